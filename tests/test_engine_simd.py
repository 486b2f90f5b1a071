"""Engine results at every SIMD level this CPU has equal the scalar level's (within f16/f32
rounding), and VDBBENCH_SIMD caps the level."""

from __future__ import annotations

import os
import subprocess
import sys

import numpy as np
import pytest

rv = pytest.importorskip("vdbbench._rust_vdb")

import vdbbench as vb  # noqa: E402
from vdbbench.datasets.synth import synth_float, synth_sift  # noqa: E402

LEVELS = rv.available_simd_levels()


@pytest.fixture
def restore_level():
    yield
    rv.set_simd_level(None)


@pytest.fixture(scope="module")
def indexes():
    """Built once (at the default level), then searched at each level."""
    out = {}
    sift, sq = synth_sift(5_000, 60, seed=4, dim=65)  # odd dim: kernel tails run
    flt, fq = synth_float(5_000, 60, dim=37, seed=4)
    for name, (base, q) in {"sift": (sift, sq), "float": (flt, fq)}.items():
        for metric in ("l2", "ip"):
            for storage in ("f32", "f16", "u8+f16"):
                idx = vb.IvfIndex(base.shape[1], nlist=20, metric=metric, storage=storage)
                idx.train(base)
                idx.add(base)
                out[(name, metric, storage)] = (idx, q)
    return out


def search_all(indexes):
    return {key: idx.search(q, k=10, nprobe=5, rerank=30) for key, (idx, q) in indexes.items()}


@pytest.mark.parametrize("level", LEVELS)
def test_every_level_matches_scalar(indexes, level, restore_level):
    assert rv.set_simd_level("scalar") == "scalar"
    ref = search_all(indexes)
    assert rv.set_simd_level(level) == level and rv.simd_level() == level
    got = search_all(indexes)
    for key in ref:
        (d0, i0), (d1, i1) = ref[key], got[key]
        # Same neighbours; where a near-tie reorders two of them, the distances still agree.
        overlap = np.mean([len(set(a) & set(b)) / 10 for a, b in zip(i0, i1)])
        assert overlap >= 0.99, (key, overlap)
        np.testing.assert_allclose(d1, d0, rtol=2e-4, atol=1e-3, err_msg=str(key))


@pytest.mark.parametrize("level", LEVELS)
def test_u8_l2_batches_are_exact_at_every_level(indexes, level, restore_level):
    """A batch over u8 codes (l2) is integer arithmetic with the threshold test inside the
    kernel: every level returns the very same ids and distances as scalar, ties to the smaller
    id, -1 padding when the probed lists hold fewer than k, and the same rows as one query
    per call."""
    idx, q = indexes[("sift", "l2", "u8+f16")]
    rv.set_simd_level("scalar")
    ref = [idx.search(q, k=k, nprobe=nprobe, rerank=0) for k, nprobe in ((10, 5), (400, 1))]
    assert (ref[1][1] == -1).any()  # lists of ~250 rows: k=400 pads
    rv.set_simd_level(level)
    for (d0, i0), (k, nprobe) in zip(ref, ((10, 5), (400, 1))):
        d1, i1 = idx.search(q, k=k, nprobe=nprobe, rerank=0)
        np.testing.assert_array_equal(i1, i0)
        np.testing.assert_array_equal(d1, d0)
        for r in range(0, len(q), 7):
            ds, is_ = idx.search(q[r : r + 1], k=k, nprobe=nprobe, rerank=0)
            np.testing.assert_array_equal(is_[0], i0[r])
            np.testing.assert_array_equal(ds[0], d0[r])


def test_flat_every_level_matches_scalar(restore_level):
    base, q = synth_float(3_000, 30, dim=129, seed=1)
    f = vb.FlatIndex(129)
    f.add(base)
    rv.set_simd_level("scalar")
    d0, i0 = f.search(q, k=10)
    for level in LEVELS:
        rv.set_simd_level(level)
        d1, i1 = f.search(q, k=10)
        np.testing.assert_array_equal(i1, i0)
        np.testing.assert_allclose(d1, d0, rtol=1e-5)


