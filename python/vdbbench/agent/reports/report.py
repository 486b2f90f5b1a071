"""A session's journal read for its reports: the events, the best-QPS curve, the table of accepted
changes and the totals (the plots are vdbbench.agent.reports.report_plots; the terminal tables and the
`report` and `compare` commands are vdbbench.agent.reports.report_cli)."""

from __future__ import annotations

import math
import re
import unicodedata
from pathlib import Path
from typing import Any, Mapping, Sequence

from vdbbench.agent.core.facts import PROGRESS_AXES, Facts
from vdbbench.agent.core.journal import OUTCOMES
from vdbbench.agent.evaluation import final as final_mod
from vdbbench.agent.evaluation.eval_report import fmt_qps as _fmt_qps


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


class JournalEvents(list):
    """A journal's events, and what was wrong with the file (`problems`, in words; empty when the
    journal is whole): every report built from them says it is partial when there are any."""

    problems: list[str]

    def __init__(self, events=(), problems=()):
        super().__init__(events)
        self.problems = list(problems)


def journal_problems(events: Sequence[Mapping[str, Any]]) -> list[str]:
    """What was wrong with the journal these events were read from (see JournalEvents)."""
    return list(getattr(events, "problems", None) or [])


def load_events(run_dir: str | Path) -> JournalEvents:
    """The events of a session's journal (`run_dir` or the journal file itself), in seq order; a
    damaged line is left out and named in the result's `problems` (core.journal.read_journal)."""
    from vdbbench.agent.core.journal import read_journal

    journal = journal_path(run_dir)
    events, problems = read_journal(journal)
    if not events:
        raise ReportError(f"{journal} holds no events yet" + (f" that can be read ({'; '.join(problems)})" if problems else ""))
    return JournalEvents(events, problems)


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


def _step_ratio(d: Mapping[str, Any], f: Facts) -> float | None:
    """A decision's candidate/best ratio, paired in its own run (interleaved repeats); for a
    decision without one (recovered after a crash) the quotient of its QPS figures."""
    g = f.same_run_gain.get(d.get("iteration"))
    if g is None and d.get("gain") is not None:
        g = 1.0 + float(d["gain"])
    if g is None and d.get("qps") and d.get("best_qps_before"):
        g = float(d["qps"]) / float(d["best_qps_before"])
    return g


def chained(events: Sequence[Mapping[str, Any]], facts: Facts | None = None) -> list[dict[str, Any]]:
    """Per decision, in QPS anchored at the start's own measurement (1.0 when there is none) and
    moved only by paired ratios: `before` (the best's level going in), `point` (the candidate:
    before x its paired ratio; None when not measured) and `after`. Chained paired ratios, not
    one evaluation's absolute QPS, which moves with the machine's load from one run to the next."""
    f = facts or Facts.fold(events)
    level = f.baseline_qps or 1.0
    out = []
    for d in f.decisions:
        ratio = _step_ratio(d, f) if (d.get("qps") is not None or d.get("outcome") == "accepted") else None
        point = level * ratio if ratio else None
        before = level
        if d.get("outcome") == "accepted" and ratio:
            level *= ratio
        out.append({"seq": int(d.get("seq", -1)), "iteration": d.get("iteration"), "outcome": d.get("outcome"),
                    "before": before, "point": point, "after": level, "ratio": ratio})
    return out


def product_of_steps(events: Sequence[Mapping[str, Any]], facts: Facts | None = None) -> float | None:
    """The product of the accepted steps' paired gains: NOT the session's result (each step was
    measured once, at or above the margin, and false accepts add phantom steps); shown apart."""
    f = facts or Facts.fold(events)
    gains = [_step_ratio(d, f) for d in f.accepted]
    if not gains:
        return 1.0 if f.decisions else None
    return math.prod(gains) if all(gains) else None


