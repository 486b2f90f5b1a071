"""The 4-bit prefilter experiment: batch and single-query QPS and recall per prefilter depth.

Needs the engine of branch exp/u4-prefilter (commit bff0f74: `search(..., prefilter=R)`), which
main does not carry (the prefilter did not pay, perf.md section 7).
Usage: python benchmarks/results/perf/prefilter_probe.py DATASET INDEX.vdb NPROBE RERANK R1,R2,... [NQ]
(R = 0 is the u8 scan without the prefilter; rounds interleaved, best of 3.)
"""
import sys, time, numpy as np
import vdbbench as vb
from vdbbench.datasets.loader import resolve
from vdbbench.datasets.groundtruth import ensure_groundtruth
from vdbbench.bench.metrics import knn_recall
dsname, path, nprobe, rerank = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4])
pfs = [int(x) for x in sys.argv[5].split(",")]
nq = int(sys.argv[6]) if len(sys.argv) > 6 else 1000
ds, gtdir = resolve(dsname); ds = ensure_groundtruth(ds, gtdir, progress=False)
base = ds.train; q = np.ascontiguousarray(ds.test[:nq], dtype=np.float32); gtd = ds.distances[:nq]
idx = vb.IvfIndex.load(path)
def run(pf, single):
    kw = dict(k=10, nprobe=nprobe, rerank=rerank, threads=1, prefilter=pf)
    t = time.perf_counter()
    if single:
        ns = 300
        I = np.empty((ns, 10), np.int64)
        for i in range(ns):
            _, I[i:i+1] = idx.search(q[i:i+1], **kw)
        el = time.perf_counter() - t; return ns / el, None
    _, I = idx.search(q, **kw); el = time.perf_counter() - t
    return nq / el, knn_recall(I, base, q, gtd)
res = {pf: {"s": [], "b": [], "r": None} for pf in pfs}
for rnd in range(3):
    for pf in pfs:
        qb, r = run(pf, False); res[pf]["b"].append(qb); res[pf]["r"] = r
        qs, _ = run(pf, True); res[pf]["s"].append(qs)
for pf in pfs:
    st = None
    idx.search(q[:1], k=10, nprobe=nprobe, rerank=rerank, threads=1, prefilter=pf); st = idx.last_search_stats()
    print(f"prefilter {pf:4d}: recall {res[pf]['r']:.4f} batch1t {max(res[pf]['b']):8,.0f} single1t {max(res[pf]['s']):7,.0f}  bytes/q {st['bytes_scanned']:,.0f} rescored {st['codes_rescored']:.0f}")
b0, s0 = max(res[pfs[0]]['b']), max(res[pfs[0]]['s'])
for pf in pfs[1:]:
    print(f"  prefilter {pf} / {pfs[0]}: batch {max(res[pf]['b'])/b0:.2f}x single {max(res[pf]['s'])/s0:.2f}x")
