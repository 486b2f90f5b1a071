"""The journal's one fold (facts), what the model is told (machine, repeat sizing, profile stages,
whole numbers in summaries), and the reference line in the report."""

from __future__ import annotations

from pathlib import Path

import pytest

from test_agent_long_journal import JournalBuilder
from vdbbench.agent.core.facts import Facts, Usage
from vdbbench.agent.core.task import load_task
from vdbbench.agent.reports import report, report_cli, report_plots
from vdbbench.agent.session.compaction import one_line, build_state_summary
from vdbbench.agent.session.machine import machine
from vdbbench.agent.session.prompts import packaged, render, repeat_text
from vdbbench.agent.session.review import stats_stages

FIXTURE_CARD = Path(__file__).parent / "fixtures" / "agent_task" / "task.toml"


def session(reference: float | None = 2000.0, stop_after_last: bool = True) -> JournalBuilder:
    j = JournalBuilder()
    j.start()
    j.add("evaluation", split="heldout", candidate={"qps": 100.0, "recall10": 0.99}, best=None, gain=None, p_value=None)
    if reference:
        j.add("reference", qps=reference, recall10=0.97, commit="a" * 40, cpu="Some CPU", source="engine")
    j.tick(30)
    j.model_call(1000, 100, cost=0.01)
    j.submit("accepted", qps=500.0, recall=0.96, message="an index")
    j.model_call(1000, 100, cost=0.01)
    j.tick(30)
    j.submit("slower", qps=480.0, recall=0.96, message="a tweak", reason="not a real gain: 480 QPS vs 500")
    if stop_after_last:
        j.add("budget_stop", which="iterations", limit=2, used=2)
        j.add("session_end", reason="budget: iterations", best={"qps": 500.0}, totals={})
    return j


def test_one_fold_serves_usage_baseline_best_and_reference():
    events = session().events
    f = Facts.fold(events)
    assert f.baseline_qps == 100.0 and f.best_qps == 500.0 and f.speedup == 5.0
    assert f.of_reference == pytest.approx(0.25)
    assert [d["outcome"] for d in f.decisions] == ["accepted", "slower"] and f.since_improvement == 1
    assert Usage.from_journal(events) == f.usage and f.usage.tool_calls == 2 and f.usage.wall_s == 60
    t = report.totals(events)
    assert t["reference_qps"] == 2000.0 and t["of_reference"] == pytest.approx(0.25)
    assert t["baseline_qps"] == 100.0 and t["best_qps"] == 500.0
    # The budget stopped the session right after the verdict: the model never saw it.
    assert t["unseen_verdict"]["outcome"] == "slower"
    j = session(stop_after_last=False)
    j.add("assistant", content="ok", tool_calls=[])
    assert Facts.fold(j.events).unseen_verdict is None


def test_report_draws_the_reference_line_and_prints_the_fraction(tmp_path, capsys):
    j = session()
    j.write(tmp_path / "run")
    drawn = report_plots.staircase(tmp_path / "run", tmp_path / "s.png")
    assert drawn["n_points"] == 2 and (tmp_path / "s.png").stat().st_size > 10_000
    from rich.console import Console

    console = Console(width=200, record=True)
    report_cli.print_report(report.load_events(tmp_path / "run"), console=console)
    text = console.export_text()
    assert "reference" in text and "2,000 QPS" in text and "25.0% of it" in text
    assert "not seen by the model" in text
    summary = build_state_summary(j.events, None)
    assert "Reference (the project's own engine on this task): 2,000 QPS; the best is 25% of it." in summary


def test_summaries_cut_between_words_never_inside_a_number():
    reason = ("not a real gain: the gain is not significant (p >= 0.05). Measured: 34,000 QPS vs 33,781 for the best, "
              "median gain +27.4%, p=0.094 over 5 interleaved repeats (ratios 1.217, 0.808, 1.274, 1.310, 1.923)")
    words = [w.rstrip(",;:") for w in reason.split()]
    for limit in range(40, len(reason)):
        cut = one_line(reason, limit)
        assert len(cut) <= limit + 2 and cut.endswith(" …")
        kept = cut[:-2].split()
        assert [w.rstrip(",;:") for w in kept] == words[:len(kept)]  # whole words, so whole numbers


