"""A/B of two engine builds: an old build's module vs the installed one, same index file, interleaved.

Usage: python benchmarks/perf/ab_builds.py DATASET INDEX.vdb NPROBE|- RERANK|- ROUNDS OLD_DIR
OLD_DIR holds oldvdb/__init__.py and oldvdb/_rust_vdb.cpython-*.so (a copy of the build before
the change; the module keeps its PyInit name, so both load in one process). "-" = engine default.
One-thread QPS is on process CPU time (a busy shared machine's preemption is not counted).
AB_MODES=batch@1,single@2 (environment) picks the modes; default all four.
"""
from usage import help_or_usage
help_or_usage(__doc__, 5)
import sys, time, statistics, importlib.util, numpy as np
sys.path.insert(0, sys.argv[6] if len(sys.argv) > 6 else "/tmp/perfP/old")
import oldvdb._rust_vdb as old
import vdbbench._rust_vdb as new
from vdbbench.datasets.loader import resolve
from vdbbench.datasets.groundtruth import ensure_groundtruth
from vdbbench.common.recall import knn_recall
name = sys.argv[1] if len(sys.argv) > 1 else "synth-sift-100k"
ds, gtdir = resolve(name); ds = ensure_groundtruth(ds, gtdir, progress=False)
base, q = ds.train, np.ascontiguousarray(ds.test[:1000])
gtd = ds.distances[:1000]
path = sys.argv[2]
opt = lambda a: None if a == '-' else int(a)
nprobe, rerank = opt(sys.argv[3]), opt(sys.argv[4])
rounds = int(sys.argv[5]) if len(sys.argv) > 5 else 5
engines = {"old": old.IvfIndex.load(path), "new": new.IvfIndex.load(path)}
def run(idx, mode, threads):
    # One thread: the process's CPU time (preemption by other jobs on a shared machine is not
    # counted); two threads: wall time.
    clock = time.process_time if threads == 1 else time.perf_counter
    t = clock()
    if mode == "batch":
        _, I = idx.search(q, k=10, nprobe=nprobe, rerank=rerank, threads=threads)
        n = len(q)
    else:
        n = 300; I = None
        for i in range(n):
            idx.search(q[i:i+1], k=10, nprobe=nprobe, rerank=rerank, threads=threads)
    return n / (clock() - t), I
for mode, threads in [tuple((m.split("@")[0], int(m.split("@")[1]))) for m in __import__("os").environ.get("AB_MODES", "batch@1,batch@2,single@1,single@2").split(",")]:
    qps = {k: [] for k in engines}
    for r in range(rounds):
        for k, idx in engines.items():
            v, I = run(idx, mode, threads)
            qps[k].append(v)
            if I is not None and r == 0:
                print(f"  {k} {mode} recall {knn_recall(I, base, q, gtd):.4f}")
    ratios = [n / o for n, o in zip(qps["new"], qps["old"])]
    print(f"{mode}@{threads}t nprobe={nprobe} rerank={rerank}: old {statistics.median(qps['old']):,.0f} new {statistics.median(qps['new']):,.0f} QPS, new/old median {statistics.median(ratios):.3f} (rounds {', '.join(f'{x:.2f}' for x in ratios)})")
