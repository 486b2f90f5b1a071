"""Two-level routing simulated on a faiss IVF-Flat index before it was built into the engine.

Groups the index's centroids under round(sqrt(nlist)) super-centroids (faiss k-means), opens
groups best-first until they hold F * nprobe centroids, and searches the lists chosen that way
with `search_preassigned`: recall@10 against flat routing, same queries, and the share of
centroids scored.

Usage: python benchmarks/perf/two_level_sim.py DATASET FAISS_IVF_FLAT_INDEX_NAME NPROBES
(the index name is a file stem under $VDBBENCH_DATA/indexes, e.g. faiss-ivf-flat-3345e45f391b88c67cb6;
NPROBES comma-separated).
"""
from usage import help_or_usage
help_or_usage(__doc__, 3)
import faiss, numpy as np, sys
from vdbbench.datasets.loader import resolve
from vdbbench.datasets.registry import data_dir
from vdbbench.datasets.groundtruth import ensure_groundtruth
from vdbbench.common.recall import knn_recall
name, idxfile, nprobes = sys.argv[1], sys.argv[2], [int(x) for x in sys.argv[3].split(",")]
ds, gtdir = resolve(name); ds = ensure_groundtruth(ds, gtdir, progress=False)
base = np.ascontiguousarray(ds.train, dtype=np.float32)
q = np.ascontiguousarray(ds.test[:2000], dtype=np.float32); gtd = ds.distances[:2000]
idx = faiss.read_index(str(data_dir() / "indexes" / f"{idxfile}.index"))
ivf = faiss.extract_index_ivf(idx)
C = ivf.quantizer.reconstruct_n(0, ivf.nlist); nlist = len(C)
def recall_for(assign):
    ivf.nprobe = assign.shape[1]
    D, I = ivf.search_preassigned(q, 10, assign.astype(np.int64), np.zeros(assign.shape, np.float32))
    return knn_recall(I, base, q, gtd)
def l2(a, b):
    return (a * a).sum(1)[:, None] - 2 * a @ b.T + (b * b).sum(1)[None]
S = int(round(np.sqrt(nlist)))
km = faiss.Kmeans(C.shape[1], S, niter=25, seed=1); km.train(C)
_, lab = km.index.search(C, 1); lab = lab[:, 0]
members = [np.where(lab == s)[0] for s in range(S)]
print(f"{name}: nlist {nlist}, S {S}, member sizes {min(map(len, members))}..{max(map(len, members))}")
dsup = l2(q, km.centroids); supord = np.argsort(dsup, axis=1)
for nprobe in nprobes:
    exact = np.argsort(l2(q, C), axis=1)[:, :nprobe]
    print(f"nprobe {nprobe}: exact routing recall {recall_for(exact):.4f}")
    for F in (4, 8, 12, 16):
        assign = np.empty((len(q), nprobe), np.int64); ncand = 0; overlap = 0
        for i in range(len(q)):
            cand = []; n = 0
            for j in supord[i]:
                cand.append(members[j]); n += len(members[j])
                if n >= F * nprobe: break
            cand = np.concatenate(cand); ncand += len(cand)
            d = l2(q[i:i+1], C[cand])[0]
            assign[i] = cand[np.argsort(d)[:nprobe]]
            overlap += len(np.intersect1d(assign[i], exact[i]))
        print(f"  F={F:2d}: centroids scored {S + ncand/len(q):6.0f} of {nlist} ({(S + ncand/len(q))/nlist:.1%}), "
              f"lists shared with exact {overlap/len(q)/nprobe:.4f}, recall {recall_for(assign):.4f}", flush=True)
