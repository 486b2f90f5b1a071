"""4-bit scalar codes simulated: how many candidates must be reranked to keep the exact recall of the
same probed lists (synth-sift-1m, faiss IVF4000,Flat lists, nprobe 46).

Codes: 16 uniform levels per dimension over the data's range ("global"), or over the 0.5-99.5
percentile range of residuals to the list centroid ("residual"). Candidates = the R best by the
decoded 4-bit distance over the probed lists; results = their 10 best by exact distance.

Usage: python benchmarks/perf/sq4_sim.py
"""
from usage import help_or_usage
help_or_usage(__doc__)
import faiss
import numpy as np
from vdbbench.datasets.loader import resolve
from vdbbench.datasets.groundtruth import ensure_groundtruth
from vdbbench.datasets.registry import data_dir
ds, gtdir = resolve("synth-sift-1m"); ds = ensure_groundtruth(ds, gtdir, progress=False)
base = np.ascontiguousarray(ds.train, dtype=np.float32); nq = 300
q = np.ascontiguousarray(ds.test[:nq], dtype=np.float32); gt = ds.neighbors[:nq, :10]
index = faiss.read_index(str(data_dir() / "indexes" / "faiss-ivf-flat-3345e45f391b88c67cb6.index"))
ivf = faiss.extract_index_ivf(index)
C = ivf.quantizer.reconstruct_n(0, ivf.nlist)
_, assign = ivf.quantizer.search(base, 1); assign = assign[:, 0]
order = np.argsort(assign, kind="stable"); starts = np.searchsorted(assign[order], np.arange(ivf.nlist + 1))
R = base - C[assign]
def quant(x, lo, hi, levels=16):
    step = (hi - lo) / levels
    return np.clip(np.floor((x - lo) / step), 0, levels - 1), step
# global per-dim range
glo, ghi = base.min(0), base.max(0)
rlo, rhi = np.percentile(R, 0.5, axis=0), np.percentile(R, 99.5, axis=0)
gcode, gstep = quant(base, glo, ghi); gdec = glo + (gcode + 0.5) * gstep
rcode, rstep = quant(R, rlo, rhi); rdec = C[assign] + rlo + (rcode + 0.5) * rstep
_, probe = ivf.quantizer.search(q, 46)
for label, dec in (("global sq4", gdec), ("residual sq4 (0.5-99.5 pct range)", rdec)):
    for Rr in (10, 50, 100, 200, 400):
        hits = 0; exact_hits = 0
        for i in range(nq):
            mem = np.concatenate([order[starts[l]:starts[l + 1]] for l in probe[i]])
            d4 = ((dec[mem] - q[i]) ** 2).sum(1)
            cand = mem[np.argsort(d4)[:Rr]]
            de = ((base[cand] - q[i]) ** 2).sum(1)
            top = cand[np.argsort(de)[:10]]
            hits += len(np.intersect1d(top, gt[i]))
            if Rr == 10:
                de_all = ((base[mem] - q[i]) ** 2).sum(1); exact_hits += len(np.intersect1d(mem[np.argsort(de_all)[:10]], gt[i]))
        print(f"{label}: rerank {Rr}: recall {hits / nq / 10:.4f}" + (f" (exact scan of the same lists {exact_hits / nq / 10:.4f})" if Rr == 10 else ""), flush=True)