def test_profile_shares_only_the_stages():
    stats = {"nq": 100, "threads": 2, "routing_s": 0.25, "prescore_s": 0.5, "rerank_s": 0.25, "total_s": 1.0,
             "wall_s": 1.0, "lists_probed": 3200}
    shares, other = stats_stages(stats)
    names = [name for name, _, _ in shares]
    assert names[:3] == ["prescore", "routing", "rerank"] and "total" not in names and "wall" not in names
    # Stage seconds are thread-time: the whole is wall x threads = 2 s, one of it outside the stages.
    assert dict((n, s) for n, _, s in shares)["prescore"] == pytest.approx(0.25)
    assert names[-1].startswith("overhead")
    assert other == {"nq": 100, "threads": 2, "total_s": 1.0, "wall_s": 1.0, "lists_probed": 3200}


def test_machine_is_read_from_cpuinfo_and_sysfs(tmp_path):
    cpuinfo = tmp_path / "cpuinfo"
    cpuinfo.write_text("processor\t: 0\nphysical id\t: 0\ncore id\t: 0\nflags\t\t: fpu sse4_2 avx2 avx512f avx512_vnni\n\n"
                       "processor\t: 1\nphysical id\t: 0\ncore id\t: 0\nflags\t\t: fpu sse4_2 avx2 avx512f avx512_vnni\n\n")
    for i, (level, kind, size, shared) in enumerate([(1, "Data", "48K", "0"), (1, "Instruction", "32K", "0"),
                                                     (2, "Unified", "2048K", "0"), (3, "Unified", "307200K", "0-1")]):
        d = tmp_path / "cpu" / "cpu0" / "cache" / f"index{i}"
        d.mkdir(parents=True)
        for name, value in (("level", level), ("type", kind), ("size", size), ("shared_cpu_list", shared)):
            (d / name).write_text(f"{value}\n")
    m = machine(cpuinfo, tmp_path / "cpu")
    assert m.simd == ["sse4_2", "avx2", "avx512f", "avx512_vnni"] and m.physical_cores == 1
    assert m.caches == ["L1d 48 KiB per core", "L2 2 MiB per core", "L3 300 MiB shared by CPUs 0-1"]
    text = m.describe()
    assert "SIMD: sse4_2, avx2, avx512f, avx512_vnni" in text and "L3 300 MiB" in text
    # Off Linux (nothing readable), it still says what it can.
    bare = machine(tmp_path / "none", tmp_path / "none")
    assert bare.cores >= 1 and bare.simd == [] and "none detected" in bare.describe()


def test_task_text_states_the_repeat_size_and_prompts_are_packaged():
    card = load_task(FIXTURE_CARD)
    text = repeat_text(card)
    assert "at least 0.3 s on that clock: `search` on batches of 150 held-out queries" in text
    assert f"times pairs of 0.25 s repeats on dev batches of the same size, at least {card.objective.dev_repeats}, more until" in text
    object.__setattr__(card.objective, "repeat_seconds", 2.5)
    assert "at least 2.5 s" in repeat_text(card)
    assert (packaged() / "system.md").is_file() and "performance engineer" in render(packaged(), "system.md")


def test_build_warnings_are_shown_capped_with_their_count():
    from vdbbench.agent.core.workspace import first_warnings

    def msg(level, n):
        return {"reason": "compiler-message", "message": {"level": level, "rendered": f"{level}: unused variable `x{n}`\n --> src/lib.rs:{n}:9\n"}}

    assert first_warnings([msg("error", 1)]) == ""
    text = first_warnings([msg("warning", n) for n in range(1, 9)] + [msg("error", 99)])
    assert text.startswith("8 warning(s):") and "src/lib.rs:5:9" in text and "src/lib.rs:6:9" not in text
    assert text.endswith("... and 3 more warning(s)") and "error" not in text
