"""faiss peers behind the adapter interface: each finds the true neighbours at generous settings."""

from __future__ import annotations

import os

os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")

import faiss
import numpy as np
import pytest

from vdbbench.adapters import RunOptions
from vdbbench.common import normalize_rows
from vdbbench.common.recall import knn_recall
from vdbbench.adapters.registry import PEERS, adapter_class
from vdbbench.datasets.synth import synth_float

GENEROUS = {"nprobe": 32, "k_factor": 16, "efSearch": 256}


def _truth(base, queries, metric, k=10):
    """Exact neighbours and distances in the metric's natural units (as the recall expects)."""
    if metric == "l2":
        index = faiss.IndexFlatL2(base.shape[1])
        index.add(base)
        d, i = index.search(queries, k)
        return i, np.sqrt(np.maximum(d, 0))
    b, q = (normalize_rows(base), normalize_rows(queries)) if metric == "cosine" else (base, queries)
    index = faiss.IndexFlatIP(base.shape[1])
    index.add(b)
    s, i = index.search(q, k)
    return i, (1.0 - s) if metric == "cosine" else -s


@pytest.fixture(scope="module")
def data():
    return synth_float(3000, 100, dim=32, seed=5)


@pytest.mark.parametrize("name", PEERS)
@pytest.mark.parametrize("metric", ["l2", "ip", "cosine"])
def test_peer_finds_true_neighbours(name, metric, data):
    base, queries = data
    adapter = adapter_class(name)(base.shape[1], base.shape[0], metric, RunOptions(nlist=32))
    info = adapter.build(base)
    assert info.train_s >= 0 and info.add_s > 0
    space = adapter.param_space()
    params = {space.primary: GENEROUS[space.primary], **{k: GENEROUS[k] for k in space.secondary}}
    ids = adapter.search(queries, 10, params, threads=1)
    assert ids.shape == (100, 10) and ids.dtype == np.int64
    _, dist = _truth(base, queries, metric)
    # SQ8 without refine and 4-bit PQ pruning lose some neighbours on normalised data; a wrong
    # metric or id mapping would lose nearly all of them
    floor = 0.85 if name in ("faiss-ivf-sq8", "faiss-ivfpq-fs") and metric != "l2" else 0.95
    assert knn_recall(ids, base, queries, dist, metric=metric) >= floor


def test_knobs_are_swept_in_order_of_cost():
    opts = RunOptions(k=10, rerank=(40, 160))
    refine = adapter_class("faiss-ivf-sq8-refine")(64, 10_000, "l2", opts)
    space = refine.param_space()
    assert space.primary == "nprobe" and (space.start, space.stop) == (1, 400)
    assert space.secondary == {"k_factor": (4, 16)}  # rerank / k, like our rerank
    hnsw = adapter_class("faiss-hnsw")(64, 10_000, "l2", RunOptions(k=10)).param_space()
    assert hnsw.primary == "efSearch" and hnsw.start == 16
    with pytest.raises(ValueError, match="nprobe 999 is outside 1..nlist=400"):
        adapter_class("faiss-ivf-flat")(64, 10_000, "l2", RunOptions(nprobe=(1, 999))).param_space()


def test_cache_key_separates_configurations():
    a = adapter_class("faiss-ivf-flat")(64, 10_000, "l2", RunOptions())
    b = adapter_class("faiss-ivf-flat")(64, 10_000, "l2", RunOptions(nlist=100))
    c = adapter_class("faiss-ivf-flat")(64, 10_000, "cosine", RunOptions())
    assert len({a.cache_key(), b.cache_key(), c.cache_key()}) == 3
