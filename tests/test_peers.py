"""Peers behind the adapter interface (faiss, and hnswlib / ScaNN / usearch when installed): each
finds the true neighbours at generous settings; a missing library is reported and skipped."""

from __future__ import annotations

import os

os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")

import faiss
import numpy as np
import pytest

from vdbbench.adapters import RunOptions
from vdbbench.common import normalize_rows
from vdbbench.common.recall import knn_recall
from vdbbench.adapters.registry import EXTRA_PEERS, PEERS, AdapterUnavailable, adapter_class
from vdbbench.datasets.synth import synth_float

GENEROUS = {"nprobe": 32, "k_factor": 16, "efSearch": 256, "ef": 256, "expansion_search": 256,
            "leaves_to_search": 32, "reorder": 200}


def _needs(name: str) -> None:
    """Skip, saying so, when a peer's optional library (pip install '.[peers]') is missing."""
    if name in EXTRA_PEERS:
        pytest.importorskip(name, reason=f"{name} is not installed (pip install '.[peers]')")


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
    _needs(name)
    base, queries = data
    adapter = adapter_class(name)(base.shape[1], base.shape[0], metric, RunOptions(nlist=32))
    info = adapter.build(base)
    assert info.train_s >= 0 and info.add_s >= 0 and info.train_s + info.add_s > 0
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
    refine = adapter_class("faiss-ivf-sq8-refine")(64, 10_000, "l2", RunOptions(k=10))
    space = refine.param_space()
    assert space.primary == "nprobe" and (space.start, space.stop) == (1, 400)
    assert space.secondary == {"k_factor": (1, 2, 4, 8, 16)}
    hnsw = adapter_class("faiss-hnsw")(64, 10_000, "l2", RunOptions(k=10)).param_space()
    assert hnsw.primary == "efSearch" and hnsw.start == 16
    with pytest.raises(ValueError, match="nprobe 999 is outside 1..nlist=400"):
        adapter_class("faiss-ivf-flat")(64, 10_000, "l2", RunOptions(nprobe=(1, 999))).param_space()


@pytest.mark.parametrize("name", ["faiss-ivf-sq8-refine", "faiss-ivfpq-fs"])
def test_refine_peers_sweep_their_own_k_factor_whatever_our_rerank(name):
    # our --rerank is our knob: a peer's refine depth covers its own range under any of ours
    spaces = [adapter_class(name)(64, 10_000, "l2", RunOptions(k=10, rerank=r)).param_space()
              for r in (None, (0, 40), (40, 160), (0,))]
    assert all(s.secondary == {"k_factor": (1, 2, 4, 8, 16)} for s in spaces)


def test_a_knob_list_given_for_one_index_replaces_its_own():
    from vdbbench.adapters.interface import swept_space

    opts = RunOptions(k=10, knobs={"faiss-ivfpq-fs": {"k_factor": (2, 32), "nprobe": (8, 16)}})
    pq = swept_space(adapter_class("faiss-ivfpq-fs")(64, 10_000, "l2", opts))
    assert pq.secondary == {"k_factor": (2, 32)} and pq.primary_values == (8, 16)
    # another index of the same run keeps its own lists
    sq8 = swept_space(adapter_class("faiss-ivf-sq8-refine")(64, 10_000, "l2", opts))
    assert sq8.secondary == {"k_factor": (1, 2, 4, 8, 16)} and sq8.primary_values is None
    bad = RunOptions(k=10, knobs={"faiss-ivf-flat": {"k_factor": (2,)}})
    with pytest.raises(ValueError, match="faiss-ivf-flat: no knob 'k_factor' to sweep \\(its knobs: nprobe\\)"):
        swept_space(adapter_class("faiss-ivf-flat")(64, 10_000, "l2", bad))


def test_cache_key_separates_configurations():
    a = adapter_class("faiss-ivf-flat")(64, 10_000, "l2", RunOptions())
    b = adapter_class("faiss-ivf-flat")(64, 10_000, "l2", RunOptions(nlist=100))
    c = adapter_class("faiss-ivf-flat")(64, 10_000, "cosine", RunOptions())
    assert len({a.cache_key(), b.cache_key(), c.cache_key()}) == 3


@pytest.mark.parametrize("name", ["hnswlib", "usearch"])
def test_cached_graph_peers_search_the_same_after_save_and_load(name, data, tmp_path):
    _needs(name)
    base, queries = data
    cls = adapter_class(name)
    a = cls(base.shape[1], base.shape[0], "l2", RunOptions())
    a.build(base)
    params = {a.param_space().primary: 64}
    a.save(str(tmp_path / "index"))
    b = cls(base.shape[1], base.shape[0], "l2", RunOptions())
    b.load(str(tmp_path / "index"))
    assert np.array_equal(a.search(queries, 10, params, 1), b.search(queries, 10, params, 1))
    # one query per call returns what the batch returns for it
    assert np.array_equal(a.search(queries[:1], 10, params, 1), a.search(queries, 10, params, 2)[:1])


def test_extra_peer_knobs():
    opts = RunOptions(k=10)
    if "scann" in PEERS:
        try:
            sc = adapter_class("scann")(128, 1_000_000, "l2", opts)
        except AdapterUnavailable:
            pass
        else:
            space = sc.param_space()
            assert sc.leaves == 2000 and space.primary == "leaves_to_search"
            assert space.secondary == {"reorder": (30, 50, 100, 200, 400)}
    try:
        hl = adapter_class("hnswlib")(128, 10_000, "l2", RunOptions(k=10, ef_search=(5,)))
    except AdapterUnavailable:
        pytest.skip("hnswlib is not installed (pip install '.[peers]')")
    with pytest.raises(ValueError, match="ef 5 must be >= k=10"):
        hl.param_space()
    assert hl.build_params()["M"] == 32 and hl.build_params()["ef_construction"] == 200


def test_a_missing_peer_library_is_reported_and_skipped(monkeypatch, tmp_path, capsys):
    import sys

    from vdbbench.cli import main

    monkeypatch.setitem(sys.modules, "hnswlib", None)  # what `import hnswlib` sees when absent
    monkeypatch.delitem(sys.modules, "vdbbench.peers.hnswlib_peer", raising=False)
    with pytest.raises(AdapterUnavailable, match="pip install 'vdbbench\\[peers\\]'"):
        adapter_class("hnswlib")
    monkeypatch.setenv("VDBBENCH_DATA", str(tmp_path / "data"))
    rc = main(["run", "--index", "faiss-ivf-flat", "--compare", "hnswlib", "--dataset", "synth-sift-2k",
               "--threads", "1", "--mode", "batch", "--repeats", "1", "--nprobe", "4,8,16", "--out", str(tmp_path / "o")])
    err = capsys.readouterr().err
    assert rc == 0 and "skipped hnswlib: cannot import" in err and "pip install 'vdbbench[peers]'" in err
    assert not (tmp_path / "o" / "hnswlib.json").exists()
