"""Transparent huge pages for every index under test, so that no engine is timed on 4 KiB pages.

Our engine advises its own lists onto huge pages (rust_vdb/core/src/hugepages.rs); faiss,
hnswlib, ScaNN and usearch do not, and on a machine whose THP mode is ``madvise`` (Ubuntu's and
this project's machines' default) their indexes then live on 4 KiB pages. A graph search reads
vectors at random addresses across hundreds of MB, so each step pays a TLB miss, and in a
virtual machine a nested page walk: that, not the data, made graph peers read 1.5-2x slow here.

``advise_process()`` walks the process's anonymous mappings (whatever allocated them: glibc's
malloc for the C++ libraries, numpy, Rust) and asks Linux to back each with huge pages now
(``MADV_COLLAPSE``, Linux 6.1+) and on later faults (``MADV_HUGEPAGE``). The runner calls it
after every index is built or loaded, outside all timing. It never changes contents; where the
kernel lacks THP or refuses, it does nothing and says so in what it returns.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import os
import re
import sys
from pathlib import Path

HUGE = 2 << 20
MADV_HUGEPAGE = 14
MADV_COLLAPSE = 25
#: Mappings with less resident memory than this are left alone: stacks, small arenas.
MIN_RESIDENT = 8 << 20

_THP_MODE = Path("/sys/kernel/mm/transparent_hugepage/enabled")


def thp_mode() -> str | None:
    """The kernel's THP mode (``always``, ``madvise`` or ``never``), None where there is none."""
    try:
        m = re.search(r"\[(\w+)\]", _THP_MODE.read_text())
    except OSError:
        return None
    return m.group(1) if m else None


def enabled() -> bool:
    """Off with VDBBENCH_HUGEPAGES=0 (as for the engine's own advice), and off Linux."""
    return sys.platform.startswith("linux") and os.environ.get("VDBBENCH_HUGEPAGES", "1") != "0"


def anon_huge_bytes(smaps_rollup: Path = Path("/proc/self/smaps_rollup")) -> int | None:
    """AnonHugePages of this process, in bytes (None where the kernel does not report it)."""
    try:
        m = re.search(r"^AnonHugePages:\s+(\d+) kB", smaps_rollup.read_text(), re.M)
    except OSError:
        return None
    return int(m.group(1)) * 1024 if m else None


def anonymous_mappings(smaps: str) -> list[tuple[int, int]]:
    """(start, end) of the private, writable, anonymous mappings in a /proc/PID/smaps text that
    hold at least MIN_RESIDENT resident bytes."""
    out: list[tuple[int, int]] = []
    current = None
    for line in smaps.splitlines():
        head = re.match(r"^([0-9a-f]+)-([0-9a-f]+) (\S{4}) \S+ \S+ (\d+)\s*(.*)$", line)
        if head:
            start, end, perms, inode, path = head.groups()
            anon = inode == "0" and path in ("", "[heap]")
            current = (int(start, 16), int(end, 16)) if anon and perms.startswith("rw") and perms[3] == "p" else None
            continue
        if current is not None and line.startswith("Rss:"):
            if int(line.split()[1]) * 1024 >= MIN_RESIDENT:
                out.append(current)
            current = None
    return out


def advise_process() -> dict:
    """Advise every large anonymous mapping of this process onto huge pages (see the module
    docstring). Returns what happened: ``{"thp": mode, "advised_mb": ..., "anon_huge_mb": ...}``,
    or ``{"thp": mode, "skipped": reason}``."""
    mode = thp_mode()
    if not enabled():
        return {"thp": mode, "skipped": "VDBBENCH_HUGEPAGES=0" if sys.platform.startswith("linux") else "not Linux"}
    if mode in (None, "never"):
        return {"thp": mode, "skipped": "transparent huge pages unavailable"}
    try:
        smaps = Path("/proc/self/smaps").read_text()
        libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6", use_errno=True)
    except OSError as exc:
        return {"thp": mode, "skipped": f"cannot read the process's mappings: {exc}"}
    libc.madvise.argtypes = (ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int)
    advised = 0
    for start, end in anonymous_mappings(smaps):
        lo, hi = -(-start // HUGE) * HUGE, end // HUGE * HUGE
        if hi <= lo:
            continue
        # Errors (EINVAL on kernels without MADV_COLLAPSE, EAGAIN when no huge page is free)
        # leave the mapping as it was; the result counts only what was advised.
        if libc.madvise(lo, hi - lo, MADV_HUGEPAGE) == 0:
            libc.madvise(lo, hi - lo, MADV_COLLAPSE)
            advised += hi - lo
    huge = anon_huge_bytes()
    return {"thp": mode, "advised_mb": round(advised / 2**20),
            "anon_huge_mb": None if huge is None else round(huge / 2**20)}
