"""`vdbbench serve`: our engine behind the HTTP JSON API of the KCORES vector-db-bench harness.

The server itself is Rust (`vdbbench._rust_vdb.Server`: axum on tokio, on its own threads); this
module only parses the flags, starts it, says where it listens and waits for Ctrl-C or SIGTERM.
"""

from __future__ import annotations

import argparse
import os
import signal
import sys

from vdbbench.common.errors import UsageError

DEFAULT_PORT = 8080

_DESCRIPTION = """\
Serves the engine over HTTP as the KCORES vector-db-bench harness expects:
POST /insert {id, vector} -> {"status": "ok"}; POST /bulk_insert {"vectors": [{id, vector}, ...]}
-> {"status": "ok", "inserted": n}; POST /search {vector, top_k} -> {"results": [{id, distance}]}
best first (distance: squared L2). Also POST /build (build now), GET /stats, GET /health.
Bad input gets a 4xx with {"error": "..."} and the server goes on.

Inserts are buffered; the index ("l2", u8 codes + f16 vectors) is built once, on the first search
or POST /build: k-means on a seeded sample of min(n, max(64 * nlist, 10000)) inserted vectors,
nlist = round(4 sqrt(n)) unless --nlist. Inserts after the build go into their lists.

Search defaults, chosen for one query per request (the harness sends one): the 4-bit prefilter
with --reorder 100 and --probe-ratio 1.4, as in the engine's single-query headline (README), and
nprobe = the engine's default, 1.6% of the lists and at least 32 (64 of 4,000 lists at 1M), a
little above the 1.45-1.5% that reached recall@10 0.95 on real SIFT descriptors there; one thread
per request (--threads 1), so concurrent requests fill the cores. --recall-target R measures
instead: at the build it searches 500 sampled inserted vectors against their exact 10 nearest and
takes the smallest nprobe (then larger reorder, then no prefilter) whose recall@10 >= R + 0.005
(started from --index FILE: at the start, on the vectors the file holds).
A search whose probed lists hold fewer than top_k vectors is repeated over every list (counted as
"widened" in /stats): every answer holds top_k results.
"""


