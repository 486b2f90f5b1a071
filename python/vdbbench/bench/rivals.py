"""Settling the headline among near equals: the timed points that reach the target and that no
other undercuts on every knob (`results.cheapest_points`) are the headline's rivals. Each was
timed once, one after another, so on a shared machine a slow minute can decide between two that
differ by 10%: the first real-data run with the 4-bit prefilter gave the batch headline to a
point that paired runs put at 0.9x of its rival, because the rival was timed in a slow minute.

So when a mode and thread count has several rivals, they are timed again in turns (rounds in
alternating order), and the one with the best median of those rounds becomes the headline. The
headline keeps the winner's own timed figures and records every rival's rounds (`rivals`).
"""

from __future__ import annotations

import statistics
from typing import Callable

from vdbbench.bench.results import HEADLINE_KEYS, cheapest_points, point_key, reaches

#: Rounds of the rivals' re-timing: each rival timed this many times, in alternating order.
ROUNDS = 3


def settle(points: list[dict], headline: list[dict], target: float, off_at_zero: tuple[str, ...],
           time_point: Callable[[dict, str, int], float], rounds: int = ROUNDS,
           say: Callable[[str], None] = lambda m: None, margin: float = 0.0) -> list[dict]:
    """The headline with each entry chosen among its rivals by interleaved re-timing.

    ``time_point(params, mode, threads)`` times one point once and returns its QPS. With a
    ``margin`` only the rivals whose own timed QPS is at least that share of the best one's are
    re-timed (a fast sweep: one a good deal slower was not a near equal).
    """
    out = []
    for entry in headline:
        if entry.get("qps") is None:
            out.append(entry)
            continue
        mode, threads = entry["mode"], entry["threads"]
        reach = [p for p in points if p["mode"] == mode and p["threads"] == threads and reaches(p, target)]
        rivals = cheapest_points(reach, off_at_zero)
        if margin and rivals:
            fastest = max(p["qps"] for p in rivals)
            rivals = [p for p in rivals if p["qps"] >= margin * fastest]
        if len(rivals) < 2:
            out.append(entry)
            continue
        samples: dict[str, list[float]] = {point_key(p["params"]): [] for p in rivals}
        for r in range(rounds):
            say(f"re-timing {len(rivals)} rivals · {mode} @ {threads}t, round {r + 1}/{rounds}")
            for p in rivals if r % 2 == 0 else rivals[::-1]:
                samples[point_key(p["params"])].append(time_point(p["params"], mode, threads))
        best = max(rivals, key=lambda p: statistics.median(samples[point_key(p["params"])]))
        settled = dict(entry)
        for key in HEADLINE_KEYS:
            settled[key] = best.get(key)
        settled["rivals"] = [{"params": p["params"], "qps_rounds": samples[point_key(p["params"])]}
                             for p in rivals]
        out.append(settled)
    return out
