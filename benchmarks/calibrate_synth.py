"""Calibrate the generated SIFT replica against every real-SIFT figure in docs/real-sift.md.

    nice -n 10 python benchmarks/calibrate_synth.py --n 100k                      # the calibration size
    nohup nice -n 10 python benchmarks/calibrate_synth.py --n 1m --nq 1000 > c1m.log &   # 1M (tens of minutes)
    python benchmarks/calibrate_synth.py --n 100k --set noise=0.8 --set power=1.6 --no-timing   # try parameters
    nice -n 15 python benchmarks/calibrate_synth.py --dataset ~/.cache/vdbbench/real/photo-sift-a.hdf5   # the real side

Prints, for the replica at each size, beside the real figures (docs/real-sift.md: 1M real descriptors
from photographs, queries from other photographs, recall@10 >= 0.95, 1 thread; and the 500k
development set photo-sift-a) and the ratio replica / real:

* value statistics and the query-to-base nearest-neighbour distance;
* IVF difficulty: the smallest nprobe at which faiss IVF-Flat (exact scan, nlist = 4*sqrt(n)) reaches
  10-recall@10 >= 0.95, as a fraction of nlist, and graph difficulty: the smallest efSearch of faiss
  HNSW32 (efConstruction 40), with the distance evaluations per query of both (faiss' counters);
* our engine at its defaults (u8+f16, nlist = 4*sqrt(n)): the smallest nprobe reaching the target,
  and there the split u8 codes' tails read per code scanned (in batch, and one query per call for
  the first --single-queries queries) and per query (its own counters, independent of timing), and, unless --no-timing, batch QPS at 2 threads over 1 thread on the same
  index (alternating calls in this process, wall clock, median of --scaling-rounds rounds). The real
  scaling figures depend on the SIMD path (AVX-512 VNNI barely used the second core, AVX2 did): the
  row shows the ones of the path that ran here;
* QPS ratios at recall@10 >= 0.95 of faiss HNSW32, hnswlib (M 32, ef_construction 200; optional,
  `pip install hnswlib`) and faiss IVF-PQ64x4fs+RFlat to IVF-Flat, and of the graphs to IVF-PQ fs,
  batch (all queries in one call) and one query per call, one thread. Every index is timed in the
  same process on the calling thread's CPU clock, round-robin over --repeats rounds, best round
  kept: ratios, never absolute QPS, are what carries between machines and runs.

The real figures are for 1M vectors (and 500k for photo-sift-a); a ratio at 100k is printed against
them too, but IVF's work grows about as sqrt(n) and a graph's as log(n), so graph/IVF ratios at 100k
are expected to be several times lower than at 1M, and tails per query lower too (tails per code
scanned is the size-free figure). --dataset measures the real side instead: value statistics and
our engine's figures on an ann-benchmarks HDF5 file, with its own exact distances. --out writes the
Markdown report (with the machine, commit and generator parameters) to a file, appending.
"""

from __future__ import annotations

import argparse
import dataclasses
import os
import platform
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Callable

os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")

import numpy as np  # noqa: E402

from vdbbench.bench import hugepages  # noqa: E402
from vdbbench.common import default_nlist, train_sample  # noqa: E402
from vdbbench.common.recall import knn_recall  # noqa: E402
from vdbbench.datasets import synth  # noqa: E402
from vdbbench.datasets.difficulty import (  # noqa: E402
    first_reaching,
    hnsw_difficulty,
    ivf_difficulty,
    nn_distance_stats,
    value_stats,
)
from vdbbench.datasets.groundtruth import compute_groundtruth  # noqa: E402
from vdbbench.datasets.loader import parse_synth_name  # noqa: E402

