"""`vdbbench` subcommands of the bench area: run, plot, compare, gate."""

from __future__ import annotations

import math
import os
import sys
from dataclasses import replace
from pathlib import Path

from rich.markup import escape

from vdbbench.common.errors import UsageError
from vdbbench.bench.run_setup import check_target_recall
from vdbbench.bench.run_setup import int_list as _int_list
from vdbbench.common.recall import RECALL_TARGET, check_confidence

# faiss (OpenMP) shares the process with our rayon pool during a run: its threads must wait
# passively or they spin on a core after each call. This has to be set before faiss is first
# imported, and any area may import it, so it is set when the CLI is assembled.
os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")


def _float_list(flag: str, text: str) -> tuple[float, ...]:
    try:
        values = tuple(float(v) for v in text.split(",") if v.strip())
    except ValueError:
        raise UsageError(f"{flag} expects comma-separated numbers (e.g. 0,1.35), got {text!r}") from None
    if not values:
        raise UsageError(f"{flag} expects comma-separated numbers (e.g. 0,1.35), got {text!r}")
    return values


def _names(text: str | None) -> list[str]:
    return [n.strip() for n in (text or "").split(",") if n.strip()]


def register(subparsers) -> None:
    """Add this area's subcommands to the `vdbbench` parser."""
    from vdbbench.adapters.registry import index_names

    run = subparsers.add_parser(
        "run",
        help="benchmark an index (and peers) on a dataset: QPS at recall@10 >= target",
        description="Build each index once, sweep its knobs adaptively around the target recall, "
        "time batch and single-query search, write one result JSON per index, a Pareto plot "
        "and a headline table. Exit 0: target reached; 1: target missed (files still written); "
        "2: bad usage.",
    )
    run.add_argument("--index", help=f"index under test ({', '.join(index_names())}); default ivf (none with --target)")
    run.add_argument("--dataset", default="sift-1m", help="dataset name or file; default sift-1m")
    run.add_argument("--compare", default="", help="comma-separated peers to run alongside (e.g. faiss-ivf-flat,faiss-hnsw)")
    run.add_argument("--nlist", type=int, help="IVF lists (ours and faiss IVF peers); default 4*sqrt(n)")
    run.add_argument("--nprobe", default="auto", help="auto (adaptive) or a list such as 1,2,4,8 "
                     "(ScaNN: its leaves_to_search)")
    run.add_argument("--reorder", help="l2 u8+f16: rows per query the 4-bit prefilter keeps for the u8 distance, to "
                     "sweep (0 = no prefilter); default 0,10k,20k")
    run.add_argument("--probe-ratio", help="l2 and cosine: probe ratios to sweep for our ivf (0 = every one of "
                     "nprobe lists; r >= 1: only lists whose centroid lies within r times the nearest "
                     "centroid's distance, at least nprobe/4); default 0,1.35")
    run.add_argument("--rerank", help="rerank candidates to sweep for our u8+f16 (0 = u8 alone); default "
                     "0,4k,8k,16k (peers sweep their own knobs: see --knob)")
    run.add_argument("--ef-search", help="search beam list for faiss-hnsw (efSearch), hnswlib (ef) and usearch "
                     "(expansion_search); default adaptive")
    run.add_argument("--knob", action="append", default=[], metavar="INDEX:KNOB=V1,V2,...",
                     help="sweep one knob of one index over these values instead of its own list (repeatable), "
                     "e.g. faiss-ivfpq-fs:k_factor=1,2,4,8,16,32 or scann:reorder=100,200; each peer otherwise "
                     "sweeps its own knobs over its own range (recorded in run.knobs)")
    run.add_argument("--storage", default="u8+f16", choices=("u8+f16", "f16", "f32"), help="storage of our ivf")
    run.add_argument("--threads", help="thread counts, e.g. 1,2 (default: 1 and all cores)")
    run.add_argument("--simd", help="cap the SIMD level of our engine and of faiss alike: scalar, avx2, "
                     "avx512bw, avx512vnni, avx512amx or avx512 (default: the best the CPU has)")
    run.add_argument("--mode", default="batch,single",
                     help="batch, single and/or concurrent (default batch,single); concurrent: --clients "
                     "threads each issue one query per call for --duration seconds")
    run.add_argument("--clients", help="client counts of --mode concurrent (default 1,4,8,16) and of --target "
                     "(default 1,2,4,8)")
    served = run.add_argument_group(
        "served targets", "measure vector servers over HTTP as the seed harness's client does (POST /bulk_insert, "
        "then POST /search, one query per request): each target is loaded, warmed up and timed at every --clients "
        "count in interleaved rounds; recall@10 both as exact ids (the leaderboard's gate) and tie-aware")
    served.add_argument("--target", action="append", default=[],
                        help="a server: http://HOST:PORT (already running, empty), 'serve' (our vdbbench serve, "
                        "started here) or a Cargo folder that serves the API (built and started here with PORT set); "
                        "repeat or comma-separate for several")
    served.add_argument("--serve-args", default="", help="flags for the 'serve' target, e.g. \"--recall-target 0.96\"")
    served.add_argument("--server-cpus", help="pin started servers to these CPUs (taskset list, e.g. 0 or 0-3); "
                        "default: not pinned")
    served.add_argument("--client-cpus", help="pin this process (the client threads) to these CPUs; default: not pinned")
    served.add_argument("--rounds", type=int, default=3, help="interleaved rounds per target and client count (default 3)")
    served.add_argument("--warmup", type=int, default=1000, help="warm-up queries, one client, before timing (default 1000)")
    served.add_argument("--no-insert", action="store_true", help="the URL targets already hold the base vectors")
    served.add_argument("--client", action="append", default=[],
                        help="also run another client on the same data: kcores=PATH (the seed harness's "
                        "vector-db-benchmark binary), against a fresh instance of each started target")
    run.add_argument("--duration", type=float, default=2.0,
                     help="seconds each client count of --mode concurrent runs (default 2)")
    run.add_argument("--time-points", default="frontier", choices=("frontier", "all"),
                     help="frontier (default): time only the swept points on or near the recall/QPS front "
                     "around the target (the others are swept for recall only); all: time every point")
    run.add_argument("--sweep", default="fast", choices=("fast", "full"),
                     help="fast (default): explore each index's knobs on the first 2,000 queries, each "
                     "combination from where the last crossed the target, skip knob steps that stopped paying, "
                     "and time only headline candidates (recall on all queries) in the modes they may win; "
                     "full: every combination swept from the low end on all queries and every point near the "
                     "front timed in every mode (for tables and plots)")
    run.add_argument("--target-recall", type=float, default=RECALL_TARGET,
                     help=f"recall@10 target (default {RECALL_TARGET:g})")
    run.add_argument("--recall-confidence", type=float, default=0.0,
                     help="hold every point (ours and peers alike) to the lower end of a one-sided confidence "
                     "interval of its recall@10, e.g. 0.95: the headline then holds on queries the run never "
                     "saw; default 0: the mean over the queries, as ann-benchmarks reads it")
    run.add_argument("--k", type=int, default=10, help="neighbours per query (default 10)")
    run.add_argument("--out", help="output directory (default ./vdbbench-results/<timestamp>)")
    run.add_argument("--repeats", type=int, default=3, help="timed batch repeats after one warm-up; median kept (default 3)")
    run.add_argument("--stat", default="median", choices=("median", "best"),
                     help="batch QPS from the median repeat (default) or the fastest (steadier on busy machines)")
    run.add_argument("--queries", type=int, help="use only the first N queries (default all)")
    run.add_argument("--single-queries", type=int, default=1000,
                     help="queries timed one by one for latency (default 1000, the first ones)")
    run.add_argument("--baseline", help="a baseline result JSON: also measure its headline parameters "
                     "(so `vdbbench gate` finds them whatever the adaptive sweep visits)")
    run.add_argument("--no-cache", action="store_true", help="rebuild peer indexes instead of loading the cache")
    run.add_argument("--resume", action="store_true", help="continue an interrupted run in --out (or the latest one)")
    run.set_defaults(func=cmd_run)

    plot = subparsers.add_parser("plot", help="draw recall-QPS Pareto fronts of result files (PNG)")
    plot.add_argument("results", nargs="+", help="result JSON files or run directories")
    plot.add_argument("-o", "--output", default="pareto.png", help="PNG to write (default pareto.png)")
    plot.add_argument("--title")
    plot.set_defaults(func=cmd_plot)

    cmp_ = subparsers.add_parser("compare", help="print the differences between two result files")
    cmp_.add_argument("a")
    cmp_.add_argument("b")
    cmp_.set_defaults(func=cmd_compare)

    gate = subparsers.add_parser(
        "gate",
        help="fail (exit 1) when recall or relative QPS regressed against a baseline",
        description="Recall is gated absolutely at the baseline headline's parameters; QPS as the "
        "ratio ours/peer measured in the same run, against the baseline's ratio.",
    )
    gate.add_argument("result", help="result JSON of the index under test")
    gate.add_argument("--baseline", required=True, help="baseline result JSON (its peer results beside it)")
    gate.add_argument("--min-recall", type=float, default=RECALL_TARGET,
                      help=f"recall@10 floor at the baseline's headline parameters (default {RECALL_TARGET:g})")
    gate.add_argument("--max-qps-drop", type=float, default=0.10, help="allowed relative drop of the QPS ratio")
    gate.add_argument("--peer", help="peer whose result sits next to RESULT and BASELINE (e.g. faiss-ivf-flat)")
    gate.set_defaults(func=cmd_gate)


