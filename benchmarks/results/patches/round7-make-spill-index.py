"""Round 7 (perf-prefilter.md): an index file whose every vector is also stored in a second list.

Usage: python round7-make-spill-index.py INDEX.vdb DATASET.hdf5 OUT.vdb [LAMBDA]

The second list is SOAR's (Sun et al., "SOAR: improved indexing for approximate nearest
neighbor search", NeurIPS 2023): for x in list c1 with residual r = x - c1, the c != c1 that
minimises ||x - c||^2 + LAMBDA <r, x - c>^2 / ||r||^2 (default 1). The spilled row is a full
copy (id, u8 code, f16 vector) appended to that list, so the file loads in an unchanged engine;
searching it needs `round7-spill-dedup.patch` (one hit per id). Reads and writes the persist.rs
layout of a "u8+f16" index, format version 2 (no f32 vectors).
"""
import sys
import zlib

import h5py
import numpy as np

src, ds, dst = sys.argv[1:4]
lam = float(sys.argv[4]) if len(sys.argv) > 4 else 1.0
base = h5py.File(ds, "r")["train"][:].astype(np.float32)
raw = np.fromfile(src, dtype=np.uint8)
dim, has_sq = int(raw[12:16].view("<u4")[0]), int(raw[19])
nlist = int(raw[36:44].view("<u8")[0])
C = raw[52:52 + nlist * dim * 4].view("<f4").reshape(nlist, dim)
pos = 52 + nlist * dim * 4 + (2 * dim * 4 if has_sq else 0)
has_pq = int(raw[pos])
pos += 1 + (dim * 16 * 4 if has_pq else 0)
head = raw[:pos].copy()
ids_l, codes_l, f16_l = [], [], []
for li in range(nlist):
    n = int(raw[pos:pos + 8].view("<u8")[0])
    p = pos + 8
    ids_l.append(raw[p:p + 8 * n].view("<i8").copy())
    p += 8 * n
    codes_l.append(raw[p:p + n * dim].reshape(n, dim).copy())
    p += n * dim
    f16_l.append(raw[p:p + 2 * n * dim].reshape(n, 2 * dim).copy())
    pos = p + 2 * n * dim
assert pos + 4 == len(raw), "not a u8+f16 index of format version 2"
allids = np.concatenate(ids_l)
lid = np.concatenate([np.full(len(i), li) for li, i in enumerate(ids_l)])
rid = np.concatenate([np.arange(len(i)) for i in ids_l])
list_of = np.empty(len(base), np.int64)
list_of[allids] = lid

# SOAR's second list of every base vector
R = base - C[list_of]
rn = (R ** 2).sum(1) + 1e-9
cn = (C ** 2).sum(1)
sec = np.empty(len(base), np.int64)
for a in range(0, len(base), 20000):
    x, r = base[a:a + 20000], R[a:a + 20000]
    d = (x ** 2).sum(1)[:, None] + cn[None] - 2 * x @ C.T
    d += lam * ((r * x).sum(1)[:, None] - r @ C.T) ** 2 / rn[a:a + 20000, None]
    d[np.arange(len(x)), list_of[a:a + 20000]] = np.inf
    sec[a:a + 20000] = d.argmin(1)

order = np.argsort(sec[allids], kind="stable")
bounds = np.searchsorted(sec[allids][order], np.arange(nlist + 1))
out = [head]
for li in range(nlist):
    sel = order[bounds[li]:bounds[li + 1]]
    ids = np.concatenate([ids_l[li], allids[sel]])
    codes = np.concatenate([codes_l[li]] + [codes_l[lid[j]][rid[j]][None] for j in sel])
    f16 = np.concatenate([f16_l[li]] + [f16_l[lid[j]][rid[j]][None] for j in sel])
    out += [np.array([len(ids)], "<u8").view(np.uint8), ids.astype("<i8").view(np.uint8),
            codes.ravel(), f16.ravel()]
body = np.concatenate([o.ravel() for o in out])
body[44:52] = np.array([2 * len(allids)], "<u8").view(np.uint8)  # ntotal: rows, spills included
with open(dst, "wb") as f:
    f.write(body.tobytes())
    f.write(np.array([zlib.crc32(body.tobytes()) & 0xFFFFFFFF], "<u4").tobytes())
print(f"wrote {dst}: {2 * len(allids):,} rows in {nlist} lists")
