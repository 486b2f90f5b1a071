"""Engine correctness: IVF vs Flat, recall of u8+f16, rerank, bytes, save/load, bad inputs."""

from __future__ import annotations

import re

import numpy as np
import pytest

rv = pytest.importorskip("vdbbench._rust_vdb")

import vdbbench as vb  # noqa: E402
from vdbbench.common.recall import knn_recall, metric_distances  # noqa: E402
from vdbbench.datasets.synth import synth_float, synth_sift  # noqa: E402

METRICS = ("l2", "ip", "cosine")


@pytest.fixture(scope="module")
def sift30k():
    """30k SIFT-like vectors (100k takes ~20 s to build here: too slow for the suite)."""
    base, queries = synth_sift(30_000, 200, seed=3)
    flat = vb.FlatIndex(128)
    flat.add(base)
    gt_d, gt_i = flat.search(queries, k=10)
    return base, queries, np.sqrt(np.maximum(gt_d, 0.0)), gt_i


@pytest.fixture(scope="module")
def float20k():
    base, queries = synth_float(20_000, 200, dim=64, seed=5)
    flat = vb.FlatIndex(64)
    flat.add(base)
    gt_d, _ = flat.search(queries, k=10)
    return base, queries, np.sqrt(np.maximum(gt_d, 0.0))


@pytest.fixture(scope="module")
def small():
    base, queries = synth_float(3_000, 40, dim=24, seed=9)
    return base, queries


def built(base, *, nlist=16, metric="l2", storage="u8+f16", seed=0):
    idx = vb.IvfIndex(base.shape[1], nlist=nlist, metric=metric, storage=storage, seed=seed)
    idx.train(base)
    idx.add(base)
    return idx


@pytest.mark.parametrize("metric", METRICS)
def test_ivf_f32_probing_every_list_returns_flat_results(small, metric):
    base, queries = small
    flat = vb.FlatIndex(base.shape[1], metric=metric)
    flat.add(base)
    fd, fi = flat.search(queries, k=10)
    idx = built(base, metric=metric, storage="f32")
    d, i = idx.search(queries, k=10, nprobe=idx.nlist)
    np.testing.assert_array_equal(i, fi)
    # Equal up to f32 rounding: SIMD batch kernels may round a row differently by position.
    np.testing.assert_allclose(d, fd, rtol=1e-5, atol=1e-5)
    assert d.dtype == np.float32 and i.dtype == np.int64 and d.shape == (40, 10)
    # Best first; similarities descend for ip/cosine, distances ascend for l2.
    step = np.diff(d, axis=1)
    assert (step <= 1e-6).all() if metric != "l2" else (step >= -1e-6).all()


def test_flat_matches_numpy_brute_force(small):
    base, queries = small
    for metric in METRICS:
        flat = vb.FlatIndex(base.shape[1], metric=metric)
        flat.add(base)
        _, i = flat.search(queries, k=5)
        exact = metric_distances(metric, queries, np.broadcast_to(base, (len(queries),) + base.shape))
        ref = np.argsort(exact, axis=1, kind="stable")[:, :5]
        np.testing.assert_array_equal(i, ref)


