#!/usr/bin/env python
"""Paired A/B of the routing stage alone: the engine's own `routing_s` (last_search_stats) per
single query, one thread, old build vs new on the same index file, rounds interleaved with
their order alternating. Prints the median per-query routing time of each build and the
median new/old ratio of the rounds.
Usage: python benchmarks/perf/ab_routing.py DATASET INDEX.vdb OLDPKG NPROBE NQ ROUNDS
OLDPKG holds oldvdb/__init__.py and oldvdb/_rust_vdb.cpython-*.so (a copy of the old build)."""
from usage import help_or_usage, pair_of_builds
help_or_usage(__doc__, 6)
import sys, statistics, numpy as np
q, eng, nprobe, nq = pair_of_builds(sys.argv)
rounds = int(sys.argv[6])
def run(idx):
    t = 0.0
    for i in range(nq):
        idx.search(q[i:i+1], k=10, nprobe=nprobe, rerank=0, threads=1)
        t += idx.last_search_stats()["routing_s"]
    return t / nq
for e in eng.values():
    run(e)
us = {"old": [], "new": []}
for r in range(rounds):
    for k in (("old", "new") if r % 2 == 0 else ("new", "old")):
        us[k].append(run(eng[k]) * 1e6)
rat = sorted(n / o for n, o in zip(us["new"], us["old"]))
print(f"routing 1t nprobe {nprobe}: old {statistics.median(us['old']):.2f} us new {statistics.median(us['new']):.2f} us per query; new/old median {statistics.median(rat):.3f} (min {rat[0]:.3f} max {rat[-1]:.3f}, {rounds} rounds)", flush=True)