# ---------------------------------------------------------------- run

from vdbbench.bench.run_setup import check_same_data as _check_same_data  # noqa: E402
from vdbbench.bench.run_setup import check_writable as _check_writable  # noqa: E402
from vdbbench.bench.run_setup import load_dataset as _load_dataset  # noqa: E402
from vdbbench.bench.run_setup import out_dir as _out_dir  # noqa: E402


def _options(args):
    from vdbbench.adapters.interface import RunOptions

    if args.k < 1:
        raise UsageError(f"--k expects an integer >= 1, got {args.k}")
    if args.nlist is not None and args.nlist < 1:
        raise UsageError(f"--nlist expects an integer >= 1, got {args.nlist}")
    nprobe = None if args.nprobe.strip().lower() == "auto" else _int_list("--nprobe", args.nprobe)
    rerank = _int_list("--rerank", args.rerank, allow_zero=True) if args.rerank else None
    reorder = _int_list("--reorder", args.reorder, allow_zero=True) if args.reorder else None
    ef = _int_list("--ef-search", args.ef_search) if args.ef_search else None
    ratio = _float_list("--probe-ratio", args.probe_ratio) if args.probe_ratio else None
    knobs = _knob_lists(args.knob)
    try:
        return RunOptions(k=args.k, nlist=args.nlist, nprobe=nprobe, rerank=rerank, reorder=reorder,
                          probe_ratio=ratio, storage=args.storage, ef_search=ef, knobs=knobs)
    except ValueError as exc:  # the rerank, reorder and probe-ratio rules, checked once for every index
        raise UsageError(f"--{exc}") from None


