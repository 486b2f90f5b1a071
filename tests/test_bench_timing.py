"""Timing one search point: single-query samples of a given length."""

from __future__ import annotations

import time

import numpy as np

from vdbbench.bench.timing import time_single


def _counting(seconds: float):
    calls = []

    def run_one(q):
        calls.append(q.shape)
        end = time.perf_counter() + seconds
        while time.perf_counter() < end:
            pass

    return run_one, calls


def test_one_pass_without_a_minimum_and_repeated_passes_with_one():
    q = np.zeros((20, 4), np.float32)
    run_one, calls = _counting(0.0005)
    out = time_single(run_one, q, warmup=3)
    assert len(calls) == 3 + 20 and out["single_queries"] == 20
    assert all(shape == (1, 4) for shape in calls)
    assert 0 < out["qps"] <= 2000 and out["p50_ms"] >= 0.5
    # a quarter of a second of calls: whole passes over the sample, as many as it takes
    run_one, calls = _counting(0.0005)
    out = time_single(run_one, q, warmup=3, min_seconds=0.05)
    timed = len(calls) - 3
    # whole passes (one is 20 calls of >= 0.5 ms, ~10 ms unless the machine is busy) until the
    # timed calls add up to the minimum (calls / QPS is their summed latency)
    assert timed % 20 == 0 and timed >= 20
    assert timed / out["qps"] >= 0.05
    assert out["single_queries"] == 20 and 0 < out["qps"] <= 2000
