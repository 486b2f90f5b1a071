"""Paired A/B of two engine builds on one index file, batch mode: 3 searches of the first 1000
queries per sample, one thread on process CPU time (AB_THREADS=1,2 adds two threads on wall time),
the builds interleaved with their order alternating per round. Prints whether both return the
same results, then the median new/old ratio of the rounds, the best-of-rounds ratio and the
ratio of the five best rounds (on a shared machine other jobs only ever slow a round down).

Usage: python benchmarks/perf/ab_batch.py DATASET INDEX.vdb OLD_DIR NEW_DIR ROUNDS [NPROBE|-] [RERANK|-]
Each DIR holds oldvdb/_rust_vdb.cpython-*.so, a copy of one build's extension (both load under
their own file, so any two builds can be compared; run OLD_DIR against itself for the noise).
"""
from usage import help_or_usage
help_or_usage(__doc__, 5)
import sys, time, statistics, importlib.util, numpy as np
from vdbbench.datasets.loader import resolve
def load(d, name):
    import glob
    so = glob.glob(f"{d}/oldvdb/_rust_vdb*.so")[0]
    spec = importlib.util.spec_from_file_location("vdbbench._rust_vdb", so)
    m = importlib.util.module_from_spec(spec); spec.loader.exec_module(m); return m
ds, _ = resolve(sys.argv[1])
q = np.ascontiguousarray(ds.test[:1000], dtype=np.float32)
old = load(sys.argv[3], "old"); new = load(sys.argv[4], "new")
eng = {"old": old.IvfIndex.load(sys.argv[2]), "new": new.IvfIndex.load(sys.argv[2])}
rounds = int(sys.argv[5])
import os; THREADS = [int(t) for t in os.environ.get("AB_THREADS", "1").split(",")]
opt = lambda i: None if len(sys.argv) <= i or sys.argv[i] == "-" else int(sys.argv[i])
nprobe, rerank = opt(6), opt(7)
Do, Io = eng["old"].search(q, k=10, nprobe=nprobe, rerank=rerank, threads=1)
Dn, In = eng["new"].search(q, k=10, nprobe=nprobe, rerank=rerank, threads=1)
print(f"nprobe={nprobe} rerank={rerank}: ids identical {np.array_equal(Io, In)}, distances identical {np.array_equal(Do, Dn)}", flush=True)
def batch(idx, th):
    clock = time.process_time if th == 1 else time.perf_counter
    t = clock(); reps = 3
    for _ in range(reps):
        idx.search(q, k=10, nprobe=nprobe, rerank=rerank, threads=th)
    return reps * len(q) / (clock() - t)
for th in THREADS:
    for e in eng.values(): batch(e, th)
    qps = {"old": [], "new": []}
    for r in range(rounds):
        for k in (("old", "new") if r % 2 == 0 else ("new", "old")):
            qps[k].append(batch(eng[k], th))
    ratios = sorted(n / o for n, o in zip(qps["new"], qps["old"]))
    print(f"batch@{th}t: old {statistics.median(qps['old']):,.0f} new {statistics.median(qps['new']):,.0f} QPS; new/old median {statistics.median(ratios):.3f} (rounds {' '.join(f'{x:.2f}' for x in ratios)}); best new/best old {max(qps['new'])/max(qps['old']):.3f}, top-5 mean ratio {sum(sorted(qps['new'])[-5:])/sum(sorted(qps['old'])[-5:]):.3f}", flush=True)
