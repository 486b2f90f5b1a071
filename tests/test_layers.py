"""The import layering of python/vdbbench: each area imports only its own modules and the areas of
lower layers (never one beside or above it; the agent's rooms are areas of their own), no two
areas import each other, and no package has an import circle. Imports inside functions and under
TYPE_CHECKING count: when they run, they close circles all the same."""

from __future__ import annotations

import ast
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
