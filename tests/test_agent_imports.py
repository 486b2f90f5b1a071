"""The agent area's import graph: no circle among its modules (imports for type checking and inside
functions included), no import of the pages area (pages reads the agent's reports, never the
reverse), and the tools and start-up steps reach the session only through its public side."""

from __future__ import annotations

import ast
from pathlib import Path

PKG = Path(__file__).resolve().parents[1] / "python" / "vdbbench"
AGENT = PKG / "agent"


def _name(path: Path) -> str:
    """vdbbench.agent.<room>.<module> (or the package) for a file under the agent area."""
    parts = path.relative_to(PKG.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _module_names() -> set[str]:
    return {_name(p) for p in AGENT.rglob("*.py")}


def _imports(path: Path, known: set[str]) -> set[str]:
    """vdbbench modules a file imports anywhere in it; `from pkg import mod` counts as pkg.mod."""
    out: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.ImportFrom) and node.module and node.level == 0 and node.module.startswith("vdbbench"):
            subs = {f"{node.module}.{a.name}" for a in node.names} & known
            out |= subs or {node.module}
        elif isinstance(node, ast.Import):
            out |= {a.name for a in node.names if a.name.startswith("vdbbench")}
    return out


def _graph() -> dict[str, set[str]]:
    known = _module_names()
    return {_name(p): _imports(p, known) for p in AGENT.rglob("*.py")}


def _cycle(graph: dict[str, set[str]]) -> list[str] | None:
    """One import circle among the graph's own nodes, or None (depth-first search)."""
    state: dict[str, int] = {}
    stack: list[str] = []

    def visit(node: str) -> list[str] | None:
        state[node] = 1
        stack.append(node)
        for nxt in sorted(graph.get(node, ())):
            if nxt not in graph:
                continue
            if state.get(nxt) == 1:
                return stack[stack.index(nxt):] + [nxt]
            if nxt not in state:
                found = visit(nxt)
                if found:
                    return found
        stack.pop()
        state[node] = 2
        return None

    for node in sorted(graph):
        if node not in state:
            found = visit(node)
            if found:
                return found
    return None


def test_the_cycle_finder_finds_a_circle():
    assert _cycle({"a": {"b"}, "b": {"c"}, "c": {"a"}}) == ["a", "b", "c", "a"]
    assert _cycle({"a": {"b"}, "b": {"c"}, "c": set()}) is None


def test_no_import_circle_inside_the_agent_area():
    circle = _cycle(_graph())
    assert circle is None, "import circle: " + " -> ".join(circle)


def test_the_agent_area_does_not_import_pages():
    bad = {mod: sorted(m for m in deps if m.startswith("vdbbench.pages")) for mod, deps in _graph().items()}
    assert not {m: d for m, d in bad.items() if d}


def test_tools_and_startup_use_only_the_public_side_of_the_session():
    for name, var in (("session/tools.py", "s"), ("session/startup.py", "session"), ("session/profiling.py", "s")):
        tree = ast.parse((AGENT / name).read_text())
        private = sorted({f"{var}.{n.attr}" for n in ast.walk(tree) if isinstance(n, ast.Attribute)
                          and isinstance(n.value, ast.Name) and n.value.id in (var, "session", "s")
                          and n.attr.startswith("_")})
        assert not private, f"{name} reaches into the session: {private}"
