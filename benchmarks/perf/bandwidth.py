"""One-thread DRAM read bandwidth probe (numpy), the yardstick for bytes-scanned x QPS in perf.md.

Usage: python benchmarks/perf/bandwidth.py [--mib 512] [--repeats 5]
Reads a buffer far larger than any cache with two reductions numpy vectorizes (float32 sum,
int64 bitwise-or) and prints the best GB/s of each over the repeats.
"""

from __future__ import annotations

import argparse
import time

import numpy as np


def best_gbps(fn, nbytes: int, repeats: int) -> float:
    best = float("inf")
    for _ in range(repeats):
        t = time.perf_counter()
        fn()
        best = min(best, time.perf_counter() - t)
    return nbytes / best / 1e9


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--mib", type=int, default=512)
    p.add_argument("--repeats", type=int, default=5)
    a = p.parse_args()
    buf = np.ones(a.mib * (1 << 20) // 8, dtype=np.int64)
    f32 = buf.view(np.float32)
    print(f"float32 sum  : {best_gbps(f32.sum, buf.nbytes, a.repeats):5.1f} GB/s ({a.mib} MiB)")
    print(f"int64 or-red.: {best_gbps(lambda: np.bitwise_or.reduce(buf), buf.nbytes, a.repeats):5.1f} GB/s")


if __name__ == "__main__":
    main()
