"""The soak (benchmarks/agent_soak.py) at the test suite's length: 40 submissions of a
scripted model through the real loop on the fixture engine (real builds, candidate processes and
judge), stopped by a budget halfway and resumed, with no-effect edits, real gains of 3-15%, regressions, build
failures and recall breaks, each known to the script. The full soak (600 submissions) is run by
hand: `python benchmarks/agent_soak.py`.

Figures with timing in them (overhead, render times) are reported, not asserted; the verdicts and
the final measurement against the true speed-up are."""

from __future__ import annotations

import shutil
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "benchmarks"))
import agent_soak  # noqa: E402

# Minutes of real builds and candidate processes: a `heavy` check (README, Test), not in the default run.
pytestmark = [pytest.mark.heavy,
              pytest.mark.skipif(shutil.which("cargo") is None, reason="needs a Rust toolchain (cargo)")]

SUBMISSIONS = 40


@pytest.fixture(scope="module")
def soak(tmp_path_factory):
    # Sessions build in this test worker's cargo folder (VDBBENCH_AGENT_TARGET_DIR, set by
    # tests/conftest.py), warm from the worker's other agent tests (a cold one costs a minute).
    work = tmp_path_factory.mktemp("soak")
    figures = agent_soak.run(SUBMISSIONS, work, seed=1, repeat_seconds=0.05, max_pairs=8, final_seconds=15,
                             say=lambda m: None, keep_best=True)
    print(figures)
    return work, figures


def test_every_submission_was_judged_and_the_session_resumed(soak):
    work, f = soak
    assert f["submissions"] == SUBMISSIONS and f["resumes"] == 1 and f["staircase_points"] == SUBMISSIONS
    kinds = f["by_kind"]
    assert set(kinds) == {"none", "gain", "regression", "build", "recall"}
    assert kinds["build"]["outcomes"] == {"build_failed": kinds["build"]["submitted"]}
    assert kinds["recall"]["outcomes"] == {"recall_below_floor": kinds["recall"]["submitted"]}
    assert kinds["regression"]["outcomes"] == {"slower": kinds["regression"]["submitted"]}
    assert f["tool_calls"] >= 2 * SUBMISSIONS and f["journal_bytes"] > 0


def test_false_accepts_and_missed_gains_are_counted_against_the_script(soak):
    _, f = soak
    none = f["by_kind"]["none"]["submitted"]
    # The judge is designed for <= 3.5% false accepts per no-effect submission with 1 s repeats;
    # at this test's 0.05 s repeats and 8-pair cap on a loaded 2-core machine it was measured at
    # 3 of 31 (one run): the bound here only catches a judge that accepts noise wholesale. The
    # full soak reports the rate; the point asserted below is that the final measurement does
    # not inherit those phantom steps, whatever the product of the steps says.
    assert sum(x["kind"] == "none" for x in f["false_accepts"]) <= max(3, round(0.15 * none))
    assert not [x for x in f["false_accepts"] if x["kind"] != "none"]
    assert f["gains"]["submitted"] >= 3 and f["gains"]["accepted"] >= 1
    assert len(f["missed_gains"]) == f["gains"]["submitted"] - f["gains"]["accepted"]


def test_the_final_measurement_is_within_5_percent_of_the_true_speedup(soak):
    _, f = soak
    assert f["final"] is not None and f["true_speedup"] > 1.05
    assert abs(f["final_vs_true"]) <= 0.05, f
    assert f["overhead_s_per_submission"]["first"] is not None and f["overhead_s_per_submission"]["last"] is not None
    assert set(f["render_s"]) == {"report", "staircase_png", "page"}
