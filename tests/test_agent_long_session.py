"""A scripted 40-iteration session through the real loop: compaction, strategic review, a budget
stop, resume, the report, and a cheating candidate that must not become the best."""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest

from vdbbench.agent.core.journal import read_events
from vdbbench.agent.core.task import load_task
from vdbbench.agent.reports import report, report_plots
from vdbbench.agent.session import loop
from vdbbench.agent.session.compaction import chars_tokens
from vdbbench.agent.session.loop import Session
from vdbbench.agent.session.machine import Machine
from vdbbench.agent.session.model import ScriptedModel

REPO = Path(__file__).resolve().parents[1]
FIXTURE = REPO / "tests" / "fixtures" / "agent_task"
LIB = "core/src/lib.rs"

# The model's window: small, so the conversation must be compacted many times, yet with room for
# the system prompt (the task text with its transfer targets and the tool list) and a summary that
# keeps its dead ends.
WINDOW = 3400

# The fixture with a small window (so the conversation must be compacted), a review after 5
# submissions without a gain, a first budget of 25 submissions, and no cargo tests (the
# interesting part here is the long run, not the Rust tests: fewer builds keep it fast).
CARD_OVERRIDES = {
    "[session]\nwindow_tokens = 32000\nreview_every = 3\n": f"[session]\nwindow_tokens = {WINDOW}\nreview_every = 5\n",
    "[budgets]\niterations = 20\ntool_calls = 200\n": "[budgets]\niterations = 25\ntool_calls = 400\n",
    "[tests]\nmanifest = \"core/Cargo.toml\"\ntimeout_s = 300\n": "[tests]\nenabled = false\n",
    # Its regressions of a few percent must read as slower: the card's default repeats, not the fixture's.
    "repeat_seconds = 0.3\n": "repeat_seconds = 1.0\n",
}

CACHE_HEAD = """    pub fn search(&self, queries: &[f32], k: usize) -> (Vec<f32>, Vec<i64>) {
        use std::hash::{Hash, Hasher};
        static ANSWERS: std::sync::OnceLock<std::sync::Mutex<std::collections::HashMap<u64, (Vec<f32>, Vec<i64>)>>> =
            std::sync::OnceLock::new();
        let mut h = std::collections::hash_map::DefaultHasher::new();
        for v in queries {
            v.to_bits().hash(&mut h);
        }
        k.hash(&mut h);
        let key = h.finish();
        if let Some(hit) = ANSWERS.get_or_init(Default::default).lock().unwrap().get(&key) {
            return hit.clone();
        }
"""
CACHE_TAIL = """        ANSWERS.get_or_init(Default::default).lock().unwrap().insert(key, (dist_out.clone(), ids_out.clone()));
        (dist_out, ids_out)
    }
}"""
SEARCH_HEAD = "    pub fn search(&self, queries: &[f32], k: usize) -> (Vec<f32>, Vec<i64>) {\n"
SEARCH_TAIL = "        (dist_out, ids_out)\n    }\n}"


def edit(old: str, new: str):
    return ("edit_file", {"path": LIB, "old": old, "new": new})


class Plan:
    """The scripted model's intentions, one reply per call. A submission meant to win or to be
    flagged is resubmitted (its edit is still in the working copy) while the judge calls it
    "slower", up to `retries` times: timings on a shared 2-core machine are noisy, and a real
    2x gain can miss p < 0.05 in one run of 5 repeats. Everything else is exact."""

    def __init__(self, intents: list[tuple], retries: int = 3):
        self.intents = list(intents)
        self.retries = retries
        self.tries = 0

    def model(self, name: str = "scripted") -> ScriptedModel:
        return ScriptedModel([self.next] * 200, name=name)

    def next(self, messages) -> dict:
        last = str(messages[-1].get("content", "")) if messages else ""
        # A `slower` verdict (its label says how: "under the margin (...)", "not distinguishable...").
        if self.tries and "): not a real gain:" in last and self.tries < self.retries:
            self.tries += 1
            return {"content": "Measured as noise; submitting the same change again.",
                    "tool_calls": [("submit", {"message": self.current})]}
        self.tries = 0
        kind, *rest = self.intents.pop(0) if self.intents else ("submit", "unchanged attempt")
        if kind == "read":
            return {"content": "Reading the engine.", "tool_calls": [("read_file", {"path": LIB})]}
        if kind == "calls":
            return {"content": "Tidying up.", "tool_calls": list(rest[0])}
        message, edits = rest[0], list(rest[1:]) if len(rest) > 1 else []
        if kind == "retry":
            self.tries, self.current = 1, message
        return {"content": message, "tool_calls": [*edits, ("submit", {"message": message})]}


