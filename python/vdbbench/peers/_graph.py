"""What the graph peers (hnswlib, usearch) share: build settings, the ef sweep, metric and ids."""

from __future__ import annotations

import numpy as np

from vdbbench.adapters.interface import ParamSpace, RunOptions
from vdbbench.common import normalize_rows

#: Graph degree and construction beam of the hnswlib and usearch peers (hnswlib's settings in
#: docs/real-sift.md, the ones its users commonly pick for SIFT-like data).
M = 32
EF_CONSTRUCTION = 200
EF_STOP = 4096


def ef_space(knob: str, options: RunOptions) -> ParamSpace:
    """The search beam swept adaptively from max(16, k) (a beam below k returns fewer than k),
    or the explicit --ef-search list (each >= k)."""
    k = options.k
    values = options.ef_search
    if values is not None:
        bad = [e for e in values if e < k]
        if bad:
            raise ValueError(f"{knob} {bad[0]} must be >= k={k}")
    return ParamSpace(knob, max(16, k), EF_STOP, values)


def prepared(x: np.ndarray, metric: str) -> np.ndarray:
    """C-contiguous float32 rows, unit length for cosine (searched as inner product)."""
    x = np.ascontiguousarray(x, dtype=np.float32)
    return normalize_rows(x) if metric == "cosine" else x


def as_ids(labels, counts=None) -> np.ndarray:
    """(nq, k) int64 ids from a library's unsigned labels; -1 past each row's count."""
    ids = np.atleast_2d(np.asarray(labels)).astype(np.int64)
    if counts is not None:
        counts = np.atleast_1d(np.asarray(counts))
        ids[np.arange(ids.shape[1])[None, :] >= counts[:, None]] = -1
    return ids
