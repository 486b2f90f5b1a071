"""Session reports from the journal: the QPS staircase plot, the table of accepted changes, totals, and side-by-side comparison of runs."""

from __future__ import annotations

import re
from collections import Counter
from pathlib import Path
from typing import Any, Mapping, Sequence

from vdbbench.agent.budget import Usage
from vdbbench.agent.journal import event_time

# Every outcome a decision can have, how it is drawn, and the order of the legend.
OUTCOME_STYLE: dict[str, dict[str, Any]] = {
    "accepted": dict(marker="*", color="#1a9850", s=150, label="accepted", zorder=5),
    "slower": dict(marker="o", color="#7f7f7f", s=22, label="slower / no gain", zorder=3),
    "recall_below_floor": dict(marker="v", color="#f46d43", s=32, label="recall under floor", zorder=3),
    "flagged": dict(marker="X", color="#d73027", s=70, label="flagged by audit", zorder=4),
    "build_failed": dict(marker="s", color="#8c510a", s=26, label="build failed", zorder=3),
    "tests_failed": dict(marker="D", color="#762a83", s=24, label="tests failed", zorder=3),
    "timed_out": dict(marker="P", color="#2166ac", s=34, label="timed out", zorder=3),
    "crashed": dict(marker="x", color="#000000", s=30, label="crashed", zorder=3),
    "no_change": dict(marker="|", color="#bdbdbd", s=40, label="no change", zorder=2),
}


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


def baseline_qps(events: Sequence[Mapping[str, Any]]) -> float | None:
    """QPS of the starting code: its own measurement (an evaluation before the first submission,
    with nothing to compare against), else what the first evaluation or decision compared against."""
    for e in events:
        if e.get("type") == "decision":
            break
        if (e.get("type") == "evaluation" and e.get("best") is None and e.get("split", "heldout") == "heldout"
                and isinstance(e.get("candidate"), Mapping) and e["candidate"].get("qps")):
            return float(e["candidate"]["qps"])
    for e in events:
        if e.get("type") == "evaluation" and isinstance(e.get("best"), Mapping) and e["best"].get("qps"):
            return float(e["best"]["qps"])
        if e.get("type") == "decision" and e.get("best_qps_before"):
            return float(e["best_qps_before"])
    return None


X_AXES = {
    "iterations": "iteration (submission)",
    "tool_calls": "tool calls",
    "hours": "wall time (hours, across resumes)",
    "cost": "cost (USD)",
    "tokens": "tokens (millions)",
}


def _progress(events: Sequence[Mapping[str, Any]], x: str) -> dict[int, float]:
    """For each decision's seq, how far the session had come on axis `x` at that point."""
    if x not in X_AXES:
        raise ReportError(f"unknown x axis {x!r}; expected one of {', '.join(X_AXES)}")
    out: dict[int, float] = {}
    tools = tokens = 0
    cost = 0.0
    wall = 0.0
    seg_start = last_t = None
    for e in events:
        t = event_time(e.get("t"))
        if e.get("type") == "session_start":
            if seg_start is not None and last_t is not None:
                wall += max(0.0, last_t - seg_start)
            seg_start = t
        elif seg_start is None:
            seg_start = t
        if t is not None:
            last_t = t
        kind = e.get("type")
        if kind == "tool_call":
            tools += 1
        elif kind == "model_call":
            tokens += int(e.get("total_tokens") or 0)
            cost += float(e.get("cost_usd") or 0.0)
        elif kind == "decision":
            here = wall + (max(0.0, last_t - seg_start) if seg_start is not None and last_t is not None else 0.0)
            out[int(e.get("seq", len(out)))] = {
                "iterations": float(e.get("iteration") or len(out) + 1), "tool_calls": float(tools),
                "hours": here / 3600.0, "cost": cost, "tokens": tokens / 1e6,
            }[x]
    return out


def best_curve(events: Sequence[Mapping[str, Any]], x: str = "iterations") -> tuple[list[float], list[float]]:
    """(x, best QPS after each submission) as a step function, from the baseline at x = 0.
    `x` is one of X_AXES: submissions by default, or tool calls, hours, cost, tokens so far."""
    xs: list[float] = []
    ys: list[float] = []
    base = baseline_qps(events)
    current = base
    if current is not None:
        xs.append(0)
        ys.append(current)
    where = _progress(events, x)
    for d in decisions(events):
        after = d.get("best_qps_after")
        if after is not None:
            current = float(after)
        elif d.get("outcome") == "accepted" and d.get("qps") is not None:
            current = float(d["qps"])
        if current is not None:
            pos = where.get(int(d.get("seq", -1)))
            xs.append(pos if pos is not None else int(d.get("iteration") or len(xs)))
            ys.append(current)
    return xs, ys


