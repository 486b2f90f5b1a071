"""What a data set file holds, read from its headers (HDF5) or in one pass (a TEXMEX tarball),
without loading its vectors: the checks a download passes before it is kept (registry.check_download)
and the layout check `formats.read_ann_hdf5` runs before it reads the arrays.

Imports only base and numpy (h5py, tarfile when called), so the registry can use it without an
import circle through formats and groundtruth.
"""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np

from vdbbench.datasets.base import DatasetError

# ann-benchmarks' `distance` attribute <-> our metric names.
ANN_TO_METRIC = {"euclidean": "l2", "angular": "cosine", "dot": "ip", "ip": "ip", "cosine": "cosine", "l2": "l2"}
METRIC_TO_ANN = {"l2": "euclidean", "cosine": "angular", "ip": "dot"}

# TEXMEX: every record is a little-endian int32 dimension followed by `dim` components.
_VECS = {".fvecs": np.dtype("<f4"), ".ivecs": np.dtype("<i4"), ".bvecs": np.dtype("u1")}


def vecs_dtype(path: Path) -> np.dtype:
    try:
        return _VECS[path.suffix.lower()]
    except KeyError:
        raise DatasetError(f"{path}: not a TEXMEX file (expected .fvecs, .ivecs or .bvecs)") from None


def ann_layout(f, path: Path, k: int) -> dict:
    """Check an open ann-benchmarks HDF5 file's layout from its headers alone (no array is read).

    Returns {"metric", "train", "test", "neighbors", "distances"}: the metric, and each dataset's
    (shape, dtype) or None when absent. Shared by `read_ann_hdf5` (before it reads the arrays) and
    `inspect_ann_hdf5` (a download's check before it is moved into place).
    """
    import h5py

    missing = [key for key in ("train", "test") if key not in f]
    if missing:
        raise DatasetError(
            f"{path}: missing dataset(s) {', '.join(missing)}; an ann-benchmarks file has "
            f"train, test, neighbors, distances (found: {', '.join(sorted(f.keys())) or 'nothing'})"
        )
    distance = f.attrs.get("distance", "euclidean")
    if isinstance(distance, bytes):
        distance = distance.decode()
    metric = ANN_TO_METRIC.get(str(distance).lower())
    if metric is None:
        raise DatasetError(
            f"{path}: attribute distance={distance!r} is not supported; expected "
            f"euclidean, angular or dot"
        )
    info = {"metric": metric, "neighbors": None, "distances": None}
    for key in ("train", "test"):
        ds = f[key]
        if not isinstance(ds, h5py.Dataset):
            raise DatasetError(f"{path}: {key} is an HDF5 group, not an array (n, dim)")
        if ds.ndim != 2:
            raise DatasetError(f"{path}: {key} must be 2-d (n, dim), got shape {ds.shape}")
        if ds.dtype.kind not in "fiu":
            raise DatasetError(f"{path}: {key} has dtype {ds.dtype}; expected a numeric type (float32)")
        info[key] = (tuple(ds.shape), ds.dtype)
    (_, dim), (_, test_dim) = info["train"][0], info["test"][0]
    if dim != test_dim:
        raise DatasetError(f"{path}: dimension mismatch between train ({dim}) and test ({test_dim})")
    dim_attr = f.attrs.get("dimension")
    try:
        dim_attr = None if dim_attr is None else int(dim_attr)
    except (TypeError, ValueError):
        raise DatasetError(f"{path}: attribute dimension={dim_attr!r} is not an integer") from None
    if dim_attr is not None and dim_attr != dim:
        raise DatasetError(f"{path}: attribute dimension={dim_attr} but train has {dim} columns")
    if "neighbors" in f:
        nb = f["neighbors"]
        if not isinstance(nb, h5py.Dataset) or nb.dtype.kind not in "iu":
            raise DatasetError(f"{path}: neighbors has dtype {getattr(nb, 'dtype', 'group')}; "
                               f"expected integers (int32/int64)")
        if nb.ndim != 2 or nb.shape[1] < k:
            raise DatasetError(
                f"{path}: neighbors has shape {nb.shape}; at least {k} columns are needed for recall@{k}"
            )
        # Checked before distances are recomputed from the ids (which would index with them).
        nq = info["test"][0][0]
        if nb.shape[0] != nq:
            raise DatasetError(f"{path}: neighbors has {nb.shape[0]} rows for {nq} queries (test)")
        info["neighbors"] = (tuple(nb.shape), nb.dtype)
        if "distances" in f:
            di = f["distances"]
            if not isinstance(di, h5py.Dataset) or di.dtype.kind not in "fiu":
                raise DatasetError(f"{path}: distances has dtype {getattr(di, 'dtype', 'group')}; "
                                   f"expected numbers (float32)")
            info["distances"] = (tuple(di.shape), di.dtype)
    return info