# docs/real-sift.md, real SIFT from photographs, 1M base, recall@10 >= 0.95, 1 thread.
REAL_VALUES = "0..242", "512.0 (510.9..513.1)", "13-15%", "27.5", "237 / 64"
REAL_IVF_FRACTION = (0.013, 0.017)  # nprobe 48-64 of 3840; 64 of 4000 in the graph table
REAL_EF = {"faiss-hnsw32": 48, "hnswlib": 40}
REAL_BATCH = {"ivf-flat": 1107, "ivfpq-fs": 7946, "faiss-hnsw32": 4465, "hnswlib": 5882}
REAL_SINGLE = {"ivfpq-fs": 3868, "faiss-hnsw32": 4245, "hnswlib": 5625}
# (numerator, denominator, mode): the ratios docs/real-sift.md asks a replica to match.
RATIOS = [
    ("faiss-hnsw32", "ivf-flat", "batch"), ("hnswlib", "ivf-flat", "batch"), ("ivfpq-fs", "ivf-flat", "batch"),
    ("faiss-hnsw32", "ivfpq-fs", "batch"), ("hnswlib", "ivfpq-fs", "batch"),
    ("faiss-hnsw32", "ivfpq-fs", "single"), ("hnswlib", "ivfpq-fs", "single"),
]
K_FACTORS = (1, 4, 8, 16)  # IVF-PQ fs refine depths tried (rerank 0, 40, 80, 160 at k = 10)

# Our engine on real SIFT (docs/real-sift.md), at its defaults (u8+f16, nlist round(4*sqrt(n)),
# default rerank). photo-sift-a: 500k real descriptors, its 10,000 queries, AVX2 path (with the
# batch tile kernel of 624c5cd) on a 2-core EPYC Zen 3: nprobe 46 of 2828 reaches recall@10 0.9503;
# per query 9,934 u8 codes scanned and 9,869 tails read in batch, and one query per call (first
# 1,000 queries) 0.344 tails per code. The 1M set: 2,000 queries at nprobe 64 of 4000 on the 2-core
# AVX-512 VNNI EPYC read 22.5M tails (the replica synth-sift-1m 16.1M); its codes were not recorded.
REAL_ENGINE_NPROBE = {"photo-sift-a 500k": (46, 2828)}
REAL_TAILS_PER_CODE = {"photo-sift-a 500k": {"batch": 9869 / 9934, "one query per call": 0.344}}
REAL_TAILS_PER_QUERY = {"photo-sift-a 500k": 9869.0, "real 1M": 22.5e6 / 2000}
# Batch QPS at 2 threads over 1 thread, same index, alternating calls in one process (medians),
# by the SIMD path that ran: AVX-512 VNNI on the 1M set and on photo-sift-a (batches of 2,000
# queries at nprobe 64, 15 calls each), AVX2 on the 1M set (5 calls).
REAL_SCALING = {"avx512": {"real 1M": 1.00, "photo-sift-a 500k": 1.15}, "avx2": {"real 1M": 1.73}}


def parse_size(text: str) -> int:
    parsed = parse_synth_name(f"synth-sift-{text.lower()}")
    if parsed is None:
        raise argparse.ArgumentTypeError(f"{text!r}: expected a size like 20000, 100k or 1m")
    return parsed[1]


def parse_override(text: str) -> tuple[str, float]:
    key, _, value = text.partition("=")
    known = {f.name for f in dataclasses.fields(synth.WorldParams)} | {f.name for f in dataclasses.fields(synth.SiftParams)}
    if key not in known or not value:
        raise argparse.ArgumentTypeError(f"{text!r}: expected NAME=VALUE with NAME one of {', '.join(sorted(known))}")
    return key, float(value)


def params_with(overrides: list[tuple[str, float]]):
    world, sift = synth.SIFT_WORLD, synth.SIFT_PARAMS
    for key, value in overrides:
        if key in {f.name for f in dataclasses.fields(world)}:
            kind = type(getattr(world, key))
            world = dataclasses.replace(world, **{key: kind(value)})
        else:
            sift = dataclasses.replace(sift, **{key: value})
    return world, sift


def git_commit() -> str:
    try:
        return subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True,
                              cwd=Path(__file__).parent, check=True).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        return "unknown"


def cpu_name() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "unknown"


def log(msg: str) -> None:
    print(f"# {time.strftime('%H:%M:%S')} {msg}", file=sys.stderr, flush=True)


@dataclasses.dataclass
class Timed:
    """One index at its cheapest setting reaching the target: how to search, and the best timings."""

    name: str
    setting: str
    recall: float
    batch: Callable[[], object]
    single: Callable[[np.ndarray], object]
    batch_qps: float = 0.0
    single_qps: float = 0.0


