"""`vdbbench agent evaluate-entry FOLDER --task CARD`: a server folder (a Cargo project speaking the
vector-db-bench API, such as an entry of that public leaderboard) measured by a served card's
judge on this machine and this card's data, so that a published row can be set beside a session
measured the same way: same machine, same data, same client, same gate.

The folder is built as it is (`cargo build --release`, its own Cargo.toml and profile, as
vdbbench.served.process.CargoServer builds a served target), its server run as a session's best would be (pinned to the card's
cores, the base vectors inserted, the warm-up, then the held-out queries with the card's
concurrency, one query per request, exact-id recall@10, the anti-cheat check, the fresh queries).
With --against, a second folder (or `start`, the card's own start version) is timed in
interleaved pairs with it, through the same client, and the gain comes with its interval."""

from __future__ import annotations

import json
import math
import shutil
import time
from pathlib import Path

from vdbbench.common.errors import UsageError


def register(sub) -> None:
    p = sub.add_parser(
        "evaluate-entry",
        help="measure a server folder (e.g. a vector-db-bench leaderboard entry) with a served card's judge, here",
        description=__doc__.split("\n\n")[0].replace("`", ""),
    )
    p.add_argument("folder", help="a Cargo project whose binary speaks the vector-db-bench HTTP API")
    p.add_argument("--task", required=True, help="a served task card, e.g. agent/tasks/serve-from-scratch-1m.toml")
    p.add_argument("--against", help="another server folder, or 'start' (the card's start version), timed in pairs with it")
    p.add_argument("--cpus", help="the servers' cores as a taskset list (default: the card's)")
    p.add_argument("--target-dir", help="cargo folder for the builds (default: each folder's own target/; the card's "
                                        "start, for --against start, under --out)")
    p.add_argument("--out", default="entry-evaluations", help="folder for the builds and server logs (default ./entry-evaluations)")
    p.add_argument("--json", metavar="FILE", help="also write the figures as JSON")
    p.set_defaults(func=cmd_evaluate_entry)


def _build(folder: Path, timeout_s: float, target_dir: Path | None, keep: Path) -> Path:
    """`cargo build --release` of the folder as the leaderboard's harness builds an entry; its
    binary, copied to `keep` at once (a later build in the same cargo folder may replace it)."""
    from vdbbench.served.client import ServedError
    from vdbbench.served.process import CargoServer

    try:
        built = CargoServer(folder, build_timeout_s=timeout_s, target_dir=target_dir).build()
    except ServedError as exc:
        raise UsageError(str(exc)) from None
    keep.parent.mkdir(parents=True, exist_ok=True)
    shutil.copy2(built, keep)
    return keep


def evaluate(folder: Path, card, out: Path, against: str | None = None, target_dir: Path | None = None) -> dict:
    """The figures of FOLDER's server under the card's judge (and its pairing with `against`)."""
    from vdbbench.agent.core import workspace as wsp
    from vdbbench.agent.evaluation.eval_data import make_eval_data
    from vdbbench.agent.evaluation.judge import SequentialTest
    from vdbbench.agent.evaluation.served import ServedEvaluator

    out.mkdir(parents=True, exist_ok=True)
    binary = _build(folder, card.build.timeout_s, target_dir, out / "builds" / "entry" / folder.name)
    other = None
    if against == "start":
        src = out / "start"
        if src.exists():
            shutil.rmtree(src)
        wsp.create_workspace(card, src)
        res = wsp.build(src, card, target_dir or out / "target", out / "builds" / "start")
        if not res.ok:
            raise UsageError(f"the card's start version does not build: {res.errors}")
        other = res.library
    elif against:
        other = _build(Path(against).resolve(), card.build.timeout_s, target_dir, out / "builds" / "against" / Path(against).name)
    data = make_eval_data(card)
    ev = ServedEvaluator(card, data, out)
    test = SequentialTest.for_card(card)
    t0 = time.monotonic()
    report = ev.run("heldout", binary, other, stop=test.stop if other is not None else None, fresh=True)
    ev.close()
    c, b = report.candidate, report.best
    result = {"folder": str(folder), "task": card.name, "data": data.dataset, "server": ev.describe(),
              "seconds": round(time.monotonic() - t0, 1)}
    if report.failure or report.best_failure:
        result["failure"] = (report.failure or report.best_failure).text
        result["failed"] = "entry" if report.failure else "against"
        return result
    result.update(qps=c.qps, own_qps=c.own_qps, recall10_ids=c.recall10, p50_ms=c.p50_ms, queries_timed=c.queries_timed,
                  fresh_recall10_ids=report.fresh.recall10 if report.fresh else None,
                  passes_gate=c.recall10 >= card.objective.recall_floor, gate=card.objective.recall_floor)
    if b is not None and report.log_ratios:
        m, lo, hi = test.bounds(report.log_ratios)
        result.update(against=str(against), against_qps=b.qps, against_recall10_ids=b.recall10, gain=report.gain,
                      gain_low=math.expm1(lo), gain_high=math.expm1(hi), pairs=report.pairs)
    return result


