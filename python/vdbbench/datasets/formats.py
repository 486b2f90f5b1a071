"""Readers and writers for ann-benchmarks HDF5 and TEXMEX fvecs/ivecs/bvecs files."""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np

from vdbbench.datasets.base import Dataset, DatasetError, validate
from vdbbench.datasets.structure import (  # noqa: F401 - inspect_* re-exported: formats is where readers look
    ANN_TO_METRIC,
    METRIC_TO_ANN,
    ann_layout,
    inspect_ann_hdf5,
    inspect_texmex_tar,
    vecs_dtype,
)

def read_vecs(path: str | os.PathLike, mmap: bool = True) -> np.ndarray:
    """Read a .fvecs/.ivecs/.bvecs file as an (n, dim) array, memory-mapped by default.

    The file length must be a multiple of the record size and every record must carry the same
    dimension; otherwise DatasetError names the file and the first bad record.
    """
    path = Path(path)
    dtype = vecs_dtype(path)
    size = path.stat().st_size
    if size < 4:
        raise DatasetError(f"{path}: {size} bytes, too short for a TEXMEX record (4-byte dimension header)")
    with open(path, "rb") as f:
        dim = int(np.frombuffer(f.read(4), dtype="<i4")[0])
    if dim <= 0 or dim > 1 << 20:
        raise DatasetError(f"{path}: first record declares dimension {dim}; expected 1..{1 << 20} (not a TEXMEX file?)")
    record = 4 + dim * dtype.itemsize
    if size % record:
        raise DatasetError(
            f"{path}: length {size} bytes is not a multiple of the record size {record} "
            f"(4 + {dim} x {dtype.itemsize}): the file is truncated or not {path.suffix}"
        )
    n = size // record
    rec_dtype = np.dtype([("dim", "<i4"), ("vec", dtype, (dim,))])
    if mmap:
        recs = np.memmap(path, dtype=rec_dtype, mode="r", shape=(n,))
    else:
        recs = np.fromfile(path, dtype=rec_dtype, count=n)
    dims = recs["dim"]
    bad = np.flatnonzero(dims != dim)
    if bad.size:
        raise DatasetError(
            f"{path}: record {bad[0]} declares dimension {dims[bad[0]]}, but record 0 declares {dim}; "
            f"all records must have the same dimension"
        )
    return recs["vec"]


def write_vecs(path: str | os.PathLike, array: np.ndarray) -> Path:
    """Write an (n, dim) array as .fvecs/.ivecs/.bvecs (chosen by the suffix)."""
    path = Path(path)
    dtype = vecs_dtype(path)
    a = np.asarray(array)
    if a.ndim != 2:
        raise DatasetError(f"{path}: can only write a 2-d array (n, dim), got shape {a.shape}")
    if dtype.kind in "iu" and a.size and not np.array_equal(a, np.rint(a)):
        raise DatasetError(f"{path}: {path.suffix} holds integers, but the array has fractional values")
    if dtype == np.uint8 and a.size and (a.min() < 0 or a.max() > 255):
        raise DatasetError(f"{path}: .bvecs holds bytes 0..255, got values {a.min()}..{a.max()}")
    recs = np.empty(a.shape[0], dtype=[("dim", "<i4"), ("vec", dtype, (a.shape[1],))])
    recs["dim"] = a.shape[1]
    recs["vec"] = a
    tmp = path.with_name(f"{path.name}.{os.getpid()}.tmp")  # per process: concurrent writers never share it
    try:
        recs.tofile(tmp)
        os.replace(tmp, path)
    except BaseException:
        tmp.unlink(missing_ok=True)  # a full disk or Ctrl-C leaves no half-written file behind
        raise
    return path


def to_float32(a: np.ndarray, block_rows: int = 1 << 16) -> np.ndarray:
    """C-contiguous float32 copy of a (possibly memory-mapped, strided) array, converted in blocks."""
    out = np.empty(a.shape, dtype=np.float32)
    with np.errstate(over="ignore"):  # values beyond float32 become inf, which `validate` refuses by name
        for start in range(0, a.shape[0], block_rows):
            out[start : start + block_rows] = a[start : start + block_rows]
    return out


def read_ann_hdf5(path: str | os.PathLike, name: str | None = None, k: int = 10) -> Dataset:
    """Load an ann-benchmarks HDF5 file (`train`, `test`, optional `neighbors`/`distances`)."""
    import h5py

    path = Path(path)
    if not h5py.is_hdf5(path):
        raise DatasetError(f"{path}: not an HDF5 file (expected the ann-benchmarks layout: train, test, neighbors, distances)")
    try:
        with h5py.File(path, "r") as f:
            layout = ann_layout(f, path, k)
            metric = layout["metric"]
            arrays = {}
            for key in ("train", "test"):
                a = f[key][()]
                arrays[key] = a if a.dtype == np.float32 and a.flags.c_contiguous else to_float32(a)
            synthetic = bool(f.attrs.get("vdbbench_synthetic", False))  # written by write_ann_hdf5
            neighbors = distances = None
            if layout["neighbors"] is not None:
                neighbors = f["neighbors"][()].astype(np.int64)
                if layout["distances"] is not None:
                    distances = np.asarray(f["distances"][()], dtype=np.float32)
    except OSError as exc:
        raise DatasetError(f"{path}: cannot read HDF5 file: {exc}") from exc
    ds = Dataset(
        name=name or path.stem,
        train=arrays["train"],
        test=arrays["test"],
        metric=metric,
        synthetic=synthetic,
        source=str(path),
    )
    if neighbors is not None:
        if neighbors.size and (neighbors.min() < 0 or neighbors.max() >= ds.n):
            raise DatasetError(f"{path}: neighbors hold ids outside 0..{ds.n - 1} (train has {ds.n} rows)")
        if distances is None:
            # Some writers store ids only: recompute exact distances from the vectors.
            from vdbbench.datasets.groundtruth import exact_distances

            distances = exact_distances(ds.train, ds.test, neighbors, metric)
        ds.neighbors, ds.distances = neighbors, distances
    return validate(ds, str(path), k=k)


def write_ann_hdf5(path: str | os.PathLike, ds: Dataset) -> Path:
    """Write ``ds`` in the ann-benchmarks layout (atomically: a temporary file, then a rename)."""
    import h5py

    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f"{path.name}.{os.getpid()}.tmp")  # per process: concurrent writers never share it
    try:
        with h5py.File(tmp, "w") as f:
            f.attrs["distance"] = METRIC_TO_ANN[ds.metric]
            f.attrs["dimension"] = ds.dim
            f.attrs["point_type"] = "float"
            f.attrs["vdbbench_name"] = ds.name
            f.attrs["vdbbench_synthetic"] = bool(ds.synthetic)
            f.create_dataset("train", data=ds.train)
            f.create_dataset("test", data=ds.test)
            if ds.neighbors is not None:
                f.create_dataset("neighbors", data=ds.neighbors.astype(np.int32))
                f.create_dataset("distances", data=ds.distances.astype(np.float32))
        os.replace(tmp, path)
    except BaseException as exc:
        tmp.unlink(missing_ok=True)  # a full disk or Ctrl-C leaves no half-written file behind
        if isinstance(exc, RuntimeError):  # h5py's close after a failed write (file size limit, full disk)
            raise OSError(f"cannot write {path}: {exc}") from exc
        raise
    return path
