#!/usr/bin/env python
"""Where a served search runs: `vdbbench serve` with searches on tokio's blocking pool against
searches in the async handler, under the Rust load client (`http_query`: one query per request,
keep-alive connections), rounds alternating in one process on one saved index; prints each
round's QPS and p50/p99 and the median per-round ratio handler / blocking, and the in-process
one-query-per-call QPS at one thread for scale.

Usage: python benchmarks/perf/serve_search_on.py [DATASET] [--clients 4] [--requests 20000]
       [--rounds 3] [--queries 1000] [--workers N] [--index FILE]

DATASET: any name or path vdbbench reads (default synth-sift-100k). The index is built by a
first server from the base vectors inserted over HTTP and saved (--index, default a temporary
file); later servers start from it. Client and server share the machine's cores: read the
figures as the two placements side by side, not as a ceiling.
"""
from usage import help_or_usage

help_or_usage(__doc__, 0)

import argparse  # noqa: E402
import statistics  # noqa: E402
import tempfile  # noqa: E402
import time  # noqa: E402
from pathlib import Path  # noqa: E402

import numpy as np  # noqa: E402

from vdbbench import IvfIndex, Server, simd_level  # noqa: E402
from vdbbench._rust_vdb import http_bulk_insert, http_query  # noqa: E402
from vdbbench.datasets.loader import resolve  # noqa: E402  (dataset, ground-truth folder)

ap = argparse.ArgumentParser()
ap.add_argument("dataset", nargs="?", default="synth-sift-100k")
ap.add_argument("--clients", type=int, default=4)
ap.add_argument("--requests", type=int, default=20000)
ap.add_argument("--rounds", type=int, default=3)
ap.add_argument("--queries", type=int, default=1000)
ap.add_argument("--workers", type=int)
ap.add_argument("--index")
args = ap.parse_args()

ds, _ = resolve(args.dataset)
index_path = Path(args.index) if args.index else Path(tempfile.mkdtemp(prefix="serve-search-on-")) / "index.ivf"
if not index_path.exists():
    with Server.start(port=0, index=str(index_path)) as s:
        http_bulk_insert(s.url, ds.train, np.arange(len(ds.train), dtype=np.uint64))
        http_query(s.url, ds.test[:1], np.zeros(1, np.uint64), timeout_s=3600)  # the build
        b = s.stats()
        print(f"built over HTTP: {b['indexed']} vectors, nlist {b['nlist']}, "
              f"train {b['build']['train_s']:.2f} s, add {b['build']['add_s']:.2f} s")
queries = np.ascontiguousarray(ds.test[: args.queries])
order = np.resize(np.arange(len(queries), dtype=np.uint64), args.requests)


def run(search_on: str) -> tuple[float, float, float]:
    with Server.start(port=0, index=str(index_path), search_on=search_on, workers=args.workers) as s:
        r = http_query(s.url, queries, order, top_k=10, clients=args.clients, warmup=min(200, len(queries)))
        served = s.stats()
    if r["errors"] or served["rejected"]:
        raise SystemExit(f"{search_on}: {r['errors']} failed requests ({r['first_error']}), "
                         f"{served['rejected']} rejected")
    p50, p99 = np.percentile(r["latency_s"] * 1e3, [50, 99])
    return len(order) / r["wall_s"], p50, p99


with Server.start(port=0, index=str(index_path)) as s:
    st = s.stats()["search"]
kw = {k: st[k] for k in ("nprobe", "rerank", "reorder", "probe_ratio")}
print(f"SIMD {simd_level()}; search settings {kw}; {args.clients} clients, {args.requests} requests a round")
ratios = []
for r in range(args.rounds):
    res = {}
    for mode in ("handler", "blocking") if r % 2 == 0 else ("blocking", "handler"):
        res[mode] = run(mode)
        q, p50, p99 = res[mode]
        print(f"round {r + 1} {mode:8s}: {q:9,.0f} QPS  p50 {p50:.3f} ms  p99 {p99:.3f} ms")
    ratios.append(res["handler"][0] / res["blocking"][0])
index = IvfIndex.load(index_path)
t0 = time.perf_counter()
for q in queries:
    index.search(q[None, :], 10, threads=1, **kw)
inproc = len(queries) / (time.perf_counter() - t0)
print(f"handler / blocking QPS: median {statistics.median(ratios):.3f} [{min(ratios):.3f}-{max(ratios):.3f}] "
      f"over {args.rounds} rounds; in-process one query per call, 1 thread: {inproc:,.0f} QPS")