# The start version does 16 passes (the fixture's planted waste, made larger here): each real
# step is then worth 4x, which the judge sees through the noise of a busy 2-core machine.
START_PASSES = ("const PASSES: usize = 4;", "const PASSES: usize = 16;")
FOUR_PASSES = edit("const PASSES: usize = 16;", "const PASSES: usize = 4;")
ONE_PASS = edit("const PASSES: usize = 4;", "const PASSES: usize = 1;")


def plan_part_one() -> Plan:
    """Up to the first budget stop (25): a gain, a plateau (-> review), a broken build, a slower
    change, a note, a cheat (one pass plus answers cached by query bytes), then no-ops."""
    return Plan([
        ("read",),
        ("submit", "resubmit the start"),
        ("retry", "four passes instead of sixteen", FOUR_PASSES),
        *[("submit", f"unchanged attempt {i}") for i in range(6)],
        ("submit", "inline the distance", edit("fn l2(a: &[f32], b: &[f32]) -> f32 {", "fn l2(a: &[f32], b: &[f32]) -> f32 {{")),
        ("calls", [("revert_to_best", {})]),
        ("submit", "eight passes for safety", edit("const PASSES: usize = 4;", "const PASSES: usize = 8;")),
        ("calls", [("revert_to_best", {}), ("note", {"text": "more passes only cost time; fewer passes is the lever"})]),
        ("retry", "one pass, and remember answers", ONE_PASS, edit(SEARCH_HEAD, CACHE_HEAD), edit(SEARCH_TAIL, CACHE_TAIL)),
        ("calls", [("revert_to_best", {})]),
    ])


def plan_part_two() -> Plan:
    """After the resume with the budget raised to 40: the honest one-pass version, then no-ops."""
    return Plan([("read",), ("retry", "one pass", ONE_PASS)])


@pytest.fixture(scope="module")
def fixture_repo(tmp_path_factory) -> Path:
    """The fixture task in a fresh git repository, with the long-session card."""
    if shutil.which("cargo") is None:
        pytest.skip("needs a Rust toolchain (cargo) to build the fixture engine")
    repo = tmp_path_factory.mktemp("long") / "fixture"
    shutil.copytree(FIXTURE, repo, ignore=shutil.ignore_patterns("target"))
    card = (repo / "task.toml").read_text()
    for old, new in CARD_OVERRIDES.items():
        assert old in card, f"the fixture card changed; update CARD_OVERRIDES ({old!r})"
        card = card.replace(old, new)
    (repo / "task.toml").write_text(card)
    engine = (repo / LIB).read_text()
    assert START_PASSES[0] in engine, "the fixture engine changed; update START_PASSES"
    (repo / LIB).write_text(engine.replace(*START_PASSES))
    for cmd in (["git", "init", "-q", "-b", "main"], ["git", "add", "-A"],
                ["git", "-c", "user.name=t", "-c", "user.email=t@t", "commit", "-q", "-m", "fixture"]):
        subprocess.run(cmd, cwd=repo, check=True)
    return repo


# The machine the task text describes, the same on every host: its SIMD list is part of the
# system prompt, and the small window is tight (on a CPU listing 18 SIMD flags instead of 7,
# the compacted summary had ~60 tokens less room and dropped its dead ends).
HOST = Machine(cpu="AMD EPYC", arch="x86_64", cores=2, physical_cores=2,
               simd=["sse4_1", "sse4_2", "avx", "f16c", "fma", "bmi2", "avx2"],
               caches=["L1d 32 KiB per core", "L2 512 KiB per core", "L3 32 MiB shared by CPUs 0-1"])