def best_curve(events: Sequence[Mapping[str, Any]], x: str = "iterations",
               facts: Facts | None = None) -> tuple[list[float], list[float]]:
    """(x, best after each submission) as a step function from the start at x = 0: the start's QPS
    times the chained paired ratios of the accepted steps (see `chained`). `x` is one of X_AXES:
    submissions by default, or tool calls, hours, cost, tokens so far."""
    if x not in X_AXES:
        raise ReportError(f"unknown x axis {x!r}; expected one of {', '.join(X_AXES)}")
    f = facts or Facts.fold(events)
    xs: list[float] = []
    ys: list[float] = []
    if f.baseline_qps is not None:
        xs.append(0)
        ys.append(f.baseline_qps)
    for n, c in enumerate(chained(events, f), start=1):
        xs.append(f.progress.get(c["seq"], {}).get(x, n))
        ys.append(c["after"])
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
    head = final_mod.headline(events)
    product = product_of_steps(events, f)
    if head is not None:
        speedup, source = head["ratio"], "final measurement"
    elif product is not None and f.decisions:
        speedup, source = product, "product of accepted steps"
    else:
        speedup, source = f.speedup, "separate evaluations"
    of_ref = f.of_reference
    if head is not None and head.get("reference"):
        of_ref = head["reference"]["ratio"]
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
        "speedup": speedup,  # the headline: the final measurement when the session has one
        "speedup_source": source,
        "final": head,
        "product_of_steps": product,
        "transfer_lines": [final_mod.target_line(r) for r in head["transfer"]] if head else [],
        "reference_qps": ref.get("qps"),
        "reference_recall10": ref.get("recall10"),
        "reference_source": ref.get("source"),
        "of_reference": of_ref,
        "compactions": f.compactions,
        "reviews": f.reviews,
        "resumes": f.resumes,
        "budget_stops": [f"{s.get('which')} ({s.get('used')} of {s.get('limit')})" for s in f.budget_stops],
        "ended": f.ended,
        "unseen_verdict": ({k: f.unseen_verdict.get(k) for k in ("iteration", "outcome", "qps", "reason")}
                           if f.unseen_verdict else None),
        # A damaged journal (torn or undecodable lines, repeated or reordered seqs): the figures
        # above are from the events that could be read, and every report says so.
        "no_final": _no_final(events, f) if head is None else None,
        "journal_problems": journal_problems(events),
        "partial": bool(journal_problems(events)),
    }


def _no_final(events: Sequence[Mapping[str, Any]], f: Facts) -> str:
    """Why a session has no final measurement, in words: still running or interrupted, ended
    without one (the card turns it off), or the measurement failed as it ended (its error)."""
    if not f.ended or f.ended == "interrupted":
        return "none yet (the session is running, or ended by an interrupt)"
    last_start = max((i for i, e in enumerate(events) if e.get("type") == "session_start"), default=0)
    err = next((e for e in reversed(events[last_start:]) if e.get("type") == "error" and e.get("where") == "final measurement"), None)
    if err is not None:
        return f"none: it failed as the session ended ({' '.join(str(err.get('text') or '').split())[:200]})"
    if final_mod.last_final(events) is None and any(e.get("type") == "final" for e in events):
        return f"none of the last best: the session ended ({f.ended}) after a change accepted since the last one"
    return f"none: the session ended ({f.ended}) without one (the card turns it off, or an older journal)"


# ---------------------------------------------------------------------------------------------
# Figures as text (the plots, the terminal tables and the session page share them)
# ---------------------------------------------------------------------------------------------


def terminal_text(text: Any) -> str:
    """Journal text (the model's messages, verdicts) for a terminal or a CI log: control characters
    shown as \\xNN, so an escape sequence in a message cannot clear the screen, retitle the window
    or hide the lines before it."""
    return "".join(f"\\x{ord(c):02x}" if unicodedata.category(c) == "Cc" else c for c in str(text))


def fmt_qps(v: Any) -> str:
    """QPS in tables and plots: compact (12.3k), a dash when missing."""
    return _fmt_qps(v, compact=True, missing="—")


def fmt_count(n: int) -> str:
    return f"{n / 1e6:.1f}M" if n >= 1e6 else (f"{n / 1e3:.0f}k" if n >= 1e4 else str(n))


def fmt_duration(seconds: float) -> str:
    s = int(round(seconds))
    return f"{s // 3600}h{s % 3600 // 60:02d}m" if s >= 3600 else f"{s // 60}m{s % 60:02d}s"
