"""The benchmark runner: build an index once, sweep its knobs around the target, time every point."""

from __future__ import annotations

import copy
import json
import os
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from vdbbench.bench import cache, hugepages, results, rivals
from vdbbench.bench.bandwidth import read_gbps_once
from vdbbench.bench.concurrent import DEFAULT_CLIENTS, DEFAULT_DURATION_S, measure_levels
from vdbbench.bench import fastsweep
from vdbbench.bench.frontier import FAST_SLACK, SLACK, select_for_timing
from vdbbench.adapters.interface import Adapter, BuildInfo, ParamSpace, RunOptions, swept_space
from vdbbench.common.recall import (
    RECALL_TARGET, check_confidence, id_recall, knn_recall_per_query, recall_lower_bound, recall_standard_error,
)
from vdbbench.bench.sweep import adaptive_values, combo_key, stops_paying
from vdbbench.bench.timing import time_batch, time_single

MODES = ("batch", "single", "concurrent")
TIMED_MODES = ("batch", "single")  # timed per point and thread count; concurrent at one point
TIME_POINTS = ("frontier", "all")
SWEEPS = ("fast", "full")  # see `fastsweep` for what a fast sweep measures


@dataclass
class RunConfig:
    """How to measure: the same for every index of a run, so their results compare."""

    target: float = RECALL_TARGET
    # 0: a point reaches the target when its mean recall@10 over the queries does; P in
    # [0.5, 1): when the lower end of its one-sided P confidence interval does (`recall_lower_bound`)
    recall_confidence: float = 0.0
    threads: tuple[int, ...] = (1,)
    modes: tuple[str, ...] = ("batch",)
    repeats: int = 3
    warmup: int = 1
    stat: str = "median"  # batch QPS from the median repeat, or "best" (the fastest)
    single_queries: int = 1000  # single-query latency is measured on the first N queries
    use_cache: bool = True
    max_bisect: int = 4
    # parameter sets measured in addition to the sweep (e.g. a baseline's headline points, so
    # that `vdbbench gate` finds them whatever the sweep visits); ignored when their knobs differ
    extra_points: tuple[dict, ...] = ()
    options: RunOptions = field(default_factory=RunOptions)
    # "frontier": time only the swept points on or near the recall/QPS front around the target
    # (see bench.frontier); "all": time every swept point
    time_points: str = "frontier"
    clients: tuple[int, ...] = DEFAULT_CLIENTS  # client counts of the concurrent mode
    duration_s: float = DEFAULT_DURATION_S  # seconds per client count
    # "fast": explore on a query sample (`fastsweep.SWEEP_QUERIES`), from where the last combination crossed
    # the target, skip knob steps that stopped paying, time only headline candidates in the modes
    # they may win; "full": every combination doubled from the low end on all queries, and
    # every point near the front timed in every mode (`time_points`)
    sweep: str = "fast"

    def __post_init__(self):
        if not self.threads or any(t < 1 for t in self.threads):
            raise ValueError(f"threads must be >= 1, got {list(self.threads)}")
        bad = [m for m in self.modes if m not in MODES]
        if bad or not self.modes:
            raise ValueError(f"unknown mode {bad[0] if bad else '(none)'}; expected batch, single and/or concurrent")
        if self.repeats < 1:
            raise ValueError(f"repeats must be >= 1, got {self.repeats}")
        if self.stat not in ("median", "best"):
            raise ValueError(f"stat must be median or best, got {self.stat!r}")
        if not 0.0 < self.target <= 1.0:
            raise ValueError(f"target recall must be in (0, 1], got {self.target}")
        check_confidence(self.recall_confidence)
        if self.time_points not in TIME_POINTS:
            raise ValueError(f"time_points must be frontier or all, got {self.time_points!r}")
        if not self.clients or any(c < 1 for c in self.clients):
            raise ValueError(f"clients must be >= 1, got {list(self.clients)}")
        if self.duration_s <= 0:
            raise ValueError(f"duration must be > 0 s, got {self.duration_s}")
        if self.sweep not in SWEEPS:
            raise ValueError(f"sweep must be fast or full, got {self.sweep!r}")

    @property
    def timed_modes(self) -> tuple[str, ...]:
        return tuple(m for m in self.modes if m in TIMED_MODES)


