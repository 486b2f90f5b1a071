"""Paired single-query timing of held-out headline points (what `heldout_check.py --reselect`
reports only from the run's unpaired sweep timings).

Usage: python benchmarks/perf/heldout_paired.py [--dataset synth-sift-1m] [--threads 1]
       [--points 'ivf:nprobe=48,rerank=0;faiss-ivf-sqfp16:nprobe=64;faiss-ivfpq-fs:nprobe=232,k_factor=16']
Builds ours, loads the faiss peers from the benchmark's index cache (builds them if absent),
then times each point on 300 held-out queries (rows 1000..1299 of the test set, which the 1M
runs never used), interleaved, 5 rounds; prints the median QPS and ours / each.
"""
from usage import help_or_usage
help_or_usage(__doc__)
import statistics
import sys

import numpy as np

from vdbbench.bench import cache, results
from vdbbench.adapters.interface import RunOptions
from vdbbench.bench.ours import IvfAdapter
from vdbbench.bench.timing import time_single
from vdbbench.datasets.loader import resolve
from vdbbench.peers.faiss_peers import PEERS


def opt(name, default):
    return sys.argv[sys.argv.index(name) + 1] if name in sys.argv else default


dsname, threads = opt("--dataset", "synth-sift-1m"), int(opt("--threads", 1))
spec = opt("--points", "ivf:nprobe=48,rerank=0;faiss-ivf-sqfp16:nprobe=64;faiss-ivfpq-fs:nprobe=232,k_factor=16")
ds, _ = resolve(dsname)
q = np.ascontiguousarray(ds.test[1000:1300])
sha = results.dataset_sha256(ds)
points = []
for item in spec.split(";"):
    name, params = item.split(":")
    params = {k: int(v) for k, v in (p.split("=") for p in params.split(","))}
    cls = IvfAdapter if name == "ivf" else PEERS[name]
    ad = cls(ds.dim, ds.n, ds.metric, RunOptions())
    if not (ad.cacheable and cache.load_cached(ad, sha)):
        ad.build(ds.train)
    points.append((name, params, ad))
qps = {name: [] for name, _, _ in points}
for _ in range(5):
    for name, params, ad in points:
        qps[name].append(time_single(lambda x: ad.search(x, 10, params, threads), q)["qps"])
ours = statistics.median(qps[points[0][0]])
for name, params, _ in points:
    m = statistics.median(qps[name])
    print(f"{name} {params} @ {threads}t: median {m:,.0f} QPS (rounds {', '.join(f'{v:,.0f}' for v in qps[name])})"
          + ("" if name == points[0][0] else f"  {points[0][0]} / it: {ours / m:.2f}x"))
