"""The `Dataset` value every part of vdbbench passes around, its content hash and its error type."""

from __future__ import annotations

import hashlib
from dataclasses import dataclass, field

import numpy as np

METRICS = ("l2", "ip", "cosine")


class DatasetError(ValueError):
    """A data set that cannot be used as asked: damaged or foreign file, bad shapes, unknown name."""


@dataclass
class Dataset:
    """Base vectors, queries and (optionally) exact ground truth, with their identity.

    ``neighbors``/``distances`` hold the exact top-K (K >= 10, usually 100) per query; the
    distances are in the metric's natural units (Euclidean for "l2", 1 - cos for "cosine",
    -dot for "ip"), as `vdbbench.common.recall` expects.
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

    @property
    def has_groundtruth(self) -> bool:
        return self.neighbors is not None and self.distances is not None

    def summary(self) -> dict:
        """The identity a result file records (schema `vdbbench.result/1`, "dataset")."""
        return {
            "name": self.name,
            "n": self.n,
            "dim": self.dim,
            "nq": self.nq,
            "metric": self.metric,
            "sha256": self.sha256,
            "synthetic": self.synthetic,
        }


def content_hash(*arrays: np.ndarray, tag: str = "") -> str:
    """sha256 over the shapes, dtypes and bytes of ``arrays`` (and an optional tag), hex."""
    h = hashlib.sha256()
    h.update(f"vdbbench-content/1 {tag}".encode())
    block_rows = 1 << 16
    for a in arrays:
        a = np.asarray(a)
        h.update(f"|{a.dtype.str}{a.shape}|".encode())
        if a.ndim == 0 or a.shape[0] == 0:
            h.update(np.ascontiguousarray(a).tobytes())
            continue
        for start in range(0, a.shape[0], block_rows):  # bounded memory for memory-mapped input
            h.update(np.ascontiguousarray(a[start : start + block_rows]).data)
    return h.hexdigest()


def check_metric(metric: str, where: str = "") -> str:
    if metric not in METRICS:
        place = f" ({where})" if where else ""
        raise DatasetError(f"unknown metric {metric!r}{place}; expected one of {', '.join(METRICS)}")
    return metric


def validate(ds: Dataset, where: str = "", k: int = 10) -> Dataset:
    """Check shapes and dtypes of a Dataset (after loading), raising DatasetError naming ``where``."""
    where = where or ds.source or ds.name
    check_metric(ds.metric, where)
    for label, a in (("train", ds.train), ("test", ds.test)):
        if not isinstance(a, np.ndarray) or a.ndim != 2:
            raise DatasetError(f"{where}: {label} must be a 2-d array (n, dim), got shape {np.shape(a)}")
        if a.dtype != np.float32 or not a.flags.c_contiguous:
            raise DatasetError(f"{where}: {label} must be float32 C-contiguous, got {a.dtype}")
        if a.shape[0] == 0 or a.shape[1] == 0:
            raise DatasetError(f"{where}: {label} is empty (shape {a.shape})")
        for start in range(0, a.shape[0], 1 << 16):  # in blocks: bounded memory on multi-GB sets
            bad = ~np.isfinite(a[start : start + (1 << 16)])
            if bad.any():
                row, col = np.argwhere(bad)[0]
                raise DatasetError(
                    f"{where}: {label} row {start + row}, column {col} is {a[start + row, col]}; vectors must be "
                    f"finite (a float64 value beyond float32's range becomes inf when loaded)"
                )
    if ds.train.shape[1] != ds.test.shape[1]:
        raise DatasetError(
            f"{where}: dimension mismatch between train ({ds.train.shape[1]}) and test ({ds.test.shape[1]})"
        )
    if (ds.neighbors is None) != (ds.distances is None):
        raise DatasetError(f"{where}: neighbors and distances must be given together")
    if ds.neighbors is not None:
        nb, di = ds.neighbors, ds.distances
        if nb.ndim != 2 or nb.shape[0] != ds.nq:
            raise DatasetError(f"{where}: neighbors must have shape ({ds.nq}, K), got {nb.shape}")
        if nb.shape[1] < k:
            raise DatasetError(
                f"{where}: neighbors has {nb.shape[1]} columns; at least {k} are needed for recall@{k}"
            )
        if di.shape != nb.shape:
            raise DatasetError(f"{where}: distances shape {di.shape} differs from neighbors shape {nb.shape}")
        if nb.size and (nb.min() < 0 or nb.max() >= ds.n):
            raise DatasetError(f"{where}: neighbors hold ids outside 0..{ds.n - 1}")
        # recall counts a returned id by the k-th true distance: a row out of order (or NaN)
        # would move that bar and credit any index with a recall it did not earn
        if not np.isfinite(di).all():
            raise DatasetError(f"{where}: distances hold NaN or infinite values")
        step = np.diff(di.astype(np.float64), axis=1)
        worse = step < -(1e-5 * np.abs(di[:, 1:]) + 1e-6)
        if worse.any():
            row = int(np.argmax(worse.any(axis=1)))
            raise DatasetError(f"{where}: distances of query {row} are not in increasing order (the true "
                               f"neighbours nearest first); the ground truth is damaged or of another layout")
    return ds