class NullReporter:
    """Progress sink used when nobody watches (tests, library use)."""

    def phase(self, index: str, text: str) -> None:
        pass

    def advance(self, index: str) -> None:
        pass


def _measure_bytes(adapter: Adapter) -> int | None:
    """The saved index's size, or None for an adapter that cannot save and did not say."""
    with tempfile.TemporaryDirectory() as tmp:
        path = os.path.join(tmp, "index")
        try:
            adapter.save(path)
        except NotImplementedError:
            return None
        return os.path.getsize(path)


def build_index(adapter: Adapter, dataset, config: RunConfig, reporter) -> tuple[BuildInfo, dict]:
    """Build (or, for cacheable peers, load from the cache); return what it cost and what
    backing the process's memory with huge pages afterwards did (``hugepages.advise_process``:
    every index is timed on huge pages, not only the engines that advise their own memory)."""
    sha = results.dataset_sha256(dataset)
    info = None
    if adapter.cacheable and config.use_cache:
        reporter.phase(adapter.name, "loading cached index")
        info = cache.load_cached(adapter, sha)
    if info is None:
        reporter.phase(adapter.name, f"building (n={dataset.n:,})")
        info = adapter.build(dataset.train)
        if adapter.cacheable and config.use_cache:
            reporter.phase(adapter.name, "saving index to cache")
            info = cache.store(adapter, sha, info)
        elif info.bytes is None:
            info = BuildInfo(info.train_s, info.add_s, _measure_bytes(adapter), info.cached)
    reporter.phase(adapter.name, "advising huge pages")
    return info, hugepages.advise_process()


class _PointEvaluator:
    """Recall of a parameter set on the first ``queries`` queries (default all; one batch search),
    memoised and resumable; that call's QPS is kept as the estimate that picks the points worth
    timing. With a ``confidence`` the point also carries ``recall10_low``, the lower bound the
    target holds it to."""

    def __init__(self, adapter, dataset, k, threads, recalls: dict, confidence: float = 0.0,
                 saved: Callable[[], None] = lambda: None, queries: int | None = None):
        self.adapter, self.ds, self.k, self.threads = adapter, dataset, k, threads
        self.recalls = recalls  # point_key -> {"recall10", "recall10_se", "recall10_ids", "qps_estimate"}
        self.confidence = confidence
        self.saved = saved  # called after each new recall: the sweep is kept as it goes, for --resume
        self.nq = min(queries or dataset.nq, dataset.nq)

    def known(self, params: dict) -> bool:
        return "recall10_se" in self.recalls.get(results.point_key(params), {})

    def __call__(self, params: dict) -> dict:
        key = results.point_key(params)
        if not self.known(params):  # new, or saved before errors were kept
            m = self.nq
            test = self.ds.test if m == self.ds.nq else self.ds.test[:m]
            t0 = time.perf_counter()
            ids = np.asarray(self.adapter.search(test, self.k, params, self.threads))
            elapsed = time.perf_counter() - t0
            per_query = knn_recall_per_query(ids, self.ds.train, test, self.ds.distances[:m], k=self.k,
                                             metric=self.ds.metric)
            self.recalls[key] = {
                "qps_estimate": m / elapsed if elapsed > 0 else None,
                "recall10": float(per_query.mean()),
                "recall10_se": recall_standard_error(per_query),
                "recall10_ids": id_recall(ids, self.ds.neighbors[:m], k=self.k),
                "recall_queries": m,
            }
            self.saved()
        got = dict(self.recalls[key])
        if self.confidence:
            got["recall10_low"] = recall_lower_bound(got["recall10"], got["recall10_se"], self.confidence)
        return got


