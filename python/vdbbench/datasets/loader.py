"""`load_dataset`: one name or path -> a verified Dataset with exact ground truth."""

from __future__ import annotations

import os
import re
from pathlib import Path

import numpy as np

from vdbbench.common.console import say_warning
from vdbbench.datasets import built
from vdbbench.datasets import registry as reg
from vdbbench.datasets import synth
from vdbbench.datasets.base import Dataset, DatasetError, check_metric, content_hash, validate
from vdbbench.datasets.download import DownloadError
from vdbbench.datasets.formats import read_ann_hdf5, read_vecs, to_float32, write_ann_hdf5
from vdbbench.datasets.groundtruth import DEFAULT_K, ensure_groundtruth, exact_distances

# Generated names: synth-sift-<n> / synth-float-<n>, n an integer or with a k/m suffix (20k, 1m).
_SYNTH_RE = re.compile(r"^synth-(sift|float)-(\d+)(k|m)?$")
_GENERATORS = {"sift": synth.synth_sift, "float": synth.synth_float}
_SYNTH_METRIC = "l2"

# Custom arrays registered in this process by `register_arrays`.
_ARRAYS: dict[str, Dataset] = {}


def default_nq(n: int) -> int:
    """Queries of a generated set: 10,000 from 1M vectors up (as SIFT-1M), 1,000 below."""
    return 10_000 if n >= 1_000_000 else 1_000


def parse_synth_name(name: str) -> tuple[str, int] | None:
    """("sift" | "float", n) for a generated name, else None."""
    m = _SYNTH_RE.match(name)
    if not m:
        return None
    n = int(m.group(2)) * {None: 1, "k": 1_000, "m": 1_000_000}[m.group(3)]
    if n <= 0:
        raise DatasetError(f"{name}: the size must be positive")
    return m.group(1), n


def generate(name: str, seed: int = 0, nq: int | None = None) -> Dataset:
    """A generated set by name, from the cache when generated before (keyed by name, seed, generator version)."""
    parsed = parse_synth_name(name)
    if parsed is None:
        raise reg.UnknownDataset(f"{name!r} is not a generated name; expected synth-sift-<n> or synth-float-<n> (e.g. synth-sift-20k, synth-float-1m)")
    kind, n = parsed
    nq = default_nq(n) if nq is None else nq
    folder = reg.data_dir() / "synth"
    version = synth.GENERATOR_VERSIONS[kind]
    path = folder / f"{name}-nq{nq}-seed{seed}-g{version}.hdf5"
    if path.exists():
        try:
            ds = read_ann_hdf5(path, name=name)
        except DatasetError:
            path.unlink()  # damaged cache entry: regenerate
        else:
            ds.synthetic, ds.source = True, "generated"
            ds.extra.update(seed=seed, generator_version=version, cached=str(path))
            ds.sha256 = ds.extra["content_sha256"] = content_hash(ds.train, ds.test)
            return ds
    try:
        train, test = _GENERATORS[kind](n, nq, seed=seed)
    except (MemoryError, ValueError) as exc:  # numpy: "Unable to allocate" / "array is too big"
        need = (n + nq) * (128 if kind == "sift" else 64) * 4
        raise DatasetError(f"{name}: cannot generate {n:,} vectors, {need / 2**30:,.1f} GiB in memory ({exc}); "
                           f"choose a smaller n") from None
    ds = Dataset(name=name, train=train, test=test, metric=_SYNTH_METRIC, synthetic=True, source="generated",
                 extra={"seed": seed, "generator_version": version, "cached": str(path)})
    ds.sha256 = ds.extra["content_sha256"] = content_hash(train, test)
    write_ann_hdf5(path, ds)
    return ds


def register_arrays(
    name: str, train, test, metric: str = "l2", neighbors=None, distances=None, *, synthetic: bool = False,
) -> Dataset:
    """Make custom arrays loadable by ``name`` in this process (ground truth computed if not given)."""
    if parse_synth_name(name) or name in reg.registry() or name in built.BUILT:
        raise DatasetError(f"{name!r} is a registered or generated name; choose another one for custom arrays")
    check_metric(metric, f"register_arrays({name!r})")
    train = np.ascontiguousarray(train, dtype=np.float32)
    test = np.ascontiguousarray(test, dtype=np.float32)
    ds = Dataset(name=name, train=train, test=test, metric=metric, synthetic=synthetic, source="arrays")
    if neighbors is not None:
        ds.neighbors = np.asarray(neighbors, dtype=np.int64)
        ds.distances = (np.asarray(distances, dtype=np.float32) if distances is not None
                        else exact_distances(train, test, ds.neighbors, metric))
    validate(ds, f"register_arrays({name!r})")
    ds.sha256 = ds.extra["content_sha256"] = content_hash(train, test)
    _ARRAYS[name] = ds
    return ds


