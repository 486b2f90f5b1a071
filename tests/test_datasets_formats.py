"""TEXMEX and ann-benchmarks HDF5 files: round trips, files written by other programs, damaged files."""

from __future__ import annotations

import h5py
import numpy as np
import pytest

from vdbbench.datasets import DatasetError, load_dataset
from vdbbench.datasets.formats import read_ann_hdf5, read_vecs, write_ann_hdf5, write_vecs
from vdbbench.datasets.groundtruth import compute_groundtruth


def _brute_l2(base, queries, k):
    d = np.sqrt(((queries[:, None, :].astype(np.float64) - base[None].astype(np.float64)) ** 2).sum(-1))
    ids = np.argsort(d, axis=1, kind="stable")[:, :k]
    return ids, np.take_along_axis(d, ids, axis=1)


@pytest.mark.parametrize("suffix,dtype", [(".fvecs", np.float32), (".ivecs", np.int32), (".bvecs", np.uint8)])
def test_vecs_round_trip(tmp_path, suffix, dtype):
    rng = np.random.default_rng(1)
    a = (rng.random((37, 13)) * 200).astype(dtype)
    path = write_vecs(tmp_path / f"x{suffix}", a)
    assert path.stat().st_size == 37 * (4 + 13 * np.dtype(dtype).itemsize)
    back = read_vecs(path)
    assert back.shape == (37, 13) and back.dtype == dtype
    np.testing.assert_array_equal(back, a)
    np.testing.assert_array_equal(read_vecs(path, mmap=False), a)


def test_fvecs_layout_is_texmex(tmp_path):
    """Bytes as the TEXMEX spec lays them out: int32 dim, then the components, per record."""
    a = np.array([[1.5, -2.0], [3.0, 4.25]], dtype=np.float32)
    raw = write_vecs(tmp_path / "a.fvecs", a).read_bytes()
    expected = b"".join(np.int32(2).tobytes() + row.tobytes() for row in a)
    assert raw == expected


def test_truncated_fvecs_is_refused(tmp_path):
    path = write_vecs(tmp_path / "t.fvecs", np.ones((10, 8), np.float32))
    path.write_bytes(path.read_bytes()[:-3])
    with pytest.raises(DatasetError, match=r"t\.fvecs.*not a multiple of the record size"):
        read_vecs(path)


def test_inconsistent_record_dims_are_refused(tmp_path):
    path = write_vecs(tmp_path / "d.ivecs", np.ones((4, 3), np.int32))
    raw = bytearray(path.read_bytes())
    raw[2 * 16 : 2 * 16 + 4] = np.int32(7).tobytes()  # record 2 claims dimension 7
    path.write_bytes(bytes(raw))
    with pytest.raises(DatasetError, match=r"d\.ivecs: record 2 declares dimension 7"):
        read_vecs(path)


def test_foreign_file_is_not_texmex(tmp_path):
    path = tmp_path / "junk.fvecs"
    path.write_bytes(b"\xff\xff\xff\xff" + b"\x00" * 60)
    with pytest.raises(DatasetError, match="junk.fvecs"):
        read_vecs(path)
    with pytest.raises(DatasetError, match="expected .fvecs, .ivecs or .bvecs"):
        read_vecs(tmp_path / "x.npy")


def _write_foreign_hdf5(path, train, test, distance="euclidean", neighbors=None, distances=None):
    """The ann-benchmarks layout as its own code writes it (h5py directly, int32 neighbors)."""
    with h5py.File(path, "w") as f:
        f.attrs["type"] = "dense"
        f.attrs["distance"] = distance
        f.attrs["dimension"] = train.shape[1]
        f.attrs["point_type"] = "float"
        f.create_dataset("train", data=train)
        f.create_dataset("test", data=test)
        if neighbors is not None:
            f.create_dataset("neighbors", data=neighbors.astype(np.int32))
        if distances is not None:
            f.create_dataset("distances", data=distances)
    return path


