"""The import layering of python/vdbbench: each area imports only its own modules and the areas of
lower layers (never one beside or above it; the agent's rooms are areas of their own), no two
areas import each other, and no package has an import circle. Imports inside functions and under
TYPE_CHECKING count: when they run, they close circles all the same."""

from __future__ import annotations

import ast
import re
import sys
from functools import lru_cache
from pathlib import Path

import pytest

PKG = Path(__file__).resolve().parents[1] / "python" / "vdbbench"

# Lowest first: an area may import the areas of the layers before its own.
LAYERS = (
    # The compiled engine imports no Python of ours, so every layer may ask it (the floor asks it
    # for its IVF defaults); `vdbbench` itself only re-exports the engine, lazily.
    ("vdbbench._rust_vdb", "vdbbench"),
    ("vdbbench.common",),
    ("vdbbench.datasets", "vdbbench.adapters"),
    # Served engines: the HTTP client and server processes, below the benchmark and the agent that drive them.
    ("vdbbench.served",),
    # Peers and the benchmark meet in the adapter registry, which names peers without importing them.
    ("vdbbench.peers", "vdbbench.bench"),
    # The agent's rooms, lowest first: what they share, the judge, the session loop, reading
    # journals back, tournaments; then the agent's command line (`vdbbench.agent` itself, its cli).
    ("vdbbench.agent.core",),
    ("vdbbench.agent.evaluation",),
    ("vdbbench.agent.session",),
    ("vdbbench.agent.reports",),
    ("vdbbench.agent.tournaments",),
    ("vdbbench.agent",),
    ("vdbbench.pages",),
    ("vdbbench.cli",),
    ("vdbbench.__main__",),
)
AREAS = {area: rank for rank, layer in enumerate(LAYERS) for area in layer}


def _module_name(path: Path) -> str:
    parts = path.relative_to(PKG.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


@lru_cache(maxsize=1)
def _module_graph() -> dict[str, set[str]]:
    """Every module of the package -> the vdbbench modules it imports anywhere in its file.

    `from pkg import name` counts as pkg.name when that is a module, else as pkg; relative imports
    are resolved.
    """
    files = {_module_name(p): p for p in PKG.rglob("*.py")}
    known = set(files) | {"vdbbench._rust_vdb"}
    graph: dict[str, set[str]] = {}
    for name, path in files.items():
        package = name if path.name == "__init__.py" else name.rpartition(".")[0]
        deps: set[str] = set()
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ImportFrom):
                base = node.module or ""
                if node.level:
                    up = package.split(".")[: len(package.split(".")) - node.level + 1]
                    base = ".".join(up + ([base] if base else []))
                if base == "vdbbench" or base.startswith("vdbbench."):
                    deps |= {f"{base}.{a.name}" if f"{base}.{a.name}" in known else base for a in node.names}
            elif isinstance(node, ast.Import):
                deps |= {a.name for a in node.names if a.name == "vdbbench" or a.name.startswith("vdbbench.")}
        graph[name] = deps - {name}
    return graph


def _area(module: str) -> str | None:
    """The area a module belongs to: the longest area name it is, or lies under."""
    hits = [a for a in AREAS if module == a or module.startswith(a + ".")]
    return max(hits, key=len) if hits else None


def _upward_imports(graph: dict[str, set[str]], area: str) -> list[str]:
    """`module -> import` for each import of `area`'s modules into its own layer or above it."""
    return sorted(
        f"{mod} -> {dep}"
        for mod, deps in graph.items() if _area(mod) == area
        for dep in deps if _area(dep) != area and AREAS[_area(dep) or area] >= AREAS[area]
    )


def _circles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The import circles of the graph: its strongly connected components of two or more modules
    (Tarjan), each sorted."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in sorted(graph[v] & graph.keys()):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                component.append(w)
                if w == v:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    limit = sys.getrecursionlimit()
    sys.setrecursionlimit(max(limit, 10 * len(graph) + 100))
    try:
        for v in sorted(graph):
            if v not in index:
                visit(v)
    finally:
        sys.setrecursionlimit(limit)
    return found


def _packages() -> list[str]:
    return sorted(_module_name(p.parent) for p in PKG.rglob("__init__.py"))