def smallest(recall_of, lo: int, hi: int, target: float) -> int | None:
    """Smallest value in lo..hi whose recall reaches target (doubling, then bisection)."""
    cur = lo
    while recall_of(cur) < target:
        if cur >= hi:
            return None
        lo, cur = cur + 1, min(2 * cur, hi)
    return first_reaching(recall_of, target, lo, cur)


def prepare(base, queries, gt, target: float, k: int, d, g, with_hnswlib: bool) -> list[Timed]:
    """Every index at its cheapest setting reaching the target: IVF-Flat and HNSW32 are the ones the
    difficulty measurement built (d, g); IVF-PQ fs shares IVF-Flat's coarse quantizer."""
    import faiss

    n, dim = base.shape
    nlist = d.nlist
    out: list[Timed] = []

    def recall(ids):
        return knn_recall(ids, base, queries, gt, k=k)

    def faiss_timed(name, index, setting, set_params):
        set_params()
        return Timed(name, setting, recall(index.search(queries, k)[1]),
                     lambda: index.search(queries, k), lambda q: index.search(q, k))

    flat = d.index
    if d.nprobe is not None:
        out.append(faiss_timed("ivf-flat", flat, f"nprobe {d.nprobe} of {nlist}",
                               lambda: setattr(flat, "nprobe", d.nprobe)))
    faiss.omp_set_num_threads(2)
    t0 = time.perf_counter()
    m = dim // 2
    ivf = faiss.IndexIVFPQFastScan(flat.quantizer, dim, nlist, m, 4)  # the trained coarse quantizer
    pq = faiss.IndexRefineFlat(ivf)
    pq.train(train_sample(base, nlist))
    pq.add(base)
    faiss.omp_set_num_threads(1)
    log(f"IVF{nlist},PQ{m}x4fs,RFlat built in {time.perf_counter() - t0:.0f}s")
    best = None
    for kf in K_FACTORS:  # cheapest setting per refine depth, then the fastest of those
        pq.k_factor = kf

        def pq_recall(p):
            ivf.nprobe = p
            return recall(pq.search(queries, k)[1])

        p = smallest(pq_recall, 1, nlist, target)
        if p is None:
            continue
        ivf.nprobe = p
        t = time.perf_counter()
        pq.search(queries, k)
        dt = time.perf_counter() - t
        if best is None or dt < best[0]:
            best = (dt, p, kf)
    if best is not None:
        _, p, kf = best

        def set_pq(p=p, kf=kf):
            ivf.nprobe, pq.k_factor = p, kf

        out.append(faiss_timed("ivfpq-fs", pq, f"nprobe {p}, k_factor {kf}", set_pq))

    hnsw = g.index
    if g.ef_search is not None:
        out.append(faiss_timed("faiss-hnsw32", hnsw, f"efSearch {g.ef_search}",
                               lambda: setattr(hnsw.hnsw, "efSearch", g.ef_search)))

    if with_hnswlib:
        import hnswlib

        t0 = time.perf_counter()
        hl = hnswlib.Index(space="l2", dim=dim)
        hl.init_index(max_elements=n, M=32, ef_construction=200, random_seed=100)
        hl.add_items(base, num_threads=2)
        log(f"hnswlib built in {time.perf_counter() - t0:.0f}s")

        def hl_recall(ef):
            hl.set_ef(ef)
            return recall(hl.knn_query(queries, k=k, num_threads=1)[0].astype(np.int64))

        ef = smallest(hl_recall, k, 4096, target)
        if ef is not None:
            hl.set_ef(ef)
            out.append(Timed("hnswlib", f"ef {ef}", hl_recall(ef), lambda: hl.knn_query(queries, k=k, num_threads=1),
                             lambda q: hl.knn_query(q, k=k, num_threads=1)))
    return out


def time_all(timed: list[Timed], queries, repeats: int, single_queries: int) -> None:
    """Batch and one-query-per-call QPS, round-robin over the indexes, best round of each kept.

    Every search runs on the calling thread (faiss with one OpenMP thread, hnswlib num_threads=1),
    so the clock is that thread's CPU time: on a shared machine wall time mostly measures how often
    the scheduler preempts us (a 60 ms batch is cut, 300 single queries of 30 us each are not),
    while CPU time still counts every cache miss and memory stall of the search itself.
    """
    qs = [queries[i : i + 1] for i in range(min(single_queries, len(queries)))]
    for t in timed:
        t.batch()  # warm
    for _ in range(repeats):
        for t in timed:
            t0 = time.thread_time()
            t.batch()
            t.batch_qps = max(t.batch_qps, len(queries) / max(time.thread_time() - t0, 1e-9))
            t0 = time.thread_time()
            for q in qs:
                t.single(q)
            t.single_qps = max(t.single_qps, len(qs) / max(time.thread_time() - t0, 1e-9))


