"""The terminal side of session reports: rich tables of one session's accepted changes and totals
and of several sessions side by side, the JSON export, and the `vdbbench agent report` and
`compare` commands."""

from __future__ import annotations

from pathlib import Path
from typing import Any, Mapping, Sequence

from vdbbench.agent.evaluation import final as final_mod
from vdbbench.agent.reports.report import (
    X_AXES, ReportError, accepted_table, decisions, fmt_count, fmt_duration, fmt_qps, journal_path, load_events, terminal_text,
    totals,
)
from vdbbench.agent.reports.report_plots import compare_runs, staircase


def escape(text: Any) -> str:
    """Journal text as a rich table shows it verbatim: no markup ("[/]"), no control characters."""
    from rich.markup import escape as markup_escape

    return markup_escape(terminal_text(text))


def print_report(events: Sequence[Mapping[str, Any]], console=None, png: str | None = None) -> None:
    from rich.console import Console
    from rich.table import Table

    console = console or Console()
    info = totals(events)
    if info["journal_problems"]:
        console.print("[bold red]PARTIAL REPORT: the journal is damaged; the figures below are from the events "
                      "that could be read[/bold red]", highlight=False)
        for problem in info["journal_problems"]:
            console.print(f"[red]  - {escape(problem)}[/red]", highlight=False)
    # Text from the journal (the model's messages, verdicts with compiler output, names) is escaped:
    # rich reads "[...]" as markup, so "out[idx]" lost its index and "[/]" raised a MarkupError.
    table = Table(title=f"Accepted changes — {escape(str(info['task']))} ({escape(str(info['model']))})", title_justify="left",
                  caption="×: median gain over the best, measured in the same run (interleaved repeats)",
                  caption_justify="left")
    for col, kw in (("it", dict(justify="right")), ("QPS before → after", dict(justify="right", no_wrap=True)),
                    ("recall@10", dict(justify="right")), ("change", dict(overflow="fold", max_width=60)),
                    ("diff", dict(overflow="fold", max_width=24)), ("audit", {})):
        table.add_column(col, **kw)
    for r in accepted_table(events):
        audit = r["audit"] or "—"
        audit = f"[red]{audit}[/red]" if audit == "flagged" else (f"[green]{audit}[/green]" if audit == "clean" else audit)
        table.add_row(
            str(r["iteration"]),
            f"{fmt_qps(r['qps_before'])} → {fmt_qps(r['qps_after'])}" + (f" ×{r['gain']:.2f}" if r["gain"] else ""),
            f"{r['recall10']:.4f}" if r["recall10"] is not None else "—",
            escape(r["message"] or "(no message)"), escape(r["diff_stat"] or "—"), audit,
        )
    if not table.rows:
        table.add_row("—", "—", "—", "no change was accepted", "—", "—")
    console.print(table)
    outcome_text = ", ".join(f"{n} {k}" for k, n in sorted(info["outcomes"].items(), key=lambda kv: -kv[1]))
    t = Table(show_header=False, title="Totals", title_justify="left")
    t.add_column(style="bold", no_wrap=True)
    t.add_column(overflow="fold")
    if info["journal_problems"]:
        t.add_row("[red]journal[/red]", f"[red]damaged: {escape('; '.join(info['journal_problems']))}[/red]")
    t.add_row("submissions", f"{info['submissions']} ({outcome_text or 'none'})")
    for label, text in headline_rows(info):
        t.add_row(label, escape(text))
    t.add_row("tool calls", f"{info['tool_calls']} ({info['model_calls']} model calls)")
    t.add_row("tokens", f"{info['tokens']:,} ({info['prompt_tokens']:,} prompt, {info['completion_tokens']:,} completion)")
    t.add_row("cost", f"${info['cost_usd']:.2f}")
    t.add_row("wall time", fmt_duration(info["wall_s"]))
    t.add_row("long-run events", f"{info['compactions']} compactions, {info['reviews']} strategic reviews, {info['resumes']} resumes")
    if info["reference_qps"]:
        t.add_row("reference", f"the project's engine on this card ({escape(str(info['reference_source']))}): {fmt_qps(info['reference_qps'])} QPS"
                  + (f", recall@10 {info['reference_recall10']:.4f}" if info["reference_recall10"] is not None else "")
                  + (f"; the best is {info['of_reference']:.1%} of it" if info["of_reference"] else ""))
    if info["budget_stops"]:
        t.add_row("budget stops", escape("; ".join(info["budget_stops"])))
    if info["unseen_verdict"]:
        v = info["unseen_verdict"]
        t.add_row("last verdict", f"iteration {v['iteration']} {v['outcome']} (not seen by the model): " + escape(' '.join(str(v['reason'] or '').split())[:300]))
    if info["ended"]:
        t.add_row("ended", escape(str(info["ended"])))
    if png:
        t.add_row("staircase", escape(png))
    console.print(t)


