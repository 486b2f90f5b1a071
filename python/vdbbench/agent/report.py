"""Session reports from the journal: the QPS staircase plot, the table of accepted changes, totals, and side-by-side comparison of runs."""

from __future__ import annotations

import re
from collections import Counter
from pathlib import Path
from typing import Any, Mapping, Sequence

from vdbbench.agent.facts import PROGRESS_AXES, Facts
from vdbbench.agent.journal import OUTCOMES


def outcome_style(outcome: str) -> dict[str, Any]:
    """matplotlib scatter keywords for an outcome (journal.OUTCOMES), a plain dot for unknown ones."""
    o = OUTCOMES.get(outcome)
    if o is None:
        return dict(marker=".", color="m", s=20, label=str(outcome), zorder=3)
    return dict(marker=o.marker, color=o.color, s=o.size, label=o.label, zorder=o.zorder)


# Plot keywords per outcome, derived from journal.OUTCOMES (for readers such as the HTML page).
OUTCOME_STYLE: dict[str, dict[str, Any]] = {name: outcome_style(name) for name in OUTCOMES}


class ReportError(ValueError):
    """A run directory that cannot be reported on; the message says what was expected."""


def journal_path(run_dir: str | Path) -> Path:
    path = Path(run_dir)
    if path.is_file():
        return path
    if not path.exists():
        raise ReportError(f"run {path} does not exist; expected a session folder under the runs directory")
    journal = path / "journal.jsonl"
    if not journal.exists():
        raise ReportError(f"{path} holds no journal.jsonl; expected a session folder written by `vdbbench agent run`")
    return journal


def load_events(run_dir: str | Path) -> list[dict]:
    """All complete events of a session's journal (`run_dir` or the journal file itself)."""
    from vdbbench.agent.journal import read_events

    journal = journal_path(run_dir)
    events = read_events(journal)
    if not events:
        raise ReportError(f"{journal} holds no events yet")
    return events


# ---------------------------------------------------------------------------------------------
# Reading a session
# ---------------------------------------------------------------------------------------------


def decisions(events: Sequence[Mapping[str, Any]]) -> list[Mapping[str, Any]]:
    return [e for e in events if e.get("type") == "decision"]


X_AXES = {
    "iterations": "iteration (submission)",
    "tool_calls": "tool calls",
    "hours": "wall time (hours, across resumes)",
    "cost": "cost (USD)",
    "tokens": "tokens (millions)",
}
assert tuple(X_AXES) == PROGRESS_AXES


def best_curve(events: Sequence[Mapping[str, Any]], x: str = "iterations",
               facts: Facts | None = None) -> tuple[list[float], list[float]]:
    """(x, best QPS after each submission) as a step function, from the baseline at x = 0.
    `x` is one of X_AXES: submissions by default, or tool calls, hours, cost, tokens so far."""
    if x not in X_AXES:
        raise ReportError(f"unknown x axis {x!r}; expected one of {', '.join(X_AXES)}")
    f = facts or Facts.fold(events)
    xs: list[float] = []
    ys: list[float] = []
    if f.baseline_qps is not None:
        xs.append(0)
        ys.append(f.baseline_qps)
    for n, (seq, best) in enumerate(f.curve, start=1):
        if best is not None:
            xs.append(f.progress.get(seq, {}).get(x, n))
            ys.append(best)
    return xs, ys


def baseline_qps(events: Sequence[Mapping[str, Any]]) -> float | None:
    """QPS of the starting code (see facts.Facts)."""
    return Facts.fold(events).baseline_qps


