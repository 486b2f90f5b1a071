"""usearch (HNSW over f32 vectors, connectivity 32, expansion_add 200; expansion_search swept)."""

from __future__ import annotations

import time
from importlib.metadata import version

import numpy as np
from usearch.index import Index

from vdbbench.adapters.interface import Adapter, BuildInfo
from vdbbench.peers._graph import EF_CONSTRUCTION, M, as_ids, ef_space, prepared

_METRIC = {"l2": "l2sq", "ip": "ip", "cosine": "ip"}  # cosine: unit rows, inner product


class UsearchAdapter(Adapter):
    name = "usearch"
    cacheable = True

    def __init__(self, dim, n, metric, options):
        super().__init__(dim, n, metric, options)
        self.index = None

    def build_params(self):
        return {"connectivity": M, "expansion_add": EF_CONSTRUCTION, "dtype": "f32"}

    def build(self, base):
        base = prepared(base, self.metric)
        self.index = Index(ndim=self.dim, metric=_METRIC[self.metric], dtype="f32",
                           connectivity=M, expansion_add=EF_CONSTRUCTION)
        t0 = time.perf_counter()
        self.index.add(np.arange(base.shape[0], dtype=np.uint64), base, threads=0)
        return BuildInfo(train_s=0.0, add_s=time.perf_counter() - t0, bytes=int(self.index.memory_usage))

    def param_space(self):
        return ef_space("expansion_search", self.options)

    def search(self, queries, k, params, threads):
        self.index.expansion_search = int(params["expansion_search"])
        q = prepared(queries, self.metric)
        found = self.index.search(q, k, threads=int(threads))
        return as_ids(found.keys, getattr(found, "counts", None)).reshape(q.shape[0], -1)

    def versions(self):
        return {"usearch": version("usearch")}

    def save(self, path):
        self.index.save(path)

    def load(self, path):
        index = Index.restore(path)
        if index is None:
            raise ValueError(f"{path}: not a usearch index")
        self.index = index