def register(subparsers) -> None:
    p = subparsers.add_parser(
        "serve",
        help="serve the engine over the KCORES vector-db-bench HTTP JSON API",
        description=_DESCRIPTION,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument("--host", default="127.0.0.1", help="address to listen on (default 127.0.0.1; 0.0.0.0: all)")
    p.add_argument(
        "--port",
        type=int,
        help=f"port (default: $PORT as the harness sets it, else {DEFAULT_PORT}; 0: any free port)",
    )
    s = p.add_argument_group("search (fixed for the server's life)")
    s.add_argument("--nprobe", type=int, help="lists probed per query (default: 1.6%% of nlist, >= 32)")
    s.add_argument("--rerank", type=int, help="u8 candidates rescored with f16 (default: the engine's)")
    s.add_argument("--reorder", type=int, help="4-bit prefilter: rows kept for the u8 distance (default 100; 0: off)")
    s.add_argument("--probe-ratio", type=float, help="probe lists within this ratio of the nearest (default 1.4; 0: off)")
    s.add_argument("--threads", type=int, help="threads one request's search may use (default 1)")
    s.add_argument(
        "--recall-target",
        type=float,
        metavar="R",
        help="pick nprobe (and reorder / probe ratio when not given) at the build so that recall@10 "
        "of 500 sampled inserted vectors reaches R (e.g. 0.95)",
    )
    b = p.add_argument_group("index")
    b.add_argument("--dim", type=int, help="vector dimension (default: fixed by the first insert)")
    b.add_argument("--nlist", type=int, help="lists (default: round(4 sqrt(n)) of the n vectors at the build)")
    b.add_argument("--seed", type=int, default=0, help="seed of the training sample and k-means (default 0)")
    b.add_argument(
        "--index",
        metavar="FILE",
        help="start from this saved index if it exists (ready at once), else save the built index there",
    )
    h = p.add_argument_group("server")
    h.add_argument("--max-body-mb", type=float, default=64.0, help="largest request body, MiB (default 64; over: 413)")
    h.add_argument("--workers", type=int, help="async runtime threads (default: one per core)")
    h.add_argument(
        "--search-on",
        choices=("handler", "blocking"),
        default="handler",
        help="run a search in the async handler itself (default: the faster on a machine whose cores are the "
        "server's) or on tokio's blocking pool (a hand-off more per request, a shorter tail when other jobs "
        "crowd the cores; benchmarks/perf/serve_search_on.py)",
    )
    p.set_defaults(func=cmd_serve)


class _Stop(Exception):
    """Raised by the signal handler in the main thread: SIGINT or SIGTERM arrived."""


def _port(args) -> int:
    if args.port is not None:
        port = args.port
    else:
        env = os.environ.get("PORT", "").strip()
        if not env:
            return DEFAULT_PORT
        try:
            port = int(env)
        except ValueError:
            raise UsageError(f"PORT={env!r} in the environment is not a port number") from None
    if not 0 <= port <= 65535:
        raise UsageError(f"--port {port}: expected 0 (any free port) to 65535")
    return port


def _check(args) -> None:
    for name in ("nprobe", "threads", "dim", "nlist", "workers"):
        v = getattr(args, name)
        if v is not None and v < 1:
            raise UsageError(f"--{name.replace('_', '-')} {v}: expected >= 1")
    for name in ("rerank", "reorder"):
        v = getattr(args, name)
        if v is not None and v < 0:
            raise UsageError(f"--{name} {v}: expected >= 0 (0: off)")
    if args.recall_target is not None and not 0 < args.recall_target < 1:
        raise UsageError(f"--recall-target {args.recall_target}: expected a recall between 0 and 1, e.g. 0.95")
    if args.recall_target is not None and args.nprobe is not None:
        raise UsageError("--recall-target picks nprobe itself: give one of --recall-target and --nprobe")
    if args.max_body_mb <= 0:
        raise UsageError(f"--max-body-mb {args.max_body_mb}: expected a positive size")
    if args.seed < 0:
        raise UsageError(f"--seed {args.seed}: expected >= 0")


def _say(line: str) -> None:
    print(line, flush=True)


def _describe(args) -> str:
    def flag(v, default):
        return default if v is None else ("off" if v == 0 else str(v))

    if args.recall_target is not None:
        nprobe = f"chosen at the build (or the start from --index) for recall@10 >= {args.recall_target}"
    else:
        nprobe = flag(args.nprobe, "1.6% of nlist, >= 32")
    return (
        f"nprobe {nprobe}, rerank {flag(args.rerank, 'engine default')}, "
        f"reorder {flag(args.reorder, '100')}, probe ratio {flag(args.probe_ratio, '1.4')}, "
        f"{args.threads or 1} thread(s) per request; nlist {args.nlist or 'round(4 sqrt(n))'}, seed {args.seed}"
    )


def cmd_serve(args) -> int:
    _check(args)
    port = _port(args)
    from vdbbench._rust_vdb import InvalidInput, Server

    try:
        server = Server.start(
            args.host,
            port,
            dim=args.dim,
            nlist=args.nlist,
            seed=args.seed,
            nprobe=args.nprobe,
            rerank=args.rerank,
            reorder=args.reorder,
            probe_ratio=args.probe_ratio,
            threads=args.threads,
            recall_target=args.recall_target,
            index=args.index,
            max_body_mb=args.max_body_mb,
            workers=args.workers,
            search_on=args.search_on,
            log=True,
        )
    except InvalidInput as exc:
        raise UsageError(str(exc)) from None
    except OSError as exc:
        print(f"vdbbench serve: error: {exc}", file=sys.stderr)
        return 1

    def on_signal(signum, frame):
        raise _Stop(signal.Signals(signum).name)

    previous = {sig: signal.signal(sig, on_signal) for sig in (signal.SIGINT, signal.SIGTERM)}
    try:
        stats = server.stats()
        _say(f"vdbbench serve: listening on {server.url} ({stats['state']}, SIMD {stats['simd']})")
        _say(f"vdbbench serve: search: {_describe(args)}")
        if args.index:
            verb = "started from" if stats["state"] == "ready" else "will save the built index to"
            _say(f"vdbbench serve: {verb} {args.index}")
        _say("vdbbench serve: Ctrl-C (or SIGTERM) stops it")
        # Short waits: Python runs signal handlers between them.
        while not server.wait(0.25):
            pass
        reason = "the server stopped by itself"
    except _Stop as stop:
        reason = f"{stop} received"
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)
        try:
            server.stop()  # with --index, also saves vectors added since the build or load
            failed = None
        except RuntimeError as exc:
            failed = str(exc)
    stats = server.stats()
    if failed:
        print(f"vdbbench serve: {reason}; stopped after {stats['queries']} queries, but: {failed}", file=sys.stderr)
        return 1
    _say(f"vdbbench serve: {reason}; stopped cleanly after {stats['queries']} queries ({stats['vectors']} vectors held)")
    return 0
