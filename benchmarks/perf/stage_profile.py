"""Stage breakdown (last_search_stats) of ivf u8+f16, batch and single, one thread.

Usage: python benchmarks/perf/stage_profile.py NPROBE RERANK [--rebuild] [--dataset NAME] [--queries N]
(default synth-sift-100k, all its queries; the index is built once and kept in
/tmp/perfP/<dataset>.vdb; the best of 3 passes is shown).
"""
from usage import help_or_usage
help_or_usage(__doc__, 2)
import sys, time, os, numpy as np
import vdbbench as vb
from vdbbench.datasets.loader import resolve
from vdbbench.datasets.groundtruth import ensure_groundtruth
from vdbbench.common.recall import knn_recall
def opt(name, default):
    return sys.argv[sys.argv.index(name) + 1] if name in sys.argv else default
dsname, nqmax = opt("--dataset", "synth-sift-100k"), int(opt("--queries", 0))
ds, gtdir = resolve(dsname); ds = ensure_groundtruth(ds, gtdir, progress=False)
base, q, gtd = np.ascontiguousarray(ds.train, dtype=np.float32), np.ascontiguousarray(ds.test, dtype=np.float32), ds.distances
if nqmax:
    q, gtd = q[:nqmax], gtd[:nqmax]
os.makedirs("/tmp/perfP", exist_ok=True)
path = f"/tmp/perfP/{dsname}.vdb"
if os.path.exists(path) and "--rebuild" not in sys.argv:
    idx = vb.IvfIndex.load(path)
else:
    t=time.perf_counter(); idx = vb.IvfIndex(dim=base.shape[1], storage="u8+f16", seed=0); idx.train(base); idx.add(base); print("build", time.perf_counter()-t); idx.save(path)
nprobe, rerank = int(sys.argv[1]), int(sys.argv[2])
for mode in ("batch", "single"):
    best = None
    for rep in range(3):
        t = time.perf_counter()
        if mode == "batch":
            D, I = idx.search(q, k=10, nprobe=nprobe, rerank=rerank, threads=1)
            st = idx.last_search_stats(); agg = dict(st)
        else:
            I = np.empty((len(q), 10), np.int64); agg = {}
            for i in range(len(q)):
                _, I[i:i+1] = idx.search(q[i:i+1], k=10, nprobe=nprobe, rerank=rerank, threads=1)
                for kk, v in idx.last_search_stats().items(): agg[kk] = agg.get(kk, 0) + v
        el = time.perf_counter() - t
        if best is None or el < best[0]: best = (el, agg, I)
    el, agg, I = best
    nq = len(q)
    print(f"{mode}: QPS {nq/el:,.0f} recall {knn_recall(I, base, q, gtd):.4f}  per query us: total {el/nq*1e6:.1f} wall_s {agg['wall_s']/nq*1e6:.1f} " +
          " ".join(f"{s}={agg[s]/nq*1e6:.1f}" for s in ("routing_s","prescore_s","rerank_s","topk_s")) +
          f" codes/q {agg['codes_scanned']/nq:.0f} cand/q {agg['candidates_reranked']/nq:.0f}")
