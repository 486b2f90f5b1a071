"""Scoring a served run as the public leaderboard scores it (exact-id recall@10, the anti-cheat
check on hard-coded answers) and as ann-benchmarks does (tie-aware recall), side by side."""

from __future__ import annotations

import numpy as np

from vdbbench.common.recall import id_recall, knn_recall

#: The leaderboard's anti-cheat rule: answers whose mean pairwise Jaccard similarity exceeds
#: this look hard-coded.
JACCARD_LIMIT = 0.8
#: Pairs of queries compared (evenly spread over all pairs when there are more).
JACCARD_PAIRS = 500


def _pair(index: int, n: int) -> tuple[int, int]:
    """The ``index``-th pair (i < j) in row-major order over n items."""
    i = 0
    row = n - 1
    while index >= row:
        index -= row
        i += 1
        row -= 1
    return i, i + 1 + index


def anti_cheat(ids: np.ndarray, limit: float = JACCARD_LIMIT, pairs: int = JACCARD_PAIRS) -> dict:
    """Mean Jaccard similarity of the id sets of up to ``pairs`` query pairs (evenly spaced over
    all pairs), and the distinct ids over all answers. Fails when the mean exceeds ``limit``."""
    sets = [frozenset(int(v) for v in row if v >= 0) for row in np.asarray(ids)]
    n = len(sets)
    total_pairs = n * (n - 1) // 2
    take = min(total_pairs, pairs)
    sims = []
    for s in range(take):
        i, j = _pair(int(s * total_pairs / take), n) if take < total_pairs else _pair(s, n)
        union = len(sets[i] | sets[j])
        sims.append(len(sets[i] & sets[j]) / union if union else 0.0)
    mean = float(np.mean(sims)) if sims else 0.0
    unique = len(frozenset().union(*sets)) if sets else 0
    total = sum(len(s) for s in sets)
    passed = mean <= limit
    message = (f"mean Jaccard similarity {mean:.4f} over {take} query pairs; {unique} distinct ids in {total} answers"
               + ("" if passed else f": above {limit:g}, the answers look hard-coded"))
    return {"passed": passed, "avg_jaccard": mean, "pairs": take, "unique_ids": unique,
            "total_results": total, "message": message}


def score(run, gt_ids, k: int = 10, *, base=None, queries=None, gt_distances=None, metric: str = "l2") -> dict:
    """recall@k as exact-id overlap (the leaderboard's), tie-aware recall@k when ``base``,
    ``queries`` and ``gt_distances`` are given (ann-benchmarks'; None otherwise), and the
    anti-cheat verdict. ``run`` is a QueryRun or an (nq, >= k) id array."""
    ids = np.asarray(getattr(run, "ids", run))
    if ids.ndim != 2 or ids.shape[1] < k:
        raise ValueError(f"answers must have shape (nq, >= {k}), got {ids.shape}")
    out = {"recall_ids": id_recall(ids, gt_ids, k), "recall_tie": None, "anti_cheat": anti_cheat(ids[:, :k])}
    if base is not None and queries is not None and gt_distances is not None:
        out["recall_tie"] = knn_recall(ids, base, queries, gt_distances, k, metric)
    return out
