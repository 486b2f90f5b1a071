"""Interleaved re-timing of every index's headline point, so ratios between indexes share one load."""

from __future__ import annotations

import statistics

import numpy as np

from vdbbench.bench.results import headline_entry
from vdbbench.bench.timing import qps_over, time_single

#: Seconds of searches in each paired sample, batch or one query per call.
PAIRED_SAMPLE_S = 0.25


def confirm_headlines(entries, dataset, config, reporter) -> list[str]:
    """Re-time each index's headline point in rounds (A, B, C, A, B, C, ...) and record ``qps_paired``.

    Each sample runs the point's searches for at least a quarter of a second (`PAIRED_SAMPLE_S`):
    a batch repeated, or the single-query sample passed over again, so that fast and slow
    indexes are timed over stretches of the same length.

    ``entries`` are (adapter, result) pairs whose indexes are still in memory. The sweep times
    one index after another, minutes apart on a big set, so a load change on a shared machine
    moves one index's QPS and not the other's; interleaving puts every index under the same
    conditions, which is what a ratio between them (the table, the gate) needs. Returns the
    names of the indexes that were re-timed.
    """
    k = config.options.k
    single_q = np.ascontiguousarray(dataset.test[: min(config.single_queries, dataset.nq)])
    touched: set[str] = set()
    for mode in config.timed_modes:
        for threads in config.threads:
            heads = [(a, r, headline_entry(r, mode, threads)) for a, r in entries]
            heads = [(a, r, h) for a, r, h in heads if h is not None]
            if len(heads) < 2:
                continue
            samples: dict[str, list[float]] = {a.name: [] for a, _, _ in heads}
            for rep in range(config.repeats):
                for a, _, h in heads:
                    reporter.phase(a.name, f"paired re-timing ({mode} @ {threads}t), round {rep + 1}/{config.repeats}")
                    if mode == "batch":
                        run = lambda a=a, h=h: a.search(dataset.test, k, h["params"], threads)  # noqa: E731
                        if rep == 0:
                            run()  # warm-up
                        qps = qps_over(run, dataset.nq, PAIRED_SAMPLE_S)
                    else:
                        one = lambda q, a=a, h=h: a.search(q, k, h["params"], threads)  # noqa: E731
                        qps = time_single(one, single_q, min_seconds=PAIRED_SAMPLE_S)["qps"]
                    samples[a.name].append(qps)
            for a, _, h in heads:
                qs = samples[a.name]
                h["qps_paired"] = statistics.median(qs) if config.stat == "median" else max(qs)
                h["qps_paired_samples"] = qs
                touched.add(a.name)
    return sorted(touched)