def test_foreign_ann_hdf5_loads_with_shapes_metric_and_neighbors(tmp_path, data_dir):
    rng = np.random.default_rng(2)
    train = rng.standard_normal((500, 16)).astype(np.float32)
    test = rng.standard_normal((20, 16)).astype(np.float32)
    ids, dist = _brute_l2(train, test, 100)
    path = _write_foreign_hdf5(tmp_path / "foreign-16-euclidean.hdf5", train, test, "euclidean", ids, dist.astype(np.float32))
    ds = load_dataset(str(path))
    assert (ds.n, ds.dim, ds.nq, ds.metric) == (500, 16, 20, "l2")
    assert ds.neighbors.dtype == np.int64 and ds.neighbors.shape == (20, 100)
    np.testing.assert_array_equal(ds.neighbors, ids)
    assert ds.train.dtype == np.float32 and ds.train.flags.c_contiguous
    assert not ds.synthetic and len(ds.sha256) == 64


def test_angular_maps_to_cosine_and_dot_to_ip(tmp_path):
    rng = np.random.default_rng(3)
    train, test = rng.random((50, 4)).astype(np.float32), rng.random((5, 4)).astype(np.float32)
    assert read_ann_hdf5(_write_foreign_hdf5(tmp_path / "a.hdf5", train, test, "angular")).metric == "cosine"
    assert read_ann_hdf5(_write_foreign_hdf5(tmp_path / "d.hdf5", train, test, "dot")).metric == "ip"
    with pytest.raises(DatasetError, match="distance='hamming'"):
        read_ann_hdf5(_write_foreign_hdf5(tmp_path / "h.hdf5", train, test, "hamming"))


def test_hdf5_round_trip(tmp_path, data_dir):
    ds = load_dataset("synth-float-2k")
    back = read_ann_hdf5(write_ann_hdf5(tmp_path / "s.hdf5", ds))
    np.testing.assert_array_equal(back.train, ds.train)
    np.testing.assert_array_equal(back.neighbors, ds.neighbors)
    np.testing.assert_allclose(back.distances, ds.distances)
    assert back.synthetic and back.metric == ds.metric


def test_hdf5_without_neighbors_gets_exact_ground_truth(tmp_path, data_dir):
    rng = np.random.default_rng(4)
    train = rng.standard_normal((800, 8)).astype(np.float32)
    test = rng.standard_normal((30, 8)).astype(np.float32)
    ds = load_dataset(str(_write_foreign_hdf5(tmp_path / "nogt.hdf5", train, test)))
    ids, dist = _brute_l2(train, test, 100)
    np.testing.assert_array_equal(ds.neighbors, ids)
    np.testing.assert_allclose(ds.distances, dist, rtol=1e-5)


@pytest.mark.parametrize(
    "damage,message",
    [
        ("dim_mismatch", "dimension mismatch between train \\(8\\) and test \\(9\\)"),
        ("dtype", "train has dtype .*expected a numeric type"),
        ("short_neighbors", "neighbors has shape \\(5, 3\\); at least 10 columns"),
        ("missing_test", "missing dataset\\(s\\) test"),
        ("not_hdf5", "not an HDF5 file"),
        ("truncated", "not an HDF5 file|cannot read HDF5 file"),
        ("float_neighbors", "neighbors has dtype float"),
    ],
)
def test_bad_hdf5_files_name_the_file_and_problem(tmp_path, data_dir, damage, message):
    path = tmp_path / f"bad-{damage}.hdf5"
    rng = np.random.default_rng(5)
    train, test = rng.random((40, 8)).astype(np.float32), rng.random((5, 8)).astype(np.float32)
    if damage == "dim_mismatch":
        _write_foreign_hdf5(path, train, rng.random((5, 9)).astype(np.float32))
    elif damage == "dtype":
        with h5py.File(path, "w") as f:
            f.create_dataset("train", data=np.array([[b"ab", b"cd"]]))
            f.create_dataset("test", data=test)
    elif damage == "short_neighbors":
        _write_foreign_hdf5(path, train, test, neighbors=np.zeros((5, 3), np.int32), distances=np.zeros((5, 3), np.float32))
    elif damage == "missing_test":
        with h5py.File(path, "w") as f:
            f.create_dataset("train", data=train)
    elif damage == "not_hdf5":
        path.write_text("train,test\n1,2\n")
    elif damage == "truncated":
        _write_foreign_hdf5(tmp_path / "ok.hdf5", train, test)
        path.write_bytes((tmp_path / "ok.hdf5").read_bytes()[:1500])
    elif damage == "float_neighbors":
        _write_foreign_hdf5(path, train, test)
        with h5py.File(path, "a") as f:
            f.create_dataset("neighbors", data=np.zeros((5, 10), np.float32))
    with pytest.raises(DatasetError, match=message) as err:
        load_dataset(str(path))
    assert path.name in str(err.value)


