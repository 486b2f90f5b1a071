"""`vdbbench run --target ...`: the command-line side of served targets (flags checked, data
loaded, targets measured, tables and plots written)."""

from __future__ import annotations

import os
import shlex
import sys

from rich.markup import escape

from vdbbench.common.errors import UsageError

DEFAULT_TARGET_CLIENTS = "1,2,4,8"


def _config(args):
    from vdbbench.bench import run_setup
    from vdbbench.bench.run_setup import int_list
    from vdbbench.bench.served_run import ServedConfig
    from vdbbench.served.process import parse_cpus

    clients = int_list("--clients", args.clients or DEFAULT_TARGET_CLIENTS)
    if args.rounds < 1:
        raise UsageError(f"--rounds expects an integer >= 1, got {args.rounds}")
    if args.warmup < 0:
        raise UsageError(f"--warmup expects an integer >= 0, got {args.warmup}")
    run_setup.check_target_recall(args.target_recall)
    for flag, cpus in (("--server-cpus", args.server_cpus), ("--client-cpus", args.client_cpus)):
        try:
            parse_cpus(cpus)
        except ValueError as exc:
            raise UsageError(f"{flag}: {exc}") from None
    try:
        serve_args = shlex.split(args.serve_args)
    except ValueError as exc:
        raise UsageError(f"--serve-args: {exc}") from None
    return ServedConfig(clients=clients, warmup=args.warmup, k=args.k, target=args.target_recall, rounds=args.rounds,
                        server_cpus=args.server_cpus, serve_args=serve_args, insert=not args.no_insert)


def _other_clients(args) -> dict[str, str]:
    out = {}
    for spec in args.client:
        name, _, path = spec.partition("=")
        if name != "kcores" or not path:
            raise UsageError(f"--client {spec!r}: expected kcores=PATH (the seed harness's vector-db-benchmark binary)")
        if not (os.path.isfile(path) and os.access(path, os.X_OK)):
            raise UsageError(f"--client kcores={path}: not an executable file")
        out[name] = path
    return out


def cmd_run_targets(args, console) -> int:
    from vdbbench.bench import run_setup
    from vdbbench.bench.served_run import parse_target, run_targets
    from vdbbench.served.client import ServedError
    from vdbbench.served.process import parse_cpus

    specs = [s.strip() for t in args.target for s in t.split(",") if s.strip()]
    if not specs:
        raise UsageError("--target: name at least one server")
    cfg = _config(args)
    others = _other_clients(args)
    try:
        for s in specs:
            parse_target(s, cfg)  # found now, before any data is loaded
    except (ValueError, ServedError) as exc:
        raise UsageError(str(exc)) from None
    if args.queries is not None and args.queries < 1:
        raise UsageError(f"--queries expects an integer >= 1, got {args.queries}")
    out = run_setup.out_dir(args)
    run_setup.check_writable(out)
    ds = run_setup.load_dataset(args.dataset, args.queries, console)
    if ds.neighbors is None:
        raise UsageError(f"{ds.name} has no ground truth: a served run scores recall against it")
    if args.k > ds.neighbors.shape[1]:
        raise UsageError(f"--k {args.k} exceeds the {ds.neighbors.shape[1]} ground-truth neighbours of {ds.name}")
    run_setup.check_same_data(out, ds)
    mine = os.sched_getaffinity(0) if args.client_cpus else None
    if args.client_cpus:  # the client threads start from this thread and inherit it; undone below
        os.sched_setaffinity(0, parse_cpus(args.client_cpus))
    console.print(
        f"[bold]vdbbench run[/] --target {', '.join(specs)} on {ds.name} (n={ds.n:,}, dim={ds.dim}, nq={ds.nq:,}); "
        f"clients {','.join(map(str, cfg.clients))}, {cfg.rounds} interleaved round(s), warm-up {cfg.warmup}; "
        f"server CPUs {args.server_cpus or 'not pinned'}, client CPUs {args.client_cpus or 'not pinned'} -> {out}")

    def say(text: str) -> None:
        console.print(escape(text), highlight=False, soft_wrap=True)

    try:
        runs = run_targets(specs, ds, cfg, out, say, others)
    except ServedError as exc:
        print(f"vdbbench run: {exc}", file=sys.stderr)
        return 1
    finally:
        if mine is not None:
            os.sched_setaffinity(0, mine)
    _write_tables(runs, ds, cfg, out, console)
    missed = [r["index"]["name"] for r in runs if not r["concurrent"]["reaches_target"]]
    if missed:
        print(f"vdbbench run: {', '.join(missed)} below recall@10 >= {cfg.target:g} as exact ids, failed the "
              "anti-cheat check, or had failed requests (see table.md)", file=sys.stderr)
        return 1
    return 0


def _write_tables(runs, ds, cfg, out, console) -> None:
    from rich.console import Console

    from vdbbench.bench.plot import plot_concurrent
    from vdbbench.bench.report import served_markdown, served_table

    plot_concurrent(runs, out / "concurrent.png")
    (out / "table.md").write_text(served_markdown(runs, cfg.target).lstrip("\n"))
    wide = Console(width=None if sys.stdout.isatty() else 160)
    wide.print(served_table(runs, title=f"{ds.name}{' (generated)' if ds.synthetic else ''}: served, one query per "
                            "request (QPS: median round)"))
    console.print(f"results: {', '.join(str(out / (r['index']['name'] + '.json')) for r in runs)}; "
                  f"table: {out / 'table.md'}; plot: {out / 'concurrent.png'}")
