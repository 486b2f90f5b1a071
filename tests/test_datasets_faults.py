"""Data set faults a user meets: malformed files, damaged caches, interrupted or failed writes,
read-only or full cache folders. Each is a clear error (or a recovery), never a traceback, a wrong
answer or a damaged file left to load later."""

from __future__ import annotations

import h5py
import numpy as np
import pytest

from vdbbench.cli import main
from vdbbench.datasets import DatasetError, load_dataset


def _hdf5(path, train, test, **extra):
    with h5py.File(path, "w") as f:
        f.attrs["distance"] = "euclidean"
        f.create_dataset("train", data=train)
        f.create_dataset("test", data=test)
        for key, value in extra.items():
            f.create_dataset(key, data=value)
    return path


@pytest.mark.parametrize(
    "damage,message",
    [
        # neighbours without distances: the ids were used to recompute distances before they were
        # checked, so IndexError / a broadcasting ValueError came out as a traceback
        ("ids_out_of_range", r"neighbors hold ids outside 0\.\.39"),
        ("rows_not_queries", r"neighbors has 7 rows for 5 queries"),
        ("text_distances", r"distances has dtype .*expected numbers"),
        ("text_dimension", r"attribute dimension='abc' is not an integer"),
        ("train_is_group", r"train is an HDF5 group"),
    ],
)
def test_malformed_hdf5_is_a_clear_error(tmp_path, data_dir, capsys, damage, message):
    rng = np.random.default_rng(0)
    train, test = rng.random((40, 8)).astype(np.float32), rng.random((5, 8)).astype(np.float32)
    path = tmp_path / f"bad-{damage}.hdf5"
    if damage == "ids_out_of_range":
        _hdf5(path, train, test, neighbors=np.full((5, 10), 500, np.int32))
    elif damage == "rows_not_queries":
        _hdf5(path, train, test, neighbors=np.zeros((7, 10), np.int32))
    elif damage == "text_distances":
        _hdf5(path, train, test, neighbors=np.zeros((5, 10), np.int32), distances=np.full((5, 10), b"a"))
    elif damage == "text_dimension":
        _hdf5(path, train, test)
        with h5py.File(path, "a") as f:
            f.attrs["dimension"] = "abc"
    elif damage == "train_is_group":
        with h5py.File(path, "w") as f:
            f.create_group("train")
            f.create_dataset("test", data=test)
    with pytest.raises(DatasetError, match=message) as err:
        load_dataset(str(path), progress=False)
    assert path.name in str(err.value)
    assert main(["datasets", "info", str(path)]) == 2  # usage error, no traceback
    assert path.name in capsys.readouterr().err


@pytest.mark.parametrize("damage", ["truncated", "flipped_byte"])
def test_damaged_groundtruth_cache_is_recomputed(tmp_path, data_dir, damage):
    # a cut or bit-flipped .npz raised zipfile.BadZipFile (not an OSError/ValueError), so the
    # load ended in a traceback instead of recomputing the entry as intended
    rng = np.random.default_rng(1)
    path = _hdf5(tmp_path / "plain.hdf5", rng.random((300, 8)).astype(np.float32), rng.random((6, 8)).astype(np.float32))
    first = load_dataset(str(path), progress=False)
    (cache,) = (data_dir / "groundtruth").glob("gt-*.npz")
    data = cache.read_bytes()
    cache.write_bytes(data[: len(data) // 2] if damage == "truncated" else data[:200] + bytes([data[200] ^ 1]) + data[201:])
    again = load_dataset(str(path), progress=False)
    assert again.extra["groundtruth"].startswith("computed")
    np.testing.assert_array_equal(again.neighbors, first.neighbors)
    assert load_dataset(str(path), progress=False).extra["groundtruth"].startswith("cached")  # rewritten whole