@pytest.fixture(scope="module")
def long_run(fixture_repo, tmp_path_factory):
    """Run the session to its first budget stop, resume with a raised budget, run to the end."""
    target = Path(os.environ.get("VDBBENCH_AGENT_TARGET_DIR") or REPO / "target" / "agent-fixture")
    old = os.environ.get("VDBBENCH_AGENT_TARGET_DIR")
    os.environ["VDBBENCH_AGENT_TARGET_DIR"] = str(target)
    pinned = pytest.MonkeyPatch()
    pinned.setattr(loop, "machine", lambda: HOST)
    try:
        card = load_task(fixture_repo / "task.toml")
        runs = tmp_path_factory.mktemp("runs")
        first = plan_part_one().model()
        session = Session.create(card, first, runs, run_id="long")
        end1 = session.run()
        run_dir = runs / "long"
        second = plan_part_two().model()
        resumed = Session.resume(run_dir, second, budget_overrides={"iterations": 40})
        end2 = resumed.run()
    finally:
        pinned.undo()
        if old is None:
            os.environ.pop("VDBBENCH_AGENT_TARGET_DIR", None)
        else:
            os.environ["VDBBENCH_AGENT_TARGET_DIR"] = old
    return run_dir, end1, end2, first, second


def by_message(events) -> dict[str, list[str]]:
    """Outcomes of the decisions, grouped by the submit message, in order."""
    out: dict[str, list[str]] = {}
    for d in events:
        if d["type"] == "decision":
            out.setdefault(d["message"], []).append(d["outcome"])
    return out


def test_forty_iterations_stop_on_budget_and_resume(long_run):
    run_dir, end1, end2, first, _ = long_run
    events = read_events(run_dir / "journal.jsonl")
    stops = [e for e in events if e["type"] == "budget_stop"]
    assert [(s["which"], s["limit"], s["used"]) for s in stops] == [("iterations", 25, 25), ("iterations", 40, 40)]
    assert end1["reason"] == "budget: iterations" and end1["totals"]["submissions"] == 25
    starts = [e for e in events if e["type"] == "session_start"]
    assert [s["resumed"] for s in starts] == [False, True]
    assert starts[1]["config"]["budgets"]["iterations"] == 40
    decisions = [e for e in events if e["type"] == "decision"]
    assert [d["iteration"] for d in decisions] == list(range(1, 41))
    assert end2["reason"] == "budget: iterations" and end2["totals"]["submissions"] == 40
    outcomes = by_message(events)
    assert outcomes["resubmit the start"] == ["no_change"]
    assert outcomes["four passes instead of sixteen"][-1] == "accepted"
    assert set(outcomes["four passes instead of sixteen"][:-1]) <= {"slower"}
    assert outcomes["inline the distance"] == ["build_failed"]
    assert outcomes["eight passes for safety"] == ["slower"]
    assert outcomes["one pass"][-1] == "accepted"
    assert [d["outcome"] for d in decisions[25:]].count("accepted") == 1  # after the resume
    unchanged = [d for d in decisions if d["message"].startswith("unchanged attempt")]
    assert len(unchanged) >= 25 and all(d["outcome"] == "no_change" for d in unchanged)
    assert sum(d["outcome"] == "no_change" for d in decisions) == len(unchanged) + 1  # +1: "resubmit the start"
    assert sum(e["type"] == "build" for e in events) <= 12  # only a handful of real builds
    # Each budget stop came right after a verdict: one last tool-less turn showed it to the model.
    finals = [e for e in events if e["type"] == "assistant" and e.get("final")]
    assert [f["iteration"] for f in finals] == [25, 40]
    assert "The session is over (budget: iterations)" in first.seen[-1][-1]["content"]
    assert first.seen[-1][-1]["content"].count("(iteration 25") == 1
    assert report.totals(events)["unseen_verdict"] is None


