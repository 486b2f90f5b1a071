"""The final measurement of a session: its result as a measurement, not a product of steps.

When a session ends, the best is timed against the start and the reference (the project's engine,
when the card measures one apart from the start), all loaded side by side and interleaved in
chunks (vdbbench.agent.evaluation.evaluator.Evaluator.interleaved), round after round, until the 95%
interval of each ratio is within +-`[final] interval` (2%) or the round cap of `max_seconds` per
target. That is done on the card's own held-out queries and on every transfer target
(vdbbench.agent.evaluation.transfer: other data sets, other SIMD levels), with the recall of each build at
the engine's defaults there. One `final` journal event holds it all; its ratio on the card's
data is the session's headline in the report, the page, the leaderboard, compare and tournament.

Why not multiply the accepted steps' gains: each was measured once, at or above the margin
(winner's curse), and a judge's false accepts become phantom steps; the product drifts upward
with the number of submissions even when nothing changed. It is shown apart, named as such.
"""

from __future__ import annotations

import functools
import math
import time
from pathlib import Path
from typing import Any, Callable, Mapping, Sequence

import numpy as np

from vdbbench.agent.core.task import TaskCard
from vdbbench.agent.evaluation import transfer

CONFIDENCE = 0.95


@functools.lru_cache(maxsize=256)
def _t(df: int) -> float:
    from scipy.stats import t

    return float(t.ppf(0.5 + CONFIDENCE / 2, df))


def interval(log_ratios: Sequence[float]) -> dict:
    """{ratio, lo, hi, half} of the mean log-ratio with its two-sided 95% t interval (half: the
    half-width as a fraction, exp(h) - 1)."""
    d = np.asarray(log_ratios, dtype=float)
    m = float(d.mean()) if d.size else 0.0
    h = _t(d.size - 1) * float(d.std(ddof=1)) / math.sqrt(d.size) if d.size > 1 else math.inf
    return {"ratio": math.exp(m), "lo": math.exp(m - h) if math.isfinite(h) else 0.0,
            "hi": math.exp(m + h) if math.isfinite(h) else math.inf, "half": math.expm1(h) if math.isfinite(h) else math.inf,
            "pairs": int(d.size)}


def libraries(card: TaskCard, run_dir: Path, ws: Path, target_dir: Path | None, emit=None) -> dict[str, Path]:
    """{"best", "start", "reference"?}: the builds the final measurement times. The reference is a
    build of its own only when the card measures the project's engine apart from the start."""
    from vdbbench.agent.evaluation import reference

    run_dir = Path(run_dir)
    libs = {"best": run_dir / "builds" / "best" / card.artifact}
    start = transfer.start_library(card, run_dir, ws, target_dir, emit)
    if start is not None:
        libs["start"] = start
    if card.reference.source == "engine" and not reference.is_start(card):
        ref = run_dir / "builds" / "reference" / f"{card.reference.module.rsplit('.', 1)[-1]}.so"
        if ref.exists():
            libs["reference"] = ref
    return libs


def _settled(fin, t0: float, rounds: int, ratios: Mapping, names: Sequence[str]) -> bool:
    """More rounds? Not once every ratio of the best is within the interval, or the cap is reached."""
    if time.monotonic() - t0 >= fin.max_seconds:
        return False
    if rounds < fin.min_pairs:
        return True
    return any(interval(ratios[("best", n)])["half"] > fin.interval for n in names if n != "best")


def measure_target(card: TaskCard, ev, libs: dict[str, Path], t: transfer.Target) -> dict:
    """One target's row of the final event: ratios of the best to each other build, recalls."""
    fin = card.final
    seconds = fin.repeat_seconds or card.objective.repeat_seconds
    t0 = time.monotonic()
    names = list(libs)
    got = ev.interleaved(libs, "heldout", seconds, lambda r, ratios: _settled(fin, t0, r, ratios, names))
    elapsed = time.monotonic() - t0
    row: dict[str, Any] = {"key": t.key, "label": t.label, "simd": t.simd, "dataset": ev.data.dataset,
                           "rounds": got["rounds"], "seconds": round(elapsed, 3), "repeat_seconds": seconds,
                           "recall10": got["recall"], "floor": card.objective.recall_floor}
    if got["failures"]:
        row.update(stopped="failure", failures=got["failures"])
        return row
    row["ratios"] = {n: interval(got["ratios"][("best", n)]) for n in names if n != "best"}
    row["qps"] = {n: math.exp(float(np.mean(v))) for n, v in got["logs"].items() if v}
    wide = [n for n, r in row["ratios"].items() if r["half"] > fin.interval]
    row["stopped"] = "cap" if wide else "interval"
    return row


