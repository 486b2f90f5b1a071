"""Recall@10 of a run's headline points on queries the run never saw (issue 7: "checked on held-out queries").

Usage::

    python benchmarks/heldout_check.py RESULT.json [RESULT.json ...] [--queries N]

A run made with `--queries Q` tuned its sweep on the first Q queries of its dataset; this
rebuilds the same index through the benchmark's adapter (same build parameters and seed; faiss
peers load their cached index), searches queries Q..Q+N (default: all the rest) at each distinct
headline parameter set, and prints the recall next to the run's. Exit 1 if any held-out recall is
below the run's target.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import numpy as np

from vdbbench.bench.adapters import RunOptions
from vdbbench.bench.data import resolve
from vdbbench.bench.metrics import knn_recall
from vdbbench.bench.registry import adapter_class


def check(path: Path, nmax: int | None) -> bool:
    res = json.loads(path.read_text())
    ds_info, index, run = res["dataset"], res["index"], res["run"]
    seen = ds_info["nq"]
    if seen >= ds_info.get("nq_total", seen):
        print(f"{path}: the run used every query of {ds_info['name']}; nothing is held out")
        return True
    ds = resolve(ds_info["name"])
    held = slice(seen, seen + nmax if nmax else None)
    queries = np.ascontiguousarray(ds.test[held], dtype=np.float32)
    gt_d = ds.distances[held]
    base = np.ascontiguousarray(ds.train, dtype=np.float32)
    params = index["params"]
    options = RunOptions(k=run["k"], nlist=params.get("nlist"), storage=params.get("storage", "u8+f16"),
                         seed=params.get("seed", 0))
    adapter = adapter_class(index["name"])(ds_info["dim"], ds_info["n"], ds_info["metric"], options)
    adapter.build(base)
    ok = True
    done = {}
    for h in res["headline"]:
        key = json.dumps(h["params"], sort_keys=True)
        if key not in done:
            ids = adapter.search(queries, run["k"], h["params"], 2)
            done[key] = knn_recall(ids, base, queries, gt_d, k=run["k"], metric=ds_info["metric"])
        held_recall = done[key]
        ok &= held_recall >= run["target_recall"]
        print(f"{path.parent.name}/{path.name} {h['mode']} {h['threads']}t {h['params']}: recall@10 "
              f"{h['recall10']:.4f} on the run's {seen} queries, {held_recall:.4f} on {len(queries)} held-out "
              f"(target {run['target_recall']})")
    return ok


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("results", nargs="+", type=Path)
    p.add_argument("--queries", type=int, help="at most this many held-out queries (default all)")
    a = p.parse_args(argv)
    ok = all([check(r, a.queries) for r in a.results])
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
