"""The judge: its sequential test (decisions and simulated error rates), the cache checks of the
audit, and a scripted session on the fixture engine (real builds, real candidate processes)
whose best is already fast: a further ~10% gain is accepted, a no-effect change is not."""

from __future__ import annotations

import json
import math
import os
import shutil
import subprocess
from pathlib import Path

import pytest

from vdbbench.agent.core.task import TaskError, load_task
from vdbbench.agent.evaluation import audit
from vdbbench.agent.evaluation.judge import Decision, SequentialTest, decision_text

FIXTURE = Path(__file__).parent / "fixtures" / "agent_task"
PYTHON_DIR = Path(__file__).resolve().parents[1] / "python"
LIB = "core/src/lib.rs"


# -- the sequential test ---------------------------------------------------------------------

def test_a_clear_gain_is_accepted_at_the_first_look():
    t = SequentialTest(margin=0.03, min_pairs=5, max_pairs=30)
    d = [math.log(1.10) + e for e in (0.01, -0.01, 0.005, -0.005, 0.0)]
    assert t.decide(d[:4]) is None  # never before min_pairs
    assert t.decide(d) == "accept"


def test_no_effect_is_rejected_once_clearly_under_the_margin_and_noise_waits():
    t = SequentialTest(margin=0.03, min_pairs=5, max_pairs=30)
    assert t.decide([0.001, -0.002, 0.0, 0.002, -0.001]) == "reject"
    noisy = [0.2, -0.15, 0.1, -0.05, 0.12]
    assert t.decide(noisy) is None
    assert t.decide((noisy * 6)[:30]) in ("accept", "reject")  # the cap always decides
    # a significant gain under the margin is still rejected
    assert t.decide([math.log(1.01)] * 4 + [math.log(1.012)]) == "reject"


def test_simulated_error_rates_match_the_stated_ones():
    t = SequentialTest(margin=0.03, min_pairs=5, max_pairs=30)
    fa, pairs = t.operating_point(0.0, 0.05, trials=1500, seed=1)
    assert fa <= 0.05 and 5 <= pairs <= 30
    fa_wide, _ = t.operating_point(0.0, 1.0, trials=1500, seed=2)  # spread so wide the margin never helps
    assert fa_wide <= 0.06
    power, _ = t.operating_point(math.log(1.07), 0.05, trials=1500, seed=3)
    assert power >= 0.95


def test_card_fields_of_the_judge_are_checked(tmp_path):
    text = (FIXTURE / "task.toml").read_text()
    card = load_task(FIXTURE / "task.toml")
    assert card.objective.repeat_seconds == 0.3 and card.objective.max_pairs >= card.objective.repeats
    assert card.batch_queries == card.dataset.heldout_queries // card.objective.repeats
    bad = tmp_path / "task.toml"
    bad.write_text(text.replace("[objective]\n", "[objective]\nmax_pairs = 3\n"))
    with pytest.raises(TaskError, match="max_pairs"):
        load_task(bad)


def test_the_1m_cards_load():
    root = PYTHON_DIR.parent / "agent" / "tasks"
    for name in ("optimize-ivf-1m", "from-scratch-1m"):
        card = load_task(root / f"{name}.toml")
        assert card.dataset.name == "sift-1m" and card.limits.keep_best_worker
        assert card.dataset.dev_queries >= card.batch_queries


# -- the audit's cache checks ----------------------------------------------------------------

def test_later_passes_much_faster_than_the_first_flag_a_cache():
    clean = audit.audit_diff("")
    ok = audit.verdict(clean, {"qps": 100, "recall10": 0.99}, {"qps": 100, "recall10": 0.99}, cache_ratio=1.05)
    assert not ok.flagged
    cached = audit.verdict(clean, {"qps": 100, "recall10": 0.99}, {"qps": 100, "recall10": 0.99}, cache_ratio=3.0)
    assert cached.flagged and any("[cache]" in t for t in cached.texts())
    drift = audit.verdict(clean, {"qps": 100, "recall10": 0.99}, {"qps": 100, "recall10": 0.99}, later_recall10=0.5)
    assert drift.flagged


def test_decision_journal_fields_carry_the_diff_and_the_judges_figures():
    d = Decision("slower", "not a real gain", pairs=12, spread=0.04, fresh_recall10=0.97, floor_margin=0.02,
                 diff="x" * 10, cpu="cpu", clock="cpu")
    f = d.journal_fields()
    for key in ("diff", "pairs", "spread", "fresh_recall10", "cpu", "clock", "floor_margin"):
        assert key in f
    json.dumps(f)
    assert decision_text(d, 3).startswith("REJECTED (iteration 3, slower)")


# -- a scripted session with real builds -----------------------------------------------------