def _inside(graph: dict[str, set[str]], package: str) -> dict[str, set[str]]:
    """The graph among the modules of `package` itself (its __init__ and direct modules)."""
    mods = {m for m in graph if m == package or m.rpartition(".")[0] == package}
    return {m: graph[m] & mods for m in mods}


def _between_areas(graph: dict[str, set[str]]) -> dict[str, set[str]]:
    """The graph among areas: area -> the other areas its modules import."""
    out: dict[str, set[str]] = {}
    for mod, deps in graph.items():
        if (area := _area(mod)) is not None:
            out.setdefault(area, set()).update(a for d in deps if (a := _area(d)) not in (None, area))
    return {a: deps & out.keys() for a, deps in out.items()}


def test_the_checks_find_a_circle_and_an_upward_import():
    graph = {"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}, "e": {"e", "d"}}
    assert _circles(graph) == [["a", "b", "c"]]
    assert _circles({"a": {"b"}, "b": set()}) == []
    made_up = {"vdbbench.common.x": {"vdbbench.bench.y", "vdbbench._rust_vdb"}, "vdbbench.bench.y": set()}
    assert _upward_imports(made_up, "vdbbench.common") == ["vdbbench.common.x -> vdbbench.bench.y"]
    assert _upward_imports(made_up, "vdbbench.bench") == []
    # Two agent rooms importing each other: an upward import and a circle between areas.
    rooms = {"vdbbench.agent.session.loop": {"vdbbench.agent.evaluation.judge"},
             "vdbbench.agent.evaluation.judge": {"vdbbench.agent.session.tools"},
             "vdbbench.agent.session.tools": set()}
    assert _upward_imports(rooms, "vdbbench.agent.evaluation") == [
        "vdbbench.agent.evaluation.judge -> vdbbench.agent.session.tools"]
    assert _circles(_between_areas(rooms)) == [["vdbbench.agent.evaluation", "vdbbench.agent.session"]]
    # A circle inside one package is found there, and only there.
    inner = {"vdbbench.agent.core.task": {"vdbbench.agent.core.journal"},
             "vdbbench.agent.core.journal": {"vdbbench.agent.core.task"}, "vdbbench.agent.cli": set()}
    assert _circles(_inside(inner, "vdbbench.agent.core")) == [["vdbbench.agent.core.journal", "vdbbench.agent.core.task"]]
    assert _circles(_inside(inner, "vdbbench.agent")) == []


def test_every_module_has_a_layer():
    assert [m for m in _module_graph() if _area(m) is None] == []


@pytest.mark.parametrize("area", [a for a in AREAS if a != "vdbbench._rust_vdb"])
def test_no_area_imports_one_beside_or_above_it(area):
    bad = _upward_imports(_module_graph(), area)
    assert not bad, f"{area} imports from its own layer or above: " + "; ".join(bad)


def test_no_import_circle_between_areas():
    circles = _circles(_between_areas(_module_graph()))
    assert not circles, "import circles between areas: " + "; ".join(" <-> ".join(c) for c in circles)


def test_every_agent_room_is_an_area():
    """A new subpackage of the agent gets a layer of its own, not the agent command line's."""
    rooms = [p for p in _packages() if p.startswith("vdbbench.agent.")]
    assert rooms and [p for p in rooms if p not in AREAS] == []


@pytest.mark.parametrize("package", _packages())
def test_no_import_circle_inside_a_package(package):
    circles = _circles(_inside(_module_graph(), package))
    assert not circles, "import circles: " + "; ".join(" <-> ".join(c) for c in circles)


# The engine's modules (rust_vdb/core/src): a module -> the modules it names through `crate::`
# or `super::` paths outside its tests. A child naming its own parent (or the crate root) is how
# Rust modules see their package and is not counted; any other circle is.
RUST_SRC = PKG.parents[1] / "rust_vdb" / "core" / "src"
_RUST_PATH = re.compile(r"\b(crate|super)::(\{[^}]*\}|\w+(?:::\w+)*)")


def _rust_module(path: Path) -> str:
    parts = path.relative_to(RUST_SRC).with_suffix("").parts
    return "::".join(("crate",) + (parts[:-1] if parts[-1] in ("mod", "lib") else parts))


def _rust_graph(sources: dict[str, str]) -> dict[str, set[str]]:
    """{module: source text} -> module -> the other modules it names (not its ancestors)."""
    graph: dict[str, set[str]] = {}
    for mod, text in sources.items():
        text = re.split(r"#\[cfg\(test\)\]\s*mod tests", text)[0]
        text = re.sub(r"//[^\n]*", "", text)
        parent = mod.rpartition("::")[0]
        deps: set[str] = set()
        for base, rest in _RUST_PATH.findall(text):
            names = [n.strip() for n in rest.strip("{}").split(",")] if rest.startswith("{") else [rest]
            for name in names:
                target = "crate" if base == "crate" else parent
                for seg in name.split("::"):
                    if f"{target}::{seg}" not in sources:
                        break
                    target = f"{target}::{seg}"
                if target != mod and not mod.startswith(target + "::") and target != "crate":
                    deps.add(target)
        graph[mod] = deps
    return graph


def test_the_engine_check_finds_a_circle_between_sibling_modules():
    made_up = {
        "crate::ivf": "mod search; mod prescore; use crate::route::Router;",
        "crate::ivf::search": "use super::{prescore::Prescore, IvfIndex};",
        "crate::ivf::prescore": "use super::IvfIndex; // super::search::Scratch no more\n"
                                "fn f(s: &mut super::search::Scratch) {}",
        "crate::route": "use crate::ivf::IvfIndex;\n#[cfg(test)]\nmod tests { use crate::ivf::search; }",
    }
    graph = _rust_graph(made_up)
    assert graph["crate::ivf::search"] == {"crate::ivf::prescore"}
    assert graph["crate::ivf"] == {"crate::route"} and graph["crate::route"] == {"crate::ivf"}
    assert _circles(graph) == [["crate::ivf", "crate::route"], ["crate::ivf::prescore", "crate::ivf::search"]]


def test_no_module_circle_in_the_engine():
    sources = {_rust_module(p): p.read_text() for p in RUST_SRC.rglob("*.rs")}
    circles = _circles(_rust_graph(sources))
    assert not circles, "module circles in the engine: " + "; ".join(" <-> ".join(c) for c in circles)


# Source files stay under MAX_LINES lines: the engine's, the package's and the benchmarks',
# except the per-instruction-set kernels (a twin of every kernel per level) and tests.
ROOT = PKG.parents[1]
MAX_LINES = 600
KERNELS = ("rust_vdb/core/src/kernels/avx2.rs", "rust_vdb/core/src/kernels/avx512/",
           "rust_vdb/core/src/kernels/neon.rs", "rust_vdb/core/src/kernels/scalar.rs")


def _long_files(root: Path, limit: int) -> dict[str, int]:
    long = {}
    for top in ("rust_vdb", "python", "benchmarks"):
        for path in sorted((root / top).rglob("*")):
            rel = path.relative_to(root)
            if path.suffix not in (".rs", ".py") or "target" in rel.parts or not path.is_file():
                continue
            if rel.as_posix().startswith(KERNELS) or "tests" in rel.parts or rel.name.startswith("test_"):
                continue
            lines = path.read_text(errors="replace").count("\n")
            if lines > limit:
                long[rel.as_posix()] = lines
    return long


def test_the_length_check_finds_a_long_file_and_spares_kernels_and_tests(tmp_path):
    for rel in ("rust_vdb/core/src/big.rs", "rust_vdb/core/src/kernels/avx2.rs",
                "rust_vdb/core/tests/engine.rs", "python/vdbbench/test_x.py", "benchmarks/ok.py"):
        (tmp_path / rel).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / rel).write_text("x\n" * (3 if rel == "benchmarks/ok.py" else 4))
    assert _long_files(tmp_path, 3) == {"rust_vdb/core/src/big.rs": 4}


def test_no_source_file_over_the_line_limit():
    long = _long_files(ROOT, MAX_LINES)
    assert not long, f"over {MAX_LINES} lines (split them by what the parts hold): " + ", ".join(
        f"{path} ({n})" for path, n in long.items())
