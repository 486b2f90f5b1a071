#!/usr/bin/env python
"""Paired A/B of two builds in one process, single queries (one per call), same index file.
1 thread: process CPU time; 2 threads: wall time (the query is shared by two threads).
Usage: python benchmarks/perf/ab_single.py DATASET INDEX.vdb OLDPKG NPROBE NQ ROUNDS
OLDPKG holds oldvdb/__init__.py and oldvdb/_rust_vdb.cpython-*.so (a copy of the old build)."""
from usage import help_or_usage, pair_of_builds
help_or_usage(__doc__, 6)
import sys, time, statistics, numpy as np
q, eng, nprobe, nq = pair_of_builds(sys.argv)
rounds = int(sys.argv[6])
def run(idx, threads):
    I = np.empty((nq, 10), np.int64); D = np.empty((nq, 10), np.float32)
    clock = time.process_time if threads == 1 else time.perf_counter
    t = clock()
    for i in range(nq):
        D[i:i+1], I[i:i+1] = idx.search(q[i:i+1], k=10, nprobe=nprobe, rerank=0, threads=threads)
    return nq / (clock() - t), D, I
for th in (1, 2):
    _, Do, Io = run(eng["old"], th); _, Dn, In = run(eng["new"], th)
    print(f"threads={th}: ids identical {np.array_equal(Io, In)}, distances identical {np.array_equal(Do, Dn)}", flush=True)
    qps = {"old": [], "new": []}
    for r in range(rounds):
        for k in (("old", "new") if r % 2 == 0 else ("new", "old")):
            qps[k].append(run(eng[k], th)[0])
    rat = sorted(n / o for n, o in zip(qps["new"], qps["old"]))
    print(f"single {th}t nprobe {nprobe}: old {statistics.median(qps['old']):,.0f} new {statistics.median(qps['new']):,.0f} QPS; new/old median {statistics.median(rat):.3f} (min {rat[0]:.3f} max {rat[-1]:.3f}, {rounds} rounds)", flush=True)
