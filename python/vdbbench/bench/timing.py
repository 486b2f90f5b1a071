"""Timing one search point: batch QPS (median of repeats after a warm-up) and single-query latency."""

from __future__ import annotations

import statistics
import time
from typing import Callable

import numpy as np


def time_batch(run: Callable[[], object], nq: int, repeats: int = 3, warmup: int = 1) -> dict:
    """All queries in one call: ``warmup`` untimed calls, then the median of ``repeats`` timed ones."""
    if repeats < 1:
        raise ValueError(f"repeats must be >= 1, got {repeats}")
    for _ in range(warmup):
        run()
    seconds = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        run()
        seconds.append(time.perf_counter() - t0)
    median = statistics.median(seconds)
    return {"qps": nq / median, "batch_s": seconds}


def time_single(run_one: Callable[[np.ndarray], object], queries: np.ndarray, warmup: int = 10) -> dict:
    """One query per call over ``queries`` (a sample): p50/p99 latency in ms, QPS = calls / time.

    The latency is measured from Python around the call, so it includes the binding's
    per-call overhead, as it does for every peer.
    """
    rows = [queries[i : i + 1] for i in range(queries.shape[0])]
    for row in rows[:warmup]:
        run_one(row)
    lat = np.empty(len(rows))
    clock = time.perf_counter
    for i, row in enumerate(rows):
        t0 = clock()
        run_one(row)
        lat[i] = clock() - t0
    return {
        "qps": len(rows) / float(lat.sum()),
        "p50_ms": float(np.percentile(lat, 50) * 1e3),
        "p99_ms": float(np.percentile(lat, 99) * 1e3),
        "single_queries": len(rows),
    }
