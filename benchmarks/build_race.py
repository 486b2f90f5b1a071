"""Build time (train + add) of two indexes on the same data and threads, interleaved (ours against faiss IVF-SQ8 by default).

Usage::

    python benchmarks/build_race.py [--dataset synth-sift-1m] [--indexes ivf,faiss-ivf-sq8] \
        [--threads 1,2] [--repeats 2] [--nlist N] [--out benchmarks/results/build-race.md]

Each thread count runs in a child process started with RAYON_NUM_THREADS / OMP_NUM_THREADS set
(both engines read them at start-up), which builds the indexes in turn, `repeats` times, through
the benchmark's adapters with the same training sample rule. Prints (and writes) a markdown
table of median build seconds and the ratio of the first index to each other one.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent


def child(args: argparse.Namespace) -> None:
    import numpy as np

    from vdbbench.adapters.interface import RunOptions
    from vdbbench.bench.data import resolve
    from vdbbench.adapters.registry import adapter_class

    ds = resolve(args.dataset)
    base = np.ascontiguousarray(ds.train, dtype=np.float32)
    times: dict[str, list[dict]] = {name: [] for name in args.indexes}
    for _ in range(args.repeats):
        for name in args.indexes:
            options = RunOptions(nlist=args.nlist)
            adapter = adapter_class(name)(base.shape[1], len(base), ds.metric, options)
            info = adapter.build(base)
            times[name].append({"train_s": info.train_s, "add_s": info.add_s})
            del adapter
    print(json.dumps(times))


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--dataset", default="synth-sift-1m")
    p.add_argument("--indexes", default="ivf,faiss-ivf-sq8")
    p.add_argument("--threads", default="1,2")
    p.add_argument("--repeats", type=int, default=2)
    p.add_argument("--nlist", type=int)
    p.add_argument("--out", help="also write the table here")
    p.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    args = p.parse_args(argv)
    args.indexes = args.indexes.split(",")
    if args.child:
        child(args)
        return 0
    rows = []
    for t in [int(x) for x in args.threads.split(",")]:
        env = dict(os.environ, RAYON_NUM_THREADS=str(t), OMP_NUM_THREADS=str(t), OMP_WAIT_POLICY="PASSIVE")
        cmd = [sys.executable, __file__, "--child", "--dataset", args.dataset, "--indexes", ",".join(args.indexes),
               "--repeats", str(args.repeats)] + (["--nlist", str(args.nlist)] if args.nlist else [])
        out = subprocess.run(cmd, env=env, check=True, capture_output=True, text=True).stdout
        times = json.loads(out.strip().splitlines()[-1])
        med = {n: statistics.median(r["train_s"] + r["add_s"] for r in times[n]) for n in args.indexes}
        detail = {n: statistics.median(r["train_s"] for r in times[n]) for n in args.indexes}
        first = args.indexes[0]
        for n in args.indexes:
            ratio = "" if n == first else f"{med[n] / med[first]:.2f}x"
            rows.append(f"| {t} | {n} | {med[n]:.1f} | {detail[n]:.1f} | {med[n] - detail[n]:.1f} | {ratio} |")
    table = (
        f"Build time (train + add), {args.dataset}, median of {args.repeats} interleaved builds per "
        f"thread count; ratio = that index's time / {args.indexes[0]}'s (above 1: {args.indexes[0]} "
        f"is faster).\n\nCommand: `python benchmarks/build_race.py {' '.join(argv or sys.argv[1:])}`\n\n"
        "| threads | index | build s | train s | add s | its time / first |\n|---|---|---|---|---|---|\n"
        + "\n".join(rows) + "\n"
    )
    print(table)
    if args.out:
        Path(args.out).write_text(table)
    return 0


if __name__ == "__main__":
    sys.exit(main())
