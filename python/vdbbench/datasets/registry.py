"""The data set registry (registry.toml), the cache folder, checksum records and fetching by name."""

from __future__ import annotations

import json
import os
import shutil
import tarfile
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from vdbbench.datasets.base import DatasetError, check_metric
from vdbbench.datasets.download import DownloadError, download, sha256_file

try:
    import tomllib
except ModuleNotFoundError:  # Python 3.10
    import tomli as tomllib  # type: ignore[no-redef]

REGISTRY_FILE = Path(__file__).with_name("registry.toml")
FORMATS = ("ann-hdf5", "texmex-tar")


class UnknownDataset(DatasetError, KeyError):
    """A name that is neither registered, generated (synth-...), registered arrays, nor a file."""

    def __str__(self) -> str:  # KeyError would repr() the message
        return str(self.args[0]) if self.args else ""


def data_dir() -> Path:
    """The cache folder: $VDBBENCH_DATA, default ~/.cache/vdbbench."""
    env = os.environ.get("VDBBENCH_DATA")
    return Path(env).expanduser() if env else Path.home() / ".cache" / "vdbbench"


@dataclass
class Source:
    url: str
    format: str
    approx_size: str = ""
    size: int | None = None
    sha256: str | None = None
    members: dict = field(default_factory=dict)  # texmex-tar: base / query / groundtruth
    dtype: str | None = None  # element type of the base and query vectors as stored (e.g. "float32")

    @property
    def filename(self) -> str:
        return self.url.rstrip("/").rsplit("/", 1)[-1]


@dataclass
class Entry:
    name: str
    description: str
    metric: str
    dim: int
    n: int
    nq: int
    sources: list[Source]
    fallback: str | None = None

    @property
    def folder(self) -> Path:
        return data_dir() / self.name


def _parse(path: Path) -> dict[str, Entry]:
    try:
        raw = tomllib.loads(path.read_text())
    except (OSError, tomllib.TOMLDecodeError) as exc:
        raise DatasetError(f"{path}: cannot read the registry: {exc}") from exc
    entries = {}
    for name, spec in raw.get("datasets", {}).items():
        where = f"{path} [datasets.{name}]"
        try:
            sources = []
            for s in spec["sources"]:
                if s["format"] not in FORMATS:
                    raise DatasetError(f"{where}: format {s['format']!r}; expected one of {', '.join(FORMATS)}")
                members = {key: s[key] for key in ("base", "query", "groundtruth") if key in s}
                if s["format"] == "texmex-tar" and not {"base", "query"} <= members.keys():
                    raise DatasetError(f"{where}: a texmex-tar source needs base and query members")
                dtype = s.get("dtype")
                if dtype is not None:
                    try:
                        dtype = np.dtype(dtype).name
                    except TypeError:
                        raise DatasetError(f"{where}: dtype {s['dtype']!r} is not a numpy type name (e.g. float32)") from None
                sources.append(Source(s["url"], s["format"], s.get("approx_size", ""), s.get("size"), s.get("sha256"),
                                      members, dtype))
            entries[name] = Entry(
                name, spec.get("description", ""), check_metric(spec["metric"], where), int(spec["dim"]),
                int(spec["n"]), int(spec["nq"]), sources, spec.get("fallback"),
            )
        except KeyError as exc:
            raise DatasetError(f"{where}: missing field {exc.args[0]!r}") from None
    return entries


def registry() -> dict[str, Entry]:
    """Registered data sets: the packaged registry.toml plus, if set, the file $VDBBENCH_REGISTRY."""
    entries = _parse(REGISTRY_FILE)
    extra = os.environ.get("VDBBENCH_REGISTRY")
    if extra:
        entries.update(_parse(Path(extra)))
    return entries


def entry(name: str) -> Entry:
    entries = registry()
    if name not in entries:
        raise UnknownDataset(f"unknown data set {name!r}; registered: {', '.join(entries)}")
    return entries[name]


# --- checksum records: size and sha256 remembered at first download, checked afterwards ---

def _records_path(folder: Path) -> Path:
    return folder / "CHECKSUMS.json"


def _read_records(folder: Path) -> dict:
    path = _records_path(folder)
    if not path.exists():
        return {}
    try:
        return json.loads(path.read_text())
    except (OSError, ValueError) as exc:
        raise DatasetError(f"{path}: damaged checksum record ({exc}); delete it to record anew") from exc


