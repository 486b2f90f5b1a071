"""Transfer targets and the final measurement, for real: a scripted session on the fixture engine
(real cargo builds, candidate processes and judge) whose card names a second data set (another
generator draw, twice the size), a SIMD level and a real-SIFT file that is not on this machine.

- A change that only holds on the card's own data (it scans the first 3,000 rows, the size of the
  card's set) is a 4x gain there and loses half the neighbours on the transfer set: it is flagged,
  and never the best. The honest change is accepted, and its recall holds everywhere.
- The missing file is reported as skipped, not a crash.
- When the session ends, the final measurement times the best against the start on every target;
  on the card's data its ratio is within 5% of the true speed-up, measured here directly (both
  builds loaded in this process and timed alternately).
- The report, page and leaderboard lead with that ratio; the product of steps is named apart.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "benchmarks"))
import agent_soak  # noqa: E402

from vdbbench.agent.core.journal import read_events
from vdbbench.agent.core.task import load_task
from vdbbench.agent.evaluation import final
from vdbbench.agent.reports import report
from vdbbench.agent.session.loop import Session
from vdbbench.agent.session.model import ScriptedModel

REPO = Path(__file__).resolve().parents[1]
FIXTURE = REPO / "tests" / "fixtures" / "agent_task"
LIB = "core/src/lib.rs"

pytestmark = pytest.mark.skipif(shutil.which("cargo") is None, reason="needs a Rust toolchain (cargo)")

ONE_PASS = ("const PASSES: usize = 4;", "const PASSES: usize = 1;")
FIRST_ROWS = ("self.data.chunks_exact(self.dim)) {", "self.data.chunks_exact(self.dim)).take(3000) {")
TRANSFER = """
[transfer]
datasets = [{ name = "synth-float-6000", seed = 11, queries = 150, label = "other draw" },
            "{data}/real/photo-sift-a.hdf5"]
simd = ["avx2"]
"""


def edit(old_new):
    return ("edit_file", {"path": LIB, "old": old_new[0], "new": old_new[1]})


class Plan:
    """The overfitted change, then the honest one (resubmitted while measured as noise)."""

    def __init__(self):
        self.step = 0

    def __call__(self, messages):
        last = str(messages[-1].get("content", ""))
        self.step += 1
        if self.step == 1:
            return {"content": "Fewer passes, and the rows that matter.",
                    "tool_calls": [edit(ONE_PASS), edit(FIRST_ROWS), ("submit", {"message": "one pass over the first rows"})]}
        if self.step == 2:
            return {"content": "Back to the best, then the honest change.",
                    "tool_calls": [("revert_to_best", {}), edit(ONE_PASS), ("submit", {"message": "one pass"})]}
        if last.startswith("REJECTED") and "transfer targets fail" not in last and self.step < 6:
            return {"content": "Again.", "tool_calls": [("submit", {"message": "one pass"})]}
        return {"content": "Done."}


@pytest.fixture(scope="module")
def session_run(tmp_path_factory):
    repo = tmp_path_factory.mktemp("transfer") / "fixture"
    shutil.copytree(FIXTURE, repo, ignore=shutil.ignore_patterns("target"))
    card = (repo / "task.toml").read_text()
    for old, new in (("[budgets]\niterations = 20", "[budgets]\niterations = 6"),
                     # the final ratio is held to 5% of the true one: the longer cap of the card before
                     ("\nmax_seconds = 8\n", "\nmax_seconds = 20\n")):
        assert card.count(old) == 1, f"the fixture card changed; update {old!r}"
        card = card.replace(old, new)
    (repo / "task.toml").write_text(card + TRANSFER)
    for cmd in (["git", "init", "-q", "-b", "main"], ["git", "add", "-A"],
                ["git", "-c", "user.name=t", "-c", "user.email=t@t", "commit", "-q", "-m", "fixture"]):
        subprocess.run(cmd, cwd=repo, check=True)
    data = tmp_path_factory.mktemp("data")  # an empty data cache: the real-SIFT file is missing
    saved = {k: os.environ.get(k) for k in ("VDBBENCH_AGENT_TARGET_DIR", "VDBBENCH_DATA")}
    os.environ["VDBBENCH_AGENT_TARGET_DIR"] = saved["VDBBENCH_AGENT_TARGET_DIR"] or str(REPO / "target" / "agent-fixture")
    os.environ["VDBBENCH_DATA"] = str(data)
    try:
        runs = tmp_path_factory.mktemp("runs")
        session = Session.create(load_task(repo / "task.toml"), ScriptedModel([Plan()] * 20, name="scripted"), runs,
                                 run_id="transfer")
        end = session.run()
    finally:
        for k, v in saved.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v
    return runs / "transfer", end


def test_a_best_that_breaks_recall_only_on_the_transfer_set_is_flagged(session_run):
    run_dir, _ = session_run
    events = read_events(run_dir / "journal.jsonl")
    decisions = [e for e in events if e["type"] == "decision"]
    overfit = decisions[0]
    assert overfit["message"] == "one pass over the first rows"
    assert overfit["outcome"] == "flagged" and overfit["commit"] is None
    assert overfit["recall10"] >= 0.95  # it holds on the card's own held-out queries...
    # The model reads pass or fail per target, never the recall of the targets' fixed queries.
    assert "other draw: FAIL" in overfit["reason"] and "avx2: pass" in overfit["reason"], overfit["reason"]
    assert "photo-sift-a: skipped" in overfit["reason"]
    tail = overfit["reason"].split("the transfer targets, where the engine must work too: ")[1]
    assert not re.search(r"\d\.\d{3}", tail), tail
    checks = [e for e in events if e["type"] == "transfer"]
    first = {r["key"]: r for r in checks[0]["targets"]}
    assert first["data:other draw"]["recall10"] < 0.8 and first["data:other draw"]["holds"] is False  # ...not there
    assert first["data:other draw"]["start_recall10"] == pytest.approx(1.0)
    assert first["simd:avx2"]["holds"] is True
    assert "does not exist" in first["data:photo-sift-a"]["skipped"]  # reported and skipped, not a crash
    honest = [d for d in decisions if d["message"] == "one pass"]
    assert honest[-1]["outcome"] == "accepted"
    assert checks[-1]["holds"] is True and checks[-1]["commit"] == honest[-1]["commit"]
    # The flagged change never entered the session branch.
    log = subprocess.run(["git", "log", "-p"], cwd=run_dir / "workspace", capture_output=True, text=True, check=True).stdout
    assert "take(3000)" not in log


def _true_ratio(fast: Path, slow: Path) -> float:
    """Both builds in this process, timed alternately on the card's last 150 queries."""
    return agent_soak.true_ratio(fast, slow, seconds=0.25, queries=slice(-150, None))


