"""An IVF index in numpy, as a vdbbench adapter plugin (`numpy-ivf`): the smallest real example.

Build: a few Lloyd iterations of k-means on a sample, then every vector goes to its nearest
centroid's list. Search: score the centroids, scan the ``nprobe`` nearest lists exactly.
"""

from __future__ import annotations

import time

import numpy as np

from vdbbench.adapters import Adapter, BuildInfo, ParamSpace, RunOptions, ivf_primary, train_sample
from vdbbench.common import default_nlist

__version__ = "0.1.0"


def _sq_dists(x: np.ndarray, c: np.ndarray, c_norms: np.ndarray) -> np.ndarray:
    """Squared L2 distances (n, m) up to each row's own norm (enough to rank centroids)."""
    return c_norms[None, :] - 2.0 * (x @ c.T)


class NumpyIvfAdapter(Adapter):
    """IVF over float32 vectors, exact distances in the probed lists; L2 only."""

    name = "numpy-ivf"
    metrics = ("l2",)

    def __init__(self, dim: int, n: int, metric: str, options: RunOptions) -> None:
        super().__init__(dim, n, metric, options)
        self.nlist = options.nlist or default_nlist(n)
        self.iterations = 8

    def build_params(self) -> dict[str, object]:
        return {"nlist": self.nlist, "iterations": self.iterations, "seed": self.options.seed}

    def build(self, base: np.ndarray) -> BuildInfo:
        base = np.ascontiguousarray(base, dtype=np.float32)
        rng = np.random.default_rng(self.options.seed)
        t0 = time.perf_counter()
        sample = train_sample(base, self.nlist, self.options.seed)
        cent = sample[rng.choice(sample.shape[0], size=self.nlist, replace=False)].copy()
        for _ in range(self.iterations):
            assign = self._nearest(sample, cent)
            sums = np.zeros_like(cent, dtype=np.float64)
            np.add.at(sums, assign, sample)
            counts = np.bincount(assign, minlength=self.nlist)
            filled = counts > 0
            cent[filled] = (sums[filled] / counts[filled, None]).astype(np.float32)
        t1 = time.perf_counter()
        assign = self._nearest(base, cent)
        order = np.argsort(assign, kind="stable")
        self.offsets = np.concatenate([[0], np.cumsum(np.bincount(assign, minlength=self.nlist))])
        self.ids = order.astype(np.int64)
        self.vectors = base[order]
        self.norms = (self.vectors.astype(np.float32) ** 2).sum(1)
        self.centroids = cent
        self.c_norms = (cent**2).sum(1)
        t2 = time.perf_counter()
        nbytes = self.vectors.nbytes + self.ids.nbytes + self.norms.nbytes + cent.nbytes + self.offsets.nbytes
        return BuildInfo(train_s=t1 - t0, add_s=t2 - t1, bytes=int(nbytes))

    def _nearest(self, x: np.ndarray, cent: np.ndarray, block: int = 65536) -> np.ndarray:
        c_norms = (cent**2).sum(1)
        return np.concatenate([
            _sq_dists(x[i : i + block], cent, c_norms).argmin(1) for i in range(0, x.shape[0], block)
        ]) if x.shape[0] else np.empty(0, dtype=np.int64)

    def param_space(self) -> ParamSpace:
        start, stop, values = ivf_primary(self.options, self.nlist)
        return ParamSpace("nprobe", start, stop, values)

    def search(self, queries: np.ndarray, k: int, params: dict, threads: int) -> np.ndarray:
        nprobe = int(params["nprobe"])
        q = np.ascontiguousarray(queries, dtype=np.float32)
        probe = np.argsort(_sq_dists(q, self.centroids, self.c_norms), axis=1)[:, :nprobe]
        out = np.full((q.shape[0], k), -1, dtype=np.int64)
        for i, lists in enumerate(probe):
            rows = np.concatenate([np.arange(self.offsets[c], self.offsets[c + 1]) for c in lists])
            if rows.size == 0:
                continue
            d = self.norms[rows] - 2.0 * (self.vectors[rows] @ q[i])
            top = np.argpartition(d, k - 1)[:k] if rows.size > k else np.arange(rows.size)
            top = top[np.lexsort((self.ids[rows[top]], d[top]))]
            out[i, : top.size] = self.ids[rows[top]]
        return out

    def versions(self) -> dict[str, str]:
        return {"vdbbench-plugin-example": __version__, "numpy": np.__version__}