def test_the_small_window_was_compacted_and_the_state_survived(long_run):
    run_dir, *_ , first, second = long_run
    events = read_events(run_dir / "journal.jsonl")
    compactions = [e for e in events if e["type"] == "compaction"]
    assert compactions, f"a {WINDOW}-token window must have been compacted"
    assert all(c["after_tokens"] < c["before_tokens"] and c["after_tokens"] <= WINDOW for c in compactions)
    cheat_seq = max(d["seq"] for d in events if d["type"] == "decision" and d["message"].startswith("one pass, and"))
    late = [c for c in compactions if c["seq"] > cheat_seq and c["iteration"] <= 25]
    assert late, "compaction goes on through the long run"
    summary = late[-1]["summary"]
    assert "four passes instead of sixteen" in summary  # the accepted change
    assert "build_failed" in summary and "eight passes for safety" in summary  # dead ends with their reasons
    assert "the audit flagged it (global-state, query-hash)" in summary
    assert "fewer passes is the lever" in summary  # the model's note
    best_qps = [d for d in events if d["type"] == "decision" and d["outcome"] == "accepted" and d["seq"] < late[-1]["seq"]][-1]["qps"]
    assert f"Best so far: {best_qps:,.0f} QPS" in summary
    # The system prompt never moves (so endpoints can cache it); the current best reaches the model
    # in the conversation, through compactions (the summary, or the last verdict; part one's last prompt).
    assert len({seen[0]["content"] for seen in first.seen}) == 1
    best_then = [d for d in events if d["type"] == "decision" and d["outcome"] == "accepted" and d["iteration"] <= 25][-1]
    assert f"{best_then['qps']:,.0f} QPS" not in first.seen[-1][0]["content"]
    assert f"{best_then['qps']:,.0f} QPS" in "\n".join(str(m.get("content") or "") for m in first.seen[-1][1:])
    # Every prompt the model saw fitted the window (estimated the way the loop does).
    for seen in first.seen + second.seen:
        assert chars_tokens(seen) <= WINDOW


def test_a_plateau_triggers_a_strategic_review(long_run):
    run_dir, *_ , first, _ = long_run
    events = read_events(run_dir / "journal.jsonl")
    reviews = [e for e in events if e["type"] == "review"]
    assert reviews
    decisions = [e for e in events if e["type"] == "decision" and e["seq"] < reviews[0]["seq"]]
    last_gain = max(d["iteration"] for d in decisions if d["outcome"] == "accepted")
    assert reviews[0]["iteration"] == last_gain + 5  # 5 submissions without a gain
    assert "5 submissions without improvement" in reviews[0]["text"]
    assert "structurally different" in reviews[0]["text"]
    # The review reached the model as a user message.
    assert any(m.get("role") == "user" and str(m.get("content")).startswith("## Strategic review")
               for seen in first.seen for m in seen)


def test_the_cheating_candidate_is_flagged_and_never_the_best(long_run):
    run_dir, *_ = long_run
    events = read_events(run_dir / "journal.jsonl")
    cheats = [d for d in events if d["type"] == "decision" and d["message"] == "one pass, and remember answers"]
    assert cheats[-1]["outcome"] == "flagged" and all(d["outcome"] in ("slower", "flagged") for d in cheats)
    assert all(d["commit"] is None and d["best_qps_after"] == d["best_qps_before"] for d in cheats)
    audit = next(e for e in events if e["type"] == "audit" and e["iteration"] == cheats[-1]["iteration"])
    assert audit["verdict"] == "flagged"
    assert any(f.startswith("[query-hash]") for f in audit["findings"])
    assert any(f.startswith("[global-state]") for f in audit["findings"])
    # The best branch never contained the cache; the honest one-pass version was accepted later.
    ws = run_dir / "workspace"
    log = subprocess.run(["git", "log", "-p", "--format=%H"], cwd=ws, capture_output=True, text=True, check=True).stdout
    assert "DefaultHasher" not in log and "ANSWERS" not in log
    head_src = (ws / LIB).read_text()
    assert "const PASSES: usize = 1;" in head_src and "HashMap" not in head_src
    honest = next(d for d in events if d["type"] == "decision" and d["message"] == "one pass" and d["outcome"] == "accepted")
    assert next(e for e in events if e["type"] == "audit" and e["commit"] == honest["commit"])["verdict"] == "clean"


def test_report_has_one_point_per_submission_and_every_accepted_change(long_run, tmp_path):
    run_dir, *_ = long_run
    events = report.load_events(run_dir)
    drawn = report_plots.staircase(run_dir, tmp_path / "staircase.png")
    assert drawn["n_points"] == 40
    assert drawn["points"] == report.totals(events)["outcomes"]
    assert drawn["points"]["accepted"] == 2 and drawn["points"]["flagged"] == 1
    rows = report.accepted_table(events)
    assert [r["message"] for r in rows] == ["four passes instead of sixteen", "one pass"]
    assert all(r["audit"] == "clean" and r["gain"] > 1.03 and r["diff_stat"] for r in rows)
    totals = report.totals(events)
    assert totals["submissions"] == 40 and totals["resumes"] == 1 and totals["compactions"] >= 1
    assert totals["reviews"] >= 1 and totals["speedup"] > 3
    assert totals["budget_stops"] == ["iterations (25 of 25)", "iterations (40 of 40)"]
