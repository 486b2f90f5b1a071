"""How long the agent judge takes per submission on a task card, with this project's engine as both
candidate and best (the installed extension vdbbench._rust_vdb, or --lib).

    python benchmarks/agent_eval_time.py agent/tasks/optimize-ivf-1m.toml

Prints the data set load, the first evaluation (which also builds the best's index) and then
`--submissions` further evaluations as a session's submissions would run them: with the card's
`keep_best_worker` the best's process is kept, so each builds only the candidate's index.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path


def _cpu(ev) -> float:
    """CPU seconds so far of this process, its reaped children and the kept best process."""
    import os
    import resource

    total = 0.0
    for who in (resource.RUSAGE_SELF, resource.RUSAGE_CHILDREN):
        r = resource.getrusage(who)
        total += r.ru_utime + r.ru_stime
    kept = getattr(ev, "_kept", None)
    if kept is not None:
        try:
            fields = Path(f"/proc/{kept[1].proc.pid}/stat").read_text().rsplit(")", 1)[1].split()
            total += (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
        except (OSError, IndexError, ValueError):
            pass
    return total


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("card")
    ap.add_argument("--lib", help="the built extension to judge (default: the installed vdbbench._rust_vdb)")
    ap.add_argument("--submissions", type=int, default=2)
    ap.add_argument("--timeout", type=float, help="override the card's eval_timeout_s (a loaded machine builds slowly)")
    args = ap.parse_args(argv)

    from vdbbench.agent.core.task import load_task
    from vdbbench.agent.evaluation.eval_data import make_eval_data
    from vdbbench.agent.evaluation.evaluator import Evaluator
    from vdbbench.agent.evaluation.judge import SequentialTest
    from vdbbench.bench.results import cpu_model

    card = load_task(args.card)
    if args.timeout:
        card.limits.eval_timeout_s = args.timeout
    if args.lib:
        lib = Path(args.lib)
    else:
        import vdbbench._rust_vdb as ext

        lib = Path(ext.__file__)
    print(f"card {card.name}: {card.dataset.name}, batch {card.batch_queries} queries, repeats >= "
          f"{card.objective.repeat_seconds:g} s ({card.objective.clock_kind} clock), pairs "
          f"{card.objective.repeats}..{card.objective.max_pairs}, keep_best_worker={card.limits.keep_best_worker}; "
          f"cpu {cpu_model()}", flush=True)
    t = time.monotonic()
    data = make_eval_data(card)
    print(f"data: {time.monotonic() - t:.1f} s ({data.dataset})", flush=True)
    test = SequentialTest.for_card(card)
    with tempfile.TemporaryDirectory() as tmp:
        ev = Evaluator(card, data, Path(tmp))
        try:
            for i in range(1 + args.submissions):
                t = time.monotonic()
                cpu0 = _cpu(ev)
                rep = ev.run("heldout", lib, lib, stop=test.stop, fresh=True)
                took = time.monotonic() - t
                cpu = _cpu(ev) - cpu0
                if rep.failure or rep.best_failure:
                    print(f"failed: {rep.failure or rep.best_failure}")
                    return 1
                c = rep.candidate
                what = "first (builds both indexes)" if i == 0 else f"submission {i}"
                print(f"{what}: {took:.1f} s wall, {cpu:.1f} CPU-seconds (harness and both workers); candidate index train {c.train_s:.1f} s + add {c.add_s:.1f} s; "
                      f"{rep.pairs} pairs ({rep.stopped}), gain {rep.gain:+.1%}, spread {rep.spread or 0:.1%}; "
                      f"{c.qps:,.0f} QPS, recall@10 {c.recall10:.4f}, "
                      + (f"fresh {rep.fresh.recall10:.4f}" if rep.fresh else "fresh not run (held-out recall under the floor)"),
                      flush=True)
        finally:
            ev.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
