"""Session plots from the journal: one session's QPS staircase with every submission by outcome,
and several sessions' best-QPS curves side by side."""

from __future__ import annotations

import functools
from collections import Counter
from pathlib import Path
from typing import Any, Sequence

from vdbbench.agent.core.facts import Facts
from vdbbench.agent.core.journal import OUTCOMES
from vdbbench.agent.reports.report import (
    X_AXES, ReportError, accepted_table, best_curve, chained, fmt_count, fmt_qps, load_events, outcome_style, totals,
)


def _pyplot():
    """matplotlib's pyplot on the file-only Agg backend."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def plain_text(fn):
    """Draw with the journal's text as it is: a '$' pair in a model's message or a model's name was
    read as mathtext, so a message such as "$\\bar$" stopped the plot with a ValueError."""
    @functools.wraps(fn)
    def drawing(*args, **kwargs):
        import matplotlib

        with matplotlib.rc_context({"text.parse_math": False}):
            return fn(*args, **kwargs)

    return drawing


def _save(fig, out_png: str | Path) -> Path:
    out_png = Path(out_png)
    out_png.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(out_png, bbox_inches="tight")
    _pyplot().close(fig)
    return out_png


def _extend_steps(xs: Sequence[float], ys: Sequence[float], last: float) -> tuple[list, list]:
    """The step line (xs, ys) held at its last value out to x = last."""
    sx, sy = list(xs), list(ys)
    if sx[-1] < last:
        sx.append(last)
        sy.append(sy[-1])
    return sx, sy


def _use_log(values: Sequence[float]) -> bool:
    vals = [v for v in values if v and v > 0]
    return bool(vals) and max(vals) / min(vals) > 20




@plain_text
def staircase(run_dir: str | Path, out_png: str | Path, log: bool | None = None, title: str | None = None) -> dict[str, Any]:
    """Draw best QPS vs iteration as a step line and every submission as a point by outcome.

    Submissions with a measured QPS sit on the QPS axis; those without one (build or tests
    failed, timed out, crashed, no change) sit in a strip below it, one row per outcome, so
    every submission is one point. Returns what was drawn (points per outcome, axis scale).
    """
    plt = _pyplot()

    events = load_events(run_dir)
    facts = Facts.fold(events)
    decs = facts.decisions
    info = totals(events, facts)
    xs, ys = best_curve(events, facts=facts)
    # Every point is the start's QPS times chained paired ratios (report.chained), so the line of
    # the best never moves with one evaluation's load; the final measurement is drawn at the end.
    chain = {c["seq"]: c for c in chained(events, facts)}
    level = {id(d): chain.get(int(d.get("seq", -1)), {}).get("point") for d in decs}
    measured = [d for d in decs if level[id(d)] is not None]
    unmeasured = [d for d in decs if level[id(d)] is None]
    ref_qps = info["reference_qps"]
    measured_final = info.get("final")
    start_qps = info["baseline_qps"] or 1.0
    qps_values = [level[id(d)] for d in measured] + ys + ([ref_qps] if ref_qps else [])
    use_log = _use_log(qps_values) if log is None else log
    strip_rows = [o for o in OUTCOMES if any(d.get("outcome") == o for d in unmeasured)]
    strip_rows += sorted({str(d.get("outcome")) for d in unmeasured} - set(strip_rows))

    fig = plt.figure(figsize=(11, 6.2 if strip_rows else 5.4), dpi=120)
    grid = fig.add_gridspec(2 if strip_rows else 1, 1, height_ratios=[5, max(1, 0.45 * len(strip_rows))] if strip_rows else [1], hspace=0.16)
    ax = fig.add_subplot(grid[0])
    last_it = max([int(d.get("iteration") or 0) for d in decs] + [1])

    if xs:
        sx, sy = _extend_steps(xs, ys, last_it)
        ax.step(sx, sy, where="post", color="#1a9850", lw=2.2, label="best QPS", zorder=4)
    if ref_qps:
        frac = f", best = {info['of_reference']:.0%} of it" if info["of_reference"] else ""
        ax.axhline(ref_qps, color="#4d4d4d", ls="-.", lw=1.4, zorder=2,
                   label=f"reference: the project's engine, {fmt_qps(ref_qps)} QPS{frac}")
    drawn: Counter = Counter()
    for outcome in OUTCOMES:
        pts = [d for d in measured if d.get("outcome") == outcome]
        if pts:
            ax.scatter([d.get("iteration") for d in pts], [level[id(d)] for d in pts], **outcome_style(outcome))
            drawn[outcome] += len(pts)
    others = [d for d in measured if d.get("outcome") not in OUTCOMES]
    if others:
        ax.scatter([d.get("iteration") for d in others], [level[id(d)] for d in others], marker=".", color="m", label="other")
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
        after = next((c["after"] for c in chain.values() if c["iteration"] == r["iteration"]), r["qps_after"])
        ax.annotate(f"{text} (×{r['gain']:.2f})", (r["iteration"], after),
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

    fm = measured_final
    if fm is not None:
        y = start_qps * fm["ratio"]
        err = [[y - start_qps * fm["lo"]], [start_qps * min(fm["hi"], fm["ratio"] * 10) - y]] if fm.get("pairs") else None
        ax.errorbar([last_it + 0.5], [y], yerr=err, fmt="D", color="#08519c", ms=7, capsize=4, zorder=7,
                    label=f"final measurement: ×{fm['ratio']:.2f} the start" + (f" (±{fm['half']:.1%})" if fm.get("pairs") else ""))
    if use_log:
        ax.set_yscale("log")
    ax.set_ylabel("QPS: the start's, times chained paired ratios" + (" (log scale)" if use_log else ""))
    ax.grid(True, which="major", alpha=0.3)
    ax.set_xlim(0, last_it + 1.5)
    head = title or f"{info['task']} — {info['model']}"
    sub = (
        f"{info['submissions']} submissions, {info['accepted']} accepted"
        + (f" · final ×{fm['ratio']:.2f} the start ({fm['lo']:.2f}–{fm['hi']:.2f})" if fm else "")
        + (f" · product of accepted steps ×{info['product_of_steps']:.2f}" if info.get("product_of_steps") else "")
        + (f" · {info['of_reference']:.0%} of the reference" if info["of_reference"] else "")
        + f" · {info['tool_calls']:,} tool calls · {fmt_count(info['tokens'])} tokens · ${info['cost_usd']:.2f} · {info['wall_s'] / 3600:.2f} h"
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

    out_png = _save(fig, out_png)
    return {"points": dict(drawn), "n_points": sum(drawn.values()), "log": use_log, "path": str(out_png)}


@plain_text
def compare_runs(run_dirs: Sequence[str | Path], out_png: str | Path, log: bool | None = None,
                 labels: Sequence[str] | None = None, x: str = "iterations") -> list[dict[str, Any]]:
    """Best-QPS staircases of several sessions on one plot; returns one totals row per run."""
    plt = _pyplot()

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
        sx, sy = _extend_steps(xs, ys, last)
        final_text = f"final ×{row['final']['ratio']:.2f} the start" if row.get("final") else f"no final measurement ({row['speedup_source']})"
        line = ax.step(sx, sy, where="post", lw=2, label=f"{row['label']}: {final_text}")[0]
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
    out_png = _save(fig, out_png)
    return [r for r, _, _ in runs]
