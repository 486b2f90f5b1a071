"""One-core memory read bandwidth, measured where the benchmark runs: the yardstick for how close
a search point comes to the memory-bandwidth bound (bytes it reads per query x QPS)."""

from __future__ import annotations

import functools
import time

import numpy as np


def read_gbps(mib: int = 256, repeats: int = 3) -> float:
    """Best GB/s of one thread OR-reducing a `mib` MiB int64 buffer (far larger than the caches)."""
    buf = np.ones(mib * (1 << 20) // 8, dtype=np.int64)
    np.bitwise_or.reduce(buf)  # fault the pages in before timing
    best = float("inf")
    for _ in range(repeats):
        t = time.perf_counter()
        np.bitwise_or.reduce(buf)
        best = min(best, time.perf_counter() - t)
    return buf.nbytes / best / 1e9


@functools.lru_cache(maxsize=1)
def read_gbps_once() -> float:
    """`read_gbps()`, measured on the first call of a process and reused (one run, one figure)."""
    return read_gbps()


def bound_share(bytes_per_query: float, qps: float, threads: int, gbps: float) -> tuple[float, float]:
    """(GB/s the point reads, its share of `threads` cores' read bandwidth). Above 1 means the
    bytes came from the caches (a batch re-reads each probed list for many queries)."""
    rate = bytes_per_query * qps / 1e9
    return rate, rate / (gbps * max(1, threads))