def test_u8_f16_reaches_095_recall_at_modest_nprobe_on_sift_like(sift30k):
    base, queries, gt_d, _ = sift30k
    idx = vb.IvfIndex(128, storage="u8+f16")
    idx.train(base)
    idx.add(base)
    assert idx.nlist == round(4 * np.sqrt(30_000))
    recalls = {}
    for nprobe in (4, 8, 16, 32):
        _, ids = idx.search(queries, k=10, nprobe=nprobe, rerank=40)
        recalls[nprobe] = knn_recall(ids, base, queries, gt_d, k=10)
    modest = [p for p, r in recalls.items() if r >= 0.95]
    assert modest and min(modest) <= 32, recalls
    # Recall grows with nprobe (monotone up to noise-free exactness of nested probes).
    assert recalls[32] >= recalls[4]
    stats = idx.last_search_stats()
    assert stats["nq"] == 200 and stats["lists_probed"] == 200 * 32
    assert stats["candidates_reranked"] == 200 * 40
    assert stats["codes_scanned"] > 0 and stats["prescore_s"] > 0.0
    # Bytes read: routing (f32 centroids once per 128-query block), the 64-byte head of each
    # scanned code + its 4-byte term, the 64-byte tails read (split codes: at most one per
    # scanned code) + the 4-byte terms of those read by the batch tiles (a tail completed
    # row by row is scored without its term), 256 f16 bytes per reranked candidate.
    routing = -(-200 // 128) * idx.nlist * 128 * 4
    assert 0 < stats["tails_read"] <= stats["codes_scanned"]
    fixed = routing + stats["codes_scanned"] * 68 + stats["tails_read"] * 64 + 200 * 40 * 256
    assert fixed <= stats["bytes_scanned"] <= fixed + stats["tails_read"] * 4
    assert (stats["bytes_scanned"] - fixed) % 4 == 0


def test_rerank_restores_recall_that_u8_alone_loses_on_float_data(float20k):
    base, queries, gt_d = float20k
    idx = vb.IvfIndex(64, storage="u8+f16")
    idx.train(base)
    idx.add(base)
    nprobe = idx.nlist  # isolate the quantization loss from the routing loss
    _, u8_only = idx.search(queries, k=10, nprobe=nprobe, rerank=0)
    _, reranked = idx.search(queries, k=10, nprobe=nprobe, rerank=100)
    r0 = knn_recall(u8_only, base, queries, gt_d, k=10)
    r1 = knn_recall(reranked, base, queries, gt_d, k=10)
    assert r1 >= 0.99, (r0, r1)
    assert r1 - r0 >= 0.03, f"rerank=0 recall {r0:.3f} vs rerank=100 {r1:.3f}: no real gap"
    # rerank=0 distances are decoded from the codes: close to, not equal to, the exact ones.
    d0, _ = idx.search(queries[:5], k=10, nprobe=nprobe, rerank=0)
    assert np.isfinite(d0).all() and (d0 >= 0).all()


def test_prefilter_reads_fewer_bytes_for_about_the_same_results(float20k):
    # With reorder, the 4-bit prefilter codes of the probed lists are read instead of the u8
    # heads, and only each query's best `reorder` rows get their u8 distance.
    base, queries, gt_d = float20k
    idx = vb.IvfIndex(64, storage="u8+f16")
    idx.train(base)
    idx.add(base)
    nprobe = idx.nlist // 2  # the lists' codes, not routing, are most of the bytes
    got = {}
    for reorder in (None, 100, 20_000):
        ids, read = [], 0
        for q in queries[:100]:
            ids.append(idx.search(q[None], k=10, nprobe=nprobe, rerank=40, threads=1, reorder=reorder)[1][0])
            read += idx.last_search_stats()["bytes_scanned"]
        got[reorder] = (np.array(ids), read)
    # keeping every probed row gives the u8 scan's results exactly
    assert (got[20_000][0] == got[None][0]).all()
    r_u8 = knn_recall(got[None][0], base, queries[:100], gt_d[:100], k=10)
    r_fs = knn_recall(got[100][0], base, queries[:100], gt_d[:100], k=10)
    assert r_fs >= r_u8 - 0.03, (r_u8, r_fs)
    assert got[100][1] < 0.8 * got[None][1], (got[100][1], got[None][1])
    # several queries in one call: the same results as one at a time
    _, many = idx.search(queries[:100], k=10, nprobe=nprobe, rerank=40, reorder=100)
    assert (many == got[100][0]).all()


def test_f16_uses_about_half_the_bytes_of_f32(small):
    base, _ = small
    b32 = built(base, storage="f32").bytes
    b16 = built(base, storage="f16").bytes
    b8 = built(base, storage="u8+f16").bytes
    n, d = base.shape
    assert b32 >= n * d * 4 and b16 >= n * d * 2
    assert 0.45 <= b16 / b32 <= 0.62, (b16, b32)
    assert b8 - b16 >= n * d  # the u8 codes on top of the f16 vectors


@pytest.mark.parametrize("storage", ["f32", "f16", "u8+f16"])
def test_save_then_load_gives_identical_results(small, tmp_path, storage):
    base, queries = small
    idx = vb.IvfIndex(base.shape[1], nlist=12, metric="cosine", storage=storage, seed=4)
    idx.train(base)
    idx.add(base, ids=np.arange(len(base), dtype=np.int64) * 7 + 3)
    path = tmp_path / "x.vdb"
    idx.save(path)
    back = vb.IvfIndex.load(str(path))
    for kw in ({"nprobe": 3}, {"nprobe": 12, "rerank": 0}):
        a = idx.search(queries, k=8, **kw)
        b = back.search(queries, k=8, **kw)
        np.testing.assert_array_equal(a[0], b[0])
        np.testing.assert_array_equal(a[1], b[1])
    assert (back.ntotal, back.nlist, back.metric, back.storage, back.bytes, back.seed) == (
        idx.ntotal, idx.nlist, idx.metric, idx.storage, idx.bytes, idx.seed)
    assert set(np.unique(a[1])) <= set(range(3, 7 * len(base) + 3, 7))


def test_load_refuses_truncated_foreign_and_damaged_files(small, tmp_path):
    base, _ = small
    idx = built(base)
    good = tmp_path / "good.vdb"
    idx.save(good)
    raw = good.read_bytes()
    bad = tmp_path / "bad.vdb"
    cases = {
        "truncated": raw[: len(raw) // 2],
        "empty": b"",
        "foreign": b"\x89HDF\r\n\x1a\n" + bytes(100),
        "flipped": raw[:100] + bytes([raw[100] ^ 1]) + raw[101:],
    }
    for name, content in cases.items():
        bad.write_bytes(content)
        with pytest.raises(vb.CorruptFile) as e:
            vb.IvfIndex.load(bad)
        assert isinstance(e.value, OSError) and isinstance(e.value, vb.VdbError)
        assert str(bad) in str(e.value), name
    with pytest.raises(FileNotFoundError):
        vb.IvfIndex.load(tmp_path / "missing.vdb")
    # A failed save does not touch an existing file.
    with pytest.raises(OSError):
        idx.save(tmp_path / "no-such-dir" / "x.vdb")
    assert good.read_bytes() == raw


def test_add_with_ids_ties_and_padding():
    # Duplicated vectors: equal distances, so the order is by id.
    x = np.repeat(np.eye(4, dtype=np.float32), 3, axis=0)  # 12 rows, 3 copies of each
    idx = vb.IvfIndex(4, nlist=2, storage="f32")
    idx.train(x)
    idx.add(x, ids=np.array([50, 40, 30, 5, 6, 7, 9, 8, 100, 11, 12, 13]))
    d, i = idx.search(x[:1], k=3, nprobe=2)
    np.testing.assert_array_equal(i, [[30, 40, 50]])
    np.testing.assert_array_equal(d, [[0, 0, 0]])
    # Rows with fewer than k hits in the probed lists are padded.
    idx2 = vb.IvfIndex(4, nlist=4, storage="f32")
    idx2.train(x)
    idx2.add(x)
    d, i = idx2.search(x[:1], k=8, nprobe=1)
    assert (i[0, 3:] == -1).all() and np.isinf(d[0, 3:]).all() and (d[0, 3:] > 0).all()
    ipx = vb.IvfIndex(4, nlist=4, metric="ip", storage="f32")
    ipx.train(x)
    ipx.add(x)
    d, i = ipx.search(x[:1], k=8, nprobe=1)
    assert (i[0, 3:] == -1).all() and (d[0, 3:] == -np.inf).all()


def test_dtype_and_layout_rules(small):
    base, queries = small
    idx = built(base, storage="f32")
    ref = idx.search(queries, k=5, nprobe=4)
    for q in (queries.astype(np.float64), np.asfortranarray(queries), queries.tolist()):
        got = idx.search(q, k=5, nprobe=4)
        np.testing.assert_array_equal(got[1], ref[1])
    ints = np.rint(queries * 10).astype(np.int32)
    idx.search(ints, k=5)  # integers are converted too


BAD_SEARCHES = [
    ({"queries": np.zeros((2, 23), np.float32)}, "dim=24"),
    ({"queries": np.zeros(24, np.float32)}, "2-D"),
    ({"queries": np.full((1, 24), np.nan, np.float32)}, "NaN"),
    ({"queries": np.full((1, 24), np.inf, np.float32)}, "inf"),
    ({"queries": np.zeros((1, 24), bool)}, "dtype bool"),
    ({"queries": np.zeros((1, 24), complex)}, "dtype complex"),
    ({"queries": np.array([["x"] * 24])}, "dtype"),
    ({"k": 0}, "k=0"),
    ({"k": -3}, "k=-3"),
    ({"k": 3001}, "k=3001"),
    ({"nprobe": 0}, "nprobe=0"),
    ({"nprobe": 17}, "nprobe=17"),
    ({"rerank": 5}, "rerank=5"),
    ({"reorder": 5}, "reorder=5"),
    ({"reorder": -1}, "reorder=-1"),
    ({"probe_ratio": 0.5}, "probe_ratio=0.5"),
    ({"probe_ratio": -2.0}, "probe_ratio=-2"),
    ({"probe_ratio": float("nan")}, "probe_ratio=NaN"),
    ({"probe_ratio": float("inf")}, "probe_ratio=inf"),
    ({"threads": 0}, "threads=0"),
]


@pytest.mark.parametrize("kwargs,needle", BAD_SEARCHES, ids=[n for _, n in BAD_SEARCHES])
def test_bad_search_inputs_raise_invalid_input(small, kwargs, needle):
    base, queries = small
    idx = built(base)
    before = idx.search(queries[:3], k=10)
    args = {"queries": queries[:1], "k": 10}
    args.update(kwargs)
    with pytest.raises(vb.InvalidInput) as e:
        idx.search(args.pop("queries"), **args)
    assert isinstance(e.value, ValueError)
    assert needle in str(e.value), str(e.value)
    after = idx.search(queries[:3], k=10)
    np.testing.assert_array_equal(before[1], after[1])


def test_probe_ratio_probes_fewer_lists_and_a_wide_one_changes_nothing(small):
    base, queries = small
    idx = built(base)
    plain = idx.search(queries, k=10, nprobe=12)
    assert idx.last_search_stats()["lists_probed"] == 12 * len(queries)
    wide = idx.search(queries, k=10, nprobe=12, probe_ratio=1e6)
    for a, b in zip(plain, wide):
        np.testing.assert_array_equal(a, b)
    idx.search(queries, k=10, nprobe=12, probe_ratio=1.0)  # the nearest list, raised to nprobe/4
    assert idx.last_search_stats()["lists_probed"] == 3 * len(queries)
    _, ids = idx.search(queries, k=10, nprobe=12, probe_ratio=1.3)
    assert 3 * len(queries) < idx.last_search_stats()["lists_probed"] < 12 * len(queries)
    # one query per call probes the lists of the same query in a batch
    for i in range(0, len(queries), 9):
        np.testing.assert_array_equal(idx.search(queries[i:i + 1], k=10, nprobe=12, probe_ratio=1.3)[1][0], ids[i])
    with pytest.raises(TypeError):
        idx.search(queries[:1], k=10, probe_ratio="wide")
    ip = built(base, metric="ip")
    with pytest.raises(vb.InvalidInput, match="'ip'"):
        ip.search(queries[:1], k=10, probe_ratio=1.2)
    ip.search(queries[:1], k=10, probe_ratio=0)  # 0 is off, on every metric


def test_bad_build_inputs_leave_the_index_unchanged(small):
    base, queries = small
    idx = vb.IvfIndex(24, nlist=16)
    with pytest.raises(vb.NotReady, match="train"):
        idx.add(base)
    with pytest.raises(vb.NotReady, match="train"):
        idx.search(queries)
    with pytest.raises(vb.InvalidInput, match="16 training vectors"):
        idx.train(base[:10])
    assert not idx.is_trained and idx.nlist == 16
    idx.train(base)
    idx.add(base)
    state = (idx.ntotal, idx.bytes, idx.list_sizes())
    bad = base[:5].copy()
    bad[2, 7] = np.nan
    for call, needle in [
        (lambda: idx.add(bad), "row 2, column 7"),
        (lambda: idx.add(base[:5, :10]), "dim=24"),
        (lambda: idx.add(base[:5], ids=[1, 2]), "ids"),
        (lambda: idx.add(base[:2], ids=[1, -1]), "negative"),
        (lambda: idx.add(base[:2], ids=[1.5, 2.0]), "integers"),
        (lambda: idx.train(base), "already holds"),
        (lambda: vb.IvfIndex(24, metric="hamming"), "metric"),
        (lambda: vb.IvfIndex(24, storage="pq"), "storage"),
        (lambda: vb.IvfIndex(0), "dim"),
        (lambda: vb.IvfIndex(24, nlist=0), "nlist"),
        (lambda: vb.FlatIndex(24, metric="L1"), "metric"),
    ]:
        with pytest.raises(vb.InvalidInput, match=needle):
            call()
    assert (idx.ntotal, idx.bytes, idx.list_sizes()) == state
    assert idx.search(queries[:2], k=3)[1].shape == (2, 3)


def test_properties_and_repr(small):
    base, _ = small
    idx = vb.IvfIndex(24, metric="ip", storage="f16", seed=11)
    assert idx.nlist is None and not idx.is_trained and idx.ntotal == 0 and idx.bytes == 0
    idx.train(base)
    assert idx.nlist == round(4 * np.sqrt(len(base))) and idx.is_trained
    idx.add(base)
    assert (idx.ntotal, idx.dim, idx.metric, idx.storage, idx.seed, len(idx)) == (3000, 24, "ip", "f16", 11, 3000)
    assert sum(idx.list_sizes()) == 3000 and min(idx.list_sizes()) >= 0
    assert "IvfIndex(dim=24" in repr(idx) and "f16" in repr(idx)
    f = vb.FlatIndex(24, metric="cosine")
    f.add(base)
    assert (f.ntotal, f.dim, f.metric, f.bytes, f.is_trained) == (3000, 24, "cosine", 3000 * 24 * 4, True)
    assert f.last_search_stats() is None
    f.search(base[:3], k=2)
    assert f.last_search_stats()["nq"] == 3
    assert isinstance(rv.simd_level(), str) and "scalar" in rv.available_simd_levels()


def test_seed_decides_the_index(small):
    base, queries = small
    a = built(base, seed=1).search(queries, k=10, nprobe=2)
    b = built(base, seed=1).search(queries, k=10, nprobe=2)
    np.testing.assert_array_equal(a[1], b[1])
    c = built(base, seed=2).search(queries, k=10, nprobe=2)
    assert not np.array_equal(a[1], c[1])


def test_u8_codes_are_lossless_on_integer_data():
    # SIFT-like integer vectors whose ranges fit in 256 levels get step-1 codes: the u8
    # prescore alone (rerank=0) is then the exact L2 scan.
    base, queries = synth_sift(4_000, 50, seed=8)
    queries = np.clip(queries, base.min(0), base.max(0))  # inside the trained range
    flat = vb.FlatIndex(128)
    flat.add(base)
    fd, fi = flat.search(queries, k=10)
    idx = vb.IvfIndex(128, nlist=16, storage="u8+f16")
    idx.train(base)
    idx.add(base)
    d, i = idx.search(queries, k=10, nprobe=16, rerank=0)
    np.testing.assert_array_equal(i, fi)
    np.testing.assert_array_equal(d, fd)


def test_default_rerank_is_skipped_only_where_the_codes_are_exact(tmp_path):
    # On exact (integer, step-1) codes the u8 distance of an exactly coded query is its f16
    # distance, so the default search skips the rerank and must return what rerank=64 returns.
    base, queries = synth_sift(4_000, 60, seed=8)
    inside = np.clip(queries, base.min(0), base.max(0))
    outside = inside.copy()
    outside[:20, 0] = base[:, 0].min() + 300  # past the 256 codes: clipped, must be reranked
    outside[20:40, 1] += 0.25  # rounded codes: inexact, must be reranked
    idx = vb.IvfIndex(128, nlist=16, storage="u8+f16")
    idx.train(base)
    idx.add(base)
    for qs, reranked in ((inside, 0), (outside, 40 * 64)):
        d, i = idx.search(qs, k=10, nprobe=4)
        assert idx.last_search_stats()["candidates_reranked"] == reranked
        d64, i64 = idx.search(qs, k=10, nprobe=4, rerank=64)
        np.testing.assert_array_equal(i, i64)
        np.testing.assert_allclose(d, d64, rtol=1e-6)
    # The property is derived again on load.
    idx.save(tmp_path / "exact.vdb")
    again = vb.IvfIndex.load(tmp_path / "exact.vdb")
    again.search(inside, k=10, nprobe=4)
    assert again.last_search_stats()["candidates_reranked"] == 0
    # One fractional vector added makes the codes inexact: every default query is reranked.
    idx.add(base[:1] + 0.5)
    idx.search(inside, k=10, nprobe=4)
    assert idx.last_search_stats()["candidates_reranked"] == len(inside) * 64
    # Float data: inexact codes, the default reranks.
    fbase, fq = synth_float(2_000, 10, dim=16, seed=1)
    f = vb.IvfIndex(16, nlist=8, storage="u8+f16")
    f.train(fbase)
    f.add(fbase)
    f.search(fq, k=10, nprobe=2)
    assert f.last_search_stats()["candidates_reranked"] == len(fq) * 64


def test_default_nprobe_grows_with_nlist():
    # 32 lists, or 1.6% of nlist when that is more (SIFT-1M's 4000 lists: 64).
    base, queries = synth_float(4_200, 20, dim=4, seed=2)
    for nlist, expected in ((10, 10), (1000, 32), (4000, 64)):
        idx = vb.IvfIndex(4, nlist=nlist, storage="f32")
        idx.train(base[:max(nlist, 1000)])
        idx.add(base)
        d, i = idx.search(queries, k=5)
        assert idx.last_search_stats()["lists_probed"] == expected * len(queries)
        np.testing.assert_array_equal(i, idx.search(queries, k=5, nprobe=expected)[1])


def test_the_shared_ivf_defaults_are_what_an_index_does(small):
    """vdbbench.common's nlist and rerank rule (what sweeps and the faiss peers use before any
    index exists) are the engine's: the nlist an index picks, the refusal a search gives."""
    from vdbbench.common import check_rerank, default_nlist

    base, queries = small
    for n in (1, 10, 3_000):
        idx = vb.IvfIndex(base.shape[1], storage="f32")
        idx.train(base[:n])
        assert idx.nlist == default_nlist(n), n
    assert check_rerank([0, 10, 40], 10) == (0, 10, 40)
    with pytest.raises(ValueError) as rule:
        check_rerank([0, 5], 10)
    with pytest.raises(vb.InvalidInput) as search:
        built(base).search(queries[:1], k=10, rerank=5)
    assert str(rule.value) == str(search.value)


def test_rerank_and_reorder_above_ntotal_mean_every_candidate(small):
    # A rerank or reorder larger than the index is "all of them", not a buffer of that size:
    # 2**62 used to abort the search with a capacity-overflow panic.
    base, queries = small
    idx = built(base)
    ref = idx.search(queries, k=10, nprobe=16, rerank=len(base))
    for huge in (len(base) + 1, 10**7, 2**62):
        got = idx.search(queries, k=10, nprobe=16, rerank=huge)
        np.testing.assert_array_equal(got[1], ref[1])
    ref = idx.search(queries[:3], k=10, nprobe=16, reorder=len(base))
    for huge in (len(base) + 1, 2**62):
        got = idx.search(queries[:3], k=10, nprobe=16, reorder=huge)
        np.testing.assert_array_equal(got[1], ref[1])


def test_a_misaligned_float32_view_is_copied_not_refused(small):
    # np.frombuffer at an odd offset: float32, C-contiguous, but not aligned for f32. It used
    # to raise TypeError ("not contiguous or is misaligned") from train, add and search.
    base, queries = small

    def misaligned(a):
        out = np.frombuffer(b"\0" + a.tobytes(), dtype=a.dtype, offset=1, count=a.size)
        out = out.reshape(a.shape)
        assert not out.flags.aligned and out.flags.c_contiguous
        return out

    idx = vb.IvfIndex(24, nlist=16, storage="f32")
    idx.train(misaligned(base))
    idx.add(misaligned(base), ids=misaligned(np.arange(len(base), dtype=np.int64) * 2))
    ref = built(base, storage="f32")
    d, i = idx.search(misaligned(queries), k=5, nprobe=4)
    rd, ri = ref.search(queries, k=5, nprobe=4)
    np.testing.assert_array_equal(i, ri * 2)
    np.testing.assert_array_equal(d, rd)
    flat = vb.FlatIndex(24)
    flat.add(misaligned(base))
    np.testing.assert_array_equal(flat.search(misaligned(queries), k=3)[1], flat.search(queries, k=3)[1])


def test_probe_ratio_is_judged_before_its_cast_to_f32(small):
    # The f64 -> f32 cast used to decide: 1e-300 became 0 (silently off), 0.99999999 became
    # 1 (accepted, though below 1), a finite 1e300 became inf (refused as "probe_ratio=inf").
    base, queries = small
    idx = built(base)
    for below in (1e-300, 0.99999999, -1e-300):
        with pytest.raises(vb.InvalidInput, match=f"probe_ratio={below!r}: expected"):
            idx.search(queries, k=10, nprobe=12, probe_ratio=below)
    plain = idx.search(queries, k=10, nprobe=12)
    wide = idx.search(queries, k=10, nprobe=12, probe_ratio=1e300)
    np.testing.assert_array_equal(plain[1], wide[1])


@pytest.mark.parametrize("storage", ["f16", "u8+f16"])
def test_values_beyond_f16_are_refused_where_vectors_are_kept_as_f16(small, storage):
    # |x| >= 65520 rounds to an infinite f16: every distance to such a vector was inf and
    # the search returned arbitrary ids (recall@10 ~0.002), silently.
    base, queries = small
    big = base * 1e5
    idx = vb.IvfIndex(24, nlist=16, storage=storage)
    idx.train(base)
    with pytest.raises(vb.InvalidInput, match="65504") as e:
        idx.add(big)
    assert "row 0" in str(e.value) and "'f32'" in str(e.value)
    assert idx.ntotal == 0
    fits = base * (65504 / np.abs(base).max())  # the largest f16 value still fits
    idx.add(fits)
    f32 = built(base, storage="f32")  # f32 storage keeps them
    f32.add(big)
    for metric in ("ip", "cosine"):  # cosine stores the normalised rows: no limit
        ix = vb.IvfIndex(24, nlist=16, metric=metric, storage=storage)
        ix.train(base)
        if metric == "ip":
            with pytest.raises(vb.InvalidInput, match="65504"):
                ix.add(big)
        else:
            ix.add(big)
            flat = vb.FlatIndex(24, metric=metric)
            flat.add(big)
            _, got = ix.search(big[:5], k=1, nprobe=16)
            np.testing.assert_array_equal(got, flat.search(big[:5], k=1)[1])


@pytest.mark.parametrize("metric", ["l2", "ip"])
def test_training_values_beyond_f16_are_refused_for_every_storage(small, metric):
    # The centroids are kept as f16 values whatever the storage: trained on |x| >= 65520
    # they were infinities, and an "f32" index put every vector in one list ("l2": a full
    # scan per query) or probed the wrong lists ("ip": recall@10 0.79 at nprobe 1 of 20).
    base, _ = small
    for storage in ("f32", "f16", "u8+f16"):
        idx = vb.IvfIndex(24, nlist=16, metric=metric, storage=storage)
        with pytest.raises(vb.InvalidInput, match="centroids.*65504"):
            idx.train(base * 1e5)
        assert not idx.is_trained
    cos = vb.IvfIndex(24, nlist=16, metric="cosine", storage="f32")
    cos.train(base * 1e5)  # unit rows
    assert cos.is_trained


@pytest.mark.parametrize("scale", [1e20, 1e-40])
def test_cosine_does_not_depend_on_the_length_even_beyond_f32_squares(small, scale):
    # The norm was summed from f32 squares: components ~1e20 overflow them (inf norm) and
    # ~1e-40 underflow them (0 norm), so such rows were normalised to zeros and every
    # similarity was 0 (ids in index order), in FlatIndex and IvfIndex alike.
    base, queries = small
    unit = base / np.linalg.norm(base, axis=1, keepdims=True)
    want = np.argsort(-(queries @ unit.T), axis=1, kind="stable")[:, :5]
    scaled = (base * np.float32(scale)).astype(np.float32)
    qs = (queries * np.float32(scale)).astype(np.float32)
    flat = vb.FlatIndex(24, metric="cosine")
    flat.add(scaled)
    d, i = flat.search(qs, k=5)
    np.testing.assert_array_equal(i, want)
    assert (d > 0.5).all()
    idx = vb.IvfIndex(24, nlist=16, metric="cosine", storage="f32")
    idx.train(scaled)
    idx.add(scaled)
    np.testing.assert_array_equal(idx.search(qs, k=5, nprobe=16)[1], want)


@pytest.mark.parametrize("metric,storage,dim", [("cosine", "u8+f16", 24), ("ip", "u8+f16", 24),
                                                ("l2", "f16", 24), ("l2", "u8+f16", 22)])
def test_reorder_on_an_index_without_the_prefilter_is_refused(metric, storage, dim):
    # The 4-bit prefilter exists for "l2" over "u8+f16" at a dim that is a multiple of 4; any
    # other index used to drop reorder without a word, so a caller asking for the prefilter
    # timed the u8 scan under its name.
    base, queries = synth_float(2_000, 5, dim=dim, seed=4)
    idx = vb.IvfIndex(dim, nlist=16, metric=metric, storage=storage, seed=0)
    idx.train(base)
    idx.add(base)
    assert not rv.supports_reorder(dim, metric, storage)
    needle = re.escape(f"'{metric}' '{storage}' at dim {dim}")
    with pytest.raises(vb.InvalidInput, match="reorder=40: the 4-bit prefilter .* " + needle):
        idx.search(queries, k=10, nprobe=4, reorder=40)
    idx.search(queries, k=10, nprobe=4, reorder=0)  # off is always fine


def test_supports_reorder_is_the_rule_search_applies():
    assert rv.supports_reorder(128, "l2", "u8+f16")
    assert rv.supports_reorder(8, "l2", "u8+f16") and rv.supports_reorder(1032, "l2", "u8+f16")
    assert not rv.supports_reorder(1036, "l2", "u8+f16") and not rv.supports_reorder(4, "l2", "u8+f16")
    base, queries = synth_float(2_000, 5, dim=24, seed=4)
    idx = vb.IvfIndex(24, nlist=16, metric="l2", storage="u8+f16", seed=0)
    idx.train(base)
    idx.add(base)
    idx.search(queries, k=10, nprobe=4, reorder=40)
    with pytest.raises(vb.InvalidInput, match="unknown metric"):
        rv.supports_reorder(24, "hamming", "u8+f16")
    with pytest.raises(vb.InvalidInput, match="unknown storage"):
        rv.supports_reorder(24, "l2", "u4")
