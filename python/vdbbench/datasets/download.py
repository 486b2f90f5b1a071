"""Verified downloads: resume into a .part file (HTTP Range), rich progress, size + sha256, atomic rename."""

from __future__ import annotations

import hashlib
import http.client
import os
import socket
import time
import urllib.error
import urllib.request
from pathlib import Path

CHUNK = 1 << 20
TIMEOUT_S = 60.0


class DownloadError(OSError):
    """A download that failed or did not verify; the message says which URL, what happened, what to do."""


def sha256_file(path: str | os.PathLike, chunk: int = 1 << 22) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        while block := f.read(chunk):
            h.update(block)
    return h.hexdigest()


def _open(url: str, offset: int, timeout: float):
    request = urllib.request.Request(url, headers={"User-Agent": "vdbbench"})
    if offset and url.startswith(("http://", "https://")):
        request.add_header("Range", f"bytes={offset}-")
    return urllib.request.urlopen(request, timeout=timeout)


def _total_from(response, offset: int, url: str = "") -> tuple[int | None, bool]:
    """(total size if known, whether the server honoured our Range request)."""
    status = getattr(response, "status", None)
    if status == 206:
        content_range = response.headers.get("Content-Range", "")  # "bytes START-END/TOTAL"
        try:
            span, total = content_range.split(" ", 1)[1].split("/")
            start = int(span.split("-")[0])
            total = int(total) if total != "*" else None
        except (IndexError, ValueError):
            raise DownloadError(f"{url}: server sent a malformed Content-Range {content_range!r}") from None
        if start != offset:
            raise DownloadError(f"{url}: server resumed at byte {start}, but {offset} bytes are on disk")
        return total, True
    length = response.headers.get("Content-Length") if hasattr(response, "headers") else None
    try:
        return (int(length) if length else None), False
    except ValueError:
        raise DownloadError(f"{url}: server sent a malformed Content-Length {length!r}") from None


def download(
    url: str,
    dest: str | os.PathLike,
    *,
    size: int | None = None,
    sha256: str | None = None,
    retries: int = 5,
    timeout: float = TIMEOUT_S,
    progress: bool = True,
) -> Path:
    """Fetch ``url`` to ``dest``: resumable, verified, atomic. Returns ``dest``.

    Bytes go to ``dest + ".part"``; a dropped connection is resumed from where it stopped (HTTP
    Range; a server that ignores Range restarts the file), up to ``retries`` times, and a
    ``.part`` left by an earlier interrupted run is resumed too. When the bytes are complete,
    their size and sha256 are checked against ``size``/``sha256`` (when given) and only then is
    the file renamed into place. A checksum or size failure deletes the .part file; a network
    failure keeps it (so the next attempt resumes) and raises DownloadError saying so.
    """
    dest = Path(dest)
    try:
        dest.parent.mkdir(parents=True, exist_ok=True)
        lock = open(dest.with_name(dest.name + ".lock"), "a")
    except OSError as exc:  # read-only or full cache, a file where the folder belongs...
        raise DownloadError(
            f"cannot download {url}: the cache folder {dest.parent} cannot be written ({exc}). "
            f"Set VDBBENCH_DATA to a writable folder, or place the file at {dest} yourself."
        ) from exc
    with _exclusive(lock):  # two processes never append to one .part
        if dest.exists():  # another process finished (and verified) it while we waited
            return dest
        return _download_locked(url, dest, size=size, sha256=sha256, retries=retries, timeout=timeout, progress=progress)


class _exclusive:
    """An advisory lock on an open lock file (POSIX flock; a no-op where fcntl does not exist); closes it on exit."""

    def __init__(self, file):
        self.file = file

    def __enter__(self):
        try:
            import fcntl
        except ImportError:  # pragma: no cover - Windows
            return self
        fcntl.flock(self.file, fcntl.LOCK_EX)
        return self

    def __exit__(self, *exc):
        self.file.close()  # closing releases the lock
        return False


