"""Verified downloads: resume into a .part file (HTTP Range with If-Range), retries with backoff
bounded by attempts without new bytes, rich progress, size + sha256 + a structural check, atomic
rename."""

from __future__ import annotations

import datetime
import email.utils
import hashlib
import http.client
import os
import socket
import sys
import time
import urllib.error
import urllib.request
from pathlib import Path
from typing import Callable

from vdbbench.datasets import validator

CHUNK = 1 << 20
TIMEOUT_S = 60.0
RETRIES = 5  # retries in a row without new bytes; an attempt that brings new bytes starts the count again
BACKOFF_S = 1.0  # the first retry's wait; each further one doubles it
MAX_WAIT_S = 60.0  # the longest single wait, Retry-After included: retries x this bounds waiting without progress
# Statuses worth another try: a request timeout, rate limiting, and the server's own failures.
# Any other 4xx (404, 403, 410...) will not change on a retry.
RETRY_STATUSES = frozenset({408, 429} | set(range(500, 600)))


class DownloadError(OSError):
    """A download that failed or did not verify; the message says which URL, what happened, what to do."""


def sha256_file(path: str | os.PathLike, chunk: int = 1 << 22) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        while block := f.read(chunk):
            h.update(block)
    return h.hexdigest()


def _open(url: str, offset: int, timeout: float, if_range: str | None = None):
    request = urllib.request.Request(url, headers={"User-Agent": "vdbbench"})
    if offset and url.startswith(("http://", "https://")):
        request.add_header("Range", f"bytes={offset}-")
        if if_range:  # the rest only if the file is still the one the bytes on disk came from
            request.add_header("If-Range", if_range)
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
    retries: int = RETRIES,
    timeout: float = TIMEOUT_S,
    progress: bool = True,
    verify: Callable[[Path], None] | None = None,
    backoff: float | None = None,
    max_wait: float | None = None,
    log: Callable[[str], None] | None = None,
) -> Path:
    """Fetch ``url`` to ``dest``: resumable, verified, atomic. Returns ``dest``.

    Bytes go to ``dest + ".part"``. A dropped connection, a timeout, HTTP 408, 429 or 5xx is
    retried, waiting ``backoff`` seconds, then twice that each time, or what the server's
    Retry-After asks; no wait is longer than ``max_wait`` (a server asking for longer is given up
    on at once). The download fails after ``retries`` retries in a row that brought no new bytes
    (none past the furthest the .part has reached); an attempt that does bring some starts the
    count and the backoff again. So a slow link that keeps dropping finishes while it advances,
    and waiting without progress is bounded by ``retries * max_wait``. (The defaults, BACKOFF_S
    and MAX_WAIT_S, are read at each call, so tests can shorten them.) Other HTTP errors are not
    retried. Each retry is one line through ``log`` (default: stderr).

    A retry asks for the rest with an HTTP Range request, with If-Range carrying the validator
    of the response the kept bytes came from (its strong ETag, else its Last-Modified; kept in
    ``dest + ".part.validator"`` until the download succeeds or its bytes are discarded). A 206
    is appended; a 200 (the file changed on the server, or Range is not supported) is read again
    from the first byte into an emptied .part. A server that sends neither validator is asked
    for the rest by Range alone. A ``.part`` left by an earlier interrupted run (Ctrl-C
    included) is resumed the same way, with the validator kept beside it.

    When the bytes are complete, their size and sha256 are checked against ``size``/``sha256``
    (when given), then ``verify(part_path)`` runs (it raises ValueError, e.g. DatasetError, when
    the bytes are not the file wanted), and only then is the file renamed into place: ``dest``
    never holds a file that failed a check or was cut short. A failed check deletes the .part
    file; a network failure keeps it (so the next attempt resumes) and raises DownloadError.
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
        return _download_locked(url, dest, size=size, sha256=sha256, retries=retries, timeout=timeout,
                                progress=progress, verify=verify, log=log,
                                backoff=BACKOFF_S if backoff is None else backoff,
                                max_wait=MAX_WAIT_S if max_wait is None else max_wait)


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


def retry_after(headers, now: float | None = None) -> float | None:
    """Seconds a Retry-After header asks to wait (delta-seconds or an HTTP date), None when absent or malformed."""
    value = (headers.get("Retry-After") if headers is not None else None) or ""
    value = value.strip()
    if not value:
        return None
    if value.isdigit():
        return float(value)
    try:
        when = email.utils.parsedate_to_datetime(value)
    except (TypeError, ValueError, IndexError):
        return None
    if when.tzinfo is None:
        when = when.replace(tzinfo=datetime.timezone.utc)
    now = time.time() if now is None else now
    return max(0.0, when.timestamp() - now)


def _complete_by_416(exc: urllib.error.HTTPError, have: int) -> bool:
    """A 416 whose Content-Range ("bytes */TOTAL") says the bytes on disk are already the whole file."""
    content_range = (exc.headers.get("Content-Range", "") if exc.headers is not None else "").strip()
    try:
        return content_range.startswith("bytes */") and int(content_range.split("/")[1]) == have > 0
    except ValueError:
        return False


def _download_locked(url: str, dest: Path, *, size, sha256, retries, timeout, progress,
                     verify=None, backoff=BACKOFF_S, max_wait=MAX_WAIT_S, log=None) -> Path:
    part = dest.with_name(dest.name + ".part")
    total: int | None = size
    attempt = 0  # retries since the last attempt that brought new bytes
    furthest = part.stat().st_size if part.exists() else 0  # bytes past this are new
    advanced = False  # some attempt brought new bytes (the retry count was started again)
    kept_validator = validator.read(part)  # which version of the file the .part holds, when known
    reached = False  # the server answered at least once (a refused connection then is not "offline")
    console_progress = _Progress(progress, dest.name)
    say = log or console_progress.note

    def have() -> int:
        return part.stat().st_size if part.exists() else 0

    def discard() -> None:
        """Remove the .part and the validator of its bytes."""
        nonlocal kept_validator
        part.unlink(missing_ok=True)
        validator.forget(part)
        kept_validator = None

    def wait_and_retry(what: str, wait: float | None = None) -> None:
        """One line saying what failed and what comes next, then the wait (raises when retries are used up)."""
        nonlocal attempt, furthest, advanced
        kept = have()
        if kept > furthest:  # the failed attempt still brought new bytes: the count starts again
            furthest, attempt, advanced = kept, 0, True
        attempt += 1
        if attempt > retries:
            kept_note = f"{kept:,} bytes are kept in {part}; run the same command again to resume. " if kept else ""
            in_a_row = " in a row without new bytes" if advanced else ""
            raise DownloadError(f"download of {url} failed after {retries} retries{in_a_row}: {what}. {kept_note}"
                                f"When offline, copy the file to {dest} yourself.")
        if wait is None:
            wait = min(backoff * 2 ** (attempt - 1), max_wait)
        elif wait > max_wait:
            kept_note = f" {kept:,} bytes are kept in {part} for then." if kept else ""
            raise DownloadError(f"download of {url} failed: {what}, and the server asks to retry after "
                                f"{wait:,.0f} s, longer than the {max_wait:,.0f} s this waits. Try again later.{kept_note}")
        then = f"asking for the rest from byte {kept:,}" if kept else "from the start"
        say(f"download of {url}: {what}; retry {attempt}/{retries} in {wait:.1f} s, {then}")
        time.sleep(wait)

    try:
        while True:
            offset = have()
            if total is not None and offset > total:
                discard()  # longer than the file can be: not ours to resume
                offset = 0
            if total is not None and offset == total:
                break
            try:
                asked_if_range = kept_validator if offset else None
                with _open(url, offset, timeout, asked_if_range) as response:
                    reached = True
                    reported, resumed = _total_from(response, offset, url)
                    served = validator.of_response(getattr(response, "headers", None))
                    if not resumed and offset:
                        changed = asked_if_range is not None and served != asked_if_range
                        why = ("the file changed on the server since the kept bytes were received" if changed
                               else "the server ignored the Range request")
                        say(f"download of {url}: {why} (HTTP {getattr(response, 'status', '?')}); "
                            f"starting again from the first byte")
                        offset = 0  # a whole body: start again from the first byte
                    if reported is not None:
                        if size is not None and reported != size:
                            raise DownloadError(
                                f"{url}: server reports {reported} bytes, but {size} are expected; "
                                f"the source changed or is not the published file"
                            )
                        total = reported
                    console_progress.update(total, offset)
                    read = getattr(response, "read1", response.read)  # what has arrived: the .part keeps up
                    with open(part, "ab" if offset else "wb") as out:
                        if not resumed or kept_validator is None:  # the bytes on disk are now this response's
                            kept_validator = served
                            validator.keep(part, served)
                        while block := read(CHUNK):
                            out.write(block)
                            offset += len(block)
                            console_progress.update(total, offset)
                if total is None or offset >= total:
                    break
                raise http.client.IncompleteRead(b"", total - offset)
            except urllib.error.HTTPError as exc:
                reached = True
                exc.close()
                status = f"HTTP {exc.code} {exc.reason}"
                if exc.code == 416 and part.exists():  # range not satisfiable
                    if _complete_by_416(exc, have()):
                        total = have()  # an interrupted run had already received every byte
                        break
                    discard()  # a stale .part, not a prefix of this file
                    wait_and_retry(f"{status} for the bytes kept from an earlier run (removed)", 0.0)
                    continue
                if exc.code in RETRY_STATUSES:
                    wait_and_retry(status, retry_after(exc.headers))
                    continue
                raise DownloadError(
                    f"download of {url} failed: {status}. "
                    f"Check the URL, or place the file at {dest} yourself."
                ) from exc
            except (urllib.error.URLError, http.client.HTTPException, OSError) as exc:
                if isinstance(exc, DownloadError):
                    raise
                reason = getattr(exc, "reason", None) or exc
                # A name that does not resolve will not resolve on a retry: say so at once. A
                # server never reached (offline, refused) gets one more try, not `retries`.
                if isinstance(reason, socket.gaierror) or (not reached and attempt >= min(retries, 1)):
                    tries = "" if isinstance(reason, socket.gaierror) else f" after {attempt} retries"
                    raise DownloadError(f"download of {url} failed{tries}: {reason}. "
                                        f"When offline, copy the file to {dest} yourself.") from exc
                what = _describe(reason, timeout)
                wait_and_retry(f"{what} ({have():,} bytes received so far)" if reached else what)
    finally:
        console_progress.close()
    got = part.stat().st_size
    if size is not None and got != size:
        discard()
        raise DownloadError(f"{url}: downloaded {got} bytes, expected {size}; the partial file was removed")
    if total is not None and got != total:
        discard()
        raise DownloadError(f"{url}: downloaded {got} bytes, server announced {total}; the partial file was removed")
    if sha256:
        digest = sha256_file(part)
        if digest != sha256.lower():
            discard()
            raise DownloadError(
                f"{url}: sha256 mismatch: got {digest}, expected {sha256}. The file was removed; "
                f"the source may be damaged or changed (try another source, or check the registry entry)."
            )
    if verify is not None:
        try:
            verify(part)
        except ValueError as exc:  # DatasetError: the bytes are complete, but not the file wanted
            discard()
            raise DownloadError(
                f"{url}: the downloaded file is not usable: {exc}. It was removed and nothing was put at "
                f"{dest}; the transfer may have been cut short without the server saying its length, or "
                f"the source served something else (run the same command again, or try another source)."
            ) from exc
    os.replace(part, dest)
    validator.forget(part)
    return dest


def _describe(reason, timeout: float) -> str:
    """A network failure in a few words."""
    if isinstance(reason, http.client.IncompleteRead):
        return "the connection closed before the end of the file"
    if isinstance(reason, (TimeoutError, socket.timeout)):
        return f"no data for {timeout:g} s"
    if isinstance(reason, ConnectionResetError):
        return "the connection was reset"
    if isinstance(reason, str):
        return reason
    return f"{type(reason).__name__}: {reason}" if str(reason) else type(reason).__name__


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

    def note(self, line: str) -> None:
        """One line on stderr (above the bar while it is shown), whether or not the bar is enabled."""
        if self._bar is not None:
            from rich.markup import escape

            self._bar.console.print(escape(line), highlight=False, soft_wrap=True)
        else:
            print(line, file=sys.stderr, flush=True)

    def close(self) -> None:
        if self._bar is not None:
            self._bar.stop()
            self._bar = None

