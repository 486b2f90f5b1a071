"""The benchmark runner: build an index once, sweep its knobs around the target, time every point."""

from __future__ import annotations

import json
import os
import tempfile
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from vdbbench.bench import cache, results
from vdbbench.bench.bandwidth import read_gbps_once
from vdbbench.adapters.interface import Adapter, BuildInfo, RunOptions
from vdbbench.common.recall import RECALL_TARGET, id_recall, knn_recall
from vdbbench.bench.sweep import adaptive_values
from vdbbench.bench.timing import time_batch, time_single

MODES = ("batch", "single")


@dataclass
class RunConfig:
    """How to measure: the same for every index of a run, so their results compare."""

    target: float = RECALL_TARGET
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

    def __post_init__(self):
        if not self.threads or any(t < 1 for t in self.threads):
            raise ValueError(f"threads must be >= 1, got {list(self.threads)}")
        bad = [m for m in self.modes if m not in MODES]
        if bad or not self.modes:
            raise ValueError(f"unknown mode {bad[0] if bad else '(none)'}; expected batch and/or single")
        if self.repeats < 1:
            raise ValueError(f"repeats must be >= 1, got {self.repeats}")
        if self.stat not in ("median", "best"):
            raise ValueError(f"stat must be median or best, got {self.stat!r}")
        if not 0.0 < self.target <= 1.0:
            raise ValueError(f"target recall must be in (0, 1], got {self.target}")


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


def build_index(adapter: Adapter, dataset, config: RunConfig, reporter) -> BuildInfo:
    """Build (or, for cacheable peers, load from the cache) and return what it cost."""
    sha = results.dataset_sha256(dataset)
    if adapter.cacheable and config.use_cache:
        reporter.phase(adapter.name, "loading cached index")
        info = cache.load_cached(adapter, sha)
        if info is not None:
            return info
    reporter.phase(adapter.name, f"building (n={dataset.n:,})")
    info = adapter.build(dataset.train)
    if adapter.cacheable and config.use_cache:
        reporter.phase(adapter.name, "saving index to cache")
        info = cache.store(adapter, sha, info)
    elif info.bytes is None:
        info = BuildInfo(info.train_s, info.add_s, _measure_bytes(adapter), info.cached)
    return info


class _PointEvaluator:
    """Recall of a parameter set on all queries (one batch search), memoised and resumable."""

    def __init__(self, adapter, dataset, k, threads, recalls: dict):
        self.adapter, self.ds, self.k, self.threads = adapter, dataset, k, threads
        self.recalls = recalls  # point_key -> {"recall10", "recall10_ids"}

    def __call__(self, params: dict) -> dict:
        key = results.point_key(params)
        if key not in self.recalls:
            ids = np.asarray(self.adapter.search(self.ds.test, self.k, params, self.threads))
            self.recalls[key] = {
                "recall10": knn_recall(ids, self.ds.train, self.ds.test, self.ds.distances, k=self.k, metric=self.ds.metric),
                "recall10_ids": id_recall(ids, self.ds.neighbors, k=self.k),
            }
        return self.recalls[key]


def sweep_points(adapter: Adapter, evaluate, config: RunConfig, reporter) -> list[dict]:
    """The parameter sets to measure: adaptive (or explicit) primary values per secondary combo."""
    space = adapter.param_space()
    points: list[dict] = []
    for combo in space.combos():
        def recall_of(v, combo=combo):
            params = {space.primary: v, **combo}
            reporter.phase(adapter.name, "sweeping " + _fmt(params))
            recall = evaluate(params)["recall10"]
            reporter.phase(adapter.name, f"recall10 {recall:.4f} at {_fmt(params)}")
            return recall

        if space.primary_values is not None:
            values = sorted(set(space.primary_values))
            for v in values:
                recall_of(v)
        else:
            values = adaptive_values(recall_of, space.start, space.stop, config.target, config.max_bisect)
        points += [{space.primary: v, **combo} for v in values]
    return points


