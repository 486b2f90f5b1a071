"""Fetch the sources and unpack only their photographs into a work folder: the pinned Debian
packages (from the Debian pool, else `apt-get download`), the wheels (`pip download --no-deps`),
and the photos GCompris keeps inside Qt resource bundles. Nothing is installed."""

from __future__ import annotations

import fnmatch
import lzma
import os
import shutil
import struct
import subprocess
import sys
import tarfile
import zipfile
import zlib
from pathlib import Path
from typing import Callable, Iterator

from vdbbench.datasets.download import DownloadError, download, sha256_file
from vdbbench.datasets.photo_sift.sources import (
    DEB_PACKAGES, GCOMPRIS_EXCLUDE, GCOMPRIS_MIN_BYTES, GCOMPRIS_RCC, IMG_EXT, WHEELS, DebPackage,
)


class SourcesUnavailable(OSError):
    """Some sources could not be fetched here; the message names each and what to do."""


def _fetch_deb(pkg: DebPackage, debs: Path, log: Callable[[str], None]) -> tuple[Path | None, str]:
    """The package's .deb in `debs` (verified), downloading it when absent; (None, why) on failure."""
    dest = debs / pkg.filename
    if dest.exists():
        if dest.stat().st_size == pkg.size and sha256_file(dest) == pkg.sha256:
            return dest, ""
        return None, f"{dest} is not the pinned file (size or sha256 differ); delete it"
    try:
        download(pkg.url, dest, size=pkg.size, sha256=pkg.sha256, progress=False, log=log)
        return dest, ""
    except DownloadError as exc:
        why = f"{pkg.url}: {exc}"
    if shutil.which("apt-get") is None:
        return None, why + "; apt-get: not on this machine"
    log(f"apt-get download {pkg.name}={pkg.version}")
    r = subprocess.run(["apt-get", "download", "-q", f"{pkg.name}={pkg.version}"], cwd=debs,
                       capture_output=True, text=True)
    if r.returncode == 0 and dest.exists() and sha256_file(dest) == pkg.sha256:
        return dest, ""
    dest.unlink(missing_ok=True)
    return None, why + f"; apt-get download {pkg.name}={pkg.version}: {(r.stderr or r.stdout).strip()[-300:]}"


def deb_data_tar(f, path: Path) -> tarfile.TarFile:
    """The data.tar member of an open .deb file `f` (an `ar` archive) as a stream, without dpkg."""
    if f.read(8) != b"!<arch>\n":
        raise ValueError(f"{path}: not a Debian package (no ar header)")
    while header := f.read(60):
        name = header[:16].decode().strip().rstrip("/")
        size = int(header[48:58])
        if name == "data.tar.xz":
            return tarfile.open(fileobj=lzma.LZMAFile(_Slice(f, f.tell(), size)), mode="r|")
        if name in ("data.tar.gz", "data.tar"):
            return tarfile.open(fileobj=_Slice(f, f.tell(), size), mode="r|*")
        if name.startswith("data.tar"):
            raise ValueError(f"{path}: {name} is compressed in a way Python's tarfile cannot read")
        f.seek(size + (size & 1), os.SEEK_CUR)
    raise ValueError(f"{path}: no data.tar member")


class _Slice:
    """A read-only window [start, start + size) of an open file."""

    def __init__(self, f, start: int, size: int):
        self.f, self.pos, self.end = f, start, start + size

    def read(self, n: int = -1) -> bytes:
        n = self.end - self.pos if n is None or n < 0 else min(n, self.end - self.pos)
        self.f.seek(self.pos)
        data = self.f.read(n)
        self.pos += len(data)
        return data

    def readable(self) -> bool:
        return True


def _wanted(name: str, patterns: tuple[str, ...]) -> bool:
    """GNU tar's member selection: a wildcard ('*' matches '/') on the name or a parent folder."""
    name = name if name.startswith("./") else "./" + name.lstrip("/")
    parts = name.split("/")
    return any(fnmatch.fnmatchcase("/".join(parts[:i]), p) for p in patterns for i in range(2, len(parts) + 1))


def unpack_deb(deb: Path, patterns: tuple[str, ...], dest: Path) -> int:
    """Write the regular files of `deb` that match `patterns` under `dest` (symlinks are left out:
    the curated list uses none); returns how many."""
    n = 0
    with open(deb, "rb") as f, deb_data_tar(f, deb) as tar:
        for m in tar:
            if not (m.isfile() or m.islnk()) or not _wanted(m.name, patterns):
                continue
            rel = Path(m.name.removeprefix("./"))
            if rel.is_absolute() or ".." in rel.parts:
                raise ValueError(f"{deb}: unsafe member name {m.name!r}")
            out = dest / rel
            out.parent.mkdir(parents=True, exist_ok=True)
            if m.islnk():  # a hard link to a member written before it
                shutil.copyfile(dest / m.linkname.removeprefix("./"), out)
            else:
                with tar.extractfile(m) as src, open(out, "wb") as dst:
                    shutil.copyfileobj(src, dst)
            n += 1
    return n