@dataclasses.dataclass
class EngineFigures:
    """Our engine at its defaults on one data set: the work a query costs at the cheapest nprobe
    reaching the target, and how batch search scales from one thread to two."""

    nlist: int
    simd: str
    nprobe: int | None = None
    recall: float = 0.0
    recall_at: dict[int, float] = dataclasses.field(default_factory=dict)
    codes_per_query: float = 0.0
    tails_per_query: float = 0.0
    single_codes: float = 0.0  # summed over the queries searched one per call
    single_tails: float = 0.0
    qps_1t: float | None = None  # batch, median over the rounds (wall clock)
    qps_2t: float | None = None
    round_ratios: list[float] = dataclasses.field(default_factory=list)

    @property
    def tails_per_code(self) -> float | None:
        return self.tails_per_query / self.codes_per_query if self.codes_per_query else None

    @property
    def single_tails_per_code(self) -> float | None:
        return self.single_tails / self.single_codes if self.single_codes else None

    @property
    def scaling(self) -> float | None:
        return self.qps_2t / self.qps_1t if self.qps_1t and self.qps_2t else None


def engine_figures(base, queries, gt_distances, target: float, k: int = 10, rounds: int = 0,
                   min_call_s: float = 0.2, seed: int = 0, single_queries: int = 300) -> EngineFigures:
    """Our engine (vdbbench.IvfIndex at its defaults: u8+f16, nlist round(4*sqrt(n)), the bench's
    training sample, default rerank) on base/queries: the smallest nprobe reaching ``target``, the
    u8 codes scanned and split-code tails read per query there (a batch at one thread, and the
    first ``single_queries`` queries one per call: the batch path tiles queries on a list and can
    read tails the one-query path skips; the counts do not depend on timing), and with ``rounds``
    > 0 the batch QPS at threads=2 over threads=1 on the same index: alternating calls in this
    process, which thread count goes first alternating too, each call repeated until
    ``min_call_s`` has passed (wall clock: two threads cannot be timed on one thread's CPU clock),
    the median of each thread count over the rounds."""
    import vdbbench as vb

    n, dim = base.shape
    nlist = default_nlist(n)
    t0 = time.perf_counter()
    index = vb.IvfIndex(dim=dim, nlist=nlist, seed=seed)
    index.train(train_sample(base, nlist, seed))
    index.add(base)
    fig = EngineFigures(nlist=nlist, simd=str(vb.simd_level()))
    log(f"our IVF{nlist} (u8+f16, {fig.simd}) built in {time.perf_counter() - t0:.0f}s")

    def recall_at(p: int) -> float:
        if p not in fig.recall_at:
            fig.recall_at[p] = knn_recall(index.search(queries, k=k, nprobe=p)[1], base, queries, gt_distances, k=k)
        return fig.recall_at[p]

    fig.nprobe = smallest(recall_at, 1, nlist, target)
    if fig.nprobe is None:
        return fig
    fig.recall = recall_at(fig.nprobe)
    nq = len(queries)
    index.search(queries, k=k, nprobe=fig.nprobe, threads=1)
    stats = index.last_search_stats()
    fig.codes_per_query, fig.tails_per_query = stats["codes_scanned"] / nq, stats["tails_read"] / nq
    for i in range(min(single_queries, nq)):
        index.search(queries[i : i + 1], k=k, nprobe=fig.nprobe, threads=1)
        stats = index.last_search_stats()
        fig.single_codes += stats["codes_scanned"]
        fig.single_tails += stats["tails_read"]
    log(f"our engine: nprobe {fig.nprobe} of {nlist} (recall {fig.recall:.4f}), {fig.codes_per_query:,.0f} codes and "
        f"{fig.tails_per_query:,.0f} tails per query in batch (tails / codes {fig.tails_per_code:.3f}; one query per "
        f"call {fig.single_tails_per_code or 0:.3f})")
    if rounds <= 0:
        return fig

    def batch_qps(threads: int) -> float:
        calls, t = 0, time.perf_counter()
        while True:
            index.search(queries, k=k, nprobe=fig.nprobe, threads=threads)
            calls += 1
            dt = time.perf_counter() - t
            if dt >= min_call_s:
                return calls * nq / dt

    batch_qps(2)  # warm both
    qps: dict[int, list[float]] = {1: [], 2: []}
    for r in range(rounds):
        for threads in ((1, 2) if r % 2 == 0 else (2, 1)):
            qps[threads].append(batch_qps(threads))
        fig.round_ratios.append(qps[2][-1] / qps[1][-1])
    fig.qps_1t, fig.qps_2t = statistics.median(qps[1]), statistics.median(qps[2])
    log(f"our engine batch: 1 thread {fig.qps_1t:,.0f} QPS, 2 threads {fig.qps_2t:,.0f} QPS (medians of {rounds}), "
        f"2t/1t {fig.scaling:.2f}; rounds " + ", ".join(f"{x:.2f}" for x in fig.round_ratios))
    return fig


