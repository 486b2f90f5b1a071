"""The adaptive parameter sweep: double until the target recall is passed, bisect, step above."""

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
) -> list[int]:
    """Integer knob values (sorted) worth measuring for a knob whose recall grows with it.

    Doubles from ``start`` until ``recall_of(v) >= target`` (or ``stop`` is reached), bisects
    between the last value below and the first at/above the target (at most ``max_bisect``
    steps, stopping when they are adjacent), then adds up to ``above`` points beyond the
    smallest value found to reach the target (x1.5, x2), so the front shows what more costs.
    When the target is never reached every doubling up to ``stop`` has been tried.
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
    while True:
        if rec(v) >= target:
            hi = v
            break
        lo = v
        if v >= stop:
            break
        v = min(stop, v * 2)
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
    for factor in (1.5, 2.0)[:above]:
        rec(min(stop, int(math.ceil(hi * factor))))
    return sorted(tried)
