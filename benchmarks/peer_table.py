"""Our IVF against every peer on one dataset, 1 and 2 threads, batch and single: the README table.

Usage (long: builds every peer index once, cached afterwards in $VDBBENCH_DATA/indexes)::

    nice -n 10 python benchmarks/peer_table.py --dataset synth-sift-1m [--queries 2000] [-- extra run options]

Writes one result JSON per index, pareto.png and table.md to benchmarks/results/<dataset>/,
and prints the markdown table (with the machine, SIMD level and git commit it ran on). Every
index is swept in full (`--sweep full`): each over its own knobs' whole lists, all points near
the front timed in every mode, so no peer's best setting is skipped.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from vdbbench.adapters.registry import PEERS
from vdbbench.cli import main as vdbbench_main

HERE = Path(__file__).resolve().parent


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--dataset", default="sift-1m")
    parser.add_argument("--queries", type=int, help="use only the first N queries")
    parser.add_argument("--peers", default=",".join(PEERS), help="comma-separated peers (default all)")
    parser.add_argument("--out", help="default benchmarks/results/<dataset>")
    parser.add_argument("extra", nargs=argparse.REMAINDER, help="more `vdbbench run` options after --")
    args = parser.parse_args(argv)
    out = Path(args.out) if args.out else HERE / "results" / args.dataset
    if out.is_absolute() and out.is_relative_to(Path.cwd()):
        out = out.relative_to(Path.cwd())  # the command printed in the table stays copyable
    run_argv = [
        "run", "--index", "ivf", "--dataset", args.dataset, "--compare", args.peers,
        "--threads", "1,2", "--mode", "batch,single", "--sweep", "full", "--out", str(out),
    ]
    if args.queries:
        run_argv += ["--queries", str(args.queries)]
    run_argv += [a for a in args.extra if a != "--"]
    rc = vdbbench_main(run_argv)
    if rc not in (0, 1):  # bad usage or interrupted: nothing complete to tabulate
        return rc
    if not (out / "ivf.json").exists():  # ivf failed (the run said why): no row to head
        print(f"peer_table: {out / 'ivf.json'} was not written; no table", file=sys.stderr)
        return rc or 1
    ours = json.loads((out / "ivf.json").read_text())
    m, ds, git = ours["machine"], ours["dataset"], ours.get("git") or {}
    # faiss's version from whichever faiss peer of this run wrote a result (a peer whose library
    # is missing is skipped and writes none; the first peer need not be a faiss one)
    faiss = "?"
    for name in args.peers.split(","):
        f = out / f"{name.strip()}.json"
        if f.exists():
            r = json.loads(f.read_text())
            if r["dataset"]["sha256"] == ds["sha256"] and r["machine"].get("faiss"):
                faiss = r["machine"]["faiss"]
                break
    header = (
        f"{ds['name']}{' (generated replica)' if ds['synthetic'] else ''}: n={ds['n']:,}, dim={ds['dim']}, "
        f"nq={ds['nq']:,}; {m['cpu']}, {m['cores']} cores, SIMD {m['simd']}; faiss {faiss}; "
        f"git {git.get('commit', '?')[:10]}{' (dirty)' if git.get('dirty') else ''}\n\n"
        f"Command: `vdbbench {' '.join(run_argv)}`\n\n"
    )
    text = header + (out / "table.md").read_text()
    (out / "table.md").write_text(text)
    print(text)
    return rc


if __name__ == "__main__":
    sys.exit(main())
