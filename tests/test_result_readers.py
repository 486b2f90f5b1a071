"""The readers of result files (report, plot, page, compare, the README table) on damaged,
foreign and mixed inputs: a clear error (exit 2, no traceback), never a wrong figure. Fixtures
are the committed synth-sift-20k baseline, edited; no benchmark runs here."""

from __future__ import annotations

import copy
import json
import math
from pathlib import Path

import pytest

from vdbbench.bench.results import load_result
from vdbbench.cli import main

REPO = Path(__file__).resolve().parents[1]
BASELINE = REPO / "benchmarks" / "baselines" / "synth-sift-20k"


def result(name: str = "ivf") -> dict:
    return json.loads((BASELINE / f"{name}.json").read_text())


def folder(tmp_path: Path, edits: dict | None = None, name: str = "run") -> Path:
    """The baseline's result files copied to tmp_path/name, each edited by edits[index] if any."""
    out = tmp_path / name
    out.mkdir()
    for f in BASELINE.glob("*.json"):
        r = json.loads(f.read_text())
        if edits and f.stem in edits:
            edits[f.stem](r)
        (out / f.name).write_text(json.dumps(r))
    return out


def _set(path: str, value):
    """An edit setting result[a][b]... (ints index lists) to value, or deleting it (value=KeyError)."""
    def edit(r):
        *head, last = [int(k) if k.isdigit() else k for k in path.split(".")]
        for k in head:
            r = r[k]
        if value is KeyError:
            del r[last]
        else:
            r[last] = value
    return edit


# hand edits a reader took a figure from and crashed on (KeyError/TypeError traceback) or drew
HAND_EDITS = [
    ("headline.0.recall10", KeyError), ("headline.0.p50_ms", KeyError), ("points.0.qps", "77417"),
    ("headline.0.qps", "77417"), ("points.0.qps", math.nan), ("headline.0.qps", math.inf),
    ("headline.0.recall10", math.nan), ("points.0.recall10", math.nan), ("points.0.recall10", 9.5),
    ("build.train_s", KeyError), ("build", {}), ("build.bytes", "9MB"), ("dataset.n", "20000"),
    ("dataset.n", KeyError), ("machine", None), ("headline.0.threads", "1"), ("points.0.threads", None),
    ("points.0.qps", True), ("index.name", None),
]


@pytest.mark.parametrize("path, value", HAND_EDITS, ids=[f"{p}={v!r}" for p, v in HAND_EDITS])
def test_a_hand_edited_result_is_refused_by_every_reader(path, value, tmp_path, capsys):
    bad = folder(tmp_path, {"ivf": _set(path, value)})
    with pytest.raises(ValueError, match="not a well-formed vdbbench result"):
        load_result(bad / "ivf.json")
    for argv in (["plot", str(bad), "-o", str(tmp_path / "p.png")],
                 ["report", str(bad / "ivf.json"), "-o", str(tmp_path / "r.html")],
                 ["compare", str(bad / "ivf.json"), str(BASELINE / "ivf.json")]):
        assert main(argv) == 2, argv
        assert "ivf.json: not a well-formed vdbbench result" in capsys.readouterr().err
    assert not (tmp_path / "p.png").exists() and not (tmp_path / "r.html").exists()


def test_results_as_written_still_load():
    for f in BASELINE.glob("*.json"):
        load_result(f)
    missed = result()
    for h in missed["headline"]:  # a headline that missed the target: nulls
        h.update({k: None for k in ("params", "qps", "recall10", "p50_ms", "p99_ms")})
    untimed = copy.deepcopy(result())
    untimed["points"][0]["qps"] = None  # a point only swept for recall
    for r in (missed, untimed):
        from vdbbench.bench.results import _damage
        assert _damage(r) is None
