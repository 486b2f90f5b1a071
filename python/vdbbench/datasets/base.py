"""The `Dataset` value every part of vdbbench passes around."""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np


@dataclass
class Dataset:
    """Base vectors, queries and (optionally) exact ground truth, with their identity.

    ``neighbors``/``distances`` hold the exact top-K (K >= 10, usually 100) per query; the
    distances are in the metric's natural units (Euclidean for "l2", 1 - cos for "cosine",
    -dot for "ip"), as `vdbbench.bench.metrics` expects.
    """

    name: str
    train: np.ndarray  # base vectors, float32 (n, dim), C-contiguous
    test: np.ndarray  # queries, float32 (nq, dim)
    metric: str  # "l2" | "ip" | "cosine"
    neighbors: np.ndarray | None = None  # int64 (nq, K)
    distances: np.ndarray | None = None  # float32 (nq, K)
    synthetic: bool = False
    sha256: str = ""  # content hash of the data the results were measured on
    source: str = ""  # path or URL it came from, or "generated"
    extra: dict = field(default_factory=dict)

    @property
    def n(self) -> int:
        return int(self.train.shape[0])

    @property
    def dim(self) -> int:
        return int(self.train.shape[1])

    @property
    def nq(self) -> int:
        return int(self.test.shape[0])
