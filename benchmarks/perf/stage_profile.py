"""Where a search's time goes: the engine's stage clocks (`last_search_stats`) of IVF u8+f16,
batch and one query per call, one thread, best of 3 passes, in µs per query.

Usage::

    python benchmarks/perf/stage_profile.py NPROBE RERANK [--dataset synth-sift-100k] [--queries N]
        [--index FILE.vdb] [--rebuild] [--json OUT.json]

Without --index the index is built in this process (the engine's defaults, seed 0). With it, the
file is loaded when it exists, else built and saved there, so repeated profiles of a large set
skip the build (--rebuild builds it again). Prints one line per mode: QPS, recall@10, the wall
time and routing / prescore / rerank / top-k per query, codes scanned and candidates reranked;
--json writes the same figures.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

import numpy as np

import vdbbench as vb
from vdbbench.common.recall import knn_recall
from vdbbench.datasets.groundtruth import ensure_groundtruth
from vdbbench.datasets.loader import resolve

STAGES = ("routing_s", "prescore_s", "rerank_s", "topk_s")


def load_or_build(base: np.ndarray, path: Path | None, rebuild: bool) -> vb.IvfIndex:
    if path is not None and path.exists() and not rebuild:
        return vb.IvfIndex.load(str(path))
    t = time.perf_counter()
    idx = vb.IvfIndex(dim=base.shape[1], storage="u8+f16", seed=0)
    idx.train(base)
    idx.add(base)
    print(f"build {time.perf_counter() - t:.1f} s", flush=True)
    if path is not None:
        path.parent.mkdir(parents=True, exist_ok=True)
        idx.save(str(path))
    return idx


def profile(idx: vb.IvfIndex, q: np.ndarray, mode: str, nprobe: int, rerank: int):
    """Best of 3 passes: (seconds, summed stage stats, ids)."""
    best = None
    for _ in range(3):
        t = time.perf_counter()
        if mode == "batch":
            _, ids = idx.search(q, k=10, nprobe=nprobe, rerank=rerank, threads=1)
            agg = dict(idx.last_search_stats())
        else:
            ids, agg = np.empty((len(q), 10), np.int64), {}
            for i in range(len(q)):
                _, ids[i:i + 1] = idx.search(q[i:i + 1], k=10, nprobe=nprobe, rerank=rerank, threads=1)
                for key, v in idx.last_search_stats().items():
                    if not isinstance(v, dict):  # the nested named timers are not profiled here
                        agg[key] = agg.get(key, 0) + v
        elapsed = time.perf_counter() - t
        if best is None or elapsed < best[0]:
            best = (elapsed, agg, ids)
    return best


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="benchmarks/perf/stage_profile.py", description=__doc__.splitlines()[0])
    p.add_argument("nprobe", type=int)
    p.add_argument("rerank", type=int)
    p.add_argument("--dataset", default="synth-sift-100k")
    p.add_argument("--queries", type=int, default=0, help="the first N queries (default all)")
    p.add_argument("--index", type=Path, help="an IvfIndex file: loaded if it exists, else built and saved there")
    p.add_argument("--rebuild", action="store_true", help="build the --index file again")
    p.add_argument("--json", type=Path, help="also write the figures here")
    args = p.parse_args(argv)

    ds, gtdir = resolve(args.dataset)
    ds = ensure_groundtruth(ds, gtdir, progress=False)
    base = np.ascontiguousarray(ds.train, dtype=np.float32)
    q, gtd = np.ascontiguousarray(ds.test, dtype=np.float32), ds.distances
    if args.queries:
        q, gtd = q[:args.queries], gtd[:args.queries]
    idx = load_or_build(base, args.index, args.rebuild)
    out = {"dataset": args.dataset, "nprobe": args.nprobe, "rerank": args.rerank, "queries": len(q),
           "simd": vb.simd_level(), "modes": {}}
    for mode in ("batch", "single"):
        elapsed, agg, ids = profile(idx, q, mode, args.nprobe, args.rerank)
        nq = len(q)
        row = {"qps": nq / elapsed, "recall10": float(knn_recall(ids, base, q, gtd)),
               "total_us": elapsed / nq * 1e6, "wall_us": agg["wall_s"] / nq * 1e6,
               **{s.removesuffix("_s") + "_us": agg[s] / nq * 1e6 for s in STAGES},
               "codes_per_query": agg["codes_scanned"] / nq,
               "reranked_per_query": agg["candidates_reranked"] / nq}
        out["modes"][mode] = row
        print(f"{mode}: QPS {row['qps']:,.0f} recall {row['recall10']:.4f}  per query us: total "
              f"{row['total_us']:.1f} wall {row['wall_us']:.1f} "
              + " ".join(f"{s.removesuffix('_s')}={row[s.removesuffix('_s') + '_us']:.1f}" for s in STAGES)
              + f" codes/q {row['codes_per_query']:.0f} cand/q {row['reranked_per_query']:.0f}", flush=True)
    if args.json:
        args.json.write_text(json.dumps(out, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