def headline_rows(info: Mapping[str, Any]) -> list[tuple[str, str]]:
    """The session's result as the report states it: the final measurement first (the best against
    the start, paired and interleaved, with its interval; against the reference; on each transfer
    target), then, apart and named as such, the product of the accepted steps."""
    rows = []
    head = info.get("final")
    if head is not None:
        text = f"×{head['ratio']:.3f} the start ({head['lo']:.3f}–{head['hi']:.3f}, 95%, {head['pairs']} interleaved rounds"
        text += ("; the ±2% interval was not reached before the time cap" if head.get("stopped") == "cap" else "") + ")"
        if head.get("reference") and not info.get("reference_source") == "start":
            r = head["reference"]
            text += f"; ×{r['ratio']:.3f} the reference ({r['lo']:.3f}–{r['hi']:.3f})"
        if head.get("recall10") is not None:
            text += f"; recall@10 {head['recall10']:.4f}"
        rows.append(("final measurement", text))
        for line in info.get("transfer_lines") or []:
            rows.append(("  transfer", line))
    elif info.get("speedup"):
        rows.append(("final measurement", f"{info.get('no_final') or 'none yet'}; `vdbbench agent final RUN` measures it; "
                                          f"the figure below is {info['speedup_source']}"))
    rows.append(("best", f"{fmt_qps(info['best_qps'])} QPS in its last evaluation"
                 + (f", recall@10 {info['best_recall10']:.4f}" if info["best_recall10"] is not None else "")))
    if info.get("product_of_steps") is not None:
        rows.append(("product of accepted steps", f"×{info['product_of_steps']:.3f} (each step's gain as measured when "
                                                  "accepted, multiplied: not the result, see the final measurement)"))
    return rows


def print_comparison(rows: Sequence[Mapping[str, Any]], console=None, png: str | None = None) -> None:
    from rich.console import Console
    from rich.table import Table

    console = console or Console()
    tasks = sorted({escape(str(r["task"])) for r in rows})
    same_task = len(tasks) == 1
    title = "Sessions side by side" + (f" on {tasks[0]}" if same_task else " (different tasks!)") + (f" — plot: {escape(str(png))}" if png else "")
    from rich import box

    table = Table(title=title, title_justify="left", box=box.SIMPLE_HEAD, pad_edge=False)
    cols = ["session"] + ([] if same_task else ["task"]) + ["subm.", "acc.", "× start", "recall", "tools", "tokens, cost", "wall"]
    for col in cols:
        if col in ("session", "task"):
            table.add_column(col, overflow="fold", min_width=10)
        else:
            table.add_column(col, justify="right", no_wrap=True)
    for r in rows:
        partial = "\n[bold red]partial: damaged journal[/bold red]" if r.get("journal_problems") else ""
        cells = [f"{escape(str(r['model']))}\n[dim]{escape(str(r['run']))}[/dim]{partial}"] + ([] if same_task else [escape(str(r["task"]))]) + [
            str(r["submissions"]), str(r["accepted"]),
            (f"×{r['final']['ratio']:.2f} ±{r['final']['half']:.1%}" if r.get("final") and r["final"].get("pairs")
             else f"×{r['final']['ratio']:.2f}" if r.get("final") else "no final")
            + (f"\n[dim]steps ×{r['product_of_steps']:.2f}[/dim]" if r.get("product_of_steps") else ""),
            f"{r['best_recall10']:.3f}" if r["best_recall10"] is not None else "—",
            str(r["tool_calls"]), f"{fmt_count(r['tokens'])} ${r['cost_usd']:.2f}", fmt_duration(r["wall_s"]),
        ]
        table.add_row(*cells)
    console.print(table)
    console.print("× start: the final measurement (best vs start, interleaved, 95% interval); "
                  "dim: the product of accepted steps (shown apart: not the result)")


