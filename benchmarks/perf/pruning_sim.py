"""Early pruning of probed lists, simulated exactly: how many lists a lower bound would skip.

Visits each query's nprobe lists nearest-centroid first (faiss IVF-Flat lists, exact float
distances) and counts the lists whose bound says no member can beat the current 10th-best
distance: (||q - c|| - r)^2 with r the list's radius (its farthest member from c), the only
bound a list's centroid and one number per list give. A skipped list could not change the
results, so the count is the most this idea can save.

Usage: python benchmarks/perf/pruning_sim.py DATASET FAISS_IVF_FLAT_INDEX_NAME NPROBE [NQ]
"""
from usage import help_or_usage
help_or_usage(__doc__, 3)
import sys

import faiss
import numpy as np

from vdbbench.datasets.loader import resolve
from vdbbench.datasets.registry import data_dir

name, idxfile, nprobe = sys.argv[1], sys.argv[2], int(sys.argv[3])
nq = int(sys.argv[4]) if len(sys.argv) > 4 else 500
ds, _ = resolve(name)
base = np.ascontiguousarray(ds.train, dtype=np.float32)
q = np.ascontiguousarray(ds.test[:nq], dtype=np.float32)
index = faiss.read_index(str(data_dir() / "indexes" / f"{idxfile}.index"))
ivf = faiss.extract_index_ivf(index)  # (index keeps ivf alive)
C = ivf.quantizer.reconstruct_n(0, ivf.nlist)
dist_c, assign = ivf.quantizer.search(base, 1)
assign = assign[:, 0]
order = np.argsort(assign, kind="stable")
starts = np.searchsorted(assign[order], np.arange(ivf.nlist + 1))
radius = np.zeros(ivf.nlist, np.float32)
np.maximum.at(radius, assign, np.sqrt(np.maximum(dist_c[:, 0], 0)))
dq, probe = ivf.quantizer.search(q, nprobe)
skipped = scanned_codes = skipped_codes = 0
margins = []
for i in range(nq):
    best = np.full(10, np.inf, np.float32)
    for j, li in enumerate(probe[i]):
        members = order[starts[li]:starts[li + 1]]
        lb = max(0.0, np.sqrt(max(dq[i, j], 0)) - radius[li]) ** 2
        kth = best.max()
        if lb > kth:
            skipped += 1
            skipped_codes += len(members)
            continue
        if np.isfinite(kth):
            margins.append(lb / kth)
        scanned_codes += len(members)
        d = ((base[members] - q[i]) ** 2).sum(1)
        best = np.sort(np.concatenate([best, d]))[:10]
print(f"{name} nprobe {nprobe}, {nq} queries: lists skipped {skipped / (nq * nprobe):.2%}, "
      f"codes skipped {skipped_codes / max(1, skipped_codes + scanned_codes):.2%}; "
      f"bound / 10th-best distance over the scanned lists: median {np.median(margins):.3f}, "
      f"p99 {np.percentile(margins, 99):.3f}, max {np.max(margins):.3f}")