def _fast() -> str:
    return (FIXTURE / LIB).read_text().replace("const PASSES: usize = 4;", "const PASSES: usize = 1;")


def _slowed(percent: int) -> str:
    """The fast version with an extra pass over `percent` of the vectors after the needed one."""
    extra = (f"            for (s, v) in scores.iter_mut().zip(self.data.chunks_exact(self.dim)).take(self.len() * {percent} / 100) {{\n"
             "                *s = l2(q, v);\n            }\n            std::hint::black_box(&mut scores);\n")
    anchor = "            let top = top_k(&scores, k);\n"
    return _fast().replace(anchor, extra + anchor)


@pytest.mark.skipif(shutil.which("cargo") is None, reason="needs a Rust toolchain (cargo)")
@pytest.mark.slow
def test_a_fast_best_still_accepts_a_ten_percent_gain_and_rejects_no_effect(tmp_path):
    from vdbbench.agent.core.journal import read_events
    from vdbbench.agent.session.loop import Session
    from vdbbench.agent.session.model import ScriptedModel

    target = os.environ.get("VDBBENCH_AGENT_TARGET_DIR") or str(PYTHON_DIR.parent / "target" / "agent-fixture")
    os.environ.setdefault("VDBBENCH_AGENT_TARGET_DIR", target)
    repo = tmp_path / "user"
    shutil.copytree(FIXTURE, repo, ignore=shutil.ignore_patterns("target"))
    (repo / LIB).write_text(_slowed(15))
    card_text = (repo / "task.toml").read_text()
    (repo / "task.toml").write_text(card_text.replace("repeat_seconds = 0.3\n", "repeat_seconds = 0.5\n"))  # quicker
    env = {**os.environ, "GIT_AUTHOR_NAME": "u", "GIT_AUTHOR_EMAIL": "u@x", "GIT_COMMITTER_NAME": "u", "GIT_COMMITTER_EMAIL": "u@x"}
    for cmd in (["init", "-q", "-b", "main"], ["add", "-A"], ["commit", "-q", "-m", "fast, with a 15% extra pass"]):
        subprocess.run(["git", *cmd], cwd=repo, check=True, env=env)
    no_effect = _fast().replace("fn l2(a: &[f32], b: &[f32]) -> f32 {", "fn l2(a: &[f32], b: &[f32]) -> f32 {\n    // squared distance")
    steps = [
        {"tool_calls": [("write_file", {"path": LIB, "content": _fast()}), ("submit", {"message": "drop the extra pass"})]},
        {"tool_calls": [("write_file", {"path": LIB, "content": no_effect}), ("submit", {"message": "a comment"})]},
    ]
    session = Session.create(load_task(repo / "task.toml"), ScriptedModel(steps), tmp_path / "runs", "s")
    session.run()
    events = read_events(tmp_path / "runs" / "s" / "journal.jsonl")
    dec = [e for e in events if e["type"] == "decision"]
    assert [d["outcome"] for d in dec] == ["accepted", "slower"], [d["reason"] for d in dec]
    gain, none = dec
    assert gain["pairs"] >= 5 and gain["gain"] > 0.03
    assert "-            for (s, v)" in gain["diff"]  # the submission's diff is in the journal
    for d in dec:
        assert d["fresh_recall10"] >= 0.95 and "fresh queries" in d["reason"] and "margin to the" in d["reason"]
        assert d["cpu"] and d["clock"] == "cpu" and d["spread"] is not None
        # headline figures and gain agree
        assert abs(d["qps"] / d["best_qps_same_run"] - 1 - d["gain"]) < 1e-9
    assert none["pairs"] >= 5
    evals = [e for e in events if e["type"] == "evaluation" and e.get("best")]
    assert all(e["candidate"]["queries_timed"] > e["candidate"]["batch"] for e in evals)


@pytest.mark.skipif(not Path("/proc/self/limits").exists(), reason="reads /proc/<pid>/limits (Linux)")
def test_every_worker_reads_the_judged_clock_alike(tmp_path):
    """Two workers spawned as the evaluator spawns candidate and best get the same limits, and
    no CPU-time limit: one on one of them alone arms its process CPU timer, whose clock then
    lags the running thread and reads it faster."""
    import time

    from vdbbench.agent.evaluation.candidate import CandidateProcess

    card = load_task(FIXTURE / "task.toml")
    limits = []
    for tag in ("candidate", "best"):
        proc = CandidateProcess(tmp_path / "absent.so", card, tmp_path / f"{tag}.log", time.monotonic() + 30)
        try:
            text = Path(f"/proc/{proc.proc.pid}/limits").read_text()
            limits.append([line for line in text.splitlines() if line.startswith("Max cpu time")])
        finally:
            proc.close()
    assert limits[0] == limits[1] and "unlimited" in limits[0][0]
