"""One machine-wide lock held while an evaluation times candidate against best, so that two
timings on one node (two sessions of a tournament, say) never share its cores.

The lock file is named by VDBBENCH_TIMING_LOCK; unset, timing takes no lock (one session alone
on a machine). Builds and model calls never take it, so they run alongside a timing.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import time
from collections.abc import Iterator

ENV = "VDBBENCH_TIMING_LOCK"


@contextlib.contextmanager
def timing_lock(path: str | os.PathLike | None = None) -> Iterator[float]:
    """Hold the node's timing lock (blocking); yields the seconds spent waiting for it."""
    path = path if path is not None else os.environ.get(ENV)
    if not path:
        yield 0.0
        return
    t0 = time.monotonic()
    with open(path, "a+") as f:
        fcntl.flock(f, fcntl.LOCK_EX)
        try:
            yield time.monotonic() - t0
        finally:
            fcntl.flock(f, fcntl.LOCK_UN)
