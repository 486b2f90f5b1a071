"""Single-query QPS of an index built in this process, then of the same index saved and loaded.

Usage: python benchmarks/perf/layout_probe.py [--dataset synth-sift-1m] [--nprobe 48]

Why it exists: the 1M peer runs measured our single queries at half the QPS the same engine
reached on an index loaded in a fresh process. The difference was where the lists' pages lay
(perf.md section 7): rows pushed in input order, no huge pages. This prints both figures so a
layout regression shows up; run it on a quiet machine (it builds a 1M index: ~30 s).
"""
from usage import help_or_usage
help_or_usage(__doc__)
import sys, time
import numpy as np
import vdbbench as vb
from vdbbench.datasets.loader import resolve
from vdbbench.adapters import train_sample
from vdbbench.common import default_nlist
from vdbbench.bench.timing import time_single


def opt(name, default):
    return sys.argv[sys.argv.index(name) + 1] if name in sys.argv else default


dsname, nprobe = opt("--dataset", "synth-sift-1m"), int(opt("--nprobe", 48))
ds, _ = resolve(dsname)
base, q = ds.train, np.ascontiguousarray(ds.test[:300])
nlist = default_nlist(base.shape[0])
idx = vb.IvfIndex(dim=base.shape[1], nlist=nlist, storage="u8+f16", seed=0)
t = time.perf_counter()
idx.train(train_sample(base, nlist, 0))
idx.add(base)
print(f"{dsname}: nlist {nlist}, build {time.perf_counter() - t:.1f} s")


def probe(ix, label):
    for _ in range(2):
        r = time_single(lambda x: ix.search(x, k=10, nprobe=nprobe, rerank=0, threads=1), q)
        print(f"  {label}: {r['qps']:,.0f} QPS, p50 {r['p50_ms']:.3f} ms (nprobe {nprobe}, 1 thread, 300 queries)")


probe(idx, "built in this process")
path = f"/tmp/layout_probe_{dsname}.vdb"
idx.save(path)
del idx
probe(vb.IvfIndex.load(path), "saved and loaded")
