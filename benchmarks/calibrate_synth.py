"""Calibrate the generated SIFT replica: value statistics and IVF difficulty next to real SIFT's.

    nice -n 10 python benchmarks/calibrate_synth.py --n 100k             # the calibration size
    nice -n 10 python benchmarks/calibrate_synth.py --n 1m --nq 1000     # the check at 1M (minutes)
    python benchmarks/calibrate_synth.py --n 100k --set noise=0.8 --set power=1.6   # try parameters

Difficulty = smallest nprobe for which faiss IndexIVFFlat (exact scan, k-means on the base,
nlist = 4*sqrt(n)) reaches 10-recall@10 >= 0.95 (the shared knn_recall, exact ground truth), as
a fraction of nlist. Real SIFT (shared/DATA_NOTES.md): 1.3-1.7% at 1M. Prints a Markdown table;
--out appends it, with the machine, commit and parameters, to a results file.
"""

from __future__ import annotations

import argparse
import dataclasses
import os
import platform
import subprocess
import sys
import time
from pathlib import Path

os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")

import numpy as np  # noqa: E402

from vdbbench.datasets import synth  # noqa: E402
from vdbbench.datasets.difficulty import ivf_difficulty, nn_distance_stats, value_stats  # noqa: E402
from vdbbench.datasets.groundtruth import compute_groundtruth  # noqa: E402
from vdbbench.datasets.loader import parse_synth_name  # noqa: E402

REAL_SIFT = "real SIFT (DATA_NOTES, 1M)", "0..242", "512.0 (510.9..513.1)", "13-15%", "27.5", "237 / 64", "1.3-1.7%"


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


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--n", type=parse_size, action="append", help="base size(s), e.g. 100k, 1m (default 100k)")
    ap.add_argument("--nq", type=int, default=1000, help="queries (default 1000)")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--target", type=float, default=0.95)
    ap.add_argument("--set", dest="overrides", type=parse_override, action="append", default=[],
                    help="override a generator parameter, NAME=VALUE (repeatable)")
    ap.add_argument("--out", type=Path, help="append the Markdown report to this file")
    args = ap.parse_args(argv)
    world, sift = params_with(args.overrides)
    rows = []
    for n in args.n or [100_000]:
        t0 = time.perf_counter()
        base, queries = synth.sift_like(n, args.nq, seed=args.seed, world_params=world, sift_params=sift)
        gen_s = time.perf_counter() - t0
        _, gt = compute_groundtruth(base, queries, "l2", k=10, backend="faiss")
        stats, nn = value_stats(base), nn_distance_stats(gt)
        d = ivf_difficulty(base, queries, target=args.target, gt_distances=gt)
        frac = "not reached" if d.fraction is None else f"{100 * d.fraction:.2f}% (nprobe {d.nprobe} of {d.nlist})"
        row = (f"synth-sift n={n:,} nq={args.nq} seed={args.seed}", f"{stats['min']:.0f}..{stats['max']:.0f}"
               + ("" if stats["integer"] else " (not integer!)"),
               f"{stats['norm_median']:.1f} ({stats['norm_p1']:.1f}..{stats['norm_p99']:.1f})",
               f"{100 * stats['zero_fraction']:.1f}%", f"{stats['mean']:.1f}",
               f"{nn['nn_median']:.0f} / {nn['nn_p1']:.0f}", frac)
        rows.append(row)
        near = sorted(d.recall_at.items())
        print(f"# n={n}: generated in {gen_s:.1f}s, IVF built in {d.build_s:.1f}s; recall by nprobe: "
              + ", ".join(f"{p}:{r:.3f}" for p, r in near), file=sys.stderr, flush=True)
    header = ("set", "values", "L2 norm median (p1..p99)", "zeros", "mean", "NN dist median / p1",
              f"IVF nprobe/nlist for 10-recall@10 >= {args.target}")
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    lines += ["| " + " | ".join(r) + " |" for r in rows + [REAL_SIFT]]
    import faiss

    meta = (f"commit {git_commit()}, generator v{synth.GENERATOR_VERSION}, {cpu_name()}, {os.cpu_count()} cores, "
            f"faiss {faiss.__version__}, numpy {np.__version__}; world {dataclasses.asdict(world)}, "
            f"sift {dataclasses.asdict(sift)}")
    report = "\n".join(lines) + "\n\n" + meta + "\n"
    print(report)
    if args.out:
        with open(args.out, "a") as f:
            f.write(f"\n### {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}: `{' '.join(sys.argv[1:])}`\n\n{report}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