def rcc_files(path: Path) -> Iterator[tuple[str, bytes]]:
    """(name, bytes) of every file in a Qt binary resource bundle (.rcc)."""
    b = Path(path).read_bytes()
    if b[:4] != b"qres":
        raise ValueError(f"{path}: not an rcc file")
    ver, tree, data, names = struct.unpack(">IIII", b[4:20])
    node = 14 if ver < 2 else 22

    def name(off: int) -> str:
        n, = struct.unpack(">H", b[names + off:names + off + 2])
        return b[names + off + 6:names + off + 6 + 2 * n].decode("utf-16-be")

    stack = [(0, "")]
    while stack:
        idx, prefix = stack.pop()
        o = tree + idx * node
        noff, flags = struct.unpack(">IH", b[o:o + 6])
        nm = name(noff) if idx else ""
        if flags & 2:  # a directory
            cnt, first = struct.unpack(">II", b[o + 6:o + 14])
            stack.extend((first + i, prefix + nm + "/") for i in range(cnt))
            continue
        doff, = struct.unpack(">I", b[o + 10:o + 14])
        size, = struct.unpack(">I", b[data + doff:data + doff + 4])
        raw = b[data + doff + 4:data + doff + 4 + size]
        if flags & 1:
            raw = zlib.decompress(raw[4:])
        elif flags & 4:
            continue  # zstd-compressed entries: these bundles use none
        yield (prefix + nm).lstrip("/"), raw


def _unpack_gcompris(root: Path) -> int:
    rccdir = root / "gcompris-qt-data" / "usr/share/gcompris-qt/rcc"
    out = root / "gcompris-qt-data" / "rcc-extracted"
    n = 0
    for act in GCOMPRIS_RCC:
        for name, raw in rcc_files(rccdir / f"{act}.rcc"):
            if name.lower().endswith(IMG_EXT) and len(raw) >= GCOMPRIS_MIN_BYTES and not GCOMPRIS_EXCLUDE.search(name):
                fn = out / act / name
                fn.parent.mkdir(parents=True, exist_ok=True)
                fn.write_bytes(raw)
                n += 1
    return n


def _wheel_file(wheels: Path, spec: str) -> Path | None:
    name, version = spec.split("==")
    have = sorted(f for f in os.listdir(wheels)
                  if f.lower().startswith(f"{name.replace('-', '_')}-{version}-") and f.endswith(".whl"))
    return wheels / have[-1] if have else None


def _fetch_wheel(spec: str, wheels: Path, log: Callable[[str], None]) -> tuple[Path | None, str]:
    have = _wheel_file(wheels, spec)
    if have:
        return have, ""
    log(f"pip download {spec}")
    cmd = [sys.executable, "-m", "pip", "download", "-q", "--no-deps", "--only-binary", ":all:", "-d", str(wheels), spec]
    r = subprocess.run(cmd, capture_output=True, text=True)
    have = _wheel_file(wheels, spec)
    if r.returncode == 0 and have:
        return have, ""
    return None, f"{' '.join(cmd[2:])}: {(r.stderr or r.stdout).strip()[-300:] or 'no wheel written'}"


def fetch_and_unpack(work: str | os.PathLike, log: Callable[[str], None] = print) -> dict:
    """Fetch every source into `work`/debs and `work`/wheels (files already there are reused) and
    unpack their photographs into `work`/root. Returns what was used (file names and sha256).

    Raises SourcesUnavailable naming each source that could not be fetched, where to get it
    and where to put it; the other sources are fetched all the same, so a second run needs only
    the missing ones.
    """
    work = Path(work)
    root, debs, wheels = work / "root", work / "debs", work / "wheels"
    for d in (root, debs, wheels):
        d.mkdir(parents=True, exist_ok=True)
    used: dict = {"debian": {}, "wheels": {}}
    missing: list[str] = []
    got_debs = {}
    for pkg in DEB_PACKAGES:
        path, why = _fetch_deb(pkg, debs, log)
        if path is None:
            missing.append(f"Debian package {pkg.name} {pkg.version} ({pkg.size / 2**20:.0f} MiB): {why}\n"
                           f"    get {pkg.url} (sha256 {pkg.sha256}) into {debs}/{pkg.filename}")
        else:
            got_debs[pkg.name] = path
            used["debian"][pkg.name] = {"file": pkg.filename, "sha256": pkg.sha256}
    got_wheels = {}
    for spec in WHEELS:
        path, why = _fetch_wheel(spec, wheels, log)
        if path is None:
            missing.append(f"wheel {spec}: {why}\n    on a machine with PyPI access: "
                           f"pip download --no-deps --only-binary :all: -d {wheels} {spec}, then copy the .whl here")
        else:
            got_wheels[spec] = path
            used["wheels"][spec] = {"file": path.name, "sha256": sha256_file(path)}
    if missing:
        raise SourcesUnavailable(
            f"{len(missing)} of {len(DEB_PACKAGES) + len(WHEELS)} sources could not be fetched on this machine:\n  - "
            + "\n  - ".join(missing)
            + "\nThe Debian packages are plain files on any Debian mirror (no Debian system is needed to use them); "
            "once every file is in place, run the build again with --setup.")
    for pkg in DEB_PACKAGES:
        dest = root / pkg.name
        shutil.rmtree(dest, ignore_errors=True)
        dest.mkdir()
        n = unpack_deb(got_debs[pkg.name], pkg.patterns, dest)
        log(f"unpacked {n} files from {pkg.filename}")
    log(f"gcompris: {_unpack_gcompris(root)} photos unpacked from {len(GCOMPRIS_RCC)} rcc bundles")
    for spec, members in WHEELS.items():
        dest = root / ("pypi-" + spec.split("==")[0])
        shutil.rmtree(dest, ignore_errors=True)
        with zipfile.ZipFile(got_wheels[spec]) as z:
            for m in members:
                z.extract(m, dest)
        log(f"unzipped {len(members)} photos from {got_wheels[spec].name}")
    return used
