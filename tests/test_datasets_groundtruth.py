"""Exact ground truth: every backend agrees with brute force in every metric, blocks merge right,
and a second load takes it from the cache."""

from __future__ import annotations

import numpy as np
import pytest

from vdbbench.datasets import DatasetError, load_dataset, register_arrays
from vdbbench.datasets import groundtruth as gtmod
from vdbbench.datasets.groundtruth import compute_groundtruth


def _brute(base, queries, metric, k):
    b, q = base.astype(np.float64), queries.astype(np.float64)
    if metric == "l2":
        d = np.sqrt(((q[:, None] - b[None]) ** 2).sum(-1))
    elif metric == "ip":
        d = -(q @ b.T)
    else:
        d = 1 - (q @ b.T) / np.outer(np.linalg.norm(q, axis=1), np.linalg.norm(b, axis=1))
    ids = np.lexsort((np.broadcast_to(np.arange(b.shape[0]), d.shape), d), axis=1)[:, :k]
    return ids, np.take_along_axis(d, ids, axis=1)


def _backends():
    out = ["numpy", "faiss"]
    try:
        import vdbbench._rust_vdb  # noqa: F401

        out.append("engine")
    except ImportError:
        pass
    return out


@pytest.mark.parametrize("backend", _backends())
@pytest.mark.parametrize("metric", ["l2", "ip", "cosine"])
def test_blocked_ground_truth_is_exact(monkeypatch, backend, metric):
    rng = np.random.default_rng(11)
    base = rng.standard_normal((1000, 24)).astype(np.float32)
    queries = rng.standard_normal((70, 24)).astype(np.float32)
    # Small blocks so that several query blocks and base blocks are merged.
    monkeypatch.setattr(gtmod, "QUERY_BLOCK", 32)
    monkeypatch.setattr(gtmod, "BASE_BLOCK", 300)
    monkeypatch.setattr(gtmod, "_NUMPY_SUB_BLOCK", 128)
    ids, dist = compute_groundtruth(base, queries, metric, k=40, backend=backend)
    ref_ids, ref_dist = _brute(base, queries, metric, 40)
    assert ids.shape == (70, 40) and ids.dtype == np.int64 and dist.dtype == np.float32
    np.testing.assert_allclose(dist, ref_dist, rtol=1e-5, atol=1e-5)
    np.testing.assert_array_equal(ids, ref_ids)


@pytest.mark.parametrize("backend", _backends())
def test_ties_go_to_the_smaller_id(backend):
    base = np.full((300, 4), 3.0, np.float32)
    base[100:120] = 0.0  # 20 vectors at the same distance from the query, all the nearest
    base[107] = 5.0
    ids, dist = compute_groundtruth(base, np.ones((3, 4), np.float32), "l2", k=10, backend=backend)
    expected = [100, 101, 102, 103, 104, 105, 106, 108, 109, 110]
    np.testing.assert_array_equal(ids, np.tile(expected, (3, 1)))
    np.testing.assert_allclose(dist, 2.0)


def test_k_larger_than_base_is_capped():
    base = np.random.default_rng(0).random((15, 3)).astype(np.float32)
    ids, _ = compute_groundtruth(base, base[:2], "l2", k=100, backend="faiss")
    assert ids.shape == (2, 15) and sorted(ids[0]) == list(range(15))


def test_second_load_takes_ground_truth_from_cache(data_dir, monkeypatch):
    calls = []
    real = gtmod.compute_groundtruth

    def counting(*args, **kwargs):
        calls.append(1)
        return real(*args, **kwargs)

    monkeypatch.setattr(gtmod, "compute_groundtruth", counting)
    first = load_dataset("synth-sift-3k", progress=False)
    assert len(calls) == 1 and first.extra["groundtruth"].startswith("computed")
    second = load_dataset("synth-sift-3k", progress=False)
    assert len(calls) == 1, "the ground truth was computed again instead of read from the cache"
    assert second.extra["groundtruth"].startswith("cached")
    np.testing.assert_array_equal(first.neighbors, second.neighbors)
    assert list(data_dir.glob("synth/gt-*-k100.npz"))  # cached beside the generated data
    # A different query set (other seed) is a different key: computed, not confused with the first.
    load_dataset("synth-sift-3k", seed=1, progress=False)
    assert len(calls) == 2


def test_register_arrays_computes_and_caches_ground_truth(data_dir):
    rng = np.random.default_rng(5)
    train = rng.random((400, 10)).astype(np.float64)  # converted to float32
    test = rng.random((8, 10))
    ds = register_arrays("my-arrays", train, test, metric="cosine")
    assert ds.train.dtype == np.float32 and len(ds.sha256) == 64
    loaded = load_dataset("my-arrays")
    ref_ids, _ = _brute(loaded.train, loaded.test, "cosine", 100)
    np.testing.assert_array_equal(loaded.neighbors, ref_ids)
    assert list((data_dir / "groundtruth").glob("gt-*.npz"))
    with pytest.raises(DatasetError, match="registered or generated name"):
        register_arrays("sift-1m", train, test)
    with pytest.raises(DatasetError, match="unknown metric 'hamming'"):
        register_arrays("other", train, test, metric="hamming")
    with pytest.raises(DatasetError, match="at least 10 are needed"):
        register_arrays("short", train, test, neighbors=np.zeros((8, 5), np.int64))