def _fmt(params: dict) -> str:
    return " ".join(f"{k}={v}" for k, v in params.items())


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

    build = build_index(adapter, dataset, config, reporter)
    evaluate = _PointEvaluator(adapter, dataset, k, max(config.threads), state["recalls"])
    param_sets = sweep_points(adapter, evaluate, config, reporter)
    knobs = set(param_sets[0]) if param_sets else set()
    for extra in config.extra_points:
        if set(extra) == knobs and extra not in param_sets:
            reporter.phase(adapter.name, "measuring baseline point " + _fmt(extra))
            evaluate(extra)
            param_sets.append(dict(extra))
    results.write_json(partial_path, state)

    done = {(results.point_key(p["params"]), p["threads"], p["mode"]) for p in state["points"]}
    nsingle = min(config.single_queries, dataset.nq)
    single_q = np.ascontiguousarray(dataset.test[:nsingle])
    for params in param_sets:
        rec = evaluate(params)
        for threads in config.threads:
            for mode in config.modes:
                if (results.point_key(params), threads, mode) in done:
                    continue
                reporter.phase(adapter.name, f"timing {_fmt(params)} · {mode} @ {threads}t")
                point = {"params": params, "threads": threads, "mode": mode, **rec}
                if mode == "batch":
                    timed = time_batch(
                        lambda: adapter.search(dataset.test, k, params, threads),
                        dataset.nq, config.repeats, config.warmup, config.stat,
                    )
                    point.update(qps=timed["qps"], p50_ms=None, p99_ms=None, batch_s=timed["batch_s"])
                else:
                    timed = time_single(lambda q: adapter.search(q, k, params, threads), single_q)
                    point.update(timed)
                # the batch call's per-stage breakdown (after single mode it would be one query's)
                stages = adapter.stage_stats() if mode == "batch" else None
                if stages is not None:
                    point["stages"] = stages
                state["points"].append(point)
                results.write_json(partial_path, state)
                reporter.advance(adapter.name)

    result = {
        "schema": results.SCHEMA,
        "created": results.now_iso(),
        "vdbbench_version": _version(),
        "git": results.git_info(),
        "dataset": {
            "name": dataset.name,
            "n": dataset.n,
            "dim": dataset.dim,
            "nq": dataset.nq,
            "metric": dataset.metric,
            "sha256": sha,
            "synthetic": bool(dataset.synthetic),
            "source": dataset.source,
            # what the user asked for, and why something else was measured (offline fallback)
            "requested": dataset.extra.get("requested"),
            "fallback_reason": dataset.extra.get("fallback_reason"),
            # --queries N measures the first N queries only; the hash identifies the full set
            "nq_total": int(dataset.extra.get("queries_total", dataset.nq)),
        },
        "index": {"name": adapter.name, "params": adapter.build_params(), "source": _source(adapter)},
        "machine": {**results.machine_info(_simd(adapter), adapter.versions()),
                    "read_gbps_1t": round(read_gbps_once(), 2)},
        "build": {"train_s": build.train_s, "add_s": build.add_s, "bytes": build.bytes, "cached": build.cached},
        "run": {
            "k": k,
            "target_recall": config.target,
            "threads": list(config.threads),
            "modes": list(config.modes),
            "repeats": config.repeats,
            "warmup": config.warmup,
            "stat": config.stat,
            "single_queries": nsingle,
            "recall_note": "recall10 of every point is measured on all nq queries with one batch search",
            "primary_knob": adapter.param_space().primary,
        },
        "points": state["points"],
        "headline": results.compute_headline(
            state["points"], config.target, config.modes, config.threads, cost_ordered=True
        ),
    }
    results.write_json(final_path, result)
    partial_path.unlink(missing_ok=True)
    return result


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
    )
    return r if same else None


def _simd(adapter: Adapter) -> str | None:
    if adapter.name in ("ivf", "flat"):
        from vdbbench.bench.ours import engine_simd_level

        return engine_simd_level()
    return None


def _source(adapter: Adapter) -> str | None:
    """Where the adapter comes from: "built-in", or "plugin <package> <version>"."""
    from vdbbench.adapters.registry import entries

    entry = entries().get(adapter.name)
    return entry.source if entry is not None else None


def _version() -> str:
    from vdbbench import __version__

    return __version__


