"""Split u8 codes, simulated: what share of the scanned rows needs its tail when the head is
the D dims of largest variance (partial l2 distance <= the heap's threshold at the list's start).

Usage: python benchmarks/perf/split_sim.py [DATASET] [NPROBE] [NQ]   (defaults synth-sift-1m 52 300)

Builds a faiss IVF-Flat (nlist 4*sqrt(n), the benchmark's training sample) for the lists, visits
each query's NPROBE nearest lists in order with a top-10 on exact distances (the data are
integers, so u8 codes are exact), and counts the rows whose head distance passes. Prints, per D,
the share of rows needing their tail and the code bytes read per row.
"""
from usage import help_or_usage

help_or_usage(__doc__)
import sys

import faiss
import numpy as np

from vdbbench.bench.data import resolve
from vdbbench.common import default_nlist, train_sample

name = sys.argv[1] if len(sys.argv) > 1 else "synth-sift-1m"
nprobe = int(sys.argv[2]) if len(sys.argv) > 2 else 52
nq = int(sys.argv[3]) if len(sys.argv) > 3 else 300
ds = resolve(name)
base = np.ascontiguousarray(ds.train, dtype=np.float32)
q = np.ascontiguousarray(ds.test[:nq], dtype=np.float32)
dim = base.shape[1]
nlist = default_nlist(len(base))
ivf = faiss.index_factory(dim, f"IVF{nlist},Flat")
ivf.train(train_sample(base, nlist, 0))
ivf.add(base)
inv = ivf.invlists
lists = [faiss.rev_swig_ptr(inv.get_ids(l), inv.list_size(l)).copy() if inv.list_size(l) else
         np.zeros(0, np.int64) for l in range(nlist)]
var = base[: min(len(base), 200_000)].var(0)
order = np.argsort(-var, kind="stable")
share = np.cumsum(var[order]) / var.sum()
xb, qq = base[:, order], q[:, order]
_, probes = ivf.quantizer.search(q, nprobe)
print(f"{name}: nlist {nlist}, nprobe {nprobe}, {nq} queries")
for d in (32, 48, 64, 80, 96):
    rows = passed = 0
    for qi in range(nq):
        top = np.full(10, np.inf)
        for li in probes[qi]:
            ids = lists[li]
            if len(ids) == 0:
                continue
            diff = xb[ids] - qq[qi]
            part = (diff[:, :d] ** 2).sum(1)
            ok = part <= top[-1]
            rows += len(ids)
            passed += int(ok.sum())
            full = part[ok] + (diff[ok, d:] ** 2).sum(1)
            top = np.sort(np.concatenate([top, full]))[:10]
    per_row = d + passed / rows * (dim - d)
    print(f"head {d} dims ({share[d - 1]:.0%} of the variance): {passed / rows:.1%} of the rows need "
          f"their tail; {per_row:.1f} code bytes per row of {dim} ({dim / per_row:.2f}x fewer)")