def measure(card: TaskCard, evaluator, run_dir: Path, ws: Path, target_dir: Path | None,
            emit: Callable[..., dict], best_commit: str, reason: str = "") -> dict | None:
    """Time the best against the start (and reference) on every target; journals and returns the
    `final` event. None when the card turns it off."""
    from vdbbench.agent.core import workspace as wsp

    if not card.final.enabled:
        return None
    run_dir = Path(run_dir)
    t0 = time.monotonic()
    start_commit = wsp.start_commit(ws)
    libs = libraries(card, run_dir, ws, target_dir, emit)
    payload: dict[str, Any] = {"best_commit": best_commit, "start_commit": start_commit, "reason": reason,
                               "interval": card.final.interval, "confidence": CONFIDENCE,
                               "max_seconds": card.final.max_seconds, "builds": sorted(libs),
                               "reference_is_start": "reference" not in libs and card.reference.source != "none",
                               "advisory": card.transfer.advisory}
    if not libs["best"].exists() or "start" not in libs:
        missing = "the best's build" if not libs["best"].exists() else "the start's build"
        emit("error", where="final measurement", text=f"{missing} is missing: no final measurement")
        return None
    if evaluator is not None:
        evaluator.close()  # the kept best worker: its memory and its core are needed now
    targets_ = getattr(evaluator, "transfer", None) or transfer.Targets(card, evaluator.data, run_dir)
    rows = []
    same = best_commit == start_commit
    for t in targets_.all():
        ev = targets_.evaluator(t)
        if ev is None:
            rows.append({"key": t.key, "label": t.label, "simd": t.simd, "skipped": targets_.missing.get(t.key)})
            continue
        if same:  # nothing was accepted: the best is the start, its ratio is 1 by definition
            rec = ev.recall_of(libs["start"], "start").get("recall10")
            rows.append({"key": t.key, "label": t.label, "simd": t.simd, "dataset": ev.data.dataset, "stopped": "same",
                         "ratios": {"start": {"ratio": 1.0, "lo": 1.0, "hi": 1.0, "half": 0.0, "pairs": 0}},
                         "recall10": {"best": rec, "start": rec}, "floor": card.objective.recall_floor})
        else:
            rows.append(measure_target(card, ev, libs, t))
    for r in rows:
        rec = (r.get("recall10") or {})
        if r.get("skipped") or rec.get("best") is None:
            continue
        need = transfer.threshold(card.objective.recall_floor, rec.get("start") if r["key"] != transfer.HERE else None)
        r["threshold"], r["holds"] = need, rec["best"] >= need
    payload.update(targets=rows, seconds=round(time.monotonic() - t0, 3))
    return emit("final", **payload)


def of_session(session, reason: str = "") -> dict | None:
    """The final measurement of a live session (the loop calls it as the session ends)."""
    return measure(session.card, session.evaluator, session.run_dir, session.ws, session.target, session.emit,
                   session.best.commit, reason)


# ---------------------------------------------------------------------------------------------
# Reading it back (report, page, leaderboard, compare, tournament)
# ---------------------------------------------------------------------------------------------


def last_final(events: Sequence[Mapping[str, Any]]) -> dict | None:
    """The last `final` event of the journal, if it measured the session's last best."""
    finals = [e for e in events if e.get("type") == "final"]
    if not finals:
        return None
    last = finals[-1]
    later_accepts = [e for e in events if e.get("type") == "decision" and e.get("outcome") == "accepted"
                     and int(e.get("seq", 0)) > int(last.get("seq", 0))]
    return None if later_accepts else dict(last)


def headline(events: Sequence[Mapping[str, Any]]) -> dict | None:
    """The session's headline: {ratio, lo, hi, half, pairs, stopped, reference: {...} | None,
    recall10, holds, transfer: [rows]} from the final measurement on the card's own data."""
    fin = last_final(events)
    if fin is None:
        return None
    rows = fin.get("targets") or []
    here = next((r for r in rows if r.get("key") == transfer.HERE), None)
    if here is None or "ratios" not in here:
        return None
    ratios = here["ratios"]
    ref = ratios.get("reference") or (ratios.get("start") if fin.get("reference_is_start") else None)
    return {**ratios["start"], "stopped": here.get("stopped"), "reference": ref,
            "recall10": (here.get("recall10") or {}).get("best"), "holds": here.get("holds"),
            "interval_target": fin.get("interval"), "transfer": [r for r in rows if r.get("key") != transfer.HERE],
            "advisory": fin.get("advisory")}


def fmt_ratio(r: Mapping[str, Any] | None) -> str:
    """"1.31x (1.29-1.33)" for a ratio with its interval; "—" for none."""
    if not r or r.get("ratio") is None:
        return "—"
    if not r.get("pairs"):
        return f"{r['ratio']:.2f}x"
    return f"{r['ratio']:.2f}x ({r['lo']:.2f}–{r['hi']:.2f})"


def target_line(r: Mapping[str, Any]) -> str:
    """One transfer target in words: "+31% on photo-sift-a (±1.8%); recall 0.935: fails"."""
    if r.get("skipped"):
        return f"{r['label']}: skipped ({r['skipped']})"
    if r.get("stopped") == "failure":
        return f"{r['label']}: not measured ({'; '.join(f'{k}: {v[:120]}' for k, v in (r.get('failures') or {}).items())})"
    s = (r.get("ratios") or {}).get("start") or {}
    text = f"{s.get('ratio', 1) - 1:+.0%} on {r['label']}"
    if s.get("pairs"):
        text += f" (±{s['half']:.1%}{', cap reached' if r.get('stopped') == 'cap' else ''})"
    rec = (r.get("recall10") or {}).get("best")
    if rec is not None:
        text += f"; recall {rec:.3f}" + ("" if r.get("holds", True) else ": fails")
    return text