def nearer_real(table: dict[str, float], n: int) -> tuple[str, float] | None:
    """The real figure measured at the size nearest n (the 1M set at 750k and above, else photo-sift-a)."""
    key = "real 1M" if n >= 750_000 else "photo-sift-a 500k"
    if table.get(key):
        return key, table[key]
    others = [(name, v) for name, v in table.items() if v]
    return others[0] if others else None


def engine_lines(fig: EngineFigures, n: int, target: float) -> list[str]:
    """The report rows of our engine's figures beside real SIFT's (docs/real-sift.md)."""
    if fig.nprobe is None:
        return [f"| our engine nprobe/nlist for recall@10 {target} (defaults, {fig.simd}) | not reached | 1.70% | - |"]
    real_p, real_nlist = REAL_ENGINE_NPROBE["photo-sift-a 500k"]
    frac, real_frac = fig.nprobe / fig.nlist, real_p / real_nlist
    lines = [f"| our engine nprobe/nlist for recall@10 {target} (u8+f16 defaults, {fig.simd}) | {100 * frac:.2f}% (nprobe "
             f"{fig.nprobe} of {fig.nlist}, recall {fig.recall:.4f}) | {100 * real_frac:.2f}% ({real_p} of {real_nlist}, "
             f"photo-sift-a 500k) | {frac / real_frac:.2f} |"]
    for mode, rate in (("batch", fig.tails_per_code), ("one query per call", fig.single_tails_per_code)):
        real_rate = REAL_TAILS_PER_CODE["photo-sift-a 500k"][mode]
        lines.append(f"| our engine tails read / u8 codes scanned, {mode} | {rate or 0:.3f} | {real_rate:.3f} "
                     f"(photo-sift-a 500k) | {fmt_ratio(rate, real_rate)} |")
    real_tq = " / ".join(f"{v:,.0f} ({name})" for name, v in REAL_TAILS_PER_QUERY.items() if v)
    near = nearer_real(REAL_TAILS_PER_QUERY, n)
    lines.append(f"| our engine tails read per query (codes scanned {fig.codes_per_query:,.0f}) | {fig.tails_per_query:,.0f} | "
                 f"{real_tq} | {fmt_ratio(fig.tails_per_query, near[1] if near else None)} |")
    if fig.scaling is not None:
        family = "avx512" if fig.simd.startswith("avx512") else fig.simd
        real = REAL_SCALING.get(family) or REAL_SCALING["avx512"]
        shown = family if family in REAL_SCALING else "avx512"
        real_text = " / ".join(f"{v:.2f} ({name}, {shown})" for name, v in real.items())
        near = nearer_real(real, n)
        lines.append(f"| our engine batch QPS 2 threads / 1 thread ({len(fig.round_ratios)} alternating rounds, medians; "
                     f"rounds {min(fig.round_ratios):.2f}..{max(fig.round_ratios):.2f}) | {fig.scaling:.2f} | {real_text} | "
                     f"{fmt_ratio(fig.scaling, near[1] if near else None)} |")
    return lines


def fmt_ratio(rep: float | None, real: float | None) -> str:
    if rep is None or not real:
        return "-"
    return f"{rep / real:.2f}"


