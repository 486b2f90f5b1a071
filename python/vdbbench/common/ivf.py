"""IVF defaults shared by our engine's adapter, the faiss IVF peers and the dataset calibration:
nlist, the rerank rule and the k-means training sample."""

from __future__ import annotations

import math
from collections.abc import Iterable

import numpy as np


def default_nlist(n: int) -> int:
    """The number of IVF lists used unless told otherwise: 4*sqrt(n), within 1..n."""
    return max(1, min(n, int(round(4.0 * math.sqrt(n)))))


def check_rerank(values: Iterable[int], k: int) -> tuple[int, ...]:
    """The rerank depths as a tuple; ValueError unless each is 0 (u8 results alone) or >= k.

    The engine checks the same rule on every call; this lets a sweep refuse bad values before
    anything is built.
    """
    out = tuple(int(v) for v in values)
    bad = [r for r in out if r < 0 or 0 < r < k]
    if bad:
        raise ValueError(f"rerank {bad[0]} must be 0 (u8 results alone) or >= k={k}")
    return out


def train_sample_size(n: int, nlist: int) -> int:
    """Vectors given to k-means: 64 per list (faiss' own guidance is 39..256), at most all n."""
    return min(n, max(64 * nlist, 10_000))


def train_sample(base: np.ndarray, nlist: int, seed: int = 0) -> np.ndarray:
    """The same seeded random subset of the base vectors, for ours and every faiss peer."""
    m = train_sample_size(base.shape[0], nlist)
    if m >= base.shape[0]:
        return base
    rows = np.sort(np.random.default_rng(seed).choice(base.shape[0], size=m, replace=False))
    return np.ascontiguousarray(base[rows])
