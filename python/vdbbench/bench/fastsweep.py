"""What a fast sweep (`vdbbench run --sweep fast`, the default) measures: the query sample it
explores on, the point it adds above each crossing, the candidates it times and in which modes,
and the rivals it re-times (the sweep itself is `runner.sweep_points`)."""

from __future__ import annotations

import statistics

from vdbbench.bench import results
from vdbbench.bench.frontier import headline_candidates, select_front_by_mode
from vdbbench.bench.timing import time_single

#: A fast sweep measures the recall of the points it explores on the first this-many queries;
#: every point it times has its recall measured on all of them.
SWEEP_QUERIES = 2000
#: A fast sweep's one-query-per-call estimate of the headline candidates: each candidate searches
#: this many queries one per call in each of `SINGLE_ESTIMATE_ROUNDS` rounds, the candidates in
#: turns (alternating order), and keeps its median: candidates a load swing would have met at
#: different times meet it alike.
SINGLE_ESTIMATE_QUERIES = 100
SINGLE_ESTIMATE_ROUNDS = 3
#: A fast sweep re-times in turns (`rivals.settle`) only the rivals whose own timing reached this
#: share of the fastest one's.
RIVAL_MARGIN = 0.8
#: The point a fast sweep adds above the smallest value reaching the target on the sample
#: (x1.1, at least one more): that value's recall on all queries falls on either side of the
#: target about as often, and this is the point to fall back on when it misses.
ABOVE = (1.1,)


def single_estimates(adapter, param_sets: list[dict], queries, k: int, threads: int) -> dict[str, float]:
    """Point key -> median one-query-per-call QPS over `SINGLE_ESTIMATE_ROUNDS` rounds, the
    points timed in turns (the order alternating round by round)."""
    samples: dict[str, list[float]] = {results.point_key(p): [] for p in param_sets}
    for r in range(SINGLE_ESTIMATE_ROUNDS):
        for params in param_sets if r % 2 == 0 else param_sets[::-1]:
            run_one = lambda q, params=params: adapter.search(q, k, params, threads)  # noqa: E731
            samples[results.point_key(params)].append(time_single(run_one, queries, warmup=3 if r == 0 else 0)["qps"])
    return {key: statistics.median(qs) for key, qs in samples.items()}


def points_to_time(adapter, space, param_sets, evaluate, explore, config, single_q, state, reporter) -> dict:
    """Point key -> modes to time it in, for a fast sweep (`select_front_by_mode`). Every point
    chosen has its recall measured on all queries, which can move it under the target (or over):
    the choice is made again until every point it names was measured on all queries. Headline
    candidates get a one-query-per-call estimate when single mode is timed."""
    single_est = state.setdefault("single_estimates", {})
    modes = config.timed_modes
    while True:
        swept = [{"params": p, **(evaluate(p) if evaluate.known(p) else explore(p))} for p in param_sets]
        if "single" in modes:
            cands = headline_candidates(swept, config.target, space.off_at_zero)
            fresh = [p["params"] for p in cands if results.point_key(p["params"]) not in single_est]
            if fresh:
                reporter.phase(adapter.name, f"estimating one query per call at {len(fresh)} candidates in turns")
                single_est.update(single_estimates(adapter, fresh, single_q[:SINGLE_ESTIMATE_QUERIES],
                                                    config.options.k, min(config.threads)))
            for p in cands:
                p["qps_estimate_single"] = single_est[results.point_key(p["params"])]
        chosen = select_front_by_mode(swept, config.target, modes, off_at_zero=space.off_at_zero)
        to_time: dict[str, set[str]] = {}
        for mode, keys in chosen.items():
            for key in keys:
                to_time.setdefault(key, set()).add(mode)
        fresh = [p for p in param_sets if results.point_key(p) in to_time and not evaluate.known(p)]
        if not fresh:
            return to_time
        for p in fresh:
            at = " ".join(f"{k}={v}" for k, v in p.items())
            reporter.phase(adapter.name, f"recall on all {evaluate.nq:,} queries at {at}")
            evaluate(p)
