#!/usr/bin/env python
"""Batch scaling of one engine build: calls of the same batch at 1 and at N threads alternate in
one process on one loaded index; prints the median QPS of each and the median of the per-round
ratios N threads / 1 thread (with their range), and the stage clocks of each.

Usage: python benchmarks/perf/thread_scaling.py DATASET INDEX.vdb NPROBE [--threads 2]
       [--queries 2000] [--rounds 9] [--reorder R] [--so BUILD.so] [--json out.json]

--reorder R searches through the 4-bit prefilter (`search(..., reorder=R)`).

--so loads another build of the engine (python/vdbbench/_rust_vdb*.so, or cargo's
target/release/lib_rust_vdb.so) instead of the installed one. Wall clock (two threads cannot be
timed on one thread's CPU clock): run it on a quiet machine, or read the range.
"""
from usage import help_or_usage

help_or_usage(__doc__, 3)

import argparse  # noqa: E402
import importlib.machinery  # noqa: E402
import importlib.util  # noqa: E402
import json  # noqa: E402
import statistics  # noqa: E402
import time  # noqa: E402

import numpy as np  # noqa: E402

from vdbbench.datasets.loader import resolve  # noqa: E402

ap = argparse.ArgumentParser()
ap.add_argument("dataset")
ap.add_argument("index")
ap.add_argument("nprobe", type=int)
ap.add_argument("--threads", type=int, default=2)
ap.add_argument("--queries", type=int, default=2000)
ap.add_argument("--rounds", type=int, default=9)
ap.add_argument("--reorder", type=int, help="search through the 4-bit prefilter with this reorder")
ap.add_argument("--so", help="an engine build to load instead of the installed one")
ap.add_argument("--json")
a = ap.parse_args()

if a.so:
    spec = importlib.util.spec_from_file_location("_rust_vdb", a.so,
                                                  loader=importlib.machinery.ExtensionFileLoader("_rust_vdb", a.so))
    engine = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(engine)
else:
    import vdbbench._rust_vdb as engine

ds, _ = resolve(a.dataset)
q = np.ascontiguousarray(ds.test[:a.queries], dtype=np.float32)
idx = engine.IvfIndex.load(a.index)
settings = (1, a.threads)
for t in settings:  # warm-up: pages, pools, helper threads
    idx.search(q, k=10, nprobe=a.nprobe, threads=t, reorder=a.reorder)
qps = {t: [] for t in settings}
stages = {t: [] for t in settings}
for r in range(a.rounds):
    for t in settings if r % 2 == 0 else settings[::-1]:
        t0 = time.perf_counter()
        idx.search(q, k=10, nprobe=a.nprobe, threads=t, reorder=a.reorder)
        qps[t].append(len(q) / (time.perf_counter() - t0))
        st = idx.last_search_stats()
        stages[t].append({k: st[k] / len(q) * 1e6 for k in ("routing_s", "prescore_s", "wall_s")})
ratios = sorted(b / a_ for a_, b in zip(qps[1], qps[a.threads]))
out = {"dataset": ds.name, "queries": len(q), "nprobe": a.nprobe, "reorder": a.reorder, "rounds": a.rounds, "simd": engine.simd_level(),
       "qps": {str(t): statistics.median(qps[t]) for t in settings},
       "ratio": statistics.median(ratios), "ratio_min": ratios[0], "ratio_max": ratios[-1]}
print(f"{ds.name} batch of {len(q)}, nprobe {a.nprobe}, reorder {a.reorder}, {a.rounds} rounds, SIMD {out['simd']}")
for t in settings:
    med = {k: statistics.median(s[k] for s in stages[t]) for k in stages[t][0]}
    print(f"{t} thread{'s' if t > 1 else ' '} QPS {out['qps'][str(t)]:9,.0f}  (per query: routing {med['routing_s']:.1f} "
          f"prescore {med['prescore_s']:.1f} wall {med['wall_s']:.1f} us; stage clocks add up every thread)")
print(f"{a.threads}t / 1t {out['ratio']:.2f} [{ratios[0]:.2f}-{ratios[-1]:.2f}]")
if a.json:
    with open(a.json, "w") as f:
        json.dump(out, f, indent=1)
