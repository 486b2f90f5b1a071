"""The import layering: the shared floor imports nothing above it, datasets nothing from the
benchmark, peers nothing from the benchmark (they meet in the adapter registry)."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from vdbbench.common import RECALL_TARGET, check_rerank, default_nlist, normalize_rows

PKG = Path(__file__).resolve().parents[1] / "python" / "vdbbench"


def _imports(folder: str) -> dict[str, set[str]]:
    """Every vdbbench module each file of ``folder`` imports (top level or inside functions)."""
    out: dict[str, set[str]] = {}
    for path in sorted((PKG / folder).glob("*.py")):
        names: set[str] = set()
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
                names.add(node.module)
            elif isinstance(node, ast.Import):
                names.update(a.name for a in node.names)
        out[path.name] = {n for n in names if n.startswith("vdbbench")}
    return out


@pytest.mark.parametrize("folder, allowed", [
    ("common", ("vdbbench.common",)),
    ("datasets", ("vdbbench.common", "vdbbench.datasets", "vdbbench._rust_vdb", "vdbbench")),
    ("adapters", ("vdbbench.common", "vdbbench.adapters")),
    ("peers", ("vdbbench.common", "vdbbench.adapters", "vdbbench.peers")),
])
def test_lower_layers_import_only_what_is_below(folder, allowed):
    for name, mods in _imports(folder).items():
        bad = [m for m in mods if not any(m == a or m.startswith(a + ".") for a in allowed)]
        assert not bad, f"{folder}/{name} imports {bad} (allowed: {allowed})"


def test_the_registry_names_peers_without_importing_them():
    mods = _imports("adapters")["registry.py"]
    assert not any(m.startswith(("vdbbench.bench", "vdbbench.peers")) for m in mods)


def test_shared_definitions():
    assert RECALL_TARGET == 0.95
    assert default_nlist(1_000_000) == 4000 and default_nlist(1) == 1 and default_nlist(10) == 10
    assert check_rerank([0, 10, 40], 10) == (0, 10, 40)
    with pytest.raises(ValueError, match="rerank 5 must be 0"):
        check_rerank([0, 5], 10)
    with pytest.raises(ValueError, match="rerank -1"):
        check_rerank([-1], 10)
    x = normalize_rows(__import__("numpy").array([[3.0, 4.0], [0.0, 0.0]]))
    assert x.dtype.name == "float32" and abs(float(x[0] @ x[0]) - 1.0) < 1e-6 and not x[1].any()
