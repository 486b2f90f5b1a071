#!/usr/bin/env python
"""Paired A/B of several engine builds in one process, same index file, interleaved rounds,
with the engine's stage clocks (routing, prescore, wall) and counters beside each build's QPS.

Usage: python benchmarks/perf/ab_many.py DATASET INDEX.vdb MODE NPROBE THREADS ROUNDS NAME=SO ...
MODE is single (one query per call, the first NQ test queries) or batch (one call of the first
NQ test queries); NQ=1000 unless set in the environment. Each NAME=SO is a copy of an
engine build (python/vdbbench/_rust_vdb*.so, or cargo's target/release/lib_rust_vdb.so) loaded
as the module NAME._rust_vdb; the first is the reference the others' ratios are against.
REORDER (environment, default unset) passes `reorder=` (the 4-bit prefilter) to every search,
PROBE_RATIO (default unset) `probe_ratio=`.
One thread is timed on the process's CPU clock (preemption by other jobs is not counted), two
or more on the wall clock; each build's turn in a round repeats its pass until MIN_ROUND_S
(environment, default 0.3) seconds of that clock have gone by. Every build must return the same ids as the first (checked before
timing); the ratio printed is the median of the per-round ratios, with their range, and a second
line per build gives its fastest pass over all rounds (QPS, ratio and smallest stage clocks), which
a busy neighbour on a shared machine slows less than the medians.
"""
from usage import help_or_usage

help_or_usage(__doc__, 7)

import importlib
import importlib.machinery
import os
import shutil
import statistics
import sys
import tempfile
import time

import numpy as np

from vdbbench.datasets.loader import resolve

dataset, index_path, mode = sys.argv[1:4]
nprobe, threads, rounds = map(int, sys.argv[4:7])
builds = [arg.split("=", 1) for arg in sys.argv[7:]]
if mode not in ("single", "batch") or any(len(b) != 2 for b in builds):
    print(__doc__.strip(), file=sys.stderr)
    sys.exit(2)

pkgs = tempfile.mkdtemp(prefix="ab_many-")
suffix = importlib.machinery.EXTENSION_SUFFIXES[0]
for name, so in builds:
    os.makedirs(os.path.join(pkgs, name))
    open(os.path.join(pkgs, name, "__init__.py"), "w").close()
    shutil.copy(so, os.path.join(pkgs, name, "_rust_vdb" + suffix))
sys.path.insert(0, pkgs)

ds, _ = resolve(dataset)
nq = int(os.environ.get("NQ", 1000))
q = np.ascontiguousarray(ds.test[:nq], dtype=np.float32)
engines = {name: importlib.import_module(name + "._rust_vdb").IvfIndex.load(index_path) for name, _ in builds}
keys = ("routing_s", "prescore_s", "wall_s", "threads", "tails_read")


MIN_ROUND_S = float(os.environ.get("MIN_ROUND_S", 0.3))
REORDER = int(os.environ["REORDER"]) if os.environ.get("REORDER") else None
PROBE_RATIO = float(os.environ["PROBE_RATIO"]) if os.environ.get("PROBE_RATIO") else None


def one_pass(idx):
    """One pass over the queries: (its time, per-query stage figures, ids)."""
    clock = time.process_time if threads == 1 else time.perf_counter
    acc = dict.fromkeys(keys, 0.0)
    ids = np.empty((nq, 10), np.int64)
    t = clock()
    if mode == "batch":
        _, ids = idx.search(q, k=10, nprobe=nprobe, rerank=0, threads=threads, reorder=REORDER,
                            probe_ratio=PROBE_RATIO)
        dt = clock() - t
        st = idx.last_search_stats()
        acc = {k: st[k] if k == "threads" else st[k] / nq for k in keys}
    else:
        for i in range(nq):
            _, ids[i:i + 1] = idx.search(q[i:i + 1], k=10, nprobe=nprobe, rerank=0, threads=threads,
                                         reorder=REORDER, probe_ratio=PROBE_RATIO)
            st = idx.last_search_stats()
            for k in keys:
                acc[k] += st[k] / nq
        dt = clock() - t
    return dt, acc, ids


def run(idx):
    """A build's turn in a round: passes until MIN_ROUND_S (environment, default 0.3 s) of its
    clock has gone by, so a round stays long against the clock's and the scheduler's grain
    however fast the engine gets. Returns (QPS, mean stage figures, the first pass's ids,
    the fastest pass's time, the smallest stage figures)."""
    spent, passes, acc, first = 0.0, 0, dict.fromkeys(keys, 0.0), None
    fastest, least = float("inf"), dict.fromkeys(keys, float("inf"))
    while passes == 0 or spent < MIN_ROUND_S:
        dt, st, ids = one_pass(idx)
        spent, passes = spent + dt, passes + 1
        acc = {k: acc[k] + st[k] for k in keys}
        fastest, least = min(fastest, dt), {k: min(least[k], st[k]) for k in keys}
        first = ids if first is None else first
    return passes * nq / spent, {k: v / passes for k, v in acc.items()}, first, fastest, least


ref = None
for name in engines:
    ids = run(engines[name])[2]
    if ref is None:
        ref = ids
    elif not np.array_equal(ids, ref):
        sys.exit(f"{name} returns other ids than {builds[0][0]}")
res = {name: [] for name in engines}
names = list(engines)
for r in range(rounds):
    for name in names if r % 2 == 0 else names[::-1]:
        res[name].append(run(engines[name]))
first = names[0]
print(f"{dataset} {mode} @ {threads}t, nprobe {nprobe}, reorder {REORDER}, probe ratio {PROBE_RATIO}, {nq} queries, {rounds} rounds (ids identical)")
for name in names:
    ratios = sorted(a[0] / b[0] for a, b in zip(res[name], res[first]))
    st = {k: statistics.median(x[1][k] for x in res[name]) for k in keys}
    print(f"{name:10s} QPS {statistics.median(x[0] for x in res[name]):9,.0f}  "
          f"/{first} {statistics.median(ratios):.3f} [{ratios[0]:.3f}-{ratios[-1]:.3f}]  "
          f"routing {st['routing_s'] * 1e6:5.1f} prescore {st['prescore_s'] * 1e6:6.1f} "
          f"wall {st['wall_s'] * 1e6:6.1f} us a query, threads {st['threads']:.2f}, "
          f"tails {st['tails_read']:.0f}", flush=True)
# The fastest pass of each build over all rounds and its smallest stage clocks: what a
# neighbour taking the CPU now and then (a shared VM) cannot slow down.
best = {name: min(x[3] for x in res[name]) for name in names}
for name in names:
    least = {k: min(x[4][k] for x in res[name]) for k in keys}
    print(f"{name:10s} fastest pass: QPS {nq / best[name]:9,.0f}  /{first} {best[first] / best[name]:.3f}  "
          f"routing {least['routing_s'] * 1e6:5.2f} prescore {least['prescore_s'] * 1e6:6.2f} "
          f"wall {least['wall_s'] * 1e6:6.2f} us a query", flush=True)
shutil.rmtree(pkgs, ignore_errors=True)