def _download_locked(url: str, dest: Path, *, size, sha256, retries, timeout, progress) -> Path:
    part = dest.with_name(dest.name + ".part")
    total: int | None = size
    attempt = 0
    console_progress = _Progress(progress, dest.name)
    try:
        while True:
            offset = part.stat().st_size if part.exists() else 0
            if total is not None and offset > total:
                part.unlink()  # longer than the file can be: not ours to resume
                offset = 0
            if total is not None and offset == total:
                break
            try:
                with _open(url, offset, timeout) as response:
                    reported, resumed = _total_from(response, offset, url)
                    if not resumed and offset:
                        offset = 0  # server ignored Range: start again from the first byte
                    if reported is not None:
                        if size is not None and reported != size:
                            raise DownloadError(
                                f"{url}: server reports {reported} bytes, but {size} are expected; "
                                f"the source changed or is not the published file"
                            )
                        total = reported
                    console_progress.update(total, offset)
                    with open(part, "ab" if offset else "wb") as out:
                        while block := response.read(CHUNK):
                            out.write(block)
                            offset += len(block)
                            console_progress.update(total, offset)
                if total is None or offset >= total:
                    break
                raise http.client.IncompleteRead(b"", total - offset)
            except (urllib.error.HTTPError,) as exc:
                if exc.code == 416 and part.exists():  # range not satisfiable: stale .part
                    part.unlink()
                    attempt += 1
                    if attempt <= retries:
                        continue
                raise DownloadError(
                    f"download of {url} failed: HTTP {exc.code} {exc.reason}. "
                    f"Check the URL, or place the file at {dest} yourself."
                ) from exc
            except (urllib.error.URLError, http.client.HTTPException, OSError) as exc:
                if isinstance(exc, DownloadError):
                    raise
                reason = getattr(exc, "reason", None) or exc
                have = part.stat().st_size if part.exists() else 0
                attempt += 1
                # A name that does not resolve will not resolve on a retry: say so at once. A
                # server never reached (nothing received yet) gets one more try, not `retries`.
                unreachable = isinstance(reason, socket.gaierror)
                if unreachable or attempt > (retries if have else min(retries, 1)):
                    kept = (f"{have} bytes are kept in {part}; run the same command again to resume. "
                            if have else "")
                    tries = "" if unreachable else f" after {attempt - 1} retries"
                    raise DownloadError(
                        f"download of {url} failed{tries}: {reason}. {kept}"
                        f"When offline, copy the file to {dest} yourself."
                    ) from exc
                time.sleep(min(0.2 * 2**attempt, 5.0))
    finally:
        console_progress.close()
    got = part.stat().st_size
    if size is not None and got != size:
        part.unlink()
        raise DownloadError(f"{url}: downloaded {got} bytes, expected {size}; the partial file was removed")
    if total is not None and got != total:
        part.unlink()
        raise DownloadError(f"{url}: downloaded {got} bytes, server announced {total}; the partial file was removed")
    if sha256:
        digest = sha256_file(part)
        if digest != sha256.lower():
            part.unlink()
            raise DownloadError(
                f"{url}: sha256 mismatch: got {digest}, expected {sha256}. The file was removed; "
                f"the source may be damaged or changed (try another source, or check the registry entry)."
            )
    os.replace(part, dest)
    return dest


class _Progress:
    """A rich download bar on stderr (silent when disabled)."""

    def __init__(self, enabled: bool, label: str):
        self.enabled, self.label, self._bar, self._task = enabled, label, None, None

    def update(self, total: int | None, done: int) -> None:
        if not self.enabled:
            return
        if self._bar is None:
            from rich.console import Console
            from rich.progress import BarColumn, DownloadColumn, Progress, TextColumn, TimeRemainingColumn, TransferSpeedColumn

            self._bar = Progress(
                TextColumn("{task.description}"), BarColumn(), DownloadColumn(), TransferSpeedColumn(),
                TimeRemainingColumn(), console=Console(stderr=True), transient=True,
            )
            self._bar.start()
            self._task = self._bar.add_task(self.label, total=total)
        self._bar.update(self._task, total=total, completed=done)

    def close(self) -> None:
        if self._bar is not None:
            self._bar.stop()
            self._bar = None

