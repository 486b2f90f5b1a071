"""How hard a data set is for IVF and for a graph index, and how SIFT-like its values are.

These calibrate the generated replica. IVF difficulty is the smallest nprobe at which exact-scan
IVF (faiss IndexIVFFlat, k-means on the bench's sample of the base, nlist = 4*sqrt(n) by default)
reaches a 10-recall@10 target, as a fraction of nlist. Graph difficulty is the smallest efSearch at which
faiss HNSW32 (efConstruction 40) reaches it. Both also count the distance evaluations one query
costs at that setting (faiss' own counters, independent of timing), so the work of the two can be
compared on a loaded machine. Recall is the shared `vdbbench.common.recall.knn_recall` against
exact ground truth.
"""

from __future__ import annotations

import os
import time
from dataclasses import dataclass, field

import numpy as np

from vdbbench.common.ivf import default_nlist, train_sample
from vdbbench.common.recall import RECALL_TARGET, knn_recall
from vdbbench.datasets.groundtruth import compute_groundtruth


@dataclass
class Difficulty:
    nlist: int
    nprobe: int | None  # smallest nprobe reaching the target (None: not even at nprobe = nlist)
    target: float
    recall_at: dict[int, float] = field(default_factory=dict)  # every nprobe tried -> recall
    build_s: float = 0.0
    distances_per_query: float | None = None  # centroids + codes scanned per query at nprobe
    index: object = field(default=None, repr=False, compare=False)  # the faiss index measured, for reuse

    @property
    def fraction(self) -> float | None:
        return None if self.nprobe is None else self.nprobe / self.nlist



def first_reaching(score, target: float, lo: int, hi: int) -> int:
    """The smallest setting in lo..hi whose `score` reaches `target`, for a score that grows with
    the setting and reaches it at `hi` (binary search)."""
    while lo < hi:
        mid = (lo + hi) // 2
        if score(mid) >= target:
            hi = mid
        else:
            lo = mid + 1
    return lo

def value_stats(x: np.ndarray) -> dict:
    """The per-vector and per-component statistics docs/real-sift.md quotes for real SIFT."""
    norms = np.linalg.norm(x.astype(np.float64), axis=1)
    return {
        "min": float(x.min()),
        "max": float(x.max()),
        "integer": bool(np.array_equal(x, np.rint(x))),
        "norm_median": float(np.median(norms)),
        "norm_p1": float(np.percentile(norms, 1)),
        "norm_p99": float(np.percentile(norms, 99)),
        "zero_fraction": float(np.mean(x == 0)),
        "mean": float(x.mean(dtype=np.float64)),
    }


def ivf_difficulty(base: np.ndarray, queries: np.ndarray, *, nlist: int | None = None, target: float = RECALL_TARGET,
                   k: int = 10, gt_distances: np.ndarray | None = None, seed: int = 1234) -> Difficulty:
    """Smallest nprobe for which faiss IVF-Flat reaches ``target`` k-recall@k (binary search)."""
    import faiss

    os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")
    n, dim = base.shape
    nlist = nlist or default_nlist(n)
    if gt_distances is None:
        _, gt_distances = compute_groundtruth(base, queries, "l2", k=k, backend="faiss")
    t0 = time.perf_counter()
    index = faiss.IndexIVFFlat(faiss.IndexFlatL2(dim), dim, nlist)
    index.cp.seed = seed
    index.train(train_sample(base, nlist))  # the bench's k-means sample (64 per list), as its IVF peers use
    index.add(base)
    build_s = time.perf_counter() - t0
    result = Difficulty(nlist=nlist, nprobe=None, target=target, build_s=build_s, index=index)

    def recall(nprobe: int) -> float:
        if nprobe not in result.recall_at:
            index.nprobe = nprobe
            _, ids = index.search(queries, k)
            result.recall_at[nprobe] = knn_recall(ids, base, queries, gt_distances, k=k)
        return result.recall_at[nprobe]

    if recall(nlist) < target:  # exact scan of every list must reach it; otherwise say so
        return result
    lo = first_reaching(recall, target, 1, nlist)  # recall grows with nprobe for IVF-Flat
    result.nprobe = lo
    faiss.cvar.indexIVF_stats.reset()
    index.nprobe = lo
    index.search(queries, k)
    result.distances_per_query = nlist + faiss.cvar.indexIVF_stats.ndis / len(queries)
    return result


@dataclass
class GraphDifficulty:
    ef_search: int | None  # smallest efSearch reaching the target (None: not even at max_ef)
    target: float
    distances_per_query: float | None  # distance evaluations per query at ef_search
    recall_at: dict[int, float] = field(default_factory=dict)  # every efSearch tried -> recall
    build_s: float = 0.0
    index: object = field(default=None, repr=False, compare=False)  # the faiss index measured, for reuse


def hnsw_difficulty(base: np.ndarray, queries: np.ndarray, *, M: int = 32, ef_construction: int = 40,
                    target: float = 0.95, k: int = 10, gt_distances: np.ndarray | None = None,
                    max_ef: int = 4096) -> GraphDifficulty:
    """Smallest efSearch for which faiss HNSW (M, efConstruction) reaches ``target`` k-recall@k.

    Recall is searched at efSearch k, 2k, 4k, ... until the target is met, then by bisection (recall
    grows with efSearch up to sampling noise). Searches run on one thread, so faiss' distance counter
    is exact for the query set.
    """
    import faiss

    os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")
    if gt_distances is None:
        _, gt_distances = compute_groundtruth(base, queries, "l2", k=k, backend="faiss")
    t0 = time.perf_counter()
    index = faiss.IndexHNSWFlat(base.shape[1], M)
    index.hnsw.efConstruction = ef_construction
    index.add(base)
    result = GraphDifficulty(ef_search=None, target=target, distances_per_query=None,
                             build_s=time.perf_counter() - t0, index=index)
    ndis: dict[int, float] = {}
    threads = faiss.omp_get_max_threads()
    faiss.omp_set_num_threads(1)
    try:
        def recall(ef: int) -> float:
            if ef not in result.recall_at:
                index.hnsw.efSearch = ef
                faiss.cvar.hnsw_stats.reset()
                _, ids = index.search(queries, k)
                ndis[ef] = faiss.cvar.hnsw_stats.ndis / len(queries)
                result.recall_at[ef] = knn_recall(ids, base, queries, gt_distances, k=k)
            return result.recall_at[ef]

        lo, hi = k, k
        while recall(hi) < target:
            if hi >= max_ef:
                return result
            lo, hi = hi + 1, min(2 * hi, max_ef)
        hi = first_reaching(recall, target, lo, hi)
        result.ef_search = hi
        result.distances_per_query = ndis[hi]
    finally:
        faiss.omp_set_num_threads(threads)
    return result


def nn_distance_stats(gt_distances: np.ndarray) -> dict:
    """Query-to-base nearest-neighbour distance: median and 1st percentile (docs/real-sift.md's figures)."""
    d1 = np.asarray(gt_distances)[:, 0]
    return {"nn_median": float(np.median(d1)), "nn_p1": float(np.percentile(d1, 1))}
