"""Session reports from the journal (vdbbench.agent.reports.report) and their CLI commands."""

from __future__ import annotations

import argparse
import io
import json

import matplotlib.image as mpimg
import pytest
from rich.console import Console

from vdbbench.agent.reports import report, report_cli
from vdbbench.agent.reports.report import ReportError, accepted_table, best_curve, totals
from vdbbench.agent.reports.report_plots import compare_runs, staircase

from test_agent_long_journal import JournalBuilder

OUTCOMES = ("slower", "recall_below_floor", "build_failed", "tests_failed", "timed_out", "crashed", "no_change", "flagged")


def long_session(model: str = "scripted", steps: dict | None = None, n: int = 40) -> JournalBuilder:
    """A session with every outcome, a resume, a review and a compaction; baseline 100 QPS."""
    steps = steps or {3: ("IVF lists with nprobe 32", 8.0), 12: ("u8 prescore + f16 rerank", 2.0), 30: ("AVX2 kernels", 1.25)}
    j = JournalBuilder()
    j.start()
    j.events[0]["model"] = model
    j.best_qps, j.best_recall = 100.0, 1.0
    for it in range(1, n + 1):
        j.tick(30)
        j.model_call(4000, 300, cost=0.01)
        if it in steps:
            msg, factor = steps[it]
            j.submit("accepted", qps=j.best_qps * factor, recall=0.96, message=msg, diff_stat="src/lib.rs | 50 +++--")
        else:
            outcome = OUTCOMES[it % len(OUTCOMES)]
            measured = outcome in ("slower", "recall_below_floor", "flagged")
            j.submit(outcome, qps=j.best_qps * (0.9 if outcome == "slower" else 1.5) if measured else None,
                     recall=(0.9 if outcome == "recall_below_floor" else 0.96) if measured else None,
                     message=f"attempt {it}", reason=f"{outcome} because")
        if it == 20:
            j.add("review", text="step back")
            j.add("compaction", before_tokens=30000, after_tokens=6000, summary="...")
        if it == 25:
            j.tick(1000)
            j.start(resumed=True)
    return j


def test_best_curve_is_a_staircase_from_the_baseline():
    j = long_session()
    xs, ys = best_curve(j.events)
    assert xs[0] == 0 and ys[0] == 100.0
    assert ys == sorted(ys)  # the best never goes down
    assert ys[-1] == pytest.approx(100 * 8 * 2 * 1.25)
    assert xs[-1] == 40


def test_accepted_table_lists_each_accepted_change_with_audit_and_totals_count_everything():
    j = long_session()
    rows = accepted_table(j.events)
    assert [r["iteration"] for r in rows] == [3, 12, 30]
    assert rows[0]["qps_before"] == 100.0 and rows[0]["qps_after"] == pytest.approx(800.0)
    assert rows[1]["gain"] == pytest.approx(2.0) and rows[1]["message"] == "u8 prescore + f16 rerank"
    assert all(r["audit"] == "clean" and r["diff_stat"] for r in rows)
    t = totals(j.events)
    assert t["submissions"] == 40 and t["accepted"] == 3
    assert sum(t["outcomes"].values()) == 40
    assert t["tool_calls"] == 40 and t["tokens"] == 40 * 4300 and t["cost_usd"] == pytest.approx(0.4)
    assert t["wall_s"] == pytest.approx(40 * 30)  # the 1000 s dead gap before the resume is not charged
    assert (t["reviews"], t["compactions"], t["resumes"]) == (1, 1, 1)
    assert t["speedup"] == pytest.approx(20.0)


def test_staircase_draws_one_point_per_submission(tmp_path):
    j = long_session()
    run = tmp_path / "run1"
    j.write(run)
    drawn = staircase(run, run / "staircase.png")
    assert drawn["n_points"] == 40
    counts = totals(j.events)["outcomes"]
    assert drawn["points"] == counts
    assert drawn["log"]  # 100 -> 2000 QPS spans more than 20x
    img = mpimg.imread(run / "staircase.png")
    assert img.shape[0] > 400 and img.shape[1] > 800
    assert not staircase(run, tmp_path / "lin.png", log=False)["log"]


