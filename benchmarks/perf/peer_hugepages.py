#!/usr/bin/env python
"""Peers' QPS on 4 KiB pages and on huge pages: one process per variant, run them in turns.
Each index is loaded from the benchmark's cache (built and stored there first when missing) and
timed at a fixed point on the calling thread's CPU clock (1 thread, 1,000 queries batch, 300 one
per call, best of 3). Variants: `time` as loaded; `advise` after vdbbench.bench.hugepages.advise_process
(what `vdbbench run` does); `time` under GLIBC_TUNABLES=glibc.malloc.hugetlb=1 (glibc's malloc advises).
Usage: python benchmarks/perf/peer_hugepages.py {build,time,advise} faiss-hnsw,hnswlib,faiss-ivfpq-fs [DATASET]"""
from usage import help_or_usage
help_or_usage(__doc__, 2)
import os, sys, time, json
import numpy as np
from vdbbench.datasets import load_dataset
from vdbbench.adapters.registry import adapter_class
from vdbbench.adapters.interface import RunOptions
from vdbbench.bench import cache, results
from vdbbench.bench.hugepages import advise_process, anon_huge_bytes

# the 1M replica's points at recall@10 0.95 (peers-synth-sift-1m-g5-2026-12-01-3cab492)
PARAMS = {"faiss-hnsw": {"efSearch": 64}, "hnswlib": {"ef": 54},
          "faiss-ivfpq-fs": {"nprobe": 54, "k_factor": 16}, "faiss-ivf-flat": {"nprobe": 50}}

def anon_huge():
    """The process's AnonHugePages, in MB."""
    return (anon_huge_bytes() or 0) // 2**20

def main():
    mode, names = sys.argv[1], sys.argv[2].split(",")
    ds = load_dataset(sys.argv[3] if len(sys.argv) > 3 else "synth-sift-1m")
    sha = results.dataset_sha256(ds)
    q = np.ascontiguousarray(ds.test[:1000], dtype=np.float32)
    out = {"tunable": os.environ.get("GLIBC_TUNABLES", ""), "mode": mode}
    for name in names:
        a = adapter_class(name)(ds.dim, ds.n, ds.metric, RunOptions())
        h0 = anon_huge()
        info = cache.load_cached(a, sha)
        if info is None:
            t = time.time(); info = a.build(ds.train); info = cache.store(a, sha, info)
            print(name, "built", time.time() - t, flush=True)
        if mode == "build":
            continue
        if mode == "advise":
            t=time.time(); r=advise_process(); print(name, r, time.time()-t, flush=True)
        p = PARAMS[name]
        if p is None:
            sp = a.param_space(); print(name, sp); continue
        a.search(q[:100], 10, p, 1)
        res = {"huge_mb": anon_huge() - h0}
        best_b = best_s = 0
        for r in range(3):
            t = time.thread_time(); a.search(q, 10, p, 1); best_b = max(best_b, len(q) / (time.thread_time() - t))
            t = time.thread_time()
            for i in range(300):
                a.search(q[i:i+1], 10, p, 1)
            best_s = max(best_s, 300 / (time.thread_time() - t))
        res.update(batch=round(best_b), single=round(best_s))
        out[name] = res
        del a
    print(json.dumps(out), flush=True)

main()