def _knob_lists(texts: list[str]) -> dict[str, dict[str, tuple]]:
    """``--knob INDEX:KNOB=V1,V2`` options as {index: {knob: values}} (integers where they are)."""
    out: dict[str, dict[str, tuple]] = {}
    for text in texts:
        index, _, rest = text.partition(":")
        knob, _, values = rest.partition("=")
        index, knob = index.strip(), knob.strip()
        if not (index and knob and values.strip()):
            raise UsageError(f"--knob expects INDEX:KNOB=V1,V2,... (e.g. faiss-ivfpq-fs:k_factor=1,2,4,8), got {text!r}")
        nums = _float_list(f"--knob {index}:{knob}", values)
        if any(not math.isfinite(v) or v < 0 for v in nums):
            raise UsageError(f"--knob {index}:{knob} expects finite values >= 0, got {values!r}")
        out.setdefault(index, {})[knob] = tuple(int(v) if v.is_integer() else v for v in nums)
    return out


def _config(args):
    from vdbbench.bench.runner import MODES, RunConfig

    threads = _int_list("--threads", args.threads) if args.threads else tuple(sorted({1, os.cpu_count() or 1}))
    modes = tuple(m.strip() for m in args.mode.split(",") if m.strip())
    bad = [m for m in modes if m not in MODES]
    if bad or not modes:
        raise UsageError(f"--mode expects batch, single and/or concurrent, got {args.mode!r}")
    clients = _int_list("--clients", args.clients or "1,4,8,16")
    if not 0 < args.duration < math.inf:  # nan and inf too: a concurrent run would never end
        raise UsageError(f"--duration expects seconds > 0, got {args.duration}")
    if args.repeats < 1:
        raise UsageError(f"--repeats expects an integer >= 1, got {args.repeats}")
    if args.single_queries < 1:
        raise UsageError(f"--single-queries expects an integer >= 1, got {args.single_queries}")
    check_target_recall(args.target_recall)
    try:
        check_confidence(args.recall_confidence)
    except ValueError:
        raise UsageError(f"--recall-confidence expects 0 (off) or a value in [0.5, 1), got {args.recall_confidence}") from None
    extra: tuple[dict, ...] = ()
    if args.baseline:
        base = _load(args.baseline)
        extra = tuple({**h["params"]} for h in base["headline"] if h["params"] is not None)
    return RunConfig(
        target=args.target_recall, threads=threads, modes=modes, repeats=args.repeats,
        single_queries=args.single_queries, use_cache=not args.no_cache, options=_options(args),
        extra_points=extra, stat=args.stat, time_points=args.time_points, clients=clients,
        duration_s=args.duration, recall_confidence=args.recall_confidence, sweep=args.sweep,
    )