def session_info(events: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    f = Facts.fold(events)
    return {"task": f.task, "model": f.model, "base_url": f.base_url}


def accepted_table(events: Sequence[Mapping[str, Any]], facts: Facts | None = None) -> list[dict[str, Any]]:
    """One row per accepted change: iteration, QPS before -> after, recall, summary, audit verdict."""
    f = facts or Facts.fold(events)
    rows = []
    for d in f.accepted:
        before, after = d.get("best_qps_before"), d.get("qps")
        audit = f.audits.get(d.get("commit"))
        # The paired gain measured in the same run (interleaved repeats) is the honest ratio; QPS
        # before and after come from different runs, so their quotient also holds machine drift.
        gain = f.same_run_gain.get(d.get("iteration"))
        rows.append({
            "iteration": d.get("iteration"),
            "qps_before": before,
            "qps_after": after,
            "gain": gain if gain is not None else ((after / before) if before and after else None),
            "recall10": d.get("recall10"),
            "message": " ".join(str(d.get("message") or "").split()),
            "diff_stat": short_stat(d.get("diff_stat")),
            "commit": d.get("commit"),
            "audit": audit.get("verdict") if audit else None,
            "audit_findings": list(audit.get("findings") or []) if audit else [],
        })
    return rows


def short_stat(stat: Any) -> str:
    """git's "3 files changed, 120 insertions(+), 4 deletions(-)" as "3 files +120 -4"."""
    text = " ".join(str(stat or "").split())
    m = re.fullmatch(r"(\d+) files? changed(?:, (\d+) insertions?\(\+\))?(?:, (\d+) deletions?\(-\))?", text)
    if not m:
        return text
    files = int(m.group(1))
    return f"{files} file{'s' if files != 1 else ''} +{m.group(2) or 0} -{m.group(3) or 0}"


def totals(events: Sequence[Mapping[str, Any]], facts: Facts | None = None) -> dict[str, Any]:
    """Session totals: submissions by outcome, tool calls, tokens, cost, wall time, best, baseline
    and the reference (the project's engine measured on the same card)."""
    f = facts or Facts.fold(events)
    best = f.accepted[-1] if f.accepted else None
    ref = f.reference or {}
    return {
        "task": f.task,
        "model": f.model, "base_url": f.base_url,
        "submissions": len(f.decisions),
        "outcomes": dict(f.outcomes),
        "accepted": f.outcomes.get("accepted", 0),
        "tool_calls": f.tool_calls,
        "model_calls": f.model_calls,
        "prompt_tokens": f.prompt_tokens,
        "completion_tokens": f.completion_tokens,
        "tokens": f.tokens,
        "cost_usd": f.cost_usd,
        "wall_s": f.elapsed(),
        "baseline_qps": f.baseline_qps,
        "best_qps": f.best_qps,
        "best_recall10": best.get("recall10") if best else None,
        "best_commit": best.get("commit") if best else None,
        "speedup": f.speedup,
        "reference_qps": ref.get("qps"),
        "reference_recall10": ref.get("recall10"),
        "reference_source": ref.get("source"),
        "of_reference": f.of_reference,
        "compactions": f.compactions,
        "reviews": f.reviews,
        "resumes": f.resumes,
        "budget_stops": [f"{s.get('which')} ({s.get('used')} of {s.get('limit')})" for s in f.budget_stops],
        "ended": f.ended,
        "unseen_verdict": ({k: f.unseen_verdict.get(k) for k in ("iteration", "outcome", "qps", "reason")}
                           if f.unseen_verdict else None),
    }


# ---------------------------------------------------------------------------------------------
# Plots
# ---------------------------------------------------------------------------------------------


def _use_log(values: Sequence[float]) -> bool:
    vals = [v for v in values if v and v > 0]
    return bool(vals) and max(vals) / min(vals) > 20


def _fmt_qps(v: Any) -> str:
    if v is None:
        return "—"
    v = float(v)
    return f"{v / 1000:.1f}k" if v >= 10_000 else f"{v:,.0f}"


def staircase(run_dir: str | Path, out_png: str | Path, log: bool | None = None, title: str | None = None) -> dict[str, Any]:
    """Draw best QPS vs iteration as a step line and every submission as a point by outcome.

    Submissions with a measured QPS sit on the QPS axis; those without one (build or tests
    failed, timed out, crashed, no change) sit in a strip below it, one row per outcome, so
    every submission is one point. Returns what was drawn (points per outcome, axis scale).
    """
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    events = load_events(run_dir)
    facts = Facts.fold(events)
    decs = facts.decisions
    info = totals(events, facts)
    xs, ys = best_curve(events, facts=facts)
    measured = [d for d in decs if d.get("qps") is not None]
    unmeasured = [d for d in decs if d.get("qps") is None]
    ref_qps = info["reference_qps"]
    qps_values = [float(d["qps"]) for d in measured] + ys + ([ref_qps] if ref_qps else [])
    use_log = _use_log(qps_values) if log is None else log
    strip_rows = [o for o in OUTCOMES if any(d.get("outcome") == o for d in unmeasured)]
    strip_rows += sorted({str(d.get("outcome")) for d in unmeasured} - set(strip_rows))

    fig = plt.figure(figsize=(11, 6.2 if strip_rows else 5.4), dpi=120)
    grid = fig.add_gridspec(2 if strip_rows else 1, 1, height_ratios=[5, max(1, 0.45 * len(strip_rows))] if strip_rows else [1], hspace=0.16)
    ax = fig.add_subplot(grid[0])
    last_it = max([int(d.get("iteration") or 0) for d in decs] + [1])

    if xs:
        sx, sy = list(xs), list(ys)
        if sx[-1] < last_it:
            sx.append(last_it)
            sy.append(sy[-1])
        ax.step(sx, sy, where="post", color="#1a9850", lw=2.2, label="best QPS", zorder=4)
    if ref_qps:
        frac = f", best = {info['of_reference']:.0%} of it" if info["of_reference"] else ""
        ax.axhline(ref_qps, color="#4d4d4d", ls="-.", lw=1.4, zorder=2,
                   label=f"reference: the project's engine, {_fmt_qps(ref_qps)} QPS{frac}")
    drawn: Counter = Counter()
    for outcome in OUTCOMES:
        pts = [d for d in measured if d.get("outcome") == outcome]
        if pts:
            ax.scatter([d.get("iteration") for d in pts], [d["qps"] for d in pts], **outcome_style(outcome))
            drawn[outcome] += len(pts)
    others = [d for d in measured if d.get("outcome") not in OUTCOMES]
    if others:
        ax.scatter([d.get("iteration") for d in others], [d["qps"] for d in others], marker=".", color="m", label="other")
        drawn["other"] += len(others)
    rows = accepted_table(events, facts)
    # Label the biggest steps, spread along the run (labels closer than 1/12 of it would collide).
    big: list[dict] = []
    for r in sorted((r for r in rows if r["gain"] and r["gain"] >= 1.1), key=lambda r: (-r["gain"], r["iteration"])):
        if len(big) < 6 and all(abs(r["iteration"] - o["iteration"]) > last_it / 12 for o in big):
            big.append(r)
    for n, r in enumerate(sorted(big, key=lambda r: r["iteration"])):
        text = r["message"][:38] + ("…" if len(r["message"]) > 38 else "")
        left = r["iteration"] < 0.6 * last_it
        ax.annotate(f"{text} (×{r['gain']:.2f})", (r["iteration"], r["qps_after"]),
                    xytext=(8 if left else -8, 10 if n % 2 == 0 else -16), ha="left" if left else "right",
                    textcoords="offset points", fontsize=7.5, color="#1b5e20",
                    bbox=dict(boxstyle="round,pad=0.2", fc="white", ec="none", alpha=0.75), zorder=6)
    # Session events worth seeing on the time line.
    marks = (("review", "strategic review", "#807dba", ":", 0.35), ("compaction", "compaction", "#a6bddb", "--", 0.65))
    for kind, label, color, ls, offset in marks:
        its = sorted({int(e.get("iteration") or 0) + offset for e in events if e.get("type") == kind})
        for i, it in enumerate(its):
            ax.axvline(it, color=color, ls=ls, lw=1, zorder=1, label=label if i == 0 else None)
    resumes = [e for e in events if e.get("type") == "session_start" and e.get("resumed")]
    for i, e in enumerate(resumes):
        ax.axvline(int(e.get("iteration") or 0) + 0.5, color="#fdae61", lw=1.6, zorder=1, label="resumed" if i == 0 else None)

    if use_log:
        ax.set_yscale("log")
    ax.set_ylabel("QPS (held-out queries" + (", log scale)" if use_log else ")"))
    ax.grid(True, which="major", alpha=0.3)
    ax.set_xlim(0, last_it + 1)
    head = title or f"{info['task']} — {info['model']}"
    sub = (
        f"{info['submissions']} submissions, {info['accepted']} accepted · best {_fmt_qps(info['best_qps'])} QPS"
        + (f" (×{info['speedup']:.2f} the start)" if info["speedup"] else "")
        + (f" · {info['of_reference']:.0%} of the reference" if info["of_reference"] else "")
        + f" · {info['tool_calls']:,} tool calls · {_short(info['tokens'])} tokens · ${info['cost_usd']:.2f} · {info['wall_s'] / 3600:.2f} h"
    )
    ax.set_title(f"{head}\n{sub}", fontsize=10.5)
    ax.margins(y=0.08)
    ax.legend(loc="upper left", bbox_to_anchor=(1.01, 1.0), fontsize=8, framealpha=0.9, borderaxespad=0)

    if strip_rows:
        ax.tick_params(labelbottom=False)
        strip = fig.add_subplot(grid[1], sharex=ax)
        for row, outcome in enumerate(strip_rows):
            pts = [d for d in unmeasured if d.get("outcome") == outcome]
            style = outcome_style(outcome)
            style.pop("label", None)
            strip.scatter([d.get("iteration") for d in pts], [row] * len(pts), **style)
            drawn[outcome] += len(pts)
        strip.set_yticks(range(len(strip_rows)))
        strip.set_yticklabels([outcome_style(o)["label"] for o in strip_rows], fontsize=8)
        strip.set_ylim(-0.6, len(strip_rows) - 0.4)
        strip.invert_yaxis()
        strip.grid(True, axis="x", alpha=0.3)
        strip.set_xlabel("iteration (submission)")
        strip.set_title("submissions without a QPS measurement", fontsize=8, loc="left", pad=2)
    else:
        ax.set_xlabel("iteration (submission)")

    out_png = Path(out_png)
    out_png.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(out_png, bbox_inches="tight")
    plt.close(fig)
    return {"points": dict(drawn), "n_points": sum(drawn.values()), "log": use_log, "path": str(out_png)}


def compare_runs(run_dirs: Sequence[str | Path], out_png: str | Path, log: bool | None = None,
                 labels: Sequence[str] | None = None, x: str = "iterations") -> list[dict[str, Any]]:
    """Best-QPS staircases of several sessions on one plot; returns one totals row per run."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    if not run_dirs:
        raise ReportError("compare needs at least one run")
    if labels is not None and len(labels) != len(run_dirs):
        raise ReportError(f"{len(labels)} labels for {len(run_dirs)} runs; give one label per run")
    runs = []
    for i, run in enumerate(run_dirs):
        events = load_events(run)
        row = totals(events)
        row["run"] = Path(run).name if Path(run).is_dir() else Path(run).parent.name
        row["label"] = labels[i] if labels else f"{row['model']} ({row['run']})"
        curve = best_curve(events, x)
        runs.append((row, curve, max(curve[0]) if curve[0] else 0))
    all_y = [y for _, (_, ys), _ in runs for y in ys]
    use_log = _use_log(all_y) if log is None else log
    fig, ax = plt.subplots(figsize=(10, 5.4), dpi=120)
    for row, (xs, ys), last in runs:
        if not xs:
            continue
        sx, sy = list(xs), list(ys)
        if sx[-1] < last:
            sx.append(last)
            sy.append(sy[-1])
        line = ax.step(sx, sy, where="post", lw=2, label=f"{row['label']}: {_fmt_qps(row['best_qps'])} QPS")[0]
        acc_x = [px for px, prev, y in zip(xs[1:], ys, ys[1:]) if y > prev]
        acc_y = [y for prev, y in zip(ys, ys[1:]) if y > prev]
        ax.scatter(acc_x, acc_y, color=line.get_color(), s=28, zorder=4)
    if use_log:
        ax.set_yscale("log")
    ax.set_xlabel(X_AXES[x])
    ax.set_ylabel("best QPS so far" + (" (log scale)" if use_log else ""))
    tasks = sorted({r["task"] for r, _, _ in runs})
    ax.set_title(f"best QPS by {X_AXES[x].split(' (')[0]} — {', '.join(tasks)}" + ("  (different tasks!)" if len(tasks) > 1 else ""), fontsize=10.5)
    ax.grid(True, alpha=0.3)
    ax.legend(loc="upper left", fontsize=8.5)
    out_png = Path(out_png)
    out_png.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(out_png, bbox_inches="tight")
    plt.close(fig)
    return [r for r, _, _ in runs]


# ---------------------------------------------------------------------------------------------
# Rich tables and the CLI
# ---------------------------------------------------------------------------------------------


def _short(n: int) -> str:
    return f"{n / 1e6:.1f}M" if n >= 1e6 else (f"{n / 1e3:.0f}k" if n >= 1e4 else str(n))


def _duration(seconds: float) -> str:
    s = int(round(seconds))
    return f"{s // 3600}h{s % 3600 // 60:02d}m" if s >= 3600 else f"{s // 60}m{s % 60:02d}s"


def print_report(events: Sequence[Mapping[str, Any]], console=None, png: str | None = None) -> None:
    from rich.console import Console
    from rich.table import Table

    console = console or Console()
    info = totals(events)
    table = Table(title=f"Accepted changes — {info['task']} ({info['model']})", title_justify="left",
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
            f"{_fmt_qps(r['qps_before'])} → {_fmt_qps(r['qps_after'])}" + (f" ×{r['gain']:.2f}" if r["gain"] else ""),
            f"{r['recall10']:.4f}" if r["recall10"] is not None else "—",
            r["message"] or "(no message)", r["diff_stat"] or "—", audit,
        )
    if not table.rows:
        table.add_row("—", "—", "—", "no change was accepted", "—", "—")
    console.print(table)
    outcome_text = ", ".join(f"{n} {k}" for k, n in sorted(info["outcomes"].items(), key=lambda kv: -kv[1]))
    t = Table(show_header=False, title="Totals", title_justify="left")
    t.add_column(style="bold", no_wrap=True)
    t.add_column(overflow="fold")
    t.add_row("submissions", f"{info['submissions']} ({outcome_text or 'none'})")
    t.add_row("best", f"{_fmt_qps(info['best_qps'])} QPS" + (f", recall@10 {info['best_recall10']:.4f}" if info["best_recall10"] is not None else "")
              + (f", ×{info['speedup']:.2f} the starting {_fmt_qps(info['baseline_qps'])} QPS" if info["speedup"] else ""))
    t.add_row("tool calls", f"{info['tool_calls']} ({info['model_calls']} model calls)")
    t.add_row("tokens", f"{info['tokens']:,} ({info['prompt_tokens']:,} prompt, {info['completion_tokens']:,} completion)")
    t.add_row("cost", f"${info['cost_usd']:.2f}")
    t.add_row("wall time", _duration(info["wall_s"]))
    t.add_row("long-run events", f"{info['compactions']} compactions, {info['reviews']} strategic reviews, {info['resumes']} resumes")
    if info["reference_qps"]:
        t.add_row("reference", f"the project's engine on this card ({info['reference_source']}): {_fmt_qps(info['reference_qps'])} QPS"
                  + (f", recall@10 {info['reference_recall10']:.4f}" if info["reference_recall10"] is not None else "")
                  + (f"; the best is {info['of_reference']:.1%} of it" if info["of_reference"] else ""))
    if info["budget_stops"]:
        t.add_row("budget stops", "; ".join(info["budget_stops"]))
    if info["unseen_verdict"]:
        v = info["unseen_verdict"]
        t.add_row("last verdict", f"iteration {v['iteration']} {v['outcome']} (not seen by the model): {' '.join(str(v['reason'] or '').split())[:300]}")
    if info["ended"]:
        t.add_row("ended", str(info["ended"]))
    if png:
        t.add_row("staircase", png)
    console.print(t)


def print_comparison(rows: Sequence[Mapping[str, Any]], console=None, png: str | None = None) -> None:
    from rich.console import Console
    from rich.table import Table

    console = console or Console()
    tasks = sorted({str(r["task"]) for r in rows})
    same_task = len(tasks) == 1
    title = "Sessions side by side" + (f" on {tasks[0]}" if same_task else " (different tasks!)") + (f" — plot: {png}" if png else "")
    from rich import box

    table = Table(title=title, title_justify="left", box=box.SIMPLE_HEAD, pad_edge=False)
    cols = ["session"] + ([] if same_task else ["task"]) + ["subm.", "acc.", "best QPS", "recall", "tools", "tokens, cost", "wall"]
    for col in cols:
        if col in ("session", "task"):
            table.add_column(col, overflow="fold", min_width=10)
        else:
            table.add_column(col, justify="right", no_wrap=True)
    for r in rows:
        cells = [f"{r['model']}\n[dim]{r['run']}[/dim]"] + ([] if same_task else [r["task"]]) + [
            str(r["submissions"]), str(r["accepted"]),
            _fmt_qps(r["best_qps"]) + (f" ×{r['speedup']:.1f}" if r["speedup"] else ""),
            f"{r['best_recall10']:.3f}" if r["best_recall10"] is not None else "—",
            str(r["tool_calls"]), f"{_short(r['tokens'])} ${r['cost_usd']:.2f}", _duration(r["wall_s"]),
        ]
        table.add_row(*cells)
    console.print(table)


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
        if args.html:  # the session page (vdbbench.pages.session) instead of the PNG
            from vdbbench.pages.session import write_session_page

            out = write_session_page(run, Path(args.output) if args.output else journal_path(run).parent / "session.html")
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

    doc = {
        "schema": "vdbbench.agent-report/1",
        "totals": totals(events),
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