def sweep_points(adapter: Adapter, space: ParamSpace, evaluate, config: RunConfig, reporter,
                 fast: bool = False) -> tuple[list[dict], list[dict]]:
    """The parameter sets to measure (adaptive or explicit primary values per combination of the
    secondary knobs) and the combinations skipped, each with why.

    ``fast``: each combination's adaptive sweep starts from where the last one crossed the
    target (`adaptive_values` ``guess``), adds one point above it, and a combination is skipped
    where a knob's step up stopped paying (`stops_paying`).
    """
    points: list[dict] = []
    crossing: dict[str, int | None] = {}
    pruned: set[str] = set()
    skipped: list[dict] = []
    last: int | None = None
    for combo in space.combos():
        knobs = {name: combo[name] for name in space.secondary}
        key = combo_key(knobs)
        if fast:
            why = stops_paying(knobs, space.secondary, crossing, space.off_at_zero, pruned)
            if why:
                pruned.add(key)
                skipped.append({"params": knobs, "why": why})
                reporter.phase(adapter.name, f"skipping {_fmt(knobs)}: {why}")
                continue

        def recall_of(v, combo=combo):
            params = {space.primary: v, **combo}
            reporter.phase(adapter.name, "sweeping " + _fmt(params))
            got = evaluate(params)
            low = f" (lower bound {got['recall10_low']:.4f})" if "recall10_low" in got else ""
            on = f" on {evaluate.nq:,} queries" if getattr(evaluate, "nq", None) else ""
            reporter.phase(adapter.name, f"recall10 {got['recall10']:.4f}{low}{on} at {_fmt(params)}")
            return results.held_recall(got)

        if space.primary_values is not None:
            values = sorted(set(space.primary_values))
            for v in values:
                recall_of(v)
        else:
            values = adaptive_values(recall_of, space.start, space.stop, config.target, config.max_bisect,
                                     guess=last if fast else None,
                                     **({"above": len(fastsweep.ABOVE), "factors": fastsweep.ABOVE} if fast else {}))
        reached = [v for v in values  # memoised: no new search
                   if results.held_recall(evaluate({space.primary: v, **combo})) >= config.target]
        crossing[key] = min(reached) if reached else None
        last = crossing[key] if reached else last
        points += [{space.primary: v, **combo} for v in values]
    return points, skipped


def _fmt(params: dict) -> str:
    return " ".join(f"{k}={v}" for k, v in params.items())


#: Queries whose engine counters, summed, make a single-mode point's `stages` (after the timing,
#: untimed): what one query reads can differ from a batch's share of it (a batch reads lists
#: whole for all the queries that probe them; one query may skip parts of them).
SINGLE_STAGE_QUERIES = 50


def single_stages(adapter, queries, k: int, params: dict, threads: int) -> dict | None:
    """The engine counters of `queries` searched one per call, summed over the calls (`threads`
    is the largest any call used), or None for an adapter without counters."""
    total: dict | None = None
    for q in queries:
        adapter.search(q[None, :], k, params, threads)
        st = adapter.stage_stats()
        if st is None:
            return None
        if total is None:
            total = copy.deepcopy(dict(st))
        else:
            _add_stats(total, st)
    return total


def _add_stats(total: dict, st: dict) -> None:
    """Adds one call's counters (and its nested named timers, say `timers`) into `total`;
    `threads` keeps the largest."""
    for key, v in st.items():
        if isinstance(v, dict) and isinstance(total.get(key), dict):
            _add_stats(total[key], v)
        elif isinstance(v, (int, float)) and not isinstance(v, bool) and key in total:
            total[key] = max(total[key], v) if key == "threads" else total[key] + v