def _adapters(names: list[str], under_test: str, ds, options, console) -> dict:
    """Construct each named adapter. The index under test must load (else UsageError); a peer
    that cannot (library missing, plugin broken) is reported by name and left out of the run."""
    from vdbbench.adapters.interface import swept_space
    from vdbbench.adapters.registry import AdapterUnavailable, adapter_class

    adapters = {}
    for n in names:
        try:
            cls = adapter_class(n)
            if not cls.supports(ds.metric):
                raise UsageError(
                    f"index {n!r} does not support the metric {ds.metric!r} of dataset {ds.name}; "
                    f"it supports {', '.join(cls.metrics)}"
                )
            adapter = cls(ds.dim, ds.n, ds.metric, options)
            swept_space(adapter)  # validates explicit lists against this index (nprobe <= nlist, --knob)
        except (UsageError, KeyError):
            raise
        except ValueError as exc:
            raise UsageError(f"{n}: {exc}") from None
        except AdapterUnavailable as exc:
            if n == under_test:
                raise UsageError(str(exc)) from None
            console.print(f"[bold yellow]skipped {n}: {escape(exc.reason)}[/]", highlight=False, soft_wrap=True)
            continue
        except Exception as exc:  # a plugin's constructor may raise anything
            if n == under_test:
                raise UsageError(f"{n}: cannot be set up: {type(exc).__name__}: {exc}") from None
            console.print(f"[bold yellow]skipped {n}: cannot be set up: {type(exc).__name__}: {escape(str(exc))}[/]",
                          highlight=False, soft_wrap=True)
            continue
        adapters[n] = adapter
    return adapters


def _cap_simd(level: str, adapters: dict, console) -> None:
    """Caps every index's library at `level` (--simd); says which cannot be capped."""
    os.environ["VDBBENCH_SIMD"] = level  # subprocesses (and engines loaded later) follow
    done, uncapped = {}, []
    for name, adapter in adapters.items():
        kind = type(adapter)
        if kind not in done:
            try:
                done[kind] = kind.cap_simd(level)
            except ValueError as exc:
                raise UsageError(f"--simd {level}: {exc}") from None
        if done[kind] is None:
            uncapped.append(name)
        else:
            console.print(f"{name}: SIMD capped at {level}, runs {done[kind]}")
    if uncapped:
        console.print(f"[yellow]{', '.join(uncapped)}: no run-time SIMD control; "
                      "they run at the best level their build has[/]")