def test_the_final_measurement_times_the_best_against_the_start_on_every_target(session_run):
    run_dir, end = session_run
    events = read_events(run_dir / "journal.jsonl")
    fin = final.last_final(events)
    assert fin is not None and fin["seq"] < end["seq"]
    rows = {r["key"]: r for r in fin["targets"]}
    assert set(rows) == {"here", "data:other draw", "data:photo-sift-a", "simd:avx2"}
    assert rows["data:photo-sift-a"]["skipped"]
    for key in ("here", "data:other draw", "simd:avx2"):
        r = rows[key]["ratios"]["start"]
        assert r["ratio"] > 2 and r["lo"] <= r["ratio"] <= r["hi"], key
        assert rows[key]["holds"] is True and rows[key]["recall10"]["best"] == pytest.approx(1.0)
        assert rows[key]["stopped"] in ("interval", "cap")
        if rows[key]["stopped"] == "interval":
            assert r["half"] <= 0.02
    here = rows["here"]["ratios"]["start"]
    true = _true_ratio(run_dir / "builds" / "best" / "fixture_vdb.so", run_dir / "builds" / "start" / "fixture_vdb.so")
    # The two are timed minutes apart, in other processes, while the other test worker's builds
    # come and go: under CI's load they read 3.57 and 3.37 once (run alone, the test passes at
    # 5%). A final that timed the wrong build, or compounded its staircase, is off by far more.
    assert abs(here["ratio"] / true - 1) <= 0.08, (here, true)


def test_the_report_leads_with_the_final_ratio(session_run, tmp_path):
    run_dir, _ = session_run
    events = report.load_events(run_dir)
    info = report.totals(events)
    head = info["final"]
    assert head is not None and head["ratio"] > 2 and head["pairs"] >= 5
    assert info["speedup"] == head["ratio"]  # the headline is the measurement
    assert info["product_of_steps"] is not None  # shown apart, under its own name
    lines = info["transfer_lines"]
    assert any(l.startswith("+") and "on other draw" in l and "recall 1.000" in l for l in lines)
    assert any("photo-sift-a: skipped" in l for l in lines)


def test_the_page_and_the_leaderboard_lead_with_it_too(session_run, tmp_path):
    from vdbbench.agent.tournaments import leaderboard as lb
    from vdbbench.pages.session import write_session_page

    run_dir, _ = session_run
    head = report.totals(report.load_events(run_dir))["final"]
    page = write_session_page(run_dir, tmp_path / "session.html").read_text()
    assert "× start: final measurement" in page and f"×{head['ratio']:.3f} ({head['lo']:.3f}–{head['hi']:.3f}, 95%" in page
    assert "product of accepted steps" in page and "transfer: other draw" in page
    board = lb.leaderboard([run_dir])
    row = board["rollouts"][0]
    assert row["speedup"] == head["ratio"] and row["speedup_source"] == "final measurement"
    md = lb.to_markdown(board)
    assert final.fmt_ratio(head) in md and "recall 1.000" in md


def test_agent_final_measures_a_session_again_and_the_report_reads_the_newest(session_run, tmp_path, monkeypatch, capsys):
    from vdbbench.cli import main

    run_dir, _ = session_run
    monkeypatch.setenv("VDBBENCH_DATA", str(tmp_path))  # the real-SIFT file stays missing
    monkeypatch.setenv("VDBBENCH_AGENT_TARGET_DIR", str(REPO / "target" / "agent-fixture"))
    before = [e for e in read_events(run_dir / "journal.jsonl") if e["type"] == "final"]
    assert main(["agent", "final", str(run_dir)]) == 0
    finals = [e for e in read_events(run_dir / "journal.jsonl") if e["type"] == "final"]
    assert len(finals) == len(before) + 1 and finals[-1]["reason"] == "vdbbench agent final"
    assert final.last_final(read_events(run_dir / "journal.jsonl"))["seq"] == finals[-1]["seq"]
    assert "final measurement" in capsys.readouterr().out