def inspect_ann_hdf5(path: str | os.PathLike, k: int = 10) -> dict:
    """The layout of an ann-benchmarks HDF5 file (see `ann_layout`), read from its headers only.

    Opening with h5py also refuses a file cut short (HDF5 records its own length); DatasetError
    names the file and what is wrong.
    """
    import h5py

    path = Path(path)
    if not h5py.is_hdf5(path):
        raise DatasetError(f"{path}: not an HDF5 file (expected the ann-benchmarks layout: train, test, neighbors, distances)")
    try:
        with h5py.File(path, "r") as f:
            return ann_layout(f, path, k)
    except OSError as exc:
        raise DatasetError(f"{path}: cannot read HDF5 file: {exc}") from exc


def inspect_texmex_tar(path: str | os.PathLike, members: dict[str, str]) -> dict[str, tuple[int, int, np.dtype]]:
    """{role: (rows, dim, dtype)} of a TEXMEX tarball's members (``members``: role -> name inside it).

    One forward pass over the whole archive, to its end: a tarball cut short (or a gzip stream
    whose CRC does not match) is refused, as is a member that is not a regular file, whose first
    record's dimension header is implausible, or whose size is not a whole number of records of
    that dimension. Members not found are left out of the result (the caller says which it needs).
    """
    import tarfile
    import zlib

    path = Path(path)
    wanted = {name: role for role, name in members.items()}
    found: dict[str, tuple[int, int, np.dtype]] = {}
    try:
        with tarfile.open(path, "r:*") as tar:
            for m in tar:  # a forward pass; each wanted member's header is read as it passes
                role = wanted.get(m.name)
                if role is None:
                    continue
                if not m.isfile():
                    raise DatasetError(f"{path}: member {m.name} is not a regular file")
                dtype = vecs_dtype(Path(m.name))
                head = tar.extractfile(m).read(4)
                if len(head) < 4:
                    raise DatasetError(f"{path}: member {m.name} holds {len(head)} bytes, too short for a TEXMEX record")
                dim = int(np.frombuffer(head, dtype="<i4")[0])
                if dim <= 0 or dim > 1 << 20:
                    raise DatasetError(f"{path}: member {m.name} declares dimension {dim}; expected 1..{1 << 20}")
                record = 4 + dim * dtype.itemsize
                if m.size % record:
                    raise DatasetError(
                        f"{path}: member {m.name} has {m.size} bytes, not a whole number of {record}-byte "
                        f"records of dimension {dim}"
                    )
                found[role] = (m.size // record, dim, dtype)
            while tar.fileobj.read(1 << 20):  # to the end: a compressed stream checks its length and CRC there
                pass
    except DatasetError:
        raise
    except (tarfile.TarError, EOFError, zlib.error, OSError) as exc:
        raise DatasetError(f"{path}: not a complete tar archive ({exc or type(exc).__name__}); "
                           f"the file was cut short or is not the published tarball") from exc
    return found