def cmd_run(args) -> int:
    from rich.console import Console

    from vdbbench.adapters.registry import OURS, index_names
    from vdbbench.bench import results

    console = Console(stderr=True)
    if args.target:
        if args.index or args.compare:
            raise UsageError("--target measures servers; run in-process indexes (--index, --compare) in their own "
                             "command with the same --out, and the report shows both")
        from vdbbench.bench.served_cli import cmd_run_targets

        return cmd_run_targets(args, console)
    args.index = args.index or "ivf"
    names = [args.index] + [n for n in _names(args.compare) if n != args.index]
    known = index_names()
    unknown = [n for n in names if n not in known]
    if unknown:
        raise UsageError(f"unknown index {unknown[0]!r}; valid: {', '.join(known)}")
    config = _config(args)
    stray = [n for n in config.options.knobs if n not in names]
    if stray:
        raise UsageError(f"--knob names {stray[0]!r}, which this run does not measure ({', '.join(names)})")
    if any(n in OURS for n in names):
        from vdbbench.bench.ours import check_engine, engine_max_threads

        try:
            check_engine()
        except ImportError as exc:
            raise UsageError(str(exc)) from None
        # beyond the engine's limit is bad usage found before any build, not an index that failed
        most = engine_max_threads()
        over = [t for t in config.threads if t > most]
        if over:
            raise UsageError(f"--threads {over[0]} exceeds the {most} threads per call our engine "
                             f"accepts (index {', '.join(n for n in names if n in OURS)})")
    if args.queries is not None and args.queries < 1:
        raise UsageError(f"--queries expects an integer >= 1, got {args.queries}")
    out = _out_dir(args)
    _check_writable(out)

    ds = _load_dataset(args.dataset, args.queries, console)
    if ds.synthetic and not args.dataset.startswith("synth-") and not Path(args.dataset).exists():
        console.print(
            f"[bold yellow]WARNING: {args.dataset} is not available here; measuring on the generated "
            f"replica {ds.name} instead (recorded as synthetic in every result).[/]"
        )
    gt_k = ds.neighbors.shape[1] if ds.neighbors is not None else ds.n
    if args.k > min(gt_k, ds.n):  # found now, before any index is built, not as a failed index
        have = (f"the {gt_k} ground-truth neighbours per query" if gt_k < ds.n else f"the {ds.n:,} vectors")
        raise UsageError(f"--k {args.k} exceeds {have} of {ds.name}")
    if args.nlist is not None and args.nlist > ds.n:
        raise UsageError(f"--nlist {args.nlist} exceeds the {ds.n:,} vectors of {ds.name}")
    _check_same_data(out, ds)
    adapters = _adapters(names, args.index, ds, config.options, console)
    names = list(adapters)
    if args.simd:
        _cap_simd(args.simd, adapters, console)

    from vdbbench.bench.plot import plot_results
    from vdbbench.bench.report import (
        RichReporter, bandwidth_markdown, done_text, headline_markdown, headline_table, knobs_markdown,
    )
    from vdbbench.bench.runner import run_index

    console.print(
        f"[bold]vdbbench run[/] {', '.join(names)} on {ds.name} (n={ds.n:,}, dim={ds.dim}, nq={ds.nq:,}, "
        f"{ds.metric}); target recall@10 >= {config.target:g}"
        f"{f' (lower bound at {config.recall_confidence:g} confidence)' if config.recall_confidence else ''}; threads {','.join(map(str, config.threads))}; "
        f"modes {','.join(config.modes)} -> {out}"
    )
    runs, used, failed = [], {}, {}
    with RichReporter(console) as reporter:
        for n, adapter in adapters.items():
            # a --baseline's headline points belong to the index under test, not to its peers
            cfg = config if n == args.index else replace(config, extra_points=())
            try:
                r = run_index(adapter, ds, cfg, out, reporter, resume=args.resume, keep_index=len(adapters) > 1)
            except Exception as exc:  # one broken index (a plugin's build or search) never ends the run
                failed[n] = f"{type(exc).__name__}: {exc}"
                reporter.done(n, f"[red]failed: {escape(failed[n])}[/]")
                continue
            reporter.done(n, done_text(r))
            runs.append(r)
            used[n] = adapter
        if len(runs) > 1:
            from vdbbench.bench.paired import confirm_headlines

            try:
                paired = confirm_headlines([(used[r["index"]["name"]], r) for r in runs], ds, config, reporter)
            except Exception as exc:  # a plugin that failed only now: keep the sweep's own figures
                console.print(f"[bold yellow]paired re-timing skipped: {type(exc).__name__}: {escape(str(exc))}[/]")
                paired = []
            for r in runs:
                r["run"]["paired_with"] = paired if r["index"]["name"] in paired else []
                results.write_json(out / f"{r['index']['name']}.json", r)

    for n, why in failed.items():
        console.print(f"[bold red]{n} failed and was skipped: {escape(why)}[/]", highlight=False, soft_wrap=True)
    if not runs:
        print(f"vdbbench run: no index could be measured ({', '.join(failed)})", file=sys.stderr)
        return 1
    plots = []
    if config.timed_modes and any(p.get("qps") is not None for r in runs for p in r["points"]):
        plot_results(runs, out / "pareto.png", config.target)  # (it refuses a plot of no points)
        plots.append("pareto.png")
    # a --mode concurrent run has no headline (no timed recall/QPS points): its levels are its table
    table_md = (headline_markdown(runs, args.index, config.target) + bandwidth_markdown(runs)
                + knobs_markdown(runs) if config.timed_modes else "")
    if "concurrent" in config.modes:
        from vdbbench.bench.plot import plot_concurrent
        from vdbbench.bench.report import concurrent_markdown, concurrent_table

        plot_concurrent(runs, out / "concurrent.png")
        plots.append("concurrent.png")
        table_md += concurrent_markdown(runs, config.target)
    wide = Console(width=None if sys.stdout.isatty() else 160)  # piped: do not squeeze to 80 columns

    (out / "table.md").write_text(table_md.lstrip("\n"))
    if config.timed_modes:
        wide.print(headline_table(runs, args.index, config.target,
                                  title=f"{ds.name}{' (generated)' if ds.synthetic else ''}: headline QPS"))
    if "concurrent" in config.modes:
        wide.print(concurrent_table(runs, title=f"{ds.name}: concurrent clients, one query per call"))
    for extra in (bandwidth_markdown(runs), knobs_markdown(runs)):
        if extra:
            console.print(extra, markup=False, highlight=False)
    if len(runs) > 1:
        console.print("ratios: from an interleaved re-timing of the headline points (qps_paired), "
                      "so both sides of each ratio saw the same machine load")
    console.print(f"results: {', '.join(str(out / (r['index']['name'] + '.json')) for r in runs)}; "
                  f"plots: {', '.join(str(out / p) for p in plots)}")

    for r in runs:
        if r["index"]["name"] != args.index and not results.target_met(r):
            console.print(f"[yellow]note: peer {r['index']['name']} misses recall10 >= {config.target:g} in some mode/threads[/]")
    if args.index in failed:
        print(f"vdbbench run: {args.index} failed: {failed[args.index]}", file=sys.stderr)
        return 1
    missed = [h for h in runs[0]["headline"] if h["qps"] is None]
    conc = runs[0].get("concurrent") if runs[0]["index"]["name"] == args.index else None
    if conc is not None and not conc["reaches_target"]:
        missed.append({"mode": "concurrent", "threads": 1})
    if missed:
        where = ", ".join(f"{h['mode']} @ {h['threads']}t" for h in missed)
        print(f"vdbbench run: {args.index} reached no recall10 >= {config.target:g} ({where}); "
              f"widen the sweep (--nprobe, --rerank)", file=sys.stderr)
        return 1
    return 0