def _scale(args) -> bool | None:
    return {"log": True, "linear": False, "auto": None}[args.scale]


def _resolve(run: str, runs_dir: str) -> Path:
    """A run folder given as a path, or as a name under the runs directory."""
    p = Path(run)
    if not p.exists() and (Path(runs_dir) / run).exists():
        return (Path(runs_dir) / run).resolve()
    return p.resolve()


def _cmd_report(args) -> int:
    from vdbbench.common.errors import UsageError

    try:
        run = _resolve(args.run, args.runs_dir)
        events = load_events(run)
        if args.html:  # the session page instead of the PNG, rendered by the pages area (its CLI hands
            # the writer in as a parser default: pages imports the agent's report, never the reverse)
            write_page = getattr(args, "write_session_page", None)
            if write_page is None:
                raise UsageError("--html needs the pages area (vdbbench.pages.cli), which did not register")
            out = write_page(run, Path(args.output) if args.output else journal_path(run).parent / "session.html")
        else:
            out = Path(args.output) if args.output else journal_path(run).parent / "staircase.png"
            staircase(run, out, log=_scale(args))
    except ReportError as exc:
        raise UsageError(str(exc)) from None
    except OSError as exc:
        raise UsageError(f"{exc.filename or args.run}: {exc.strerror or exc}") from None
    print_report(events, png=None if args.html else str(out))
    if args.html:
        print(f"wrote {out}: the session page (self-contained HTML; click a submission for its diff)")
    if args.json:
        write_json(events, Path(args.json))
    return 0


def write_json(events: Sequence[Mapping[str, Any]], path: Path) -> None:
    """Totals, accepted changes and every submission, for scripts and CI dashboards."""
    import json

    info = totals(events)
    doc = {
        "schema": "vdbbench.agent-report/1",
        "partial": info["partial"],
        "journal_problems": info["journal_problems"],
        "totals": info,
        "accepted": accepted_table(events),
        "submissions": [{k: d.get(k) for k in ("iteration", "outcome", "qps", "recall10", "best_qps_after", "message")}
                        for d in decisions(events)],
    }
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(doc, indent=2, default=str) + "\n")


def _cmd_compare(args) -> int:
    from vdbbench.common.errors import UsageError

    try:
        rows = compare_runs([_resolve(r, args.runs_dir) for r in args.runs], args.output, log=_scale(args),
                            labels=args.label, x=args.x)
    except ReportError as exc:
        raise UsageError(str(exc)) from None
    print_comparison(rows, png=str(args.output))
    return 0