def text(result: dict, published_row: dict | None) -> str:
    from vdbbench.agent.evaluation.eval_report import fmt_qps

    ds = result["data"] or {}
    lines = [f"{result['folder']} under the judge of {result['task']}: data {ds.get('loaded') or ds.get('name')} "
             f"({ds.get('n', 0):,} vectors{'; a generated replica' if ds.get('synthetic') else ''}), "
             f"{result['server']['clients']} clients, {result['server']['pinning']}"]
    if "failure" in result:
        lines.append(f"FAILED ({result['failed']}): {result['failure']}")
        return "\n".join(lines)
    gate = "passes" if result["passes_gate"] else "FAILS"
    own = result["own_qps"] or result["qps"]
    lines.append(f"QPS {fmt_qps(own)}, recall@10 (exact ids) {result['recall10_ids']:.4f} ({gate} the {result['gate']} gate), "
                 f"p50 {result['p50_ms']:.3f} ms, fresh-query recall {result['fresh_recall10_ids'] or 0:.4f}, "
                 f"{result['queries_timed']:,} queries timed")
    if "gain" in result:
        lines.append(f"against {result['against']}: {fmt_qps(result['against_qps'])} QPS, recall@10 "
                     f"{result['against_recall10_ids']:.4f}; entry / against = {1 + result['gain']:.3f} over {result['pairs']} "
                     f"interleaved pairs (interval {1 + result['gain_low']:.3f} .. {1 + result['gain_high']:.3f})")
    if published_row:
        from vdbbench.agent.reports import published

        lines.append(f"published for {published_row['entry']}: {fmt_qps(published_row['qps'])} QPS at recall "
                     f"{published_row['recall10']:.4f} on their machine ({published.load()['machine']}), not this one")
    return "\n".join(lines)


def cmd_evaluate_entry(args) -> int:
    from vdbbench.agent.core.task import TaskError, load_task, parse_cpus
    from vdbbench.agent.reports import published

    try:
        card = load_task(args.task)
        if args.cpus is not None:
            parse_cpus(args.cpus, "--cpus")
            card.evaluation.cpus = args.cpus
    except TaskError as exc:
        raise UsageError(str(exc)) from None
    if not card.evaluation.served:
        raise UsageError(f"{args.task} is not a served card ([evaluation] kind = \"served\"); try agent/tasks/serve-from-scratch.toml")
    folder = Path(args.folder).resolve()
    if not folder.is_dir():
        raise UsageError(f"{args.folder} is not a folder")
    result = evaluate(folder, card, Path(args.out).resolve(), args.against,
                      Path(args.target_dir).resolve() if args.target_dir else None)
    row = next((r for r in published.load()["rows"] if r["entry"] == folder.name), None)
    if row:
        result["published"] = {**row, "machine": published.load()["machine"], "source": published.load()["source"]}
    print(text(result, row))
    if args.json:
        Path(args.json).write_text(json.dumps(result, indent=2, default=str) + "\n")
    return 1 if "failure" in result else 0


__all__ = ["register", "evaluate", "cmd_evaluate_entry"]
