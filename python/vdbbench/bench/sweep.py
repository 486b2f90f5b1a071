"""The adaptive parameter sweep: double until the target recall is passed (or, from a guess, halve
or double until it is bracketed), bisect, step above."""

from __future__ import annotations

import math
from typing import Callable


def adaptive_values(
    recall_of: Callable[[int], float],
    start: int,
    stop: int,
    target: float,
    max_bisect: int = 4,
    above: int = 2,
    guess: int | None = None,
    factors: tuple[float, ...] = (1.5, 2.0),
    step: float = 1.25,
) -> list[int]:
    """Integer knob values (sorted) worth measuring for a knob whose recall grows with it.

    Doubles from ``start`` until ``recall_of(v) >= target`` (or ``stop`` is reached), bisects
    between the last value below and the first at/above the target (at most ``max_bisect``
    steps, stopping when they are adjacent), then adds up to ``above`` points beyond the
    smallest value found to reach the target (``factors`` times it, at least one more: x1.5 and
    x2 by default), so the front shows what more costs.
    When the target is never reached every doubling up to ``stop`` has been tried.

    With a ``guess`` (where a like sweep crossed the target: the same knob under neighbouring
    settings of the others) the crossing is bracketed from there instead, in steps of ``step``
    (down while the guess and the values under it reach the target, up while they do not; the
    steps grow to doubling when the guess is far off), then bisected. Near a good guess that takes two or three values where doubling from
    ``start`` takes seven or eight.
    """
    if start < 1 or stop < start:
        raise ValueError(f"bad sweep range {start}..{stop}")
    tried: dict[int, float] = {}

    def rec(v: int) -> float:
        if v not in tried:
            tried[v] = recall_of(v)
        return tried[v]

    lo: int | None = None
    hi: int | None = None
    v = start
    grow = 2.0
    if guess is not None:
        grow = step
        v = min(stop, max(start, int(guess)))
        if rec(v) >= target:
            hi = v
            shrink = step
            while hi > start:  # step down to the first value under the target
                v = max(start, min(hi - 1, int(hi / shrink)))
                if rec(v) >= target:
                    hi = v
                    shrink = min(2.0, shrink * step)  # a guess far off is left as fast as doubling
                else:
                    lo = v
                    break
    while hi is None:
        if rec(v) >= target:
            hi = v
            break
        lo = v
        if v >= stop:
            break
        v = min(stop, max(v + 1, int(math.ceil(v * grow))))
        grow = min(2.0, grow * step) if guess is not None else grow
    if hi is None:
        return sorted(tried)
    if lo is not None:
        for _ in range(max_bisect):
            if hi - lo <= 1:
                break
            mid = (lo + hi) // 2
            if rec(mid) >= target:
                hi = mid
            else:
                lo = mid
    for factor in factors[:above]:
        rec(min(stop, max(hi + 1, int(math.ceil(hi * factor)))))
    return sorted(tried)


#: A knob's step up pays when it lowers the primary value at which the target is reached by at
#: least this share: a smaller gain is within the sample's noise, and the step adds its own cost.
MIN_GAIN = 0.05


def stops_paying(combo: dict, order: dict[str, tuple], crossing: dict[str, int | None],
                 off_at_zero: tuple[str, ...] = (), pruned: set[str] = frozenset(),
                 min_gain: float = MIN_GAIN) -> str | None:
    """Why the combination ``combo`` of secondary knob values need not be swept, or None.

    ``order`` maps each secondary knob to its values; ``crossing`` maps the key (`combo_key`)
    of each combination swept so far to the smallest primary value (nprobe) at which it reached
    the target (None: it never did); ``pruned`` holds the keys of combinations already skipped.
    A knob that costs more as it grows pays only by letting a smaller primary value reach the
    target. When its last step up (the same other knobs) did not lower that crossing by
    ``min_gain`` (a share of it), the next step is skipped, and the steps beyond it: a point
    there needs about as large a primary value and costs more in this knob, so at best it ties
    with the smaller step (when the crossing did not move at all, it is undercut on every knob,
    `results.cheapest_points`, and can never be the headline). Knobs in ``off_at_zero`` compare
    only values above 0 (0 turns a stage off: another trade-off).
    """
    for knob, values in order.items():
        v = combo[knob]
        if knob in off_at_zero and v == 0:
            continue
        ladder = sorted(x for x in values if not (knob in off_at_zero and x == 0))
        i = ladder.index(v)
        if i == 0:
            continue
        below1 = combo_key({**combo, knob: ladder[i - 1]})
        if below1 in pruned:
            return f"{knob}={ladder[i - 1]} was skipped already"
        if i < 2:
            continue
        below2 = combo_key({**combo, knob: ladder[i - 2]})
        a, b = crossing.get(below2), crossing.get(below1)
        if a is not None and b is not None and b > a * (1.0 - min_gain):
            return (f"{knob} {ladder[i - 2]} -> {ladder[i - 1]} did not lower the crossing of the target "
                    f"by {min_gain:.0%} ({a} -> {b})")
    return None


def combo_key(combo: dict) -> str:
    return ",".join(f"{k}={combo[k]}" for k in sorted(combo))