def _sibling(base: Path, role: str, suffixes: tuple[str, ...]) -> Path | None:
    stem = base.name[: base.name.rfind("_base")] if "_base" in base.name else None
    if stem is None:
        return None
    for suffix in suffixes:
        candidate = base.with_name(f"{stem}_{role}{suffix}")
        if candidate.exists():
            return candidate
    return None


def _load_texmex(base_path: Path, query_path: Path | None, gt_path: Path | None, name: str, metric: str) -> Dataset:
    if query_path is None:
        raise DatasetError(
            f"{base_path}: no query file beside it; expected {base_path.name.replace('_base', '_query')} "
            f"(the convention: X_base.fvecs|bvecs, X_query.fvecs|bvecs, optional X_groundtruth.ivecs)"
        )
    train = to_float32(read_vecs(base_path))
    test = to_float32(read_vecs(query_path))
    if train.shape[1] != test.shape[1]:
        raise DatasetError(
            f"{query_path}: dimension {test.shape[1]} differs from the base's ({train.shape[1]}, {base_path})"
        )
    ds = Dataset(name=name, train=train, test=test, metric=metric, source=str(base_path))
    if gt_path is not None:
        gt = np.asarray(read_vecs(gt_path), dtype=np.int64)
        if gt.shape[0] != ds.nq:
            raise DatasetError(f"{gt_path}: {gt.shape[0]} rows of ground truth for {ds.nq} queries")
        if gt.shape[1] < 10:
            raise DatasetError(f"{gt_path}: {gt.shape[1]} neighbours per query; at least 10 are needed for recall@10")
        if gt.min() < 0 or gt.max() >= ds.n:
            raise DatasetError(f"{gt_path}: ids outside 0..{ds.n - 1}")
        ds.neighbors = gt
        ds.distances = exact_distances(train, test, gt, metric)  # TEXMEX ships ids only
    return validate(ds, str(base_path))


def load_path(path: str | os.PathLike, metric: str | None = None) -> Dataset:
    """A local file: ann-benchmarks .hdf5/.h5, or a TEXMEX X_base.fvecs/.bvecs (or a folder holding one).

    TEXMEX convention: X_base.{fvecs,bvecs} with X_query.{fvecs,bvecs} beside it and, optionally,
    X_groundtruth.ivecs (ids; distances are recomputed). Their metric is l2 unless given.
    """
    path = Path(path)
    if path.is_dir():
        bases = sorted(path.glob("*_base.fvecs")) + sorted(path.glob("*_base.bvecs"))
        if len(bases) != 1:
            raise DatasetError(f"{path}: expected exactly one *_base.fvecs or *_base.bvecs in the folder, found {len(bases)}")
        path = bases[0]
    if not path.exists():
        raise DatasetError(f"{path}: no such file")
    suffix = path.suffix.lower()
    if suffix in (".hdf5", ".h5"):
        ds = read_ann_hdf5(path)
        if metric and metric != ds.metric:
            raise DatasetError(f"{path}: the file says metric {ds.metric!r}, but {metric!r} was asked for")
    elif suffix in (".fvecs", ".bvecs"):
        ds = _load_texmex(path, _sibling(path, "query", (".fvecs", ".bvecs")),
                          _sibling(path, "groundtruth", (".ivecs",)), path.stem.replace("_base", ""),
                          check_metric(metric or "l2"))
    else:
        raise DatasetError(f"{path}: unsupported file type {suffix!r}; expected .hdf5/.h5, X_base.fvecs or X_base.bvecs")
    ds.sha256 = ds.extra["content_sha256"] = content_hash(ds.train, ds.test)
    return ds


