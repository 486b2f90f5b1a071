#!/usr/bin/env python
"""Per-call latency of single queries (one per call) at THREADS threads, two builds interleaved
(20 rounds of NQ queries, order alternating), same index file: p50, mean, and the calls over
500 us with their share of the total (a shared query's helper preempted mid-job makes its
caller wait a scheduler tick). ab_single.py gives the rounds' median; this the pooled tail.
Usage: python benchmarks/perf/single_tail.py DATASET INDEX.vdb OLDPKG NPROBE NQ THREADS
OLDPKG holds oldvdb/__init__.py and oldvdb/_rust_vdb.cpython-*.so (a copy of the old build)."""
from usage import help_or_usage, pair_of_builds
help_or_usage(__doc__, 6)
import sys, time, numpy as np
q, eng, nprobe, nq = pair_of_builds(sys.argv)
threads = int(sys.argv[6])
lat = {"old": [], "new": []}
for r in range(20):
    for k in (("old", "new") if r % 2 == 0 else ("new", "old")):
        for i in range(nq):
            t = time.perf_counter()
            eng[k].search(q[i:i+1], k=10, nprobe=nprobe, rerank=0, threads=threads)
            lat[k].append(time.perf_counter() - t)
for k in ("old", "new"):
    a = np.array(lat[k]) * 1e6
    big = a[a > 500]
    print(f"{k} {threads}t: p50 {np.median(a):.0f} mean {a.mean():.0f} us; calls > 500 us: {len(big)} of {len(a)}, "
          f"{big.sum() / 1e3:.1f} ms of {a.sum() / 1e3:.0f} ms; largest {np.sort(a)[-5:].astype(int)}")
