"""Concurrent clients: N threads each issue one query per call for a fixed time, as a server's
callers would; QPS and latency percentiles per client count.

Threads suffice because every engine measured here releases the interpreter inside its search
call (ours, faiss, hnswlib, usearch); an engine that does not shows it plainly, as QPS that no
longer grows with the clients.
"""

from __future__ import annotations

import threading
import time
from typing import Callable

import numpy as np

DEFAULT_CLIENTS = (1, 4, 8, 16)
DEFAULT_DURATION_S = 2.0


def percentiles_ms(latencies_s: np.ndarray) -> dict:
    """p50, p99 and p99.9 of per-call latencies, in milliseconds."""
    p50, p99, p999 = np.percentile(latencies_s, [50, 99, 99.9]) * 1e3
    return {"p50_ms": float(p50), "p99_ms": float(p99), "p999_ms": float(p999)}


def run_clients(
    search_one: Callable[[np.ndarray], object],
    queries: np.ndarray,
    clients: int,
    duration_s: float = DEFAULT_DURATION_S,
) -> dict:
    """``clients`` threads call ``search_one(one_query_row)`` back to back for ``duration_s``.

    Client i starts at query i * nq / clients and walks the set cyclically, so clients do not
    repeat each other's queries in step. Returns QPS (calls / wall time, the wall time running
    from the common start to the last call's return), latency percentiles and the call count.
    An exception in any client stops all of them and is raised here.
    """
    if clients < 1:
        raise ValueError(f"clients must be >= 1, got {clients}")
    if duration_s <= 0:
        raise ValueError(f"duration must be > 0 s, got {duration_s}")
    nq = queries.shape[0]
    if nq == 0:
        raise ValueError("no queries to issue")
    rows = [np.ascontiguousarray(queries[i : i + 1]) for i in range(nq)]
    for row in rows[: min(nq, 10)]:  # warm-up: first-call costs do not belong to any level
        search_one(row)
    lat: list[list[float]] = [[] for _ in range(clients)]
    errors: list[BaseException] = []
    stop = threading.Event()
    start = threading.Barrier(clients + 1)
    clock = time.perf_counter

    def client(i: int) -> None:
        mine, j = lat[i], (i * nq) // clients
        start.wait()
        end = clock() + duration_s
        try:
            while not stop.is_set():
                t0 = clock()
                search_one(rows[j])
                t1 = clock()
                mine.append(t1 - t0)
                if t1 >= end:
                    break
                j = j + 1 if j + 1 < nq else 0
        except BaseException as exc:  # noqa: BLE001 - re-raised in the caller's thread
            errors.append(exc)
            stop.set()

    threads = [threading.Thread(target=client, args=(i,), daemon=True) for i in range(clients)]
    for t in threads:
        t.start()
    start.wait()
    t0 = clock()
    for t in threads:
        t.join()
    wall = clock() - t0
    if errors:
        raise errors[0]
    all_lat = np.concatenate([np.asarray(x) for x in lat])
    return {"clients": clients, "qps": all_lat.size / wall, **percentiles_ms(all_lat),
            "calls": int(all_lat.size), "wall_s": wall}


def measure_levels(search_one, queries: np.ndarray, levels, duration_s: float, on_level=None) -> list[dict]:
    """`run_clients` at each client count in ``levels``, in order."""
    out = []
    for clients in levels:
        if on_level is not None:
            on_level(clients)
        out.append(run_clients(search_one, queries, clients, duration_s))
    return out
