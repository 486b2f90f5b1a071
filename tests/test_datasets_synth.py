"""Generated sets: deterministic, SIFT's value statistics, and as hard for IVF and for a graph index
as measured on real SIFT."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

from vdbbench.datasets import UnknownDataset, default_nq, load_dataset, synth_float, synth_sift
from vdbbench.datasets.difficulty import hnsw_difficulty, ivf_difficulty, value_stats
from vdbbench.datasets.groundtruth import compute_groundtruth
from vdbbench.datasets.loader import parse_synth_name
from vdbbench.datasets.synth import SIFT_WORLD, sift_like, sift_normalise

# The IVF difficulty band asserted at 100k (exact-scan IVF, nlist = 4*sqrt(n) = 1265): generator
# v6 measured 2.69% (nprobe 34 with 1000 queries, as v5); at 1M it needs 1.50% (nprobe 60 of 4000),
# inside real SIFT's 1.3-1.7% (benchmarks/results/synth_calibration.md). Generator v4, whose 32
# groups k-means tiled one by one, measured 1.11% here and 0.53% at 1M: 2.5x too easy there. Recall
# grows by ~0.005 per extra probe near 0.95, so the crossing moves with the 200-query sample: the
# band leaves room for that and for faiss k-means differences, and still fails v4 (1.11%) or a
# replica of a few tight clusters (0.5% at 20k).
BAND_100K = (0.018, 0.04)

# Graph difficulty at 100k, counted rather than timed: faiss HNSW32's distance evaluations per
# query at its smallest efSearch for recall@10 0.95, against exact-scan IVF-Flat's (centroids plus
# codes scanned) at its smallest nprobe for 0.95. On real SIFT at 1M, HNSW32 runs at 4x IVF-Flat's
# batch QPS (docs/real-sift.md); the replica before generator v3, with isotropic noise in all 128
# dimensions, ran it at 0.4x, and its work ratio here is 1.9 (it fails this bound); this
# generator's is 4.3 for v6 (IVF 4,368 per query at nprobe 34, HNSW32 1,007 at efSearch 29; v5:
# 4.4, v3: 3.7). IVF's work
# grows about as sqrt(n) and a graph's as log(n), so at 100k the ratio is several times lower
# than at 1M.
GRAPH_WORK_MIN_100K = 2.5
# ...and the graph's own setting: HNSW32's smallest efSearch for 0.95 at 100k may not exceed real
# SIFT's at 1M (48). v6 needs 29 here and 45 at 1M (v5: 31 and 67); v5's world with isotropic noise
# needed 116 here while its work ratio (3.3) still passed the bound above, because IVF got harder too.
GRAPH_EF_MAX_100K = 48


def graph_not_far_harder(ratio: float, ef_search: int) -> bool:
    return ratio >= GRAPH_WORK_MIN_100K and ef_search <= GRAPH_EF_MAX_100K


@pytest.fixture(scope="module")
def sift_100k():
    return synth_sift(100_000, 200, seed=0)


@pytest.fixture(scope="module")
def gt_100k(sift_100k):
    return compute_groundtruth(*sift_100k, "l2", k=10, backend="faiss")[1]


@pytest.fixture(scope="module")
def ivf_100k(sift_100k, gt_100k):
    return ivf_difficulty(*sift_100k, target=0.95, gt_distances=gt_100k)


def graph_work_ratio(base, queries, gt=None, ivf=None) -> tuple[float, object, object]:
    ivf = ivf or ivf_difficulty(base, queries, target=0.95, gt_distances=gt)
    graph = hnsw_difficulty(base, queries, target=0.95, gt_distances=gt)
    assert ivf.nprobe is not None and graph.ef_search is not None
    return ivf.distances_per_query / graph.distances_per_query, ivf, graph


def test_synth_sift_contract(sift_100k):
    base, queries = sift_100k
    for a, rows in ((base, 100_000), (queries, 200)):
        assert a.shape == (rows, 128) and a.dtype == np.float32 and a.flags.c_contiguous


def test_synth_sift_values_are_sift_like(sift_100k):
    s = value_stats(sift_100k[0])
    assert s["integer"] and s["min"] == 0 and 200 <= s["max"] <= 255
    assert abs(s["norm_median"] - 512) <= 2
    assert 510 - 2 <= s["norm_p1"] and s["norm_p99"] <= 514 + 2
    assert 0.10 <= s["zero_fraction"] <= 0.20
    assert 24 <= s["mean"] <= 31  # real SIFT: about 27.5


@pytest.mark.slow
def test_synth_sift_is_as_hard_for_ivf_as_measured(ivf_100k):
    d = ivf_100k
    assert d.nlist == 1265
    assert d.fraction is not None and BAND_100K[0] <= d.fraction <= BAND_100K[1], (
        f"nprobe {d.nprobe} of {d.nlist} ({d.fraction:.2%}) for recall@10 0.95, outside the calibrated "
        f"band {BAND_100K[0]:.1%}..{BAND_100K[1]:.1%}; recall by nprobe: {sorted(d.recall_at.items())}"
    )


@pytest.mark.slow
def test_synth_sift_is_not_far_harder_for_graphs_than_real_sift(sift_100k, gt_100k, ivf_100k):
    ratio, ivf, graph = graph_work_ratio(*sift_100k, gt=gt_100k, ivf=ivf_100k)
    assert graph_not_far_harder(ratio, graph.ef_search), (
        f"IVF-Flat scans {ivf.distances_per_query:,.0f} vectors per query (nprobe {ivf.nprobe}) and HNSW32 "
        f"evaluates {graph.distances_per_query:,.0f} (efSearch {graph.ef_search}): ratio {ratio:.2f} (at least "
        f"{GRAPH_WORK_MIN_100K}), efSearch at most {GRAPH_EF_MAX_100K}: the graph finds this replica far harder "
        f"than real SIFT; "
        f"recall by efSearch: {sorted(graph.recall_at.items())}"
    )


@pytest.mark.slow
def test_isotropic_noise_fails_the_graph_bound():
    """The graph bounds can fail: the world with generator v2's noise (isotropic in all 128 dimensions,
    widely spread levels), which was as hard as real SIFT for IVF but not for graphs."""
    v2 = dataclasses.replace(SIFT_WORLD, noise_rank=0, noise_spread=0.8)
    base, queries = sift_like(100_000, 200, seed=0, world_params=v2)
    ratio, ivf, graph = graph_work_ratio(base, queries)
    assert not graph_not_far_harder(ratio, graph.ef_search), (ratio, ivf.nprobe, graph.ef_search)


def test_tight_clusters_fail_the_difficulty_band():
    """The band test can fail: the first-cut replica (sqrt(n) gamma clusters plus gamma noise,
    SIFT-normalised) has the right values but is far too easy (measured: nprobe 3 of 566, 0.5%)."""
    rng = np.random.default_rng(0)
    centers = rng.gamma(0.6, 1.0, size=(142, 128))
    x = centers[rng.integers(0, 142, 20_200)] + rng.gamma(0.6, 0.6, size=(20_200, 128))
    x = sift_normalise(x).astype(np.float32)
    d = ivf_difficulty(x[:20_000], x[20_000:])
    assert d.fraction < BAND_100K[0]


def test_deterministic_by_seed_and_prefix_stable():
    b1, q1 = synth_sift(9000, 50, seed=3)
    b2, q2 = synth_sift(9000, 50, seed=3)
    np.testing.assert_array_equal(b1, b2)
    np.testing.assert_array_equal(q1, q2)
    b3, _ = synth_sift(9000, 50, seed=4)
    assert not np.array_equal(b1, b3)
    small, q_small = synth_sift(5000, 50, seed=3)  # a smaller n is a prefix; queries do not depend on n
    np.testing.assert_array_equal(small, b1[:5000])
    np.testing.assert_array_equal(q_small, q1)


def test_queries_are_disjoint_from_base():
    base, queries = synth_sift(20_000, 300, seed=0)
    d2 = ((queries[:, None, :] - base[None, :2000, :]) ** 2).sum(-1)
    assert d2.min() > 0
    as_bytes = {row.tobytes() for row in base}
    assert not any(row.tobytes() in as_bytes for row in queries)


def test_synth_float_is_real_valued_with_varied_scales():
    base, queries = synth_float(20_000, 100, dim=48, seed=2)
    assert base.shape == (20_000, 48) and queries.shape == (100, 48)
    assert base.dtype == np.float32 and base.flags.c_contiguous
    assert not np.array_equal(base, np.rint(base))
    scales = base.std(axis=0)
    assert scales.max() / scales.min() > 20  # what makes one-range u8 codes lose information
    np.testing.assert_array_equal(base, synth_float(20_000, 100, dim=48, seed=2)[0])


@pytest.mark.parametrize("bad", [dict(n=0, nq=10), dict(n=10, nq=-1), dict(n=10, nq=10, seed=-1)])
def test_bad_sizes_are_refused(bad):
    with pytest.raises(ValueError, match="must be"):
        synth_sift(**bad)


def test_generated_names():
    assert parse_synth_name("synth-sift-20k") == ("sift", 20_000)
    assert parse_synth_name("synth-float-1m") == ("float", 1_000_000)
    assert parse_synth_name("synth-sift-12345") == ("sift", 12_345)
    assert parse_synth_name("synth-sift-1.5m") is None
    assert default_nq(1_000_000) == 10_000 and default_nq(100_000) == 1_000


def test_generated_set_is_cached_and_identified(data_dir):
    ds = load_dataset("synth-sift-4k", progress=False)
    assert (ds.n, ds.nq, ds.dim, ds.metric, ds.synthetic) == (4000, 1000, 128, "l2", True)
    assert ds.summary()["synthetic"] is True and len(ds.sha256) == 64
    cached = list((data_dir / "synth").glob("synth-sift-4k-nq1000-seed0-g*.hdf5"))
    assert len(cached) == 1
    again = load_dataset("synth-sift-4k", progress=False)
    assert again.sha256 == ds.sha256
    np.testing.assert_array_equal(again.train, ds.train)
    other = load_dataset("synth-sift-4k", seed=7, progress=False)
    assert other.sha256 != ds.sha256


def test_unknown_name_lists_valid_ones(data_dir):
    with pytest.raises(UnknownDataset, match="sift-1m.*synth-sift-<n>"):
        load_dataset("sift-2m")
