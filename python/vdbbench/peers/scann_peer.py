"""ScaNN (partitioning tree + anisotropic hashing + exact reorder): Google's IVF-family index.

Build: 2*sqrt(n) leaves (2,000 at 1M, the setting of docs/real-sift.md), AH with 2
dimensions per block and anisotropic threshold 0.2, reorder with the exact f32 vectors.
Swept: ``leaves_to_search`` adaptively, ``reorder`` (candidates rescored exactly) over
`REORDER_FACTORS` times k.
"""

from __future__ import annotations

import math
import os
import tempfile
import time
from importlib.metadata import version

import numpy as np
import scann

from vdbbench.adapters.interface import Adapter, BuildInfo, ParamSpace
from vdbbench.peers._graph import prepared

_DISTANCE = {"l2": "squared_l2", "ip": "dot_product", "cosine": "dot_product"}
DIMS_PER_BLOCK = 2
AH_THRESHOLD = 0.2
TRAINING_SAMPLE = 250_000
#: Exact rescoring depths swept, as multiples of k: from well under to well over the 10x of
#: ScaNN's own example (reorder 100 for 10 neighbours), so the fewest leaves that reach a
#: target are found whatever depth they need.
REORDER_FACTORS = (3, 5, 10, 20, 40)


def default_leaves(n: int) -> int:
    """2*sqrt(n) leaves: 2,000 at 1M; at least 1 and at most n/50 (ScaNN's min partition)."""
    return max(1, min(int(round(2.0 * math.sqrt(n))), n // 50 or 1))


def _dir_bytes(path: str) -> int:
    return sum(os.path.getsize(os.path.join(root, f)) for root, _, files in os.walk(path) for f in files)


class ScannAdapter(Adapter):
    name = "scann"

    def __init__(self, dim, n, metric, options):
        super().__init__(dim, n, metric, options)
        self.leaves = default_leaves(n)
        self.searcher = None
        self._threads = None

    def build_params(self):
        return {"num_leaves": self.leaves, "dims_per_block": DIMS_PER_BLOCK,
                "anisotropic_threshold": AH_THRESHOLD, "reorder": "f32"}

    def build(self, base):
        base = prepared(base, self.metric)
        k = self.options.k
        t0 = time.perf_counter()
        self.searcher = (
            scann.scann_ops_pybind.builder(base, k, _DISTANCE[self.metric])
            .tree(num_leaves=self.leaves, num_leaves_to_search=max(1, self.leaves // 50),
                  training_sample_size=min(base.shape[0], TRAINING_SAMPLE))
            .score_ah(DIMS_PER_BLOCK, anisotropic_quantization_threshold=AH_THRESHOLD)
            .reorder(10 * k)
            .build()
        )
        t1 = time.perf_counter()
        with tempfile.TemporaryDirectory() as tmp:  # its memory: what it serializes
            self.searcher.serialize(tmp)
            nbytes = _dir_bytes(tmp)
        return BuildInfo(train_s=t1 - t0, add_s=0.0, bytes=nbytes)

    def param_space(self):
        k = self.options.k
        values = self.options.nprobe  # --nprobe: the leaves to search, the IVF knob's twin
        if values is not None:
            bad = [v for v in values if v < 1 or v > self.leaves]
            if bad:
                raise ValueError(f"leaves_to_search {bad[0]} is outside 1..num_leaves={self.leaves}")
        return ParamSpace("leaves_to_search", 1, self.leaves, values,
                          {"reorder": tuple(f * k for f in REORDER_FACTORS)})

    def search(self, queries, k, params, threads):
        q = prepared(queries, self.metric)
        leaves, reorder = int(params["leaves_to_search"]), max(k, int(params["reorder"]))
        if q.shape[0] == 1:
            ids, _ = self.searcher.search(q[0], final_num_neighbors=k, pre_reorder_num_neighbors=reorder,
                                          leaves_to_search=leaves)
            return np.asarray(ids, dtype=np.int64).reshape(1, -1)
        if threads > 1:
            if self._threads != threads:
                self.searcher.set_num_threads(int(threads))
                self._threads = threads
            ids, _ = self.searcher.search_batched_parallel(q, final_num_neighbors=k, leaves_to_search=leaves,
                                                           pre_reorder_num_neighbors=reorder)
        else:
            ids, _ = self.searcher.search_batched(q, final_num_neighbors=k, leaves_to_search=leaves,
                                                  pre_reorder_num_neighbors=reorder)
        return np.asarray(ids, dtype=np.int64)

    def versions(self):
        return {"scann": version("scann")}
