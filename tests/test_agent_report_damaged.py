"""Reports on a damaged journal: every event that can be read is counted once, in seq order, and
the report, the JSON, the session page and the leaderboard say the figures are partial."""

from __future__ import annotations

import json

import pytest

from vdbbench.agent.reports import report
from vdbbench.agent.tournaments import leaderboard
from vdbbench.cli import main

from test_agent_report import long_session


def _journal(tmp_path, edit):
    j = long_session()
    path = j.write(tmp_path / "run")
    lines = path.read_text().splitlines(keepends=True)
    path.write_bytes(edit(lines))
    return j, tmp_path / "run"


def _decision_lines(lines):
    return [i for i, line in enumerate(lines) if '"type": "decision"' in line]


def _check_whole_figures(j, run, capsys, problem):
    """The figures equal the undamaged journal's, and every reader says the journal is damaged."""
    events = report.load_events(run)
    whole = report.totals(j.events)
    t = report.totals(events)
    assert (t["submissions"], t["accepted"], t["outcomes"]) == (whole["submissions"], whole["accepted"], whole["outcomes"])
    assert t["speedup"] == pytest.approx(whole["speedup"])
    assert report.best_curve(events) == report.best_curve(j.events)
    assert t["partial"] and any(problem in p for p in t["journal_problems"])
    assert main(["agent", "report", str(run), "--json", str(run / "r.json"), "-o", str(run / "s.png")]) == 0
    out = capsys.readouterr().out
    assert "PARTIAL REPORT" in out and problem in " ".join(out.split())
    doc = json.loads((run / "r.json").read_text())
    assert doc["partial"] is True and len(doc["submissions"]) == whole["submissions"]
    board = leaderboard.leaderboard([run])
    assert any("PARTIAL" in n for n in board["notes"]) and "partial" in leaderboard.to_markdown(board)


def test_a_damaged_line_in_the_middle_hides_no_later_event(tmp_path, capsys):
    # read_events stops at the first line that is not JSON: the 37 submissions after it (two of
    # the three accepted changes) vanished from the report without a word.
    def edit(lines):
        lines[10] = lines[10][:25] + "\n"
        return "".join(lines).encode()

    j, run = _journal(tmp_path, edit)
    _check_whole_figures(j, run, capsys, "line 11 is not JSON")


def test_a_repeated_event_is_counted_once(tmp_path, capsys):
    # A decision copied twice (same seq) counted as two submissions and two accepted steps.
    def edit(lines):
        first = _decision_lines(lines)[2]  # iteration 3: accepted
        lines.insert(first + 1, lines[first])
        return "".join(lines).encode()

    j, run = _journal(tmp_path, edit)
    _check_whole_figures(j, run, capsys, "in the journal twice")


def test_events_out_of_order_are_read_in_seq_order(tmp_path, capsys):
    def edit(lines):
        a, b = _decision_lines(lines)[2:4]
        lines[a], lines[b] = lines[b], lines[a]
        return "".join(lines).encode()

    j, run = _journal(tmp_path, edit)
    _check_whole_figures(j, run, capsys, "out of seq order")


@pytest.mark.parametrize("bad", [b"[1, 2, 3]\n", b'{"seq": 5, "t": "\xff\xfe", "type": "note"}\n', b"42\n"])
def test_a_line_that_is_no_event_is_named_not_a_traceback(tmp_path, capsys, bad):
    def edit(lines):
        data = [line.encode() for line in lines]
        data.insert(3, bad)
        return b"".join(data)

    j, run = _journal(tmp_path, edit)
    _check_whole_figures(j, run, capsys, "line 4 is not")


def test_a_torn_last_line_is_marked_on_the_report_and_the_page(tmp_path, capsys):
    def edit(lines):
        return ("".join(lines) + lines[-1][:30]).encode()

    j, run = _journal(tmp_path, edit)
    _check_whole_figures(j, run, capsys, "is cut short")
    assert main(["agent", "report", str(run), "--html"]) == 0
    page = (run / "session.html").read_text()
    assert 'id="partial"' in page and "is cut short" in page


def test_a_whole_journal_is_not_marked(tmp_path, capsys):
    long_session().write(tmp_path / "run")
    assert main(["agent", "report", str(tmp_path / "run"), "--json", str(tmp_path / "r.json")]) == 0
    assert "PARTIAL" not in capsys.readouterr().out
    assert json.loads((tmp_path / "r.json").read_text())["partial"] is False


def test_a_journal_of_damaged_lines_only_is_a_clear_error(tmp_path, capsys):
    (tmp_path / "run").mkdir()
    (tmp_path / "run" / "journal.jsonl").write_text("not json\n")
    assert main(["agent", "report", str(tmp_path / "run")]) == 2
    assert "holds no events yet that can be read (line 1 is not JSON" in capsys.readouterr().err


def test_a_figure_of_the_wrong_type_is_named_not_a_traceback(tmp_path, capsys):
    # "recall10": "0.96" failed the report halfway ("Unknown format code 'f' for object of type 'str'").
    def edit(lines):
        events = [json.loads(line) for line in lines]
        d = next(e for e in events if e["type"] == "decision" and e["outcome"] == "accepted")
        d["recall10"], d["best_qps_before"] = "0.96", [100]
        return "".join(json.dumps(e) + "\n" for e in events).encode()

    j, run = _journal(tmp_path, edit)
    events = report.load_events(run)
    assert any("recall10 is not a number ('0.96')" in p for p in events.problems)
    assert main(["agent", "report", str(run), "--json", str(run / "r.json"), "-o", str(run / "s.png")]) == 0
    assert "PARTIAL REPORT" in capsys.readouterr().out
    assert main(["agent", "report", str(run), "--html"]) == 0
    rows = json.loads((run / "r.json").read_text())["accepted"]
    assert rows[0]["recall10"] is None and rows[1]["recall10"] == 0.96


def test_text_lists_and_objects_of_the_wrong_shape_are_named_not_a_traceback(tmp_path, capsys):
    # An audit's findings as a number, a commit as a list (unhashable), a tool call that is not an
    # object: each stopped the report or the page with a TypeError or an AttributeError.
    def edit(lines):
        events = [json.loads(line) for line in lines]
        audit = next(e for e in events if e["type"] == "audit")
        audit["findings"] = 3
        d = next(e for e in events if e["type"] == "decision" and e["outcome"] == "accepted")
        d["commit"] = ["abc"]
        events.append({**events[-1], "seq": events[-1]["seq"] + 1, "type": "assistant", "content": "x",
                       "tool_calls": [7, {"name": "submit"}]})
        return "".join(json.dumps(e) + "\n" for e in events).encode()

    j, run = _journal(tmp_path, edit)
    problems = report.load_events(run).problems
    assert any("findings is not a list (3)" in p for p in problems) and any("commit is not text" in p for p in problems)
    assert main(["agent", "report", str(run), "--json", str(run / "r.json"), "-o", str(run / "s.png")]) == 0
    assert main(["agent", "report", str(run), "--html"]) == 0
    assert "PARTIAL REPORT" in capsys.readouterr().out