def report_size(n: int, args, world, sift) -> list[str]:
    import faiss

    t0 = time.perf_counter()
    base, queries = synth.sift_like(n, args.nq, seed=args.seed, world_params=world, sift_params=sift)
    log(f"n={n}: generated in {time.perf_counter() - t0:.1f}s")
    _, gt = compute_groundtruth(base, queries, "l2", k=10, backend="faiss")
    stats, nn = value_stats(base), nn_distance_stats(gt)
    d = ivf_difficulty(base, queries, target=args.target, gt_distances=gt)
    log(f"IVF difficulty: nprobe {d.nprobe} of {d.nlist}; recall by nprobe "
        + ", ".join(f"{p}:{r:.3f}" for p, r in sorted(d.recall_at.items())))
    g = hnsw_difficulty(base, queries, target=args.target, gt_distances=gt)
    log(f"graph difficulty: efSearch {g.ef_search}; recall by efSearch "
        + ", ".join(f"{e}:{r:.3f}" for e, r in sorted(g.recall_at.items())))

    lines = [f"#### synth-sift n={n:,}, {args.nq} queries, seed {args.seed}", "",
             "| property | replica | real SIFT (1M) | replica / real |", "|---|---|---|---|"]
    values = (f"{stats['min']:.0f}..{stats['max']:.0f}" + ("" if stats["integer"] else " (not integer!)"),
              f"{stats['norm_median']:.1f} ({stats['norm_p1']:.1f}..{stats['norm_p99']:.1f})",
              f"{100 * stats['zero_fraction']:.1f}%", f"{stats['mean']:.1f}", f"{nn['nn_median']:.0f} / {nn['nn_p1']:.0f}")
    ratios = ("-", f"{stats['norm_median'] / 512:.2f}", f"{stats['zero_fraction'] / 0.14:.2f}",
              f"{stats['mean'] / 27.5:.2f}", f"{nn['nn_median'] / 237:.2f} / {nn['nn_p1'] / 64:.2f}")
    for label, rep, real, ratio in zip(("values", "L2 norm median (p1..p99)", "zero components", "mean component",
                                        "NN distance median / p1"), values, REAL_VALUES, ratios):
        lines.append(f"| {label} | {rep} | {real} | {ratio} |")
    if d.fraction is None:
        lines.append(f"| IVF-Flat nprobe/nlist for recall@10 {args.target} | not reached | 1.3-1.7% | - |")
    else:
        mid = sum(REAL_IVF_FRACTION) / 2
        lines.append(f"| IVF-Flat nprobe/nlist for recall@10 {args.target} (nlist 4*sqrt(n)) | {100 * d.fraction:.2f}% "
                     f"(nprobe {d.nprobe} of {d.nlist}) | 1.3-1.7% (48-64 of 3840) | {d.fraction / mid:.2f} |")
    ef_real = REAL_EF["faiss-hnsw32"]
    lines.append(f"| faiss HNSW32 efSearch for recall@10 {args.target} | "
                 + ("not reached | 48 | - |" if g.ef_search is None else f"{g.ef_search} | {ef_real} | {g.ef_search / ef_real:.2f} |"))
    if g.ef_search is not None and d.distances_per_query:
        lines.append(f"| distance evaluations per query, IVF-Flat / HNSW32 | {d.distances_per_query:,.0f} / "
                     f"{g.distances_per_query:,.0f} = {d.distances_per_query / g.distances_per_query:.1f} | - | - |")

    fig = engine_figures(base, queries, gt, args.target, rounds=0 if args.no_timing else args.scaling_rounds,
                         single_queries=args.single_queries)
    lines += engine_lines(fig, n, args.target)

    if not args.no_timing:
        with_hnswlib = not args.no_hnswlib
        if with_hnswlib:
            try:
                import hnswlib  # noqa: F401
            except ImportError:
                log("hnswlib is not installed (pip install hnswlib): its rows are skipped")
                with_hnswlib = False
        timed = prepare(base, queries, gt, args.target, 10, d, g, with_hnswlib)
        pages = hugepages.advise_process()  # every index on huge pages, as `vdbbench run` times them
        log(f"huge pages: {pages}")
        threads = faiss.omp_get_max_threads()
        faiss.omp_set_num_threads(1)
        time_all(timed, queries, args.repeats, args.single_queries)
        faiss.omp_set_num_threads(threads)
        by = {t.name: t for t in timed}
        for t in timed:
            log(f"{t.name}: {t.setting}, recall {t.recall:.4f}, batch {t.batch_qps:,.0f} QPS, single {t.single_qps:,.0f} QPS")
        if "hnswlib" in by:
            ef = int(by["hnswlib"].setting.split()[-1])
            lines.append(f"| hnswlib (M 32, ef_construction 200) ef for recall@10 {args.target} | {ef} | 40 | {ef / 40:.2f} |")
        for num, den, mode in RATIOS:
            if num not in by or den not in by:
                lines.append(f"| {num} / {den}, {mode} QPS | not measured | | |")
                continue
            real_tab = REAL_BATCH if mode == "batch" else REAL_SINGLE
            rep = (by[num].batch_qps / by[den].batch_qps if mode == "batch" else by[num].single_qps / by[den].single_qps)
            real = real_tab[num] / real_tab[den]
            what = "batch, 1 thread" if mode == "batch" else "one query per call, 1 thread"
            lines.append(f"| {num} / {den} QPS, {what} | {rep:.2f} | {real:.2f} | {fmt_ratio(rep, real)} |")
        # Each index's batch over one-query-per-call QPS: what the machine (and the library's
        # batch code) does, not the data; where it differs from real SIFT's machine, ratios
        # that mix a batch figure and a single figure across indexes inherit the difference.
        for name in ("ivfpq-fs", "faiss-hnsw32", "hnswlib"):
            if name in by and by[name].single_qps:
                rep, real = by[name].batch_qps / by[name].single_qps, REAL_BATCH[name] / REAL_SINGLE[name]
                lines.append(f"| {name} batch / one query per call QPS, 1 thread (machine, not data) | "
                             f"{rep:.2f} | {real:.2f} | {fmt_ratio(rep, real)} |")
        lines.append(f"| huge pages for every index (THP mode `{pages.get('thp')}`) | "
                     + (f"{pages['anon_huge_mb']:,} MB backed" if pages.get("anon_huge_mb") is not None
                        else pages.get("skipped", "-")) + " | - | - |")
        lines += ["", "Settings at recall@10 >= %.2f and QPS on this machine (1 thread; best of %d rounds, %d single queries): "
                  % (args.target, args.repeats, min(args.single_queries, args.nq))
                  + "; ".join(f"{t.name} {t.setting} (recall {t.recall:.3f}): batch {t.batch_qps:,.0f}, single "
                              f"{t.single_qps:,.0f}" for t in timed) + "."]
    lines += ["", "IVF-Flat recall by nprobe: " + ", ".join(f"{p}: {r:.3f}" for p, r in sorted(d.recall_at.items()))
              + ". HNSW32 recall by efSearch: " + ", ".join(f"{e}: {r:.3f}" for e, r in sorted(g.recall_at.items()))
              + ". Our engine's recall by nprobe: " + ", ".join(f"{p}: {r:.3f}" for p, r in sorted(fig.recall_at.items())) + "."]
    return lines


