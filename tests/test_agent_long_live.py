"""The live view of a running session and its quiet mode (vdbbench.agent.reports.live)."""

from __future__ import annotations

import io

from rich.console import Console

from vdbbench.agent.reports.live import LiveView, SessionState
from vdbbench.agent.session.budget import Budgets

from test_agent_long_journal import JournalBuilder


def session() -> JournalBuilder:
    j = JournalBuilder()
    j.start()
    j.tick(10)
    j.model_call(1000, 100, cost=0.02)
    j.submit("accepted", qps=1500.0, recall=0.961, message="u8 prescore")
    j.tick(20)
    j.model_call(2000, 200, cost=0.04)
    j.submit("build_failed", message="avx512", reason="error[E0658]: unstable feature")
    j.add("budget_stop", which="iterations", limit=2, used=2)
    j.add("session_end", reason="budget", best={"qps": 1500.0}, totals={})
    return j


def test_quiet_mode_prints_one_plain_line_per_decision_and_the_stop():
    out = io.StringIO()
    view = LiveView(quiet=True, stream=out)
    with view:
        for ev in session().events:
            view.feed(ev)
    lines = out.getvalue().splitlines()
    assert lines[0] == "[start] fixture with scripted"
    assert lines[1].startswith("[it 1] accepted | 1,500 QPS | recall 0.9610 | best 1,500 | tools 1, tokens 1,100, $0.02, 0:00:10")
    assert lines[1].endswith("| u8 prescore")
    assert lines[2].startswith("[it 2] build_failed | best 1,500 | tools 2, tokens 3,300, $0.06, 0:00:30")
    assert "error[E0658]" in lines[2]
    assert lines[3].startswith("[stop] budget iterations: 2 of 2")
    assert lines[4].startswith("[end] budget: best 1,500 QPS after 2 submissions")
    assert len(lines) == 5
    assert "\x1b[" not in out.getvalue()  # plain text for CI logs


def test_live_panel_shows_iteration_best_outcome_tokens_cost_elapsed_against_budgets():
    buf = io.StringIO()
    console = Console(file=buf, width=140, force_terminal=False)
    j = session()
    view = LiveView(budgets=Budgets(iterations=100, cost_usd=5.0), console=console)
    with view:
        for ev in j.events[:-2]:
            view.feed(ev)
    console.print(view.render(now=view.state.segment_start + 30))
    text = buf.getvalue()
    assert "fixture" in text and "scripted" in text
    assert "2 / 100" in text and "1,500 QPS" in text and "build_failed" in text
    assert "3,300" in text and "$0.06 / $5.00" in text and "0:00:30" in text


def test_state_survives_a_resume_and_counts_wall_time_per_segment():
    j = session()
    j.tick(5000)  # dead time before the resume is not counted
    j.start(resumed=True)
    j.tick(15)
    j.model_call(10, 10)
    state = SessionState()
    for ev in j.events:
        state.apply(ev)
    assert state.elapsed(now=state.last_event_t) == 30 + 15
    assert state.best_qps == 1500.0 and state.iteration == 2 and state.stopped is None
    view = LiveView(quiet=True, stream=io.StringIO())
    view.prime(j.events)
    assert view.state.tool_calls == 2 and view.stream.getvalue() == ""


def test_quiet_mode_also_reports_compactions_reviews_and_flags():
    j = JournalBuilder()
    j.start()
    j.add("compaction", before_tokens=30000, after_tokens=6000, summary="...")
    j.add("review", text="## Strategic review: 8 submissions without improvement\n...")
    j.add("audit", commit="abc123def4567890", verdict="flagged", findings=["[query-hash] src/lib.rs:4: hashes"],
          fresh_qps=1.0, fresh_recall10=1.0, jump_factor=None)
    j.add("audit", commit="fff", verdict="clean", findings=[], fresh_qps=1.0, fresh_recall10=1.0, jump_factor=None)
    out = io.StringIO()
    view = LiveView(quiet=True, stream=out)
    for ev in j.events:
        view.feed(ev)
    assert out.getvalue().splitlines()[1:] == [
        "[compaction] 30,000 -> 6,000 tokens at iteration 0",
        "[review] Strategic review: 8 submissions without improvement",
        "[audit] commit abc123def456 flagged: [query-hash] src/lib.rs:4: hashes",
    ]