def run_index(
    adapter: Adapter, dataset, config: RunConfig, out_dir: Path, reporter=None, resume: bool = False,
    keep_index: bool = False,
) -> dict:
    """Benchmark one index on ``dataset``; write ``<out_dir>/<name>.json`` and return the result.

    Completed points are kept in ``<name>.partial.json`` as they are measured, so an
    interrupted run continues where it stopped when called again with ``resume=True``; an index
    already finished is not measured again (``keep_index`` still builds or loads it, for the
    paired re-timing that follows).
    """
    reporter = reporter or NullReporter()
    if not adapter.supports(dataset.metric):
        raise ValueError(
            f"index {adapter.name!r} does not support metric {dataset.metric!r} "
            f"(it supports {', '.join(adapter.metrics)})"
        )
    if dataset.neighbors is None or dataset.distances is None:
        raise ValueError(f"dataset {dataset.name!r} has no ground truth; recall cannot be measured")
    k = config.options.k
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    final_path = out_dir / f"{adapter.name}.json"
    partial_path = out_dir / f"{adapter.name}.partial.json"
    sha = results.dataset_sha256(dataset)
    identity = {"dataset_sha256": sha, "nq": dataset.nq, "index": adapter.name, "params": adapter.build_params(), "k": k}

    if resume and final_path.exists():
        done_before = _finished(final_path, identity, config)
        if done_before is not None:
            reporter.phase(adapter.name, "already measured (kept from the interrupted run)")
            if keep_index:  # the paired re-timing needs it in memory (peers come from the cache)
                build_index(adapter, dataset, config, reporter)
            return done_before

    state = {"identity": identity, "recalls": {}, "points": []}
    if resume and partial_path.exists():
        try:
            saved = json.loads(partial_path.read_text())
        except (OSError, ValueError):
            saved = None
        if saved and saved.get("identity") == identity:
            state = saved

    build, pages = build_index(adapter, dataset, config, reporter)
    # each swept recall is written as soon as it is measured: an interrupted sweep (minutes on
    # 1M vectors) is not measured again by --resume
    save = lambda: results.write_json(partial_path, state)  # noqa: E731
    evaluate = _PointEvaluator(adapter, dataset, k, max(config.threads), state["recalls"], config.recall_confidence,
                               saved=save)
    fast = config.sweep == "fast"
    explore = evaluate
    if fast and dataset.nq > fastsweep.SWEEP_QUERIES:  # recall on a sample while exploring; all queries for timed points
        explore = _PointEvaluator(adapter, dataset, k, max(config.threads), state.setdefault("sample_recalls", {}),
                                  config.recall_confidence, saved=save, queries=fastsweep.SWEEP_QUERIES)
    space = swept_space(adapter)
    param_sets, skipped = sweep_points(adapter, space, explore, config, reporter, fast=fast)
    knobs = set(param_sets[0]) if param_sets else set()
    # a baseline point from before a knob existed names it at 0, its "off" (as `gate` reads it)
    extras = [{**{k: 0 for k in knobs - set(e)}, **e} for e in config.extra_points if set(e) <= knobs]
    for extra in extras:
        if extra not in param_sets:
            reporter.phase(adapter.name, "measuring baseline point " + _fmt(extra))
            evaluate(extra)
            param_sets.append(dict(extra))
    save()

    nsingle = min(config.single_queries, dataset.nq)
    single_q = np.ascontiguousarray(dataset.test[:nsingle])
    every_point = config.time_points == "all" or space.primary_values is not None
    if fast and not every_point:
        to_time = fastsweep.points_to_time(adapter, space, param_sets, evaluate, explore, config, single_q, state,
                                           reporter)
    elif every_point:
        # every point, also when the user listed the knob values to measure (--nprobe 1,2,4)
        to_time = {results.point_key(p): set(config.timed_modes) for p in param_sets}
    else:
        keys = select_for_timing([{"params": p, **evaluate(p)} for p in param_sets], config.target,
                                 off_at_zero=space.off_at_zero)
        to_time = {key: set(config.timed_modes) for key in keys}
    for p in param_sets:
        if p in extras:
            to_time[results.point_key(p)] = set(config.timed_modes)
    for p in param_sets:  # a timed point's recall is its recall on all queries
        if results.point_key(p) in to_time:
            evaluate(p)
    single_est = state.get("single_estimates", {})
    swept = [{"params": p, **(evaluate(p) if evaluate.known(p) else explore(p)),
              **({"qps_estimate_single": single_est[key]} if (key := results.point_key(p)) in single_est else {})}
             for p in param_sets]
    # points kept from an interrupted run are held to this run's recall rule (a --resume with
    # another --recall-confidence must not judge them by the bound they were saved with)
    for point in state["points"]:
        point.pop("recall10_low", None)
        point.update({key: v for key, v in evaluate(point["params"]).items() if key != "qps_estimate"})
    done = {(results.point_key(p["params"]), p["threads"], p["mode"]) for p in state["points"]}
    for params in param_sets:
        modes = to_time.get(results.point_key(params), set())
        if not modes:
            continue
        rec = {key: v for key, v in evaluate(params).items() if key != "qps_estimate"}
        for threads in config.threads:
            for mode in config.timed_modes:
                if mode not in modes or (results.point_key(params), threads, mode) in done:
                    continue
                reporter.phase(adapter.name, f"timing {_fmt(params)} · {mode} @ {threads}t")
                point = {"params": params, "threads": threads, "mode": mode, **rec}
                if mode == "batch":
                    timed = time_batch(
                        lambda: adapter.search(dataset.test, k, params, threads),
                        dataset.nq, config.repeats, config.warmup, config.stat,
                    )
                    point.update(qps=timed["qps"], p50_ms=None, p99_ms=None, batch_s=timed["batch_s"])
                    stages = adapter.stage_stats()  # the batch call's per-stage breakdown
                else:
                    timed = time_single(lambda q: adapter.search(q, k, params, threads), single_q)
                    point.update(timed)
                    stages = single_stages(adapter, single_q[:SINGLE_STAGE_QUERIES], k, params, threads)
                if stages is not None:
                    point["stages"] = stages
                state["points"].append(point)
                results.write_json(partial_path, state)
                reporter.advance(adapter.name)

    off_at_zero = space.off_at_zero
    headline = results.compute_headline(
        state["points"], config.target, config.timed_modes, config.threads, cost_ordered=True,
        off_at_zero=off_at_zero,
    )

    def time_point(params: dict, mode: str, threads: int) -> float:
        if mode == "batch":
            run = lambda: adapter.search(dataset.test, k, params, threads)  # noqa: E731
            return time_batch(run, dataset.nq, repeats=1, warmup=0)["qps"]
        return time_single(lambda q: adapter.search(q, k, params, threads), single_q, warmup=5)["qps"]

    headline = rivals.settle(state["points"], headline, config.target, off_at_zero, time_point,
                             say=lambda m: reporter.phase(adapter.name, m), margin=fastsweep.RIVAL_MARGIN if fast else 0.0)
    concurrent = None
    if "concurrent" in config.modes:
        concurrent = state.get("concurrent") or _measure_concurrent(adapter, dataset, config, swept, headline, reporter,
                                                                        evaluate)
        state["concurrent"] = concurrent
        results.write_json(partial_path, state)

    result = {
        "schema": results.SCHEMA,
        "schema_minor": results.SCHEMA_MINOR,
        "created": results.now_iso(),
        "vdbbench_version": _version(),
        "git": results.git_info(),
        "dataset": results.dataset_record(dataset, sha),
        "index": {"name": adapter.name, "params": adapter.build_params(), "source": _source(adapter)},
        "machine": {**results.machine_info(_simd(adapter), adapter.versions()),
                    "read_gbps_1t": round(read_gbps_once(), 2)},
        "build": {"train_s": build.train_s, "add_s": build.add_s, "bytes": build.bytes, "cached": build.cached,
                  "hugepages": pages},
        "run": {
            "k": k,
            "target_recall": config.target,
            "recall_confidence": config.recall_confidence,
            "threads": list(config.threads),
            "modes": list(config.modes),
            "repeats": config.repeats,
            "warmup": config.warmup,
            "stat": config.stat,
            "single_queries": nsingle,
            "recall_note": "recall10 of every point is measured on all nq queries with one batch search"
                           + (f"; a point reaches the target when recall10_low, the lower end of its one-sided "
                              f"{config.recall_confidence:g} confidence interval, does" if config.recall_confidence else ""),
            "primary_knob": space.primary,
            # what each knob's sweep covered (the peers sweep their own knobs over their own ranges)
            "knobs": space.describe({knob: [p[knob] for p in param_sets] for knob in [space.primary, *space.secondary]}),
            "time_points": config.time_points,
            "frontier_slack": (None if config.time_points != "frontier" else FAST_SLACK if fast else SLACK),
            "sweep": config.sweep,
            # the queries the recall of a point only explored was measured on (timed points: all)
            "sweep_queries": explore.nq,
            "skipped": skipped,
        },
        "points": state["points"],
        "swept": [
            {"params": p["params"], "recall10": p["recall10"], "recall10_se": p["recall10_se"],
             **({"recall10_low": p["recall10_low"]} if "recall10_low" in p else {}), "recall10_ids": p["recall10_ids"],
             "qps_estimate": p.get("qps_estimate"), "recall_queries": p.get("recall_queries", dataset.nq),
             **({"qps_estimate_single": p["qps_estimate_single"]} if "qps_estimate_single" in p else {}),
             "timed": bool(to_time.get(results.point_key(p["params"]))),
             "timed_modes": sorted(to_time.get(results.point_key(p["params"]), ()))}
            for p in swept
        ],
        "headline": headline,
    }
    if concurrent is not None:
        result["concurrent"] = concurrent
    results.write_json(final_path, result)
    partial_path.unlink(missing_ok=True)
    return result


