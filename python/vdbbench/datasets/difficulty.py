"""How hard a data set is for IVF, and how SIFT-like its values are (calibrates the generated replica).

Difficulty is the smallest nprobe at which exact-scan IVF (faiss IndexIVFFlat, k-means trained on
the base, nlist = 4*sqrt(n) by default) reaches a 10-recall@10 target, as a fraction of nlist;
recall is the shared `vdbbench.common.recall.knn_recall` against exact ground truth.
"""

from __future__ import annotations

import os
import time
from dataclasses import dataclass, field

import numpy as np

from vdbbench.common.ivf import default_nlist
from vdbbench.common.recall import RECALL_TARGET, knn_recall
from vdbbench.datasets.groundtruth import compute_groundtruth


@dataclass
class Difficulty:
    nlist: int
    nprobe: int | None  # smallest nprobe reaching the target (None: not even at nprobe = nlist)
    target: float
    recall_at: dict[int, float] = field(default_factory=dict)  # every nprobe tried -> recall
    build_s: float = 0.0

    @property
    def fraction(self) -> float | None:
        return None if self.nprobe is None else self.nprobe / self.nlist


def value_stats(x: np.ndarray) -> dict:
    """The per-vector and per-component statistics DATA_NOTES.md quotes for real SIFT."""
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
    index.cp.max_points_per_centroid = 256  # faiss' default sample cap, stated explicitly
    index.train(base)
    index.add(base)
    build_s = time.perf_counter() - t0
    result = Difficulty(nlist=nlist, nprobe=None, target=target, build_s=build_s)

    def recall(nprobe: int) -> float:
        if nprobe not in result.recall_at:
            index.nprobe = nprobe
            _, ids = index.search(queries, k)
            result.recall_at[nprobe] = knn_recall(ids, base, queries, gt_distances, k=k)
        return result.recall_at[nprobe]

    if recall(nlist) < target:  # exact scan of every list must reach it; otherwise say so
        return result
    lo, hi = 1, nlist
    while lo < hi:  # recall grows with nprobe for IVF-Flat: binary search the first success
        mid = (lo + hi) // 2
        if recall(mid) >= target:
            hi = mid
        else:
            lo = mid + 1
    result.nprobe = lo
    return result


def nn_distance_stats(gt_distances: np.ndarray) -> dict:
    """Query-to-base nearest-neighbour distance: median and 1st percentile (DATA_NOTES' figures)."""
    d1 = np.asarray(gt_distances)[:, 0]
    return {"nn_median": float(np.median(d1)), "nn_p1": float(np.percentile(d1, 1))}
