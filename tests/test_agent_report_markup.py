"""The terminal report, compare and the live panel show the model's text as it is: rich markup in
it ("[/]", "out[idx]", "[red]") is neither interpreted nor a crash."""

from __future__ import annotations

import io

from rich.console import Console

from vdbbench.agent.reports import report_cli
from vdbbench.agent.reports.live import LiveView
from vdbbench.agent.reports.report_plots import compare_runs

from test_agent_long_journal import JournalBuilder

MESSAGE = "set out[idx] = d[j]; slice [/] and [/x] [red]"
REASON = "error[E0308] in v[i] [/y]"


def session() -> JournalBuilder:
    j = JournalBuilder()
    j.start()
    j.events[0]["model"] = "model [/m]"
    j.add("evaluation", split="heldout", candidate={"qps": 1000.0, "recall10": 0.97}, best=None, gain=None)
    j.best_qps, j.best_recall = 1000.0, 0.97
    j.model_call()
    j.submit("accepted", qps=1200.0, recall=0.97, message=MESSAGE, diff_stat="[b]1 file[/b]")
    j.model_call()
    j.submit("build_failed", message=MESSAGE, reason=REASON)
    return j


def flat(text: str) -> str:
    return "".join(text.split())


def test_the_report_prints_model_text_verbatim(tmp_path):
    j = session()
    buf = io.StringIO()
    report_cli.print_report(j.events, console=Console(file=buf, width=400))  # raised MarkupError
    out = flat(buf.getvalue())
    assert flat(MESSAGE) in out and flat(REASON) in out and "[b]1file[/b]" in out and "model[/m]" in out


def test_compare_prints_model_names_verbatim(tmp_path):
    session().write(tmp_path / "a")
    rows = compare_runs([tmp_path / "a"], tmp_path / "c.png")
    buf = io.StringIO()
    report_cli.print_comparison(rows, console=Console(file=buf, width=200))
    assert "model [/m]" in buf.getvalue()


def test_the_live_panel_shows_model_text_verbatim():
    view = LiveView(quiet=False, console=Console(file=io.StringIO(), width=200))
    for ev in session().events:
        view.feed(ev)
    view.state.activity = "tool: [/t]"
    buf = io.StringIO()
    Console(file=buf, width=300).print(view.render())  # raised MarkupError
    out = buf.getvalue()
    assert MESSAGE[:60] in out and "model [/m]" in out and "tool: [/t]" in out


def test_escape_sequences_in_model_text_do_not_reach_the_terminal():
    # A submit message or verdict holding ESC sequences (clear screen, set the window title, colour)
    # went to the terminal as they were, from the report and from the quiet view's line per decision.
    j = JournalBuilder()
    j.start()
    j.model_call()
    j.submit("accepted", qps=1200.0, recall=0.97, message="fix\x1b[2J\x1b]0;owned\x07 loop")
    j.model_call()
    j.submit("build_failed", message="m\x1b[31m", reason="err\x1b[31mRED")
    buf = io.StringIO()
    report_cli.print_report(j.events, console=Console(file=buf, width=400))
    out = buf.getvalue()
    assert "\x1b" not in out and "\x07" not in out and "fix\\x1b[2J\\x1b]0;owned\\x07 loop" in out
    assert "err\\x1b[31mRED" in out
    lines = io.StringIO()
    view = LiveView(quiet=True, stream=lines)
    for ev in j.events:
        view.feed(ev)
    assert "\x1b" not in lines.getvalue() and "m\\x1b[31m" in lines.getvalue()
    panel = LiveView(quiet=False, console=Console(file=io.StringIO()))
    for ev in j.events:
        panel.feed(ev)
    buf = io.StringIO()
    Console(file=buf, width=300).print(panel.render())
    assert "\x1b" not in buf.getvalue()