@pytest.mark.parametrize("damage,message", [("reversed", "distances of query 0 are not in increasing order"),
                                            ("nan", "distances hold NaN or infinite values")])
def test_ground_truth_distances_out_of_order_are_refused(tmp_path, data_dir, damage, message):
    # recall counts a returned id within the 10th true distance: rows stored farthest first (or a
    # NaN) moved that bar, and any index, even one returning poor ids, was credited recall 1.0
    rng = np.random.default_rng(6)
    train, test = rng.random((200, 8)).astype(np.float32), rng.random((5, 8)).astype(np.float32)
    ids, dist = _brute_l2(train, test, 20)
    dist = dist.astype(np.float32)
    if damage == "reversed":
        dist = np.ascontiguousarray(dist[:, ::-1])
    else:
        dist[3, 7] = np.nan
    path = _write_foreign_hdf5(tmp_path / f"gt-{damage}.hdf5", train, test, neighbors=ids, distances=dist)
    with pytest.raises(DatasetError, match=message):
        load_dataset(str(path))
    # ties and float32 rounding of correctly ordered rows still load
    tied = np.sort(_brute_l2(train, test, 20)[1].astype(np.float32), axis=1)
    tied[:, 5] = tied[:, 4]
    load_dataset(str(_write_foreign_hdf5(tmp_path / "ok.hdf5", train, test, neighbors=ids, distances=tied)))


def test_texmex_folder_with_siblings(tmp_path, data_dir):
    rng = np.random.default_rng(6)
    base = (rng.random((300, 12)) * 255).round().astype(np.uint8)
    queries = (rng.random((7, 12)) * 255).round().astype(np.uint8)
    write_vecs(tmp_path / "toy_base.bvecs", base)
    write_vecs(tmp_path / "toy_query.bvecs", queries)
    ids, _ = _brute_l2(base.astype(np.float32), queries.astype(np.float32), 20)
    write_vecs(tmp_path / "toy_groundtruth.ivecs", ids.astype(np.int32))
    for target in (tmp_path / "toy_base.bvecs", tmp_path):  # the base file, or the folder holding it
        ds = load_dataset(str(target))
        assert (ds.n, ds.dim, ds.nq, ds.metric, ds.name) == (300, 12, 7, "l2", "toy")
        np.testing.assert_array_equal(ds.train, base.astype(np.float32))
        np.testing.assert_array_equal(ds.neighbors, ids)  # TEXMEX ids, distances recomputed
        ref = np.sqrt(((queries[:, None].astype(np.float64) - base[ids].astype(np.float64)) ** 2).sum(-1))
        np.testing.assert_allclose(ds.distances, ref, rtol=1e-6)


def test_texmex_base_without_query_file_says_the_convention(tmp_path, data_dir):
    write_vecs(tmp_path / "lonely_base.fvecs", np.ones((5, 3), np.float32))
    with pytest.raises(DatasetError, match="lonely_query.fvecs"):
        load_dataset(str(tmp_path / "lonely_base.fvecs"))


def test_texmex_groundtruth_must_match_queries(tmp_path, data_dir):
    write_vecs(tmp_path / "g_base.fvecs", np.ones((50, 3), np.float32))
    write_vecs(tmp_path / "g_query.fvecs", np.ones((4, 3), np.float32))
    write_vecs(tmp_path / "g_groundtruth.ivecs", np.zeros((3, 10), np.int32))
    with pytest.raises(DatasetError, match="g_groundtruth.ivecs: 3 rows of ground truth for 4 queries"):
        load_dataset(str(tmp_path / "g_base.fvecs"))


def test_ground_truth_of_written_file_matches_compute(tmp_path, data_dir):
    """An HDF5 file written with our ground truth reloads with identical neighbours."""
    rng = np.random.default_rng(7)
    train = rng.standard_normal((400, 6)).astype(np.float32)
    test = rng.standard_normal((9, 6)).astype(np.float32)
    ids, dist = compute_groundtruth(train, test, "l2", k=50)
    path = _write_foreign_hdf5(tmp_path / "w.hdf5", train, test, neighbors=ids, distances=dist)
    np.testing.assert_array_equal(load_dataset(str(path)).neighbors, ids)