def _write_records(folder: Path, records: dict) -> None:
    path = _records_path(folder)
    tmp = path.with_name(f"{path.name}.{os.getpid()}.tmp")  # per process: concurrent writers never share it
    try:
        tmp.write_text(json.dumps(records, indent=2, sort_keys=True))
        os.replace(tmp, path)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise


def expected_checksum(entry_: Entry, source: Source) -> tuple[int | None, str | None, str]:
    """(size, sha256, where it comes from) for a source: the registry's, else the first-download record."""
    if source.sha256:
        return source.size, source.sha256, "published"
    rec = _read_records(entry_.folder).get(source.filename)
    if rec:
        return rec["size"], rec["sha256"], "recorded at first download"
    return source.size, None, "none yet"


def verify_cached(entry_: Entry, source: Source) -> str:
    """Check a cached download against its published or recorded hash; returns the sha256.

    Hashing a multi-GB file on every load is slow, so a successful check is remembered with the
    file's size and mtime and repeated only when either changes.
    """
    path = entry_.folder / source.filename
    size, sha, origin = expected_checksum(entry_, source)
    stat = path.stat()
    records = _read_records(entry_.folder)
    rec = records.get(source.filename, {})
    if rec.get("verified_size") == stat.st_size and rec.get("verified_mtime_ns") == stat.st_mtime_ns and rec.get("sha256") == sha and sha:
        return sha
    if size is not None and stat.st_size != size:
        raise DatasetError(f"{path}: {stat.st_size} bytes, expected {size} ({origin}); delete it and fetch again")
    digest = sha256_file(path)
    if sha and digest != sha:
        raise DatasetError(f"{path}: sha256 {digest} differs from {sha} ({origin}); delete it and fetch again")
    rec.update({"size": stat.st_size, "sha256": digest, "url": source.url,
                "verified_size": stat.st_size, "verified_mtime_ns": stat.st_mtime_ns})
    rec.setdefault("recorded", time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()))
    records[source.filename] = rec
    _write_records(entry_.folder, records)
    return digest


def forget_record(entry_: Entry, source: Source) -> bool:
    """Drop the size and sha256 recorded for a source's file (not a published one); True if one was dropped."""
    if source.sha256:
        return False
    records = _read_records(entry_.folder)
    if records.pop(source.filename, None) is None:
        return False
    _write_records(entry_.folder, records)
    return True


def mismatches(entry_: Entry, *, metric: str | None = None, n: int | None = None, nq: int | None = None,
               dim: int | None = None) -> list[str]:
    """What a file holds that the registry entry does not say (empty when it agrees), one phrase each."""
    said = {"metric": entry_.metric, "n": entry_.n, "nq": entry_.nq, "dim": entry_.dim}
    held = {"metric": metric, "n": n, "nq": nq, "dim": dim}
    return [f"{key} {held[key]:,} where the registry says {said[key]:,}" if key != "metric"
            else f"metric {held[key]} where the registry says {said[key]}"
            for key in said if held[key] is not None and held[key] != said[key]]


def check_download(entry_: Entry, source: Source, path: Path) -> None:
    """Refuse a complete download that is not the registered data set, by its structure.

    For sources without a published checksum this is what tells the real file from an error
    page served as the file, or a body cut short by a server that sent no length: an ann-hdf5
    file must open with h5py and hold train (n, dim) and test (nq, dim) of the registry's sizes
    (and dtype, where the source names one), with the registry's metric and, if present,
    neighbors for every query; a texmex-tar file must read to its end and hold the base, query
    (and groundtruth) members whose sizes are whole records of the registry's dimension and
    counts. Only the headers are read from HDF5; a tarball is read once, through. Raises
    DatasetError naming the file and each disagreement.
    """
    from vdbbench.datasets.structure import inspect_ann_hdf5, inspect_texmex_tar

    name = entry_.name
    if source.format == "ann-hdf5":
        info = inspect_ann_hdf5(path)
        (n, dim), (nq, _) = info["train"][0], info["test"][0]
        problems = mismatches(entry_, metric=info["metric"], n=n, nq=nq, dim=dim)
        if source.dtype:
            problems += [f"{key} is {info[key][1]} where the registry says {source.dtype}"
                         for key in ("train", "test") if info[key][1].name != source.dtype]
    else:
        found = inspect_texmex_tar(path, source.members)
        absent = [source.members[role] for role in source.members if role not in found]
        if absent:
            raise DatasetError(f"{path}: the tarball lacks {', '.join(absent)} (registered for {name})")
        problems = []
        for role, rows, what in (("base", entry_.n, "n"), ("query", entry_.nq, "nq")):
            got_rows, got_dim, dtype = found[role]
            member = source.members[role]
            if got_rows != rows:
                problems.append(f"{member} holds {got_rows:,} vectors where the registry says {what} {rows:,}")
            if got_dim != entry_.dim:
                problems.append(f"{member} has dimension {got_dim} where the registry says dim {entry_.dim}")
            if source.dtype and dtype.name != source.dtype:
                problems.append(f"{member} holds {dtype.name} where the registry says {source.dtype}")
        if "groundtruth" in found:
            got_rows, k, _ = found["groundtruth"]
            member = source.members["groundtruth"]
            if got_rows != entry_.nq:
                problems.append(f"{member} holds {got_rows:,} rows where the registry says nq {entry_.nq:,}")
            if k < 10:
                problems.append(f"{member} holds {k} neighbours per query; at least 10 are needed for recall@10")
    if problems:
        raise DatasetError(f"{path}: not the registered {name}: " + "; ".join(problems))