def report_dataset(path: Path, args) -> list[str]:
    """Value statistics and our engine's figures on an ann-benchmarks HDF5 file (the real set the
    replica is calibrated against), with the file's own exact distances as ground truth."""
    import h5py

    with h5py.File(path, "r") as f:
        base = np.ascontiguousarray(f["train"][:], dtype=np.float32)
        queries = np.ascontiguousarray(f["test"][:], dtype=np.float32)
        gt = np.asarray(f["distances"][:, :10])
    if args.nq and args.nq < len(queries):
        queries, gt = queries[: args.nq], gt[: args.nq]
    stats, nn = value_stats(base), nn_distance_stats(gt)
    fig = engine_figures(base, queries, gt, args.target, rounds=0 if args.no_timing else args.scaling_rounds,
                         single_queries=args.single_queries)
    lines = [f"#### {path.name}: n={len(base):,}, {len(queries)} queries", "",
             "| property | value |", "|---|---|",
             f"| values | {stats['min']:.0f}..{stats['max']:.0f}{'' if stats['integer'] else ' (not integer!)'} |",
             f"| L2 norm median (p1..p99) | {stats['norm_median']:.1f} ({stats['norm_p1']:.1f}..{stats['norm_p99']:.1f}) |",
             f"| zero components | {100 * stats['zero_fraction']:.1f}% |", f"| mean component | {stats['mean']:.2f} |",
             f"| NN distance median / p1 | {nn['nn_median']:.1f} / {nn['nn_p1']:.1f} |"]
    if fig.nprobe is not None:
        lines += [f"| our engine nprobe for recall@10 {args.target} (u8+f16 defaults, {fig.simd}) | {fig.nprobe} of "
                  f"{fig.nlist} ({100 * fig.nprobe / fig.nlist:.2f}%), recall {fig.recall:.4f} |",
                  f"| u8 codes scanned / tails read per query, batch | {fig.codes_per_query:,.0f} / {fig.tails_per_query:,.0f} "
                  f"(tails / codes {fig.tails_per_code:.3f}) |",
                  f"| tails read / codes scanned, one query per call ({min(args.single_queries, len(queries))} queries) | "
                  f"{fig.single_tails_per_code or 0:.3f} |"]
    if fig.scaling is not None:
        lines.append(f"| batch QPS 2 threads / 1 thread ({len(fig.round_ratios)} alternating rounds, medians) | "
                     f"{fig.scaling:.2f} (rounds {', '.join(f'{x:.2f}' for x in fig.round_ratios)}) |")
    lines += ["", "Our engine's recall by nprobe: " + ", ".join(f"{p}: {r:.4f}" for p, r in sorted(fig.recall_at.items())) + "."]
    return lines


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--n", type=parse_size, action="append", help="base size(s), e.g. 100k, 1m (default 100k)")
    ap.add_argument("--nq", type=int, help="queries (default 1000; with --dataset, all of the file's)")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--target", type=float, default=0.95)
    ap.add_argument("--repeats", type=int, default=3, help="timing rounds, best kept (default 3)")
    ap.add_argument("--single-queries", type=int, default=300, help="queries timed one per call (default 300)")
    ap.add_argument("--no-timing", action="store_true", help="difficulty and values only (no QPS ratios)")
    ap.add_argument("--no-hnswlib", action="store_true", help="skip hnswlib (its ef_construction 200 build is the "
                    "slowest step at 1M)")
    ap.add_argument("--set", dest="overrides", type=parse_override, action="append", default=[],
                    help="override a generator parameter, NAME=VALUE (repeatable)")
    ap.add_argument("--scaling-rounds", type=int, default=7, help="alternating 1- and 2-thread batch rounds of our "
                    "engine, medians kept (default 7)")
    ap.add_argument("--dataset", type=Path, help="instead of the replica: value statistics and our engine's figures on "
                    "this ann-benchmarks HDF5 file (e.g. the real photo-sift-a), all its queries unless --nq is given")
    ap.add_argument("--out", type=Path, help="append the Markdown report to this file")
    args = ap.parse_args(argv)
    world, sift = params_with(args.overrides)
    if args.nq is None and args.dataset is None:
        args.nq = 1000
    lines = []
    if args.dataset is not None:
        lines += report_dataset(args.dataset, args) + [""]
    for n in [] if args.dataset is not None else args.n or [100_000]:
        lines += report_size(n, args, world, sift) + [""]
    import faiss

    try:
        import hnswlib
        hl_version = getattr(hnswlib, "__version__", "installed")
    except ImportError:
        hl_version = "absent"
    import vdbbench as vb

    meta = (f"commit {git_commit()}, {cpu_name()}, {os.cpu_count()} cores, SIMD {vb.simd_level()}, load average "
            f"{os.getloadavg()[0]:.1f}, faiss {faiss.__version__}, hnswlib {hl_version}, numpy {np.__version__}")
    if args.dataset is None:
        meta += (f"; generator v{synth.GENERATOR_VERSIONS['sift']}, world {dataclasses.asdict(world)}, "
                 f"sift {dataclasses.asdict(sift)}")
    report = "\n".join(lines) + "\n" + meta + "\n"
    print(report)
    if args.out:
        with open(args.out, "a") as f:
            f.write(f"\n### {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}: "
                    f"`python benchmarks/calibrate_synth.py {' '.join(sys.argv[1:] if argv is None else argv)}`\n\n{report}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
