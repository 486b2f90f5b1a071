"""Exact duplicate removal and the deterministic per-image "water-filling" sample."""

from __future__ import annotations

import numpy as np


def void_view(a: np.ndarray) -> np.ndarray:
    """Each row of a 2-d array as one opaque value (for np.unique over rows)."""
    a = np.ascontiguousarray(a)
    return a.view(np.dtype((np.void, a.dtype.itemsize * a.shape[1]))).ravel()


def unique_rows(x: np.ndarray) -> np.ndarray:
    """Indices of the first occurrence of every distinct row, in original order."""
    _, idx = np.unique(void_view(x), return_index=True)
    return np.sort(idx)


def dedup(xb, ob, xq, oq) -> tuple[tuple, tuple, dict]:
    """Drop exact duplicate vectors within base, within query, and query vectors that also occur
    in base. Returns ((base, owners), (query, owners), counts dropped)."""
    kb, kq = unique_rows(xb), unique_rows(xq)
    dropped = {"base_within": len(xb) - len(kb), "query_within": len(xq) - len(kq)}
    xb_u, ob_u = xb[kb], ob[kb]
    xq_u, oq_u = xq[kq], oq[kq]
    both = np.concatenate([void_view(xb_u), void_view(xq_u)])
    _, inv, cnt = np.unique(both, return_inverse=True, return_counts=True)
    cross = cnt[inv.ravel()[len(xb_u):]] > 1
    dropped["query_in_base"] = int(cross.sum())
    return (xb_u, ob_u), (xq_u[~cross], oq_u[~cross]), dropped


def waterfill(counts, n: int, rng: np.random.Generator) -> np.ndarray:
    """Per-image quotas: min(count, T) with sum == n (or everything if fewer): the largest T that
    fits, then one more from randomly chosen images above T, so no few very textured images
    dominate."""
    counts = np.asarray(counts, np.int64)
    if counts.sum() <= n:
        return counts.copy()
    lo, hi = 0, int(counts.max())
    while lo < hi:  # largest T with sum(min(c, T)) <= n
        mid = (lo + hi + 1) // 2
        if np.minimum(counts, mid).sum() <= n:
            lo = mid
        else:
            hi = mid - 1
    q = np.minimum(counts, lo)
    rest = n - int(q.sum())
    if rest:
        cand = np.flatnonzero(counts > lo)
        q[rng.choice(cand, size=rest, replace=False)] += 1
    return q


def sample_rows(owner: np.ndarray, quota: np.ndarray, rng: np.random.Generator) -> np.ndarray:
    """owner[i] = image of row i; `quota[img]` random rows of each image, in a random order."""
    order = np.argsort(owner, kind="stable")
    starts = np.searchsorted(owner[order], np.arange(len(quota)))
    ends = np.searchsorted(owner[order], np.arange(len(quota)), side="right")
    out = []
    for i, q in enumerate(quota):
        if q:
            rows = order[starts[i]:ends[i]]
            out.append(rows[rng.choice(len(rows), size=int(q), replace=False)])
    sel = np.concatenate(out) if out else np.zeros(0, np.int64)
    return sel[rng.permutation(len(sel))]
