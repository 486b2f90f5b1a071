"""The client side of a served benchmark: bulk insert and concurrent one-query-per-request
clients, driven from Rust threads (`vdbbench._rust_vdb.http_*`) with the interpreter released,
so the client is not what limits the QPS it reports."""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from typing import Callable

import numpy as np

from vdbbench import _rust_vdb as _ext

DEFAULT_CLIENTS = 4  # the seed harness's concurrency
DEFAULT_WARMUP = 1000  # its warm-up queries, sent first by one client
DEFAULT_SEED = 42  # its shuffle seed
INSERT_BATCH = 1000  # its bulk_insert batch


class ServedError(RuntimeError):
    """A server that cannot be reached, refuses a request, or answers outside the API."""


def _matrix(x, what: str) -> np.ndarray:
    a = np.asarray(x)
    if a.ndim != 2 or a.shape[0] == 0 or a.shape[1] == 0:
        raise ValueError(f"{what} must be a non-empty 2-D array (n, dim), got shape {a.shape}")
    if a.dtype.kind not in "fiu":
        raise ValueError(f"{what} has dtype {a.dtype}; expected real numbers")
    a = np.ascontiguousarray(a, dtype=np.float32)
    if not np.isfinite(a).all():
        raise ValueError(f"{what} holds NaN or inf")
    return a


