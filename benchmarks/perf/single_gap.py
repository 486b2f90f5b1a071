#!/usr/bin/env python
"""Single queries at 2 threads with a busy gap of G us after each call (the caller's own Python
work between queries), two builds interleaved over ROUNDS rounds of NQ queries, same index
file: mean search latency per call (the gap excluded) and the process CPU per call beyond
the gap (what a spinning helper burns). Shows up to which gap a helper is still awake.
Usage: python benchmarks/perf/single_gap.py DATASET INDEX.vdb OLDPKG NPROBE NQ ROUNDS G1,G2,...
OLDPKG holds oldvdb/__init__.py and oldvdb/_rust_vdb.cpython-*.so (a copy of the old build)."""
from usage import help_or_usage, pair_of_builds
help_or_usage(__doc__, 7)
import sys, time, statistics, numpy as np
q, eng, nprobe, nq = pair_of_builds(sys.argv)
rounds = int(sys.argv[6])
def run(idx, gap):
    lat = []; c0 = time.process_time(); w0 = time.perf_counter()
    for i in range(nq):
        t = time.perf_counter()
        idx.search(q[i:i+1], k=10, nprobe=nprobe, rerank=0, threads=2)
        t1 = time.perf_counter(); lat.append(t1 - t)
        while time.perf_counter() - t1 < gap:
            pass
    gaps = time.perf_counter() - w0 - sum(lat)
    return statistics.mean(lat) * 1e6, (time.process_time() - c0 - gaps) / nq * 1e6
for gap_us in map(int, sys.argv[7].split(",")):
    res = {"old": [], "new": []}
    for r in range(rounds):
        for k in (("old", "new") if r % 2 == 0 else ("new", "old")):
            res[k].append(run(eng[k], gap_us / 1e6))
    lo, ln = (statistics.median(x[0] for x in res[k]) for k in ("old", "new"))
    co, cn = (statistics.median(x[1] for x in res[k]) for k in ("old", "new"))
    print(f"gap {gap_us:5d} us: mean latency old {lo:6.1f} new {ln:6.1f} us (new/old speed {lo / ln:.2f}x); "
          f"CPU us/call beyond the gap: old {co:6.1f} new {cn:6.1f}", flush=True)