def test_unknown_level_is_refused(restore_level):
    with pytest.raises(vb.InvalidInput, match="unknown SIMD level"):
        rv.set_simd_level("sse9")


def test_env_var_caps_the_level():
    code = "import vdbbench as vb; print(vb.simd_level())"
    env = dict(os.environ, VDBBENCH_SIMD="scalar")
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "scalar"


@pytest.mark.parametrize("level", LEVELS)
def test_single_query_scan_equals_batch_rows_at_every_level(indexes, level, restore_level):
    """A single u8 l2 query scans its lists in chunks with a prefetch cursor (its own path);
    its u8 top k (rerank 0) must equal the batch path's row, list sizes not multiples of 16."""
    rv.set_simd_level(level)
    idx, q = indexes[("sift", "l2", "u8+f16")]
    d, i = idx.search(q, k=10, nprobe=5, rerank=0)
    for r in range(q.shape[0]):
        d1, i1 = idx.search(q[r:r + 1], k=10, nprobe=5, rerank=0, threads=1)
        np.testing.assert_array_equal(i1[0], i[r])
        np.testing.assert_array_equal(d1[0], d[r])


def test_avx512_names_the_best_avx512_level_and_unknown_names_are_refused(restore_level):
    """"avx512" asks for the best AVX-512 table this CPU has (VNNI, AMX or neither); each finer
    level is its own name, so the VNNI path runs on a CPU with AMX; a CPU without AVX-512
    refuses them all by name."""
    avx512 = [lv for lv in LEVELS if lv.startswith("avx512")]
    for level in ("avx512bw", "avx512vnni", "avx512amx"):
        if level in LEVELS:
            assert rv.set_simd_level(level) == level
        else:
            with pytest.raises(vb.InvalidInput, match=f"SIMD level {level} is not available"):
                rv.set_simd_level(level)
    if avx512:
        assert rv.set_simd_level("avx512") == avx512[-1]
    else:
        with pytest.raises(vb.InvalidInput, match="not available on this CPU"):
            rv.set_simd_level("avx512")
    with pytest.raises(vb.InvalidInput, match='unknown SIMD level "sse9".*avx512vnni'):
        rv.set_simd_level("sse9")


def test_run_simd_caps_ours_and_faiss_and_records_it(tmp_path, monkeypatch):
    """`vdbbench run --simd scalar` runs our engine and faiss at their scalar levels, and each
    result records the level its library ran at; a level the CPU lacks is bad usage (exit 2)."""
    from vdbbench.cli import main
    import json

    monkeypatch.setenv("VDBBENCH_DATA", str(tmp_path / "data"))
    out = tmp_path / "out"
    args = ["run", "--index", "ivf", "--dataset", "synth-sift-5k", "--compare", "faiss-ivf-flat", "--threads", "1",
            "--mode", "batch", "--repeats", "1", "--out", str(out)]
    try:
        assert main([*args, "--simd", "scalar"]) == 0
        ours = json.loads((out / "ivf.json").read_text())["machine"]["simd"]
        theirs = json.loads((out / "faiss-ivf-flat.json").read_text())["machine"]["simd"]
        assert ours == "scalar"
        faiss = pytest.importorskip("faiss")
        assert theirs == ("NONE" if hasattr(faiss, "SIMDConfig") else None)
        if "avx512bw" not in LEVELS:
            assert main([*args, "--simd", "avx512bw"]) == 2
    finally:
        os.environ.pop("VDBBENCH_SIMD", None)
        faiss = sys.modules.get("faiss")
        if faiss is not None and hasattr(faiss, "SIMDConfig"):
            faiss.SIMDConfig.set_level(faiss.SIMDConfig.auto_detect_simd_level())