def _concurrent_point(swept: list[dict], headline: list[dict], target: float) -> dict | None:
    """The point the concurrent clients query: the one-query-per-call headline at the fewest
    threads, else any headline point, else the swept point reaching the target with the best
    QPS estimate, else the highest-recall one."""
    heads = [h for h in headline if h["qps"] is not None]
    heads.sort(key=lambda h: (h["mode"] != "single", h["threads"]))
    if heads:
        chosen = heads[0]["params"]
        return next(p for p in swept if p["params"] == chosen)
    reach = [p for p in swept if results.reaches(p, target)]
    if reach:
        return max(reach, key=lambda p: p.get("qps_estimate") or 0.0)
    return max(swept, key=lambda p: p["recall10"]) if swept else None


def _measure_concurrent(adapter: Adapter, dataset, config: RunConfig, swept, headline, reporter,
                        evaluate) -> dict | None:
    point = _concurrent_point(swept, headline, config.target)
    if point is None:
        return None
    params, k = point["params"], config.options.k
    point = evaluate(params)  # its recall on all queries (a fast sweep explored on a sample)

    def on_level(clients: int) -> None:
        reporter.phase(adapter.name, f"concurrent: {clients} client{'s' if clients > 1 else ''} at {_fmt(params)}"
                                     f" for {config.duration_s:g} s")

    levels = measure_levels(lambda q: adapter.search(q, k, params, 1), dataset.test, config.clients,
                            config.duration_s, on_level)
    reporter.advance(adapter.name)
    return {
        "params": params,
        "recall10": point["recall10"],
        "reaches_target": results.reaches(point, config.target),
        "duration_s": config.duration_s,
        "workers": "threads",
        "threads_per_call": 1,
        "levels": levels,
    }


def _finished(path: Path, identity: dict, config: RunConfig) -> dict | None:
    """A completed result of the same index, data and run settings, or None."""
    try:
        r = results.load_result(path)
    except ValueError:
        return None
    run = r.get("run", {})
    same = (
        r["dataset"]["sha256"] == identity["dataset_sha256"]
        and r["dataset"]["nq"] == identity["nq"]
        and r["index"]["params"] == identity["params"]
        and run.get("k") == identity["k"]
        and run.get("threads") == list(config.threads)
        and run.get("modes") == list(config.modes)
        and run.get("target_recall") == config.target
        and run.get("recall_confidence", 0.0) == config.recall_confidence
        and run.get("sweep", "full") == config.sweep
    )
    return r if same else None


def _simd(adapter: Adapter) -> str | None:
    """The SIMD level the index ran at, where its library says."""
    try:
        return adapter.simd_level()
    except Exception:  # a plugin's report must not end the run
        return None


def _source(adapter: Adapter) -> str | None:
    """Where the adapter comes from: "built-in", or "plugin <package> <version>"."""
    from vdbbench.adapters.registry import entries

    entry = entries().get(adapter.name)
    return entry.source if entry is not None else None


def _version() -> str:
    from vdbbench import __version__

    return __version__