def cached_source(entry_: Entry) -> Source | None:
    """The first source whose file is already in the cache."""
    for source in entry_.sources:
        if (entry_.folder / source.filename).exists():
            return source
    return None


def fetch(name: str, progress: bool = True) -> tuple[Entry, Source]:
    """Make sure a registered data set's file is in the cache, verified; download if needed.

    Sources are tried in order; when all fail, DownloadError lists each URL and its error.
    """
    entry_ = entry(name)
    source = cached_source(entry_)
    if source is not None:
        verify_cached(entry_, source)
        return entry_, source
    errors = []
    for source in entry_.sources:
        size, sha, _origin = expected_checksum(entry_, source)
        dest = entry_.folder / source.filename
        try:
            download(source.url, dest, size=size, sha256=sha, progress=progress,
                     verify=lambda part, source=source: check_download(entry_, source, part))
        except DownloadError as exc:
            errors.append(f"  - {exc}")
            continue
        verify_cached(entry_, source)  # records size and sha256 when none was known
        return entry_, source
    raise DownloadError(
        f"could not download {name!r} from any of its {len(entry_.sources)} source(s):\n" + "\n".join(errors)
        + f"\nPlace a copy of one of these files in {entry_.folder} to use it offline."
    )


def extract_members(entry_: Entry, source: Source, tar_sha256: str = "") -> dict[str, Path]:
    """Extract a texmex-tar source's base/query/groundtruth members (safely) next to the tarball.

    The members are extracted into a temporary folder and renamed into place, then a stamp
    records the sha256 of the tarball they came from (``tar_sha256``, the verified hash): members
    without a matching stamp (an extraction that was interrupted, or one from another tarball of
    the same name) are extracted again rather than loaded.
    """
    folder = entry_.folder
    out = {role: folder / member for role, member in source.members.items()}
    stamp = folder / f".{source.filename}.extracted"
    try:
        stamped = stamp.read_text().strip() == tar_sha256
    except OSError:
        stamped = False
    if stamped and all(p.exists() for p in out.values()):
        return out
    tar_path = folder / source.filename
    scratch = None
    try:
        stamp.unlink(missing_ok=True)
        scratch = Path(tempfile.mkdtemp(prefix=".extract-", dir=folder))
        with tarfile.open(tar_path) as tar:
            wanted = [tar.getmember(m) for m in source.members.values()]
            if hasattr(tarfile, "data_filter"):  # Python >= 3.10.12 / 3.11.4: refuses links, devices, escapes
                tar.extractall(scratch, members=wanted, filter="data")
            else:
                for m in wanted:
                    if not m.isfile() or m.name.startswith("/") or ".." in Path(m.name).parts:
                        raise DatasetError(f"{tar_path}: refusing to extract unsafe member {m.name!r}")
                tar.extractall(scratch, members=wanted)
        for member, dest in zip(source.members.values(), out.values()):
            dest.parent.mkdir(parents=True, exist_ok=True)
            os.replace(scratch / member, dest)  # whole files only: never a member cut short by a kill
        tmp = stamp.with_name(f"{stamp.name}.{os.getpid()}.tmp")
        tmp.write_text(tar_sha256)
        os.replace(tmp, stamp)
    except (tarfile.TarError, KeyError, OSError) as exc:
        raise DatasetError(f"{tar_path}: cannot extract {', '.join(source.members.values())}: {exc}") from exc
    finally:
        if scratch is not None:
            shutil.rmtree(scratch, ignore_errors=True)
    return out