# ---------------------------------------------------------------- plot / compare / gate


def _expand(paths: list[str]) -> list[Path]:
    out: list[Path] = []
    for p in map(Path, paths):
        if p.is_dir():
            found = sorted(x for x in p.glob("*.json") if not x.name.endswith(".partial.json"))
            if not found:
                raise UsageError(f"{p}: no result files (*.json) in this directory")
            out += found
        else:
            out.append(p)
    return out


def _load(path) -> dict:
    from vdbbench.bench.results import load_result

    try:
        return load_result(path)
    except ValueError as exc:
        raise UsageError(str(exc)) from None


def cmd_plot(args) -> int:
    from vdbbench.bench.plot import plot_results

    paths = list(dict.fromkeys(p.resolve() for p in _expand(args.results)))  # a file named twice: once
    runs = [_load(p) for p in paths]
    names = [r["index"]["name"] for r in runs]
    for p, r in zip(paths, runs):  # one index from two runs (old/ new/): say which line is whose
        if names.count(r["index"]["name"]) > 1:
            r["index"]["name"] += f" ({p.parent.name}/{p.name})"
    out = Path(args.output)
    if out.suffix.lower() != ".png":
        raise UsageError(f"-o expects a .png file name, got {out}")
    try:
        plot_results(runs, out, title=args.title)
    except ValueError as exc:
        raise UsageError(str(exc)) from None
    except OSError as exc:
        raise UsageError(f"cannot write {out}: {exc.strerror or exc}") from None
    print(f"wrote {out}")
    return 0


def cmd_compare(args) -> int:
    from rich.console import Console

    from vdbbench.bench.compare import compare_table, differences_in_setup

    a, b = _load(args.a), _load(args.b)
    console = Console()
    for line in differences_in_setup(a, b):
        console.print(f"[yellow]note: {line}[/]")
    console.print(compare_table(a, b, "A", "B"))
    return 0


def cmd_gate(args) -> int:
    from vdbbench.bench.gate import check

    if not 0.0 < args.min_recall <= 1.0:
        raise UsageError(f"--min-recall expects a value in (0, 1], got {args.min_recall}")
    if not 0.0 <= args.max_qps_drop < 1.0:
        raise UsageError(f"--max-qps-drop expects a fraction in [0, 1), got {args.max_qps_drop}")
    try:
        bad, ok = check(args.result, args.baseline, args.min_recall, args.max_qps_drop, args.peer)
    except ValueError as exc:
        raise UsageError(str(exc)) from None
    for line in ok:
        print(f"ok: {line}")
    for line in bad:
        print(f"FAIL: {line}")
    print("gate: " + ("failed" if bad else "passed"))
    return 1 if bad else 0