def insert(url: str, vectors, ids=None, batch: int = INSERT_BATCH,
           progress: bool | Callable[[int, int], None] = False, timeout_s: float = 600.0) -> int:
    """POST /bulk_insert every row of ``vectors`` with ``ids`` (default 0..n-1), ``batch`` a request.

    ``progress``: True draws a progress bar on the console; a callable gets (sent, total) after
    each chunk. Returns the server's count of inserted vectors; raises ServedError when a
    request fails (the message has the server's answer) and ValueError for bad arguments."""
    x = _matrix(vectors, "vectors")
    n = x.shape[0]
    if ids is None:
        id_arr = np.arange(n, dtype=np.uint64)
    else:
        id_arr = np.asarray(ids)
        if id_arr.shape != (n,) or id_arr.dtype.kind not in "iu" or (id_arr.dtype.kind == "i" and (id_arr < 0).any()):
            raise ValueError(f"ids must be {n} non-negative integers, got shape {id_arr.shape} dtype {id_arr.dtype}")
        id_arr = np.ascontiguousarray(id_arr, dtype=np.uint64)
    if batch < 1:
        raise ValueError(f"batch must be >= 1, got {batch}")
    chunk = batch * max(1, 50_000 // batch)  # rows per call into Rust: a progress step
    report = progress if callable(progress) else None
    bar = None
    if progress is True:
        from rich.progress import BarColumn, MofNCompleteColumn, Progress, TimeRemainingColumn

        bar = Progress("[progress.description]{task.description}", BarColumn(), MofNCompleteColumn(),
                       TimeRemainingColumn(), transient=True)
        task = bar.add_task(f"inserting into {url}", total=n)
        bar.start()
    inserted = 0
    try:
        for start in range(0, n, chunk):
            stop = min(start + chunk, n)
            try:
                inserted += _ext.http_bulk_insert(url, x[start:stop], id_arr[start:stop], batch, timeout_s)
            except (ConnectionError, RuntimeError) as e:
                raise ServedError(f"bulk insert of rows {start}..{stop - 1} failed: {e}") from None
            if bar is not None:
                bar.update(task, completed=stop)
            if report is not None:
                report(stop, n)
    finally:
        if bar is not None:
            bar.stop()
    return int(inserted)


@dataclass
class QueryRun:
    """What one concurrent run got back, per query row (in the queries' own order)."""

    ids: np.ndarray  # (nq, top_k) int64, -1 where fewer hits came back or the request failed
    distances: np.ndarray  # (nq, top_k) float64, the server's own distances (never scored)
    latency_s: np.ndarray  # (nq,) seconds per request, NaN where it failed
    wall_s: float  # from the common start to the last answer
    errors: int
    first_error: str | None
    warmup_errors: int
    clients: int
    order: np.ndarray = field(repr=False)  # rows in the order they were issued

    @property
    def answered(self) -> int:
        return int(self.latency_s.size - self.errors)

    @property
    def qps(self) -> float:
        """Answered requests per second of wall time."""
        return self.answered / self.wall_s if self.wall_s > 0 else 0.0

    def latency_ms(self, *percentiles: float) -> list[float]:
        ok = self.latency_s[np.isfinite(self.latency_s)]
        if ok.size == 0:
            return [float("nan")] * len(percentiles)
        return [float(v) for v in np.percentile(ok, percentiles) * 1e3]


def issue_order(nq: int, seed: int = DEFAULT_SEED, shuffle: bool = True) -> np.ndarray:
    """The rows in the order they are sent: a seeded shuffle, as the seed harness does."""
    order = np.arange(nq, dtype=np.uint64)
    if shuffle:
        np.random.default_rng(seed).shuffle(order)
    return order


def query(url: str, queries, top_k: int = 10, clients: int = DEFAULT_CLIENTS, warmup: int = DEFAULT_WARMUP,
          seed: int = DEFAULT_SEED, shuffle: bool = True, timeout_s: float = 30.0) -> QueryRun:
    """POST /search for every query row, ``clients`` requests in flight, after ``warmup`` rows
    sent by one client. Failed requests are counted (``errors``, ``first_error``) and their rows
    hold -1; a server that cannot be reached at all raises ServedError."""
    q = _matrix(queries, "queries")
    if top_k < 1 or clients < 1 or warmup < 0:
        raise ValueError(f"top_k and clients must be >= 1 and warmup >= 0, got {top_k}, {clients}, {warmup}")
    order = issue_order(q.shape[0], seed, shuffle)
    out = _ext.http_query(url, q, order, top_k, clients, warmup, timeout_s)
    if out["errors"] == order.size and order.size:
        raise ServedError(f"every request failed: {out['first_error']}")
    back = np.argsort(order, kind="stable")  # position of each row in the issue order
    return QueryRun(
        ids=out["ids"][back], distances=out["distances"][back], latency_s=out["latency_s"][back],
        wall_s=float(out["wall_s"]), errors=int(out["errors"]), first_error=out["first_error"],
        warmup_errors=int(out["warmup_errors"]), clients=clients, order=order,
    )


def client_ceiling(queries, top_k: int = 10, clients: int = DEFAULT_CLIENTS, seconds: float = 1.0,
                   server_cpus: set[int] | None = None) -> float:
    """QPS this client reaches against a server that answers at once (on 127.0.0.1, beside the
    run): above it, a served figure measures the client, not the server. With ``server_cpus``
    that do-nothing server runs there (the clients where this thread may run): what the
    machine's loopback and wake-ups leave to any server on those CPUs."""
    q = _matrix(queries, "queries")
    if server_cpus:
        mine = os.sched_getaffinity(0)
        os.sched_setaffinity(0, server_cpus)  # the server's threads inherit it
        try:
            null = _ext.NullServer()
        finally:
            os.sched_setaffinity(0, mine)
    else:
        null = _ext.NullServer()
    try:
        probe = _ext.http_query(null.url, q, issue_order(min(q.shape[0], 2000)), top_k, clients, 0, 10.0)
        per_s = probe["ids"].shape[0] / max(probe["wall_s"], 1e-9)
        m = int(min(max(per_s * seconds, 1000), 2_000_000))
        order = np.resize(issue_order(q.shape[0]), m)
        out = _ext.http_query(null.url, q, order, top_k, clients, 0, 10.0)
        return m / out["wall_s"] if out["wall_s"] > 0 else float("inf")
    finally:
        null.stop()