def _cmd_final(args) -> int:
    """Measure a session's best against its start (and reference) now, on every target of its
    card, and journal it as the session's `final` event (for a session that was interrupted, or to
    measure again on a quieter machine)."""
    import json
    import os

    from vdbbench.agent.core import workspace as wsp
    from vdbbench.agent.core.journal import Journal
    from vdbbench.agent.core.task import load_task
    from vdbbench.agent.evaluation import final as final_mod
    from vdbbench.agent.evaluation.eval_data import make_eval_data
    from vdbbench.agent.evaluation.evaluator import Evaluator
    from vdbbench.common.errors import UsageError

    try:
        run = _resolve(args.run, args.runs_dir)
        load_events(run)
    except ReportError as exc:
        raise UsageError(str(exc)) from None
    ws = run / "workspace"
    meta = json.loads((run / "session.json").read_text()) if (run / "session.json").exists() else {}
    card = load_task(run / "task.toml", origin=meta.get("card_path"))
    head = wsp.head(ws)
    marker = run / "builds" / "best" / "COMMIT"
    if not marker.exists() or marker.read_text().strip() != head:
        raise UsageError(f"{run}: builds/best is not the build of the session's best ({head[:12]}); "
                         "`vdbbench agent resume` it once, which rebuilds it")
    journal = Journal(run / "journal.jsonl")
    try:
        evaluator = Evaluator(card, make_eval_data(card), run)
        target = Path(os.environ.get("VDBBENCH_AGENT_TARGET_DIR") or run / "target")
        final_mod.measure(card, evaluator, run, ws, target, journal.append, head, reason="vdbbench agent final")
    finally:
        journal.close()
    print_report(load_events(run))
    return 0


def register_report_commands(agent_subparsers) -> None:
    """Add `report` and `compare` to the `vdbbench agent` subcommands."""
    p = agent_subparsers.add_parser(
        "report", help="staircase plot and table of accepted changes of a session",
        description="Draw the session's staircase (best QPS and every submission by outcome vs iteration) "
                    "and print its accepted changes and totals, all from the journal.",
    )
    p.add_argument("run", metavar="RUN", help="the session folder (holding journal.jsonl), or its name under --runs-dir")
    p.add_argument("--runs-dir", default="runs", help="where sessions live (default ./runs)")
    p.add_argument("-o", "--output", metavar="FILE", help="where to write the plot (default RUN/staircase.png), "
                   "or with --html the page (default RUN/session.html)")
    p.add_argument("--html", action="store_true", help="write the session page instead of the PNG: one self-contained "
                   "HTML file (staircase; click a submission for its diff, verdict, message and notes)")
    p.add_argument("--scale", choices=("auto", "log", "linear"), default="auto",
                   help="QPS axis: log when QPS spans more than 20x (auto, the default), or forced")
    p.add_argument("--json", metavar="FILE", help="also write totals, accepted changes and submissions as JSON")
    p.set_defaults(func=_cmd_report)

    f = agent_subparsers.add_parser(
        "final", help="measure a session's best against its start and reference now, on every target of its card",
        description="The final measurement (it runs by itself when a session ends, but not after an interrupt): "
                    "best, start and reference loaded side by side and timed in interleaved rounds until each "
                    "ratio's 95%% interval is within the card's [final] interval, on the card's data and every "
                    "transfer target; journaled as the session's `final` event, which the report leads with.",
    )
    f.add_argument("run", metavar="RUN", help="the session folder, or its name under --runs-dir")
    f.add_argument("--runs-dir", default="runs", help="where sessions live (default ./runs)")
    f.set_defaults(func=_cmd_final)

    c = agent_subparsers.add_parser(
        "compare", help="several sessions side by side (best QPS curves on one plot, and a table)",
        description="Put several sessions (say, two models on the same task) side by side.",
    )
    c.add_argument("runs", metavar="RUN", nargs="+", help="session folders, or names under --runs-dir")
    c.add_argument("--runs-dir", default="runs", help="where sessions live (default ./runs)")
    c.add_argument("-o", "--output", metavar="PNG", default="agent-compare.png", help="the plot (default agent-compare.png)")
    c.add_argument("--label", action="append", metavar="TEXT", help="legend label per run, in order (default: model and run name)")
    c.add_argument("--scale", choices=("auto", "log", "linear"), default="auto", help="QPS axis scale")
    c.add_argument("--x", choices=tuple(X_AXES), default="iterations",
                   help="what the runs are compared against: submissions (default), tool calls, hours, cost or tokens")
    c.set_defaults(func=_cmd_compare)
