#!/usr/bin/env python
"""Our engine at each of its SIMD levels on one loaded index: the same searches alternate between
the levels (`vdbbench.set_simd_level`) in one process, in rounds; prints each level's median QPS
and the median of its per-round ratios to the first level (with their range), after checking
that every level returns the same ids and recall@10.

Usage: python benchmarks/perf/simd_levels.py DATASET INDEX.vdb NPROBE [--levels avx512vnni,avx2]
       [--mode batch|single] [--threads 1] [--queries 1000] [--rounds 6] [--reorder R]
       [--probe-ratio r] [--json out.json]

--levels defaults to every level this CPU has, best first; a level the CPU lacks is an error.
Each level's turn in a round repeats its pass for at least half a second of wall clock: run it
on a quiet machine, or read the range. `--mode single` times one query per call.
"""
from usage import help_or_usage

help_or_usage(__doc__, 3)

import argparse  # noqa: E402
import json  # noqa: E402
import statistics  # noqa: E402
import sys  # noqa: E402
import time  # noqa: E402

import numpy as np  # noqa: E402

import vdbbench as vb  # noqa: E402
from vdbbench.common.recall import knn_recall  # noqa: E402
from vdbbench.datasets.groundtruth import ensure_groundtruth  # noqa: E402
from vdbbench.datasets.loader import resolve  # noqa: E402

ap = argparse.ArgumentParser()
ap.add_argument("dataset")
ap.add_argument("index")
ap.add_argument("nprobe", type=int)
ap.add_argument("--levels", help="comma-separated SIMD levels, the first the reference")
ap.add_argument("--mode", choices=("batch", "single"), default="batch")
ap.add_argument("--threads", type=int, default=1)
ap.add_argument("--queries", type=int, default=1000)
ap.add_argument("--rounds", type=int, default=6)
ap.add_argument("--reorder", type=int, help="search through the 4-bit prefilter with this reorder")
ap.add_argument("--probe-ratio", type=float)
ap.add_argument("--json")
a = ap.parse_args()

have = vb.available_simd_levels()
levels = a.levels.split(",") if a.levels else list(reversed(have))
if missing := [lv for lv in levels if lv not in have]:
    sys.exit(f"this CPU runs {', '.join(have)}; not {', '.join(missing)}")

ds, gt_dir = resolve(a.dataset)
ds = ensure_groundtruth(ds, gt_dir, progress=False)
nq = min(a.queries, len(ds.test))
q, gtd = np.ascontiguousarray(ds.test[:nq], dtype=np.float32), ds.distances[:nq]
idx = vb.IvfIndex.load(a.index)
kw = dict(k=10, nprobe=a.nprobe, rerank=0, threads=a.threads)
if a.reorder is not None:
    kw["reorder"] = a.reorder
if a.probe_ratio is not None:
    kw["probe_ratio"] = a.probe_ratio


def one_pass() -> np.ndarray:
    if a.mode == "batch":
        return idx.search(q, **kw)[1]
    return np.vstack([idx.search(q[i:i + 1], **kw)[1] for i in range(nq)])


first = None
for lv in levels:
    vb.set_simd_level(lv)
    ids = one_pass()
    if first is None:
        first = ids
        recall = knn_recall(ids, np.asarray(ds.train), q, gtd)
    elif not np.array_equal(ids, first):
        sys.exit(f"{lv} returned other ids than {levels[0]}")

qps: dict[str, list[float]] = {lv: [] for lv in levels}
for r in range(a.rounds):
    for lv in levels if r % 2 == 0 else levels[::-1]:
        vb.set_simd_level(lv)
        n, t0 = 0, time.perf_counter()
        while (el := time.perf_counter() - t0) < 0.5 or n == 0:
            one_pass()
            n += 1
        qps[lv].append(n * nq / el)

extra = "".join(f", {k.replace('_', ' ')} {v}" for k, v in kw.items() if k in ("reorder", "probe_ratio"))
print(f"{a.dataset}: {a.mode} of {nq} queries @ {a.threads}t, nprobe {a.nprobe}{extra}, recall@10 {recall:.4f} "
      f"(same ids at every level), {a.rounds} rounds")
figures = {}
for lv in levels:
    ratios = [x / y for x, y in zip(qps[lv], qps[levels[0]])]
    figures[lv] = {"qps": statistics.median(qps[lv]), "ratio": statistics.median(ratios),
                   "ratio_min": min(ratios), "ratio_max": max(ratios)}
    print(f"{lv:12s} {figures[lv]['qps']:>10,.0f} QPS   / {levels[0]} {figures[lv]['ratio']:.3f} "
          f"[{min(ratios):.3f}-{max(ratios):.3f}]")
if a.json:
    with open(a.json, "w") as f:
        json.dump({"dataset": a.dataset, "mode": a.mode, "threads": a.threads, "queries": nq, "nprobe": a.nprobe,
                   "reorder": a.reorder, "probe_ratio": a.probe_ratio, "recall10": recall, "levels": figures}, f, indent=2)
