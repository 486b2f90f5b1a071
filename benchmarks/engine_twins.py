"""IvfIndex next to its like-for-like faiss twins: recall@10 and QPS, batch and single-query.

    f32     <-> IVF,Flat
    f16     <-> IVF,SQfp16
    u8+f16  <-> IVF,SQ8 + Refine(SQfp16)   (k_factor = rerank / k)
    single-query calls of u8+f16 are also compared with plain IVF,SQ8 at the same nprobe.

Same generated data, nlist, nprobe, threads; one process, one run; QPS is the median of
``--repeats`` timed passes (the first, untimed pass warms caches). faiss trains one coarse
quantizer shared by its three twins; ours trains each index (each with seed 0). Run:

    OMP_WAIT_POLICY=PASSIVE nice -n 10 python benchmarks/engine_twins.py --n 100000
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import subprocess
import time

os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")  # idle OpenMP threads must not spin

import faiss  # noqa: E402
import numpy as np  # noqa: E402
from rich.console import Console  # noqa: E402
from rich.table import Table  # noqa: E402

import vdbbench as vb  # noqa: E402
import vdbbench._rust_vdb as engine  # noqa: E402
from vdbbench.common.recall import knn_recall  # noqa: E402
from vdbbench.datasets.synth import synth_float, synth_sift  # noqa: E402

K = 10


def parse_args():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--data", choices=["sift", "float"], default="sift", help="synth_sift or synth_float")
    p.add_argument("--n", type=int, default=100_000)
    p.add_argument("--nq", type=int, default=1_000)
    p.add_argument("--nlist", type=int, default=None, help="default round(4*sqrt(n))")
    p.add_argument("--nprobe", type=str, default="16,32")
    p.add_argument("--rerank", type=int, default=40)
    p.add_argument("--threads", type=str, default="1,2")
    p.add_argument("--repeats", type=int, default=3)
    p.add_argument("--single", type=int, default=300, help="queries timed one per call")
    p.add_argument("--storages", type=str, default="f32,f16,u8+f16", help="which of ours (and twins) to run")
    p.add_argument("--out", type=str, default=None, help="write the rows as JSON here")
    return p.parse_args()


def ints(s: str) -> list[int]:
    return [int(x) for x in s.split(",") if x]


def median_time(fn, repeats: int) -> float:
    fn()  # warm-up
    times = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return statistics.median(times)


def single_loop(search, queries):
    def run():
        for i in range(len(queries)):
            search(queries[i:i + 1])
    return run


def main() -> int:
    a = parse_args()
    commit = git_commit()  # now, before the run: the tree may move while it runs
    console = Console(width=180)
    gen = synth_sift if a.data == "sift" else synth_float
    base, queries = gen(a.n, a.nq, seed=0)
    dim = base.shape[1]
    nlist = a.nlist or int(round(4 * np.sqrt(a.n)))
    nprobes, threads = ints(a.nprobe), ints(a.threads)
    console.print(f"commit {commit[:10]}; vdbbench._rust_vdb from {engine.__file__}")
    console.print(f"data synth-{a.data} n={a.n} nq={a.nq} dim={dim}; nlist={nlist} nprobe={nprobes} "
                  f"rerank={a.rerank} threads={threads}; simd={vb.simd_level()} faiss={faiss.__version__}")

    flat = faiss.IndexFlatL2(dim)
    flat.add(base)
    gt_d, _ = flat.search(queries, K)
    gt = np.sqrt(np.maximum(gt_d, 0))

    builds = {}
    ours = {}
    storages = [x for x in a.storages.split(",") if x]
    for storage in storages:
        idx = vb.IvfIndex(dim, nlist=nlist, storage=storage, seed=0)
        t0 = time.perf_counter()
        idx.train(base)
        t1 = time.perf_counter()
        idx.add(base)
        builds[f"ours {storage}"] = (t1 - t0, time.perf_counter() - t1, idx.bytes)
        ours[storage] = idx

    t0 = time.perf_counter()
    quantizer = faiss.IndexFlatL2(dim)
    cl = faiss.Clustering(dim, nlist)
    cl.seed = 0
    cl.niter = 10
    cl.train(base, quantizer)
    kmeans_s = time.perf_counter() - t0
    theirs = {}
    qt = faiss.ScalarQuantizer
    for storage, make in {
        "f32": lambda: faiss.IndexIVFFlat(quantizer, dim, nlist),
        "f16": lambda: faiss.IndexIVFScalarQuantizer(quantizer, dim, nlist, qt.QT_fp16),
        "u8": lambda: faiss.IndexIVFScalarQuantizer(quantizer, dim, nlist, qt.QT_8bit),
    }.items():
        if storage == "u8" and "u8+f16" not in storages or storage != "u8" and storage not in storages:
            continue
        ix = make()
        t0 = time.perf_counter()
        ix.train(base)  # the shared quantizer is trained: only the scalar quantizer trains
        t1 = time.perf_counter()
        ix.add(base)
        builds[f"faiss {storage}"] = (kmeans_s + t1 - t0, time.perf_counter() - t1, None)
        theirs[storage] = ix
    if "u8+f16" in storages:
        sq8_base = faiss.IndexIVFScalarQuantizer(quantizer, dim, nlist, qt.QT_8bit)
        t0 = time.perf_counter()
        sq8_base.train(base)
        refine = faiss.IndexRefine(sq8_base, faiss.IndexScalarQuantizer(dim, qt.QT_fp16))
        refine.train(base)
        t1 = time.perf_counter()
        refine.add(base)
        builds["faiss u8+f16"] = (kmeans_s + t1 - t0, time.perf_counter() - t1, None)
        refine.k_factor = a.rerank / K
        theirs["u8+f16"] = refine

    twin_name = {"f32": "IVF,Flat", "f16": "IVF,SQfp16", "u8+f16": f"IVF,SQ8+Refine(SQfp16) k_factor={a.rerank / K:g}"}
    rows = []
    for storage in storages:
        for nprobe in nprobes:
            params = faiss.SearchParametersIVF(nprobe=nprobe)
            if storage == "u8+f16":
                fsearch = lambda q, p=params: refine.search(q, K, params=faiss.IndexRefineSearchParameters(k_factor=a.rerank / K, base_index_params=p))  # noqa: E731
                osearch = lambda q, p=nprobe: ours["u8+f16"].search(q, k=K, nprobe=p, rerank=a.rerank, threads=tcur)  # noqa: E731
            else:
                fsearch = lambda q, ix=theirs[storage], p=params: ix.search(q, K, params=p)  # noqa: E731
                osearch = lambda q, ix=ours[storage], p=nprobe: ix.search(q, k=K, nprobe=p, threads=tcur)  # noqa: E731
            r_ours = knn_recall(osearch_ids(ours, storage, queries, nprobe, a.rerank), base, queries, gt, k=K)
            r_faiss = knn_recall(fsearch(queries)[1], base, queries, gt, k=K)
            for tcur in threads:
                faiss.omp_set_num_threads(tcur)
                for mode in ("batch", "single"):
                    q = queries if mode == "batch" else queries[: a.single]
                    run_o = (lambda q=q: osearch(q)) if mode == "batch" else single_loop(osearch, q)
                    run_f = (lambda q=q: fsearch(q)) if mode == "batch" else single_loop(fsearch, q)
                    to, tf = median_time(run_o, a.repeats), median_time(run_f, a.repeats)
                    st = ours[storage].last_search_stats() if mode == "batch" else None
                    rows.append(dict(storage=storage, twin=twin_name[storage], nprobe=nprobe, threads=tcur,
                                     mode=mode, recall_ours=r_ours, recall_faiss=r_faiss,
                                     qps_ours=len(q) / to, qps_faiss=len(q) / tf, stages=st))
                    console.print(f"  {storage:7s} nprobe={nprobe:3d} t={tcur} {mode:6s} "
                                  f"ours {len(q) / to:9.0f} qps  faiss {len(q) / tf:9.0f} qps")
    # Single-query u8+f16 against plain IVF-SQ8 at the same nprobe.
    sq8_rows = []
    for nprobe in nprobes if "u8+f16" in storages else []:
        for tcur in threads:
            faiss.omp_set_num_threads(tcur)
            q = queries[: a.single]
            params = faiss.SearchParametersIVF(nprobe=nprobe)
            to = median_time(single_loop(lambda x: ours["u8+f16"].search(x, k=K, nprobe=nprobe, rerank=a.rerank, threads=tcur), q), a.repeats)
            tf = median_time(single_loop(lambda x: theirs["u8"].search(x, K, params=params), q), a.repeats)
            r_sq8 = knn_recall(theirs["u8"].search(queries, K, params=params)[1], base, queries, gt, k=K)
            sq8_rows.append(dict(nprobe=nprobe, threads=tcur, qps_ours=len(q) / to, qps_sq8=len(q) / tf, recall_sq8=r_sq8))

    table = Table(title=f"IvfIndex vs faiss twins — synth-{a.data}-{a.n}, nlist={nlist}, k={K}, median of {a.repeats}")
    for col in ("ours", "faiss twin", "nprobe", "thr", "mode", "recall ours", "recall faiss", "QPS ours", "QPS faiss", "ours/faiss"):
        table.add_column(col, justify="right" if col not in ("ours", "faiss twin", "mode") else "left")
    for r in rows:
        table.add_row(r["storage"], r["twin"], str(r["nprobe"]), str(r["threads"]), r["mode"],
                      f"{r['recall_ours']:.4f}", f"{r['recall_faiss']:.4f}", f"{r['qps_ours']:.0f}",
                      f"{r['qps_faiss']:.0f}", f"{r['qps_ours'] / r['qps_faiss']:.2f}x")
    console.print(table)
    t2 = Table(title="single-query calls: ours u8+f16 vs faiss IVF,SQ8 (no refine)")
    for col in ("nprobe", "thr", "recall SQ8", "QPS ours", "QPS SQ8", "ours/SQ8"):
        t2.add_column(col, justify="right")
    for r in sq8_rows:
        t2.add_row(str(r["nprobe"]), str(r["threads"]), f"{r['recall_sq8']:.4f}", f"{r['qps_ours']:.0f}",
                   f"{r['qps_sq8']:.0f}", f"{r['qps_ours'] / r['qps_sq8']:.2f}x")
    console.print(t2)
    ts = Table(title="where our batch time goes (last timed call; CPU microseconds per query, summed over threads)")
    for col in ("ours", "nprobe", "thr", "routing", "prescore", "rerank", "top-k", "codes/query", "reranked/query"):
        ts.add_column(col, justify="right")
    for r in rows:
        st = r["stages"]
        if st:
            per = {k: 1e6 * st[k] / st["nq"] for k in ("routing_s", "prescore_s", "rerank_s", "topk_s")}
            ts.add_row(r["storage"], str(r["nprobe"]), str(r["threads"]), *(f"{per[k]:.1f}" for k in per),
                       f"{st['codes_scanned'] / st['nq']:.0f}", f"{st['candidates_reranked'] / st['nq']:.0f}")
    console.print(ts)
    t3 = Table(title="build (seconds; faiss train includes its one shared k-means)")
    for col in ("index", "train s", "add s", "bytes"):
        t3.add_column(col)
    for name, (tr, ad, by) in builds.items():
        t3.add_row(name, f"{tr:.2f}", f"{ad:.2f}", "" if by is None else f"{by:,}")
    console.print(t3)
    if a.out:
        meta = dict(commit=commit, machine=platform.processor() or platform.machine(), simd=vb.simd_level(),
                    faiss=faiss.__version__, args=vars(a), nlist=nlist)
        with open(a.out, "w") as f:
            json.dump(dict(meta=meta, rows=rows, single_vs_sq8=sq8_rows, builds=builds), f, indent=1)
    return 0


def osearch_ids(ours, storage, queries, nprobe, rerank):
    kw = {"rerank": rerank} if storage == "u8+f16" else {}
    return ours[storage].search(queries, k=K, nprobe=nprobe, **kw)[1]


def git_commit() -> str:
    try:
        return subprocess.run(["git", "rev-parse", "HEAD"], capture_output=True, text=True, check=True).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        return "unknown"


if __name__ == "__main__":
    raise SystemExit(main())
