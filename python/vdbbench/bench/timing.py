"""Timing one search point: batch QPS (median of repeats after a warm-up) and single-query latency."""

from __future__ import annotations

import statistics
import time
from typing import Callable

import numpy as np


STATS = ("median", "best")


def time_batch(run: Callable[[], object], nq: int, repeats: int = 3, warmup: int = 1, stat: str = "median") -> dict:
    """All queries in one call: ``warmup`` untimed calls, then ``repeats`` timed ones.

    QPS comes from the median time, or with ``stat="best"`` from the fastest repeat (as
    ann-benchmarks does): on a shared machine the fastest run is the one least disturbed.
    """
    if repeats < 1:
        raise ValueError(f"repeats must be >= 1, got {repeats}")
    if stat not in STATS:
        raise ValueError(f"stat must be one of {', '.join(STATS)}, got {stat!r}")
    for _ in range(warmup):
        run()
    seconds = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        run()
        seconds.append(time.perf_counter() - t0)
    chosen = statistics.median(seconds) if stat == "median" else min(seconds)
    return {"qps": nq / chosen, "batch_s": seconds}


def qps_over(run: Callable[[], object], nq: int, min_seconds: float = 0.25) -> float:
    """QPS of repeated batch calls lasting at least ``min_seconds`` in all (one call at least).

    A single short call is at the mercy of the scheduler on a shared machine; a quarter of a
    second of calls averages that out.
    """
    calls, clock = 0, time.perf_counter
    t0 = clock()
    while True:
        run()
        calls += 1
        elapsed = clock() - t0
        if elapsed >= min_seconds:
            return calls * nq / elapsed


def time_single(run_one: Callable[[np.ndarray], object], queries: np.ndarray, warmup: int = 10,
                min_seconds: float = 0.0) -> dict:
    """One query per call over ``queries`` (a sample): p50/p99 latency in ms, QPS = calls / time.

    The latency is measured from Python around the call, so it includes the binding's
    per-call overhead, as it does for every peer. With ``min_seconds`` the passes over the
    sample repeat until the calls add up to that long: a pass of a fast index is a few
    milliseconds, which one preempted time slice decides, while a slower index's pass is
    longer and averages it out.
    """
    rows = [queries[i : i + 1] for i in range(queries.shape[0])]
    for row in rows[:warmup]:
        run_one(row)
    lat: list[float] = []
    clock = time.perf_counter
    spent = 0.0
    while True:
        for row in rows:
            t0 = clock()
            run_one(row)
            dt = clock() - t0
            lat.append(dt)
            spent += dt
        if spent >= min_seconds or not rows:
            break
    a = np.array(lat)
    return {
        "qps": len(a) / float(a.sum()),
        "p50_ms": float(np.percentile(a, 50) * 1e3),
        "p99_ms": float(np.percentile(a, 99) * 1e3),
        "single_queries": len(rows),
    }
