"""Why a session has no final measurement, as the report and the page say it."""

from __future__ import annotations

import io

from rich.console import Console

from vdbbench.agent.reports import report_cli
from vdbbench.agent.reports.report import totals
from vdbbench.pages.session import session_page

from test_agent_long_journal import JournalBuilder


def session(end: str | None, error: str | None = None) -> JournalBuilder:
    j = JournalBuilder()
    j.start()
    j.add("evaluation", split="heldout", candidate={"qps": 1000.0, "recall10": 0.97}, best=None, gain=None)
    j.best_qps, j.best_recall = 1000.0, 0.97
    j.model_call()
    j.submit("accepted", qps=1500.0, recall=0.97, message="a")
    if error:
        j.add("error", where="final measurement", text=error)
    if end:
        j.add("session_end", reason=end, best={}, totals={})
    return j


def report_text(j: JournalBuilder) -> str:
    buf = io.StringIO()
    report_cli.print_report(j.events, console=Console(file=buf, width=300))
    return buf.getvalue()


def test_a_session_that_ended_without_a_final_measurement_is_not_called_running_or_interrupted(tmp_path):
    # The report said "none yet (the session is running, or ended by an interrupt)" for every
    # session without a `final`, also one that ended by its budget and whose final measurement
    # failed (the loop journals why, as an error) or that a card without [final] ended.
    failed = session("budget: iterations", error="RuntimeError: the start did not build")
    text = report_text(failed)
    assert "failed as the session ended (RuntimeError: the start did not build)" in text and "running" not in text
    off = report_text(session("model_finished"))
    assert "the session ended (model_finished) without one" in off and "running" not in off
    assert "none yet (the session is running, or ended by an interrupt)" in report_text(session(None))
    assert "none yet" in report_text(session("interrupted"))
    assert totals(failed.events)["no_final"].startswith("none: it failed")
    failed.write(tmp_path / "run")
    assert "failed as the session ended (RuntimeError: the start did not build)" in session_page(tmp_path / "run")
