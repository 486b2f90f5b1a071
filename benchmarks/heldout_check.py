"""Recall@10 of a run's headline points on queries the run never saw: is the headline tuned to its queries?

Usage::

    python benchmarks/heldout_check.py RESULT.json [RESULT.json ...] [--queries N] [--reselect]
    python benchmarks/heldout_check.py FOLDER/ivf.json FOLDER/*.json --reselect   # every system of a run

A run made with `--queries Q` tuned its sweep on the first Q queries of its dataset; this
rebuilds the same index through the benchmark's adapter (same build parameters and seed; a peer
whose index the benchmark caches, faiss and the graph libraries, loads it from the cache),
searches queries Q..Q+N (default: all the rest) at each distinct headline parameter set, and
prints the recall next to the run's. Exit 1 if any held-out recall is below the run's target.

--reselect: per mode, walk the run's timed points from the fastest down and keep the first whose
held-out recall reaches the target (the headline the held-out queries would have chosen), print
its QPS (the run's, unpaired), and the first result's QPS over each other's at those points.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import numpy as np

from vdbbench.adapters.interface import RunOptions
from vdbbench.bench.data import resolve
from vdbbench.bench.results import dataset_sha256, load_result, measured_on
from vdbbench.bench.runner import NullReporter, RunConfig, build_index
from vdbbench.common.recall import knn_recall
from vdbbench.adapters.registry import adapter_class


def dataset_ref(ds_info: dict) -> str:
    """What to load the run's data set by: the file it read (a data set given by path, such as
    real descriptors built locally, is recorded under its stem), else its registered name."""
    source = ds_info.get("source")
    if source and Path(source).is_file():
        return source
    return ds_info["name"]


def check(path: Path, nmax: int | None, reselect: bool = False, chosen: dict | None = None) -> bool:
    res = load_result(path)
    ds_info, index, run = res["dataset"], res["index"], res["run"]
    seen = ds_info["nq"]
    if seen >= ds_info.get("nq_total", seen):
        print(f"{path}: the run used every query of {ds_info['name']}; nothing is held out")
        return True
    ds = resolve(dataset_ref(ds_info))
    rows = slice(seen, seen + nmax if nmax else None)
    queries = np.ascontiguousarray(ds.test[rows], dtype=np.float32)
    gt_d = ds.distances[rows]
    base = np.ascontiguousarray(ds.train, dtype=np.float32)
    params = index["params"]
    options = RunOptions(k=run["k"], nlist=params.get("nlist"), storage=params.get("storage", "u8+f16"),
                         seed=params.get("seed", 0))
    if dataset_sha256(ds) != ds_info["sha256"]:
        print(f"{path}: {dataset_ref(ds_info)} is not the data set the run measured (its hash differs)")
        return False
    adapter = adapter_class(index["name"])(ds_info["dim"], ds_info["n"], ds_info["metric"], options)
    build_index(adapter, ds, RunConfig(options=options), NullReporter())
    done = {}

    def held(params) -> float:
        """Held-out recall@10 at `params` (each parameter set searched once)."""
        key = json.dumps(params, sort_keys=True)
        if key not in done:
            ids = adapter.search(queries, run["k"], params, 2)
            done[key] = knn_recall(ids, base, queries, gt_d, k=run["k"], metric=ds_info["metric"])
        return done[key]

    ok = True
    for h in res["headline"]:
        held_recall = held(h["params"])
        ok &= held_recall >= run["target_recall"]
        low = f" (lower bound {h['recall10_low']:.4f})" if h.get("recall10_low") is not None else ""
        print(f"{path.parent.name}/{path.name} {h['mode']} {h['threads']}t {h['params']}: recall@10 "
              f"{h['recall10']:.4f}{low} on the run's {seen} queries, {held_recall:.4f} on {len(queries)} held-out "
              f"(target {run['target_recall']})")
    if reselect:
        for h in res["headline"]:
            pts = sorted((p for p in res["points"] if p["mode"] == h["mode"] and p["threads"] == h["threads"]
                          and p.get("qps") and p["recall10"] >= run["target_recall"] - 0.02),
                         key=lambda p: -p["qps"])
            pick = next((p for p in pts if held(p["params"]) >= run["target_recall"]), None)
            where = f"{h['mode']} {h['threads']}t"
            if pick is None:
                print(f"  {index['name']} {where}: no timed point reaches {run['target_recall']} on held-out queries")
                continue
            if chosen is not None:
                chosen.setdefault(where, {})[index["name"]] = pick["qps"]
            print(f"  {index['name']} {where}: held-out headline {pick['params']} recall "
                  f"{held(pick['params']):.4f}, {pick['qps']:,.0f} QPS (run headline {h['qps'] or 0:,.0f})")
    return ok


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("results", nargs="+", type=Path)
    p.add_argument("--queries", type=int, help="at most this many held-out queries (default all)")
    p.add_argument("--reselect", action="store_true", help="also pick each index's held-out headline")
    a = p.parse_args(argv)
    # `FOLDER/ivf.json FOLDER/*.json`: ours first (the QPS ratios are over the first), each once
    a.results = list(dict.fromkeys(r.resolve() for r in a.results))
    try:  # every file readable, and (the ratios are over the first) all of one run's data
        loaded = [load_result(r) for r in a.results]
    except ValueError as exc:
        print(f"heldout_check: {exc}", file=sys.stderr)
        return 2
    for path, r in zip(a.results[1:], loaded[1:]):
        if measured_on(r) != measured_on(loaded[0]):
            print(f"heldout_check: {path} was measured on {r['dataset']['name']} (nq={r['dataset']['nq']:,}), "
                  f"{a.results[0]} on {loaded[0]['dataset']['name']} (nq={loaded[0]['dataset']['nq']:,}): "
                  "check each run's files on their own", file=sys.stderr)
            return 2
    chosen: dict = {}
    ok = all([check(r, a.queries, a.reselect, chosen) for r in a.results])
    if a.reselect and len(a.results) > 1 and chosen:
        first = loaded[0]["index"]["name"]
        print(f"\nheld-out headlines, {first} QPS / each other's (unpaired, same run):")
        for where, by in chosen.items():
            if first in by:
                cells = [f"{n} {by[first] / q:.2f}x" for n, q in by.items() if n != first]
                print(f"  {where}: " + ", ".join(cells))
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
