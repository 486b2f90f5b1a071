"""hnswlib (HNSW, M 32, ef_construction 200; ef swept): the graph index people pick first."""

from __future__ import annotations

import time
from importlib.metadata import version

import hnswlib
import numpy as np

from vdbbench.adapters.interface import Adapter, BuildInfo
from vdbbench.peers._graph import EF_CONSTRUCTION, M, as_ids, ef_space, prepared

_SPACE = {"l2": "l2", "ip": "ip", "cosine": "ip"}  # cosine: unit rows, inner product


class HnswlibAdapter(Adapter):
    name = "hnswlib"
    cacheable = True

    def __init__(self, dim, n, metric, options):
        super().__init__(dim, n, metric, options)
        self.index = None

    def build_params(self):
        return {"M": M, "ef_construction": EF_CONSTRUCTION, "seed": self.options.seed}

    def _new(self) -> hnswlib.Index:
        return hnswlib.Index(space=_SPACE[self.metric], dim=self.dim)

    def build(self, base):
        base = prepared(base, self.metric)
        self.index = self._new()
        t0 = time.perf_counter()
        self.index.init_index(max_elements=base.shape[0], ef_construction=EF_CONSTRUCTION, M=M,
                              random_seed=self.options.seed)
        self.index.add_items(base, np.arange(base.shape[0]), num_threads=-1)
        return BuildInfo(train_s=0.0, add_s=time.perf_counter() - t0, bytes=None)

    def param_space(self):
        return ef_space("ef", self.options)

    def search(self, queries, k, params, threads):
        self.index.set_ef(int(params["ef"]))
        labels, _ = self.index.knn_query(prepared(queries, self.metric), k=k, num_threads=int(threads))
        return as_ids(labels)

    def versions(self):
        return {"hnswlib": version("hnswlib")}

    def save(self, path):
        self.index.save_index(path)

    def load(self, path):
        self.index = self._new()
        self.index.load_index(path, max_elements=self.n)
