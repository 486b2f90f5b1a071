"""Per-call overhead of one search: a tiny index (dim 128, 1 list of 16 rows, u8+f16), k=1 nprobe=1,
against a no-op PyO3 call (the `dim` getter) and a getter that releases the interpreter (`ntotal`).
Times per call in µs (process CPU time), median of R rounds of N calls.
Usage: python benchmarks/perf/call_overhead.py [OLDPKG]  (OLDPKG: a folder holding oldvdb/, an old build)"""
from usage import help_or_usage
help_or_usage(__doc__)
import sys, time, statistics, numpy as np
if len(sys.argv) > 1:
    sys.path.insert(0, sys.argv[1]); import oldvdb._rust_vdb as m
else:
    import vdbbench._rust_vdb as m
rng = np.random.default_rng(0)
x = rng.integers(0, 100, (256, 128)).astype(np.float32)
idx = m.IvfIndex(128, nlist=1, storage="u8+f16"); idx.train(x); idx.add(x[:16])
q = x[:1].copy()
def t(fn, n=20000):
    t0 = time.process_time()
    for _ in range(n): fn()
    return (time.process_time() - t0) / n * 1e6
cases = {"noop getter (dim)": lambda: idx.dim, "getter releasing GIL (ntotal)": lambda: idx.ntotal,
         "search k=1 nprobe=1 threads=1": lambda: idx.search(q, k=1, nprobe=1, threads=1),
         "search k=10 default": lambda: idx.search(q, k=10)}
res = {k: [] for k in cases}
for r in range(9):
    for k, f in cases.items(): res[k].append(t(f))
for k, v in res.items(): print(f"{k:34s} {statistics.median(v):6.2f} us")
