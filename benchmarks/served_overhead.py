#!/usr/bin/env python
"""What serving over HTTP costs: our index searched one query per call in-process (client
threads in this process) against the same index behind `vdbbench serve` (the same number of
HTTP clients, one query per request), in interleaved rounds on the same queries, with the
per-round ratio served / in-process and its range, latency percentiles of both, and a check
that the served answers are the in-process answers (ids, every query).

Usage:
  python benchmarks/served_overhead.py --dataset ~/.cache/vdbbench/real/photo-sift-a.hdf5 \
      [--index FILE.vdb] [--nprobe 56 --reorder 100 --probe-ratio 1.4 --rerank 0] [--clients 2] \
      [--rounds 7] [--seconds 2] [--queries 2000] [--json out.json] \
      [--server-cpus 1 --client-cpus 0]

With --server-cpus the server runs on those CPUs and the in-process side searches there too, with
one thread per server CPU (the same cores and thread count on both sides); --client-cpus pins the
HTTP clients (elsewhere, so the clients' own CPU time is not charged to the served side).

Without --index (or when FILE does not exist) the index is built with the engine's defaults and
saved there (a temporary file without --index); the server starts from that file.
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

import numpy as np


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--dataset", required=True, help="dataset name or file (HDF5, TEXMEX)")
    ap.add_argument("--index", help="a saved index (built and saved there when missing)")
    ap.add_argument("--nprobe", type=int, default=56)
    ap.add_argument("--rerank", type=int, default=0)
    ap.add_argument("--reorder", type=int, default=100, help="0: no 4-bit prefilter")
    ap.add_argument("--probe-ratio", type=float, default=1.4, help="0: off")
    ap.add_argument("--clients", type=int, default=os.cpu_count() or 1, help="clients of both sides (default: cores)")
    ap.add_argument("--rounds", type=int, default=7)
    ap.add_argument("--seconds", type=float, default=2.0, help="in-process seconds per round")
    ap.add_argument("--queries", type=int, default=2000, help="queries timed per round (first N)")
    ap.add_argument("--k", type=int, default=10)
    ap.add_argument("--json", help="write the figures here")
    ap.add_argument("--server-cpus", help="pin the server, and the in-process searches, to these CPUs (e.g. 1)")
    ap.add_argument("--client-cpus", help="pin the HTTP clients to these CPUs (e.g. 0)")
    args = ap.parse_args(argv)

    import vdbbench as vb
    from vdbbench.bench.concurrent import run_clients
    from vdbbench.common import default_nlist
    from vdbbench.common.ivf import train_sample
    from vdbbench.datasets.loader import load_dataset
    from vdbbench.served import client as http
    from vdbbench.served.process import our_server, parse_cpus

    server_cpus, client_cpus = parse_cpus(args.server_cpus), parse_cpus(args.client_cpus)
    every_cpu = os.sched_getaffinity(0)
    local_threads = len(server_cpus) if server_cpus else args.clients

    def on(cpus):  # threads started after this run there (Linux threads inherit the mask)
        os.sched_setaffinity(0, cpus or every_cpu)

    ds = load_dataset(args.dataset)
    params = {"nprobe": args.nprobe, "rerank": args.rerank}
    if args.reorder:
        params["reorder"] = args.reorder
    if args.probe_ratio:
        params["probe_ratio"] = args.probe_ratio
    tmp = tempfile.TemporaryDirectory()
    path = Path(args.index or Path(tmp.name) / "index.vdb")
    if path.is_file():
        idx = vb.IvfIndex.load(str(path))
    else:
        idx = vb.IvfIndex(dim=ds.dim, nlist=default_nlist(ds.n), seed=0)
        t0 = time.perf_counter()
        idx.train(train_sample(ds.train, default_nlist(ds.n), 0))
        idx.add(ds.train)
        print(f"built {idx.nlist} lists over {ds.n:,} vectors in {time.perf_counter() - t0:.1f} s -> {path}")
        idx.save(str(path))
    flags = ["--index", str(path), "--threads", "1", "--nprobe", str(args.nprobe), "--rerank", str(args.rerank),
             "--reorder", str(args.reorder), "--probe-ratio", str(args.probe_ratio)]
    queries = np.ascontiguousarray(ds.test[: args.queries])
    with our_server(flags, cpus=args.server_cpus) as srv:
        url = srv.start()
        where = (f"server and in-process ({local_threads} thread(s)) on CPUs {sorted(server_cpus)}" if server_cpus
                 else f"not pinned, {os.cpu_count()} cores")
        print(f"vdbbench serve {' '.join(flags)} at {url}; {args.clients} clients"
              f"{f' on CPUs {sorted(client_cpus)}' if client_cpus else ''}; {where}; {len(queries)} queries a round")
        on(client_cpus)
        # every query of the set, served and in-process: the same ids
        served = http.query(url, ds.test, args.k, clients=args.clients, warmup=0)
        _, local = idx.search(ds.test, k=args.k, threads=1, **params)
        differ = int((served.ids != local).any(axis=1).sum())
        print(f"served == in-process: {ds.nq - differ} of {ds.nq} queries have the same ids"
              f"{'' if not differ else f' ({differ} differ)'}")

        def one(q):
            idx.search(q, k=args.k, threads=1, **params)

        rounds = []
        for r in range(args.rounds):
            order = ("in-process", "served") if r % 2 == 0 else ("served", "in-process")
            row = {}
            for side in order:
                if side == "in-process":
                    on(server_cpus)
                    m = run_clients(one, queries, local_threads, args.seconds)
                    row[side] = {"qps": m["qps"], "p50_ms": m["p50_ms"], "p99_ms": m["p99_ms"]}
                else:
                    on(client_cpus)
                    s = http.query(url, queries, args.k, clients=args.clients, warmup=0, seed=r)
                    p50, p99 = s.latency_ms(50, 99)
                    row[side] = {"qps": s.qps, "p50_ms": p50, "p99_ms": p99, "errors": s.errors}
            row["ratio"] = row["served"]["qps"] / row["in-process"]["qps"]
            rounds.append(row)
            print(f"round {r + 1}: in-process {row['in-process']['qps']:,.0f} QPS, served {row['served']['qps']:,.0f} "
                  f"QPS (p50 {row['served']['p50_ms']:.3f} ms, p99 {row['served']['p99_ms']:.3f} ms): "
                  f"{row['ratio']:.3f}x")
        ceiling = http.client_ceiling(queries, args.k, args.clients)
        # pinned apart, a do-nothing server on the server's CPUs: the machine's cost of one request
        # (loopback TCP, waking the client); added to the in-process search time it bounds any server
        floor = http.client_ceiling(queries, args.k, args.clients, seconds=2.0, server_cpus=server_cpus) \
            if server_cpus else None
    ratios = sorted(r["ratio"] for r in rounds)
    med = statistics.median(ratios)
    p50 = statistics.median(r["served"]["p50_ms"] for r in rounds)
    p99 = statistics.median(r["served"]["p99_ms"] for r in rounds)
    summary = {"dataset": ds.name, "n": ds.n, "params": params, "clients": args.clients, "cores": os.cpu_count(),
               "server_cpus": sorted(server_cpus) if server_cpus else None,
               "client_cpus": sorted(client_cpus) if client_cpus else None, "in_process_threads": local_threads,
               "simd": vb.simd_level(), "same_ids": ds.nq - differ, "nq": ds.nq, "rounds": rounds,
               "ratio_median": med, "ratio_low": ratios[0], "ratio_high": ratios[-1],
               "served_p50_ms": p50, "served_p99_ms": p99, "client_ceiling_qps": ceiling,
               "null_server_qps_on_server_cpus": floor,
               "recall10_ids_served": float(np.mean([len(set(a) & set(b[: args.k])) / args.k
                                                     for a, b in zip(served.ids.tolist(), ds.neighbors.tolist())]))}
    print(f"served / in-process at {args.clients} clients: {med:.3f}x [{ratios[0]:.3f}-{ratios[-1]:.3f}] over "
          f"{len(ratios)} rounds; served p99/p50 {p99 / p50:.2f} ({p50:.3f} / {p99:.3f} ms); recall@10 (ids) "
          f"{summary['recall10_ids_served']:.4f}; the client alone reaches {ceiling:,.0f} QPS")
    if floor:
        local = statistics.median(r["in-process"]["qps"] for r in rounds)
        bound = 1.0 / (1.0 / local + 1.0 / floor)
        summary["bound_qps"] = bound
        print(f"a do-nothing server on CPUs {sorted(server_cpus)} answers {floor:,.0f} QPS: search + that per request "
              f"bounds any server here at {bound:,.0f} QPS ({bound / local:.2f}x in-process); served reached "
              f"{statistics.median(r['served']['qps'] for r in rounds) / bound:.2f} of that bound")
    if args.json:
        Path(args.json).write_text(json.dumps(summary, indent=1) + "\n")
    return 0 if differ == 0 else 1


if __name__ == "__main__":
    sys.exit(main())