def test_compare_runs_and_cli_commands(tmp_path, capsys):
    long_session("glm-5.1").write(tmp_path / "a")
    long_session("gpt-5-mini", steps={5: ("IVF", 6.0)}, n=25).write(tmp_path / "b")
    rows = compare_runs([tmp_path / "a", tmp_path / "b"], tmp_path / "cmp.png")
    assert [r["model"] for r in rows] == ["glm-5.1", "gpt-5-mini"]
    assert rows[1]["best_qps"] == pytest.approx(600.0) and rows[1]["submissions"] == 25
    assert (tmp_path / "cmp.png").stat().st_size > 10_000

    parser = argparse.ArgumentParser()
    sub = parser.add_subparsers()
    report_cli.register_report_commands(sub)
    args = parser.parse_args(["report", str(tmp_path / "a")])
    assert args.func(args) == 0
    out = capsys.readouterr().out
    assert "Accepted changes" in out and "prescore" in out and "100 → 800" in out and "40 (" in out
    assert (tmp_path / "a" / "staircase.png").exists()
    args = parser.parse_args(["compare", str(tmp_path / "a"), str(tmp_path / "b"), "-o", str(tmp_path / "c.png"),
                              "--label", "GLM", "--label", "GPT"])
    assert args.func(args) == 0
    assert "gpt-5-mini" in capsys.readouterr().out
    assert (tmp_path / "c.png").exists()


def test_bad_runs_are_usage_errors_saying_what_was_expected(tmp_path):
    from vdbbench.cli import UsageError

    with pytest.raises(ReportError, match="does not exist"):
        report.load_events(tmp_path / "nope")
    (tmp_path / "empty").mkdir()
    with pytest.raises(ReportError, match="holds no journal.jsonl"):
        report.load_events(tmp_path / "empty")
    parser = argparse.ArgumentParser()
    report_cli.register_report_commands(parser.add_subparsers())
    args = parser.parse_args(["report", str(tmp_path / "empty")])
    with pytest.raises(UsageError, match="journal.jsonl"):
        args.func(args)
    long_session().write(tmp_path / "a")
    with pytest.raises(ReportError, match="one label per run"):
        compare_runs([tmp_path / "a"], tmp_path / "x.png", labels=["a", "b"])


def test_print_report_with_no_accepted_change():
    j = JournalBuilder()
    j.start()
    j.submit("build_failed", message="oops", reason="error")
    buf = io.StringIO()
    report_cli.print_report(j.events, console=Console(file=buf, width=120))
    text = buf.getvalue()
    assert "no change was accepted" in text and "1 build_failed" in text


def test_runs_are_found_by_name_under_the_runs_directory(tmp_path, capsys):
    long_session().write(tmp_path / "runs" / "20260101-fixture")
    parser = argparse.ArgumentParser()
    report_cli.register_report_commands(parser.add_subparsers())
    args = parser.parse_args(["report", "20260101-fixture", "--runs-dir", str(tmp_path / "runs"), "-o", str(tmp_path / "s.png")])
    assert args.func(args) == 0 and (tmp_path / "s.png").exists()
    args = parser.parse_args(["compare", "20260101-fixture", "--runs-dir", str(tmp_path / "runs"), "-o", str(tmp_path / "c.png")])
    assert args.func(args) == 0 and "Sessions side by side on fixture" in capsys.readouterr().out


def test_compare_against_tool_calls_hours_or_cost(tmp_path):
    long_session("a").write(tmp_path / "a")
    long_session("b").write(tmp_path / "b")
    events = report.load_events(tmp_path / "a")
    xs, ys = best_curve(events, "tool_calls")
    assert xs[0] == 0 and xs[-1] == 40  # one submit tool call per iteration in this journal
    hx, _ = best_curve(events, "hours")
    assert hx[-1] == pytest.approx(40 * 30 / 3600)  # the dead gap before the resume is not counted
    cx, _ = best_curve(events, "cost")
    assert cx[-1] == pytest.approx(0.4)
    compare_runs([tmp_path / "a", tmp_path / "b"], tmp_path / "cost.png", x="cost")
    assert (tmp_path / "cost.png").exists()
    with pytest.raises(ReportError, match="unknown x axis 'days'"):
        best_curve(events, "days")


def test_report_through_the_vdbbench_command(tmp_path, capsys):
    from vdbbench.cli import main

    long_session().write(tmp_path / "run")
    assert main(["agent", "report", str(tmp_path / "run"), "--json", str(tmp_path / "r.json")]) == 0
    assert (tmp_path / "run" / "staircase.png").stat().st_size > 10_000
    doc = json.loads((tmp_path / "r.json").read_text())
    assert doc["schema"] == "vdbbench.agent-report/1" and doc["totals"]["submissions"] == 40
    assert len(doc["submissions"]) == 40 and [r["iteration"] for r in doc["accepted"]] == [3, 12, 30]
    assert main(["agent", "report", str(tmp_path / "missing")]) == 2
    assert "does not exist" in capsys.readouterr().err