def session_info(events: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    start = next((e for e in events if e.get("type") == "session_start"), {})
    task = start.get("task") or {}
    card = task.get("card") if isinstance(task.get("card"), Mapping) else task
    name = (card or {}).get("name") or Path(str(task.get("path") or "task")).stem
    return {"task": name, "model": start.get("model") or "?", "base_url": start.get("base_url")}


def accepted_table(events: Sequence[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """One row per accepted change: iteration, QPS before -> after, recall, summary, audit verdict."""
    audits: dict[Any, Mapping[str, Any]] = {}
    for e in events:
        if e.get("type") == "audit":
            audits[e.get("commit")] = e
    # The paired gain measured in the same run (interleaved repeats) is the honest ratio; QPS
    # before and after come from different runs, so their quotient also holds machine drift.
    same_run_gain: dict[Any, float] = {}
    for e in events:
        if e.get("type") == "evaluation" and e.get("split", "heldout") == "heldout" and e.get("gain") is not None:
            same_run_gain[e.get("iteration")] = 1.0 + float(e["gain"])
    rows = []
    for d in decisions(events):
        if d.get("outcome") != "accepted":
            continue
        before, after = d.get("best_qps_before"), d.get("qps")
        audit = audits.get(d.get("commit"))
        gain = same_run_gain.get(d.get("iteration"))
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


def totals(events: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    """Session totals: submissions by outcome, tool calls, tokens, cost, wall time, best and baseline."""
    usage = Usage.from_journal(events)
    decs = decisions(events)
    outcomes = Counter(d.get("outcome") for d in decs)
    xs, ys = best_curve(events)
    base = baseline_qps(events)
    acc = [d for d in decs if d.get("outcome") == "accepted"]
    best = acc[-1] if acc else None
    stops = [e for e in events if e.get("type") == "budget_stop"]
    end = next((e for e in reversed(events) if e.get("type") == "session_end"), None)
    return {
        **session_info(events),
        "submissions": len(decs),
        "outcomes": dict(outcomes),
        "accepted": outcomes.get("accepted", 0),
        "tool_calls": usage.tool_calls,
        "model_calls": usage.model_calls,
        "prompt_tokens": usage.prompt_tokens,
        "completion_tokens": usage.completion_tokens,
        "tokens": usage.tokens,
        "cost_usd": usage.cost_usd,
        "wall_s": usage.wall_s,
        "baseline_qps": base,
        "best_qps": ys[-1] if ys else None,
        "best_recall10": best.get("recall10") if best else None,
        "best_commit": best.get("commit") if best else None,
        "speedup": (ys[-1] / base) if ys and base else None,
        "compactions": sum(e.get("type") == "compaction" for e in events),
        "reviews": sum(e.get("type") == "review" for e in events),
        "resumes": sum(e.get("type") == "session_start" and bool(e.get("resumed")) for e in events),
        "budget_stops": [f"{s.get('which')} ({s.get('used')} of {s.get('limit')})" for s in stops],
        "ended": end.get("reason") if end else None,
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
    decs = decisions(events)
    info = totals(events)
    xs, ys = best_curve(events)
    measured = [d for d in decs if d.get("qps") is not None]
    unmeasured = [d for d in decs if d.get("qps") is None]
    qps_values = [float(d["qps"]) for d in measured] + ys
    use_log = _use_log(qps_values) if log is None else log
    strip_rows = [o for o in OUTCOME_STYLE if any(d.get("outcome") == o for d in unmeasured)]
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
    drawn: Counter = Counter()
    for outcome, style in OUTCOME_STYLE.items():
        pts = [d for d in measured if d.get("outcome") == outcome]
        if pts:
            ax.scatter([d.get("iteration") for d in pts], [d["qps"] for d in pts], **style)
            drawn[outcome] += len(pts)
    others = [d for d in measured if d.get("outcome") not in OUTCOME_STYLE]
    if others:
        ax.scatter([d.get("iteration") for d in others], [d["qps"] for d in others], marker=".", color="m", label="other")
        drawn["other"] += len(others)
    rows = accepted_table(events)
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
            style = dict(OUTCOME_STYLE.get(outcome, dict(marker=".", color="m")))
            style.pop("label", None)
            strip.scatter([d.get("iteration") for d in pts], [row] * len(pts), **style)
            drawn[outcome] += len(pts)
        strip.set_yticks(range(len(strip_rows)))
        strip.set_yticklabels([OUTCOME_STYLE.get(o, {}).get("label", o) for o in strip_rows], fontsize=8)
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
    if info["budget_stops"]:
        t.add_row("budget stops", "; ".join(info["budget_stops"]))
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
        return Path(runs_dir) / run
    return p


def _cmd_report(args) -> int:
    from vdbbench.common.errors import UsageError

    try:
        run = _resolve(args.run, args.runs_dir)
        events = load_events(run)
        out = Path(args.output) if args.output else journal_path(run).parent / "staircase.png"
        staircase(run, out, log=_scale(args))
    except ReportError as exc:
        raise UsageError(str(exc)) from None
    print_report(events, png=str(out))
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
    p.add_argument("-o", "--output", metavar="PNG", help="where to write the plot (default RUN/staircase.png)")
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