def _load_registered(entry: reg.Entry, source: reg.Source) -> Dataset:
    folder = entry.folder
    sha256 = reg.verify_cached(entry, source)  # the verified file's hash is the set's identity
    try:
        if source.format == "ann-hdf5":
            ds = read_ann_hdf5(folder / source.filename, name=entry.name)
        else:
            files = reg.extract_members(entry, source, sha256)  # members of exactly this tarball
            ds = _load_texmex(files["base"], files["query"], files.get("groundtruth"), entry.name, entry.metric)
        problems = reg.mismatches(entry, metric=ds.metric, n=ds.n, nq=ds.nq, dim=ds.dim)
        if problems:  # the same rule a download is held to (registry.check_download), for a file placed by hand
            raise DatasetError(f"{folder / source.filename}: not the registered {entry.name}: " + "; ".join(problems))
    except DatasetError as exc:
        # Not the data set (an error page served as the file, a body cut short without a length):
        # a checksum recorded from it would refuse every good download after it, so it goes.
        if reg.forget_record(entry, source):
            raise DatasetError(f"{exc}\nThe cached copy is not usable and its recorded checksum was dropped: "
                               f"delete {folder / source.filename} and fetch again.") from exc
        raise
    ds.name = entry.name
    ds.source = source.url
    ds.sha256 = sha256
    ds.extra["file"] = str(folder / source.filename)
    return ds


def resolve(name_or_path: str | os.PathLike, *, allow_download: bool = True, offline_fallback: bool = True,
            seed: int = 0, metric: str | None = None, progress: bool = True) -> tuple[Dataset, Path]:
    """The Dataset (without computing ground truth) and the folder its ground truth is cached in."""
    name = os.fspath(name_or_path)
    if name in _ARRAYS:
        return _ARRAYS[name], reg.data_dir() / "groundtruth"
    if parse_synth_name(name):
        return generate(name, seed=seed), reg.data_dir() / "synth"
    if name in built.BUILT:  # built on this machine (`vdbbench datasets build`), never downloaded
        return built.load_built(name), reg.data_dir() / "groundtruth"
    entries = reg.registry()
    if name in entries:
        entry = entries[name]
        source = reg.cached_source(entry)
        if source is None and allow_download:
            try:
                entry, source = reg.fetch(name, progress=progress)
            except DownloadError as exc:
                failure = str(exc)
            else:
                failure = ""
        elif source is None:
            failure = f"{name} is not in the cache ({entry.folder}) and downloads are disabled"
        if source is not None:
            return _load_registered(entry, source), entry.folder
        if entry.fallback and offline_fallback:
            from rich.markup import escape

            say_warning(
                f"[bold]{name} is not available[/]: {escape(failure)}\n"
                f"Falling back to the GENERATED replica [bold]{entry.fallback}[/]: every figure measured "
                f"on it is recorded as synthetic and is NOT a {name} result.",
                markup=True,
            )
            ds, folder = resolve(entry.fallback, seed=seed)
            ds.extra.update(requested=name, fallback_reason=failure)
            return ds, folder
        raise DownloadError(failure)
    path = Path(name).expanduser()
    if path.exists():
        return load_path(path, metric=metric), reg.data_dir() / "groundtruth"
    valid = ", ".join(list(entries) + list(built.BUILT) + sorted(_ARRAYS))
    raise reg.UnknownDataset(
        f"unknown data set {name!r} (and no such file); valid: {valid}, or a generated name "
        f"synth-sift-<n> / synth-float-<n> (e.g. synth-sift-20k, synth-float-1m), or a file path"
    )


def load_dataset(name_or_path: str | os.PathLike, *, allow_download: bool = True, offline_fallback: bool = True,
                 seed: int = 0, metric: str | None = None, k: int = DEFAULT_K, progress: bool = True) -> Dataset:
    """Load a data set by registered, built (photo-sift-a) or generated name, registered-arrays name, or file path.

    Registered names come from the cache, else a verified download; when that fails and the
    entry has a fallback (sift-1m -> synth-sift-1m), a loud warning goes to stderr and the
    generated replica is returned with ``synthetic=True`` and the reason in ``extra``. The
    result always carries exact ground truth (computed once, then cached by content hash).
    """
    ds, gt_folder = resolve(name_or_path, allow_download=allow_download, offline_fallback=offline_fallback,
                            seed=seed, metric=metric, progress=progress)
    return ensure_groundtruth(ds, gt_folder, k=k, progress=progress)

