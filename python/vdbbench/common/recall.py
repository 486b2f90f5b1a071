"""Recall as ann-benchmarks defines it, the one implementation every part of vdbbench uses.

A returned id counts as a hit when its exact distance to the query, recomputed here from the
base vectors (never the index's own, possibly quantized, distance), is within the k-th true
distance plus ``epsilon``. Distances are in the metric's natural units: Euclidean (not
squared) for "l2", 1 - cos for "cosine", -dot for "ip". Invalid ids (-1, out of range) and
repeated ids count as misses.
"""

from __future__ import annotations

from statistics import NormalDist

import numpy as np

METRICS = ("l2", "ip", "cosine")
EPSILON = 1e-3
#: The recall@k every area aims at unless told otherwise (benchmark target, gate floor, the
#: agent's recall floor, the dataset calibration).
RECALL_TARGET = 0.95
#: The k of the headline recall (recall@10).
RECALL_K = 10


def metric_distances(metric: str, queries: np.ndarray, vectors: np.ndarray) -> np.ndarray:
    """Exact distances between query i and each of ``vectors[i]`` (shape (nq, m, dim)) -> (nq, m)."""
    q = np.asarray(queries, dtype=np.float64)[:, None, :]
    v = np.asarray(vectors, dtype=np.float64)
    if metric == "l2":
        return np.sqrt(np.maximum(((v - q) ** 2).sum(-1), 0.0))
    if metric == "ip":
        return -(v * q).sum(-1)
    if metric == "cosine":
        qn = np.linalg.norm(q, axis=-1)
        vn = np.linalg.norm(v, axis=-1)
        denom = np.where(qn * vn == 0.0, 1.0, qn * vn)
        return 1.0 - (v * q).sum(-1) / denom
    raise ValueError(f"unknown metric {metric!r}; expected one of {', '.join(METRICS)}")


def _valid_unique_mask(ids: np.ndarray, n_base: int) -> np.ndarray:
    """True where an id is in range and is the first occurrence of that id in its row."""
    valid = (ids >= 0) & (ids < n_base)
    # Mark repeats: sort each row, find equal neighbours, map back to original positions.
    order = np.argsort(ids, axis=1, kind="stable")
    sorted_ids = np.take_along_axis(ids, order, axis=1)
    repeat_sorted = np.zeros_like(sorted_ids, dtype=bool)
    repeat_sorted[:, 1:] = sorted_ids[:, 1:] == sorted_ids[:, :-1]
    repeat = np.zeros_like(repeat_sorted)
    np.put_along_axis(repeat, order, repeat_sorted, axis=1)
    return valid & ~repeat


def knn_recall_per_query(
    ids: np.ndarray,
    base: np.ndarray,
    queries: np.ndarray,
    gt_distances: np.ndarray,
    k: int = 10,
    metric: str = "l2",
    epsilon: float = EPSILON,
    block: int = 2048,
) -> np.ndarray:
    """Per-query k-nn recall (ann-benchmarks' definition), in [0, 1]."""
    ids = np.asarray(ids)
    if ids.ndim != 2 or ids.shape[1] < k:
        raise ValueError(f"ids must have shape (nq, >= {k}), got {ids.shape}")
    gt_distances = np.asarray(gt_distances)
    if gt_distances.ndim != 2 or gt_distances.shape[1] < k:
        raise ValueError(
            f"ground-truth distances must have shape (nq, >= {k}), got {gt_distances.shape}"
        )
    nq = ids.shape[0]
    if queries.shape[0] != nq or gt_distances.shape[0] != nq:
        raise ValueError(
            f"row counts differ: ids {nq}, queries {queries.shape[0]}, ground truth {gt_distances.shape[0]}"
        )
    ids = ids[:, :k].astype(np.int64, copy=False)
    n_base = base.shape[0]
    out = np.empty(nq, dtype=np.float64)
    for start in range(0, nq, block):
        stop = min(start + block, nq)
        row_ids = ids[start:stop]
        ok = _valid_unique_mask(row_ids, n_base)
        safe = np.where(ok, row_ids, 0)
        dist = metric_distances(metric, queries[start:stop], base[safe])
        threshold = gt_distances[start:stop, k - 1].astype(np.float64) + epsilon
        hits = ok & (dist <= threshold[:, None])
        out[start:stop] = hits.sum(axis=1) / k
    return out


def knn_recall(ids, base, queries, gt_distances, k: int = 10, metric: str = "l2", epsilon: float = EPSILON) -> float:
    """Mean k-nn recall over all queries (ann-benchmarks' "k-nn" metric)."""
    return float(knn_recall_per_query(ids, base, queries, gt_distances, k, metric, epsilon).mean())


def id_recall(ids: np.ndarray, gt_ids: np.ndarray, k: int = 10) -> float:
    """Plain id-overlap recall: |returned[:k] & true[:k]| / k, averaged over queries."""
    ids = np.asarray(ids)[:, :k]
    gt = np.asarray(gt_ids)[:, :k]
    if ids.shape[0] != gt.shape[0]:
        raise ValueError(f"row counts differ: ids {ids.shape[0]}, ground truth {gt.shape[0]}")
    hits = 0
    for row, truth in zip(ids, gt):
        hits += len(set(row[row >= 0].tolist()) & set(truth.tolist()))
    return hits / (k * ids.shape[0]) if ids.shape[0] else 0.0


def recall_standard_error(per_query: np.ndarray) -> float:
    """The standard error of a mean recall over ``per_query`` (sample std / sqrt(n); 0 for n < 2)."""
    per_query = np.asarray(per_query, dtype=np.float64)
    n = per_query.size
    return float(per_query.std(ddof=1) / np.sqrt(n)) if n > 1 else 0.0


def recall_lower_bound(mean: float, standard_error: float, confidence: float) -> float:
    """The lower end of a one-sided ``confidence`` interval of a mean recall (normal approximation:
    mean - z * standard_error); ``confidence`` 0 means no interval, the mean itself.

    A point read at recall 0.9502 on 2,000 queries (standard error ~0.002) is as likely as not to
    read under 0.95 on other queries; held to its lower bound at 0.95 confidence it reaches a
    0.95 target only near 0.954, and then holds on queries the run never saw.
    """
    check_confidence(confidence)
    if confidence == 0.0:
        return float(mean)
    return float(mean - NormalDist().inv_cdf(confidence) * standard_error)


def check_confidence(confidence: float) -> None:
    """ValueError unless ``confidence`` is 0 (no interval) or a one-sided level in [0.5, 1)."""
    if confidence != 0.0 and not 0.5 <= confidence < 1.0:
        raise ValueError(f"recall confidence must be 0 (off) or in [0.5, 1), got {confidence}")
