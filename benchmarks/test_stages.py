"""pytest-benchmark micro-benchmarks of the search stages at fixed parameters (not run by `pytest`).

Run: ``python -m pytest benchmarks/test_stages.py --benchmark-columns=median,ops`` (the
normal test suite collects only ``tests/``). ``VDBBENCH_SIMD=scalar|avx2|avx512`` caps the
kernels, so each level can be measured; the level in use is recorded in extra_info.
``VDBBENCH_STAGES_N`` sets the base size (default 50,000).
"""

from __future__ import annotations

import os

import numpy as np
import pytest

vb = pytest.importorskip("vdbbench._rust_vdb")

from vdbbench.adapters import train_sample  # noqa: E402
from vdbbench.common import default_nlist  # noqa: E402
from vdbbench.datasets import compute_groundtruth  # noqa: E402
from vdbbench.common.recall import knn_recall  # noqa: E402
from vdbbench.datasets.synth import synth_sift  # noqa: E402

N, NQ, K, NPROBE = int(os.environ.get("VDBBENCH_STAGES_N", 50_000)), 500, 10, 16


@pytest.fixture(scope="module")
def data():
    base, queries = synth_sift(N, NQ, seed=7)
    _, dist = compute_groundtruth(base, queries, "l2", k=K)
    return base, queries, dist


_BUILT: dict[str, object] = {}


def built(storage: str, base: np.ndarray):
    """One IVF index per storage, built on first use and shared by the benchmarks."""
    if storage not in _BUILT:
        nlist = default_nlist(N)
        idx = vb.IvfIndex(dim=base.shape[1], nlist=nlist, metric="l2", storage=storage, seed=0)
        idx.train(train_sample(base, nlist))
        idx.add(base)
        _BUILT[storage] = idx
    return _BUILT[storage]


def _bench(benchmark, data, idx, **params):
    base, queries, dist = data
    _, ids = benchmark(lambda: idx.search(queries, k=K, threads=1, nprobe=NPROBE, **params))
    benchmark.extra_info.update(
        simd=vb.simd_level(), n=N, nq=NQ, nprobe=NPROBE, **params,
        recall10=knn_recall(ids, base, queries, dist), stages=dict(idx.last_search_stats()),
    )
    return ids


def test_prescore_only(benchmark, data):
    """u8 codes scanned and cut to k, no rerank: the prescore stage alone."""
    _bench(benchmark, data, built("u8+f16", data[0]), rerank=0)


@pytest.mark.parametrize("rerank", [4 * K, 16 * K])
def test_prescore_and_rerank(benchmark, data, rerank):
    """u8 prescore, then the best ``rerank`` candidates rescored from f16."""
    _bench(benchmark, data, built("u8+f16", data[0]), rerank=rerank)


@pytest.mark.parametrize("storage", ["f16", "f32"])
def test_full_precision_scan(benchmark, data, storage):
    """f16 or f32 storage: every probed vector scored at full precision."""
    _bench(benchmark, data, built(storage, data[0]))


def test_exact_flat_kernel(benchmark, data):
    """FlatIndex: the f32 distance kernel over every base vector (the reference)."""
    base, queries, dist = data
    flat = vb.FlatIndex(dim=base.shape[1], metric="l2")
    flat.add(base)
    q = np.ascontiguousarray(queries[:100])
    _, ids = benchmark(lambda: flat.search(q, k=K, threads=1))
    benchmark.extra_info.update(simd=vb.simd_level(), n=N, nq=100)
    assert knn_recall(ids, base, q, dist[:100]) == 1.0
