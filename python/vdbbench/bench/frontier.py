"""Which swept points are worth timing: those on or near the recall/QPS frontier around the target.

Every swept point has its recall measured (one batch search over all queries) and, from the
same call, a QPS estimate. Timing a point in every mode and thread count costs far more than
that, and a point far from the target (recall 0.3, or far more work than the cheapest point
that reaches it) can change neither the headline nor the front near it. So only these are timed:

- every point reaching the target that no other point reaching it undercuts on every knob
  (`results.cheapest_points`): the headline is chosen among exactly these, so it is the same
  as when every point is timed;
- points reaching the target on the estimated front within ``slack`` of the best estimate
  (what more recall costs, near the target);
- the ``below`` highest-recall points of the estimated front of the points under the target
  (where the front crosses it); when nothing reaches the target, the ``below`` + 1 closest misses.
"""

from __future__ import annotations

from vdbbench.bench.results import cheapest_points, point_key, reaches

#: Front points above the target are timed while their estimated QPS is at least this share of
#: the best estimate; a one-call estimate on a shared machine can be off by 20-30%.
SLACK = 0.6
BELOW = 2


def estimated_front(swept: list[dict]) -> list[dict]:
    """The swept points no other beats on both recall and estimated QPS, by recall."""
    ordered = sorted(swept, key=lambda p: (-p["recall10"], -p["qps_estimate"]))
    front: list[dict] = []
    for p in ordered:
        if not front or p["qps_estimate"] > front[-1]["qps_estimate"]:
            front.append(p)
    return front[::-1]


def select_for_timing(swept: list[dict], target: float, slack: float = SLACK, below: int = BELOW,
                      off_at_zero: tuple[str, ...] = ()) -> set[str]:
    """Point keys (`results.point_key`) of the swept points to time; see the module docstring.

    A point without an estimate (measured before estimates were recorded) is always timed.
    ``off_at_zero`` as for `results.cheapest_points`.
    """
    keys = {point_key(p["params"]) for p in swept if p.get("qps_estimate") is None}
    known = [p for p in swept if p.get("qps_estimate") is not None]
    reach = [p for p in swept if reaches(p, target)]
    keys |= {point_key(p["params"]) for p in cheapest_points(reach, off_at_zero)}
    # the fronts above and under the target, each of its own points (a noisy estimate above
    # the target must not hide where the front crosses it)
    under = estimated_front([p for p in known if not reaches(p, target)])
    over = estimated_front([p for p in known if reaches(p, target)])
    if over:
        best = max(p["qps_estimate"] for p in over)
        keys |= {point_key(p["params"]) for p in over if p["qps_estimate"] >= slack * best}
    if not reach:
        below += 1
    if below > 0:
        keys |= {point_key(p["params"]) for p in under[-below:]}
    return keys


#: In a fast sweep (`select_front_by_mode`), the share of the best estimate a candidate must reach
#: to be timed in a mode, and the most candidates timed per mode: only those that may be the
#: headline are timed, and the re-timing of rivals (`rivals.settle`) decides among them.
FAST_SLACK = 0.7
FAST_CANDIDATES = 3
#: The estimate of each timed mode, as a swept point carries it.
ESTIMATES = {"batch": "qps_estimate", "single": "qps_estimate_single"}


def headline_candidates(swept: list[dict], target: float, off_at_zero: tuple[str, ...] = ()) -> list[dict]:
    """The swept points reaching the target that no other reaching one undercuts on every knob:
    the only points any mode's headline can be (`results.cheapest_points`)."""
    return cheapest_points([p for p in swept if reaches(p, target)], off_at_zero)


def select_front_by_mode(swept: list[dict], target: float, modes: tuple[str, ...], slack: float = FAST_SLACK,
                         most: int = FAST_CANDIDATES, off_at_zero: tuple[str, ...] = ()) -> dict[str, set[str]]:
    """Mode -> point keys to time in it, for a fast sweep: of the headline candidates
    (`headline_candidates`), the ``most`` with the best estimate in that mode (`ESTIMATES`), those
    within ``slack`` of the best. A candidate without that estimate is always timed. When
    nothing reaches the target, the two points closest to it on the estimated front are timed
    (the headline then says the target was missed)."""
    cands = headline_candidates(swept, target, off_at_zero)
    if not cands:
        under = estimated_front([p for p in swept if p.get("qps_estimate") is not None])
        return {mode: {point_key(p["params"]) for p in under[-2:]} for mode in modes}
    out = {}
    for mode in modes:
        field = ESTIMATES[mode]
        known = sorted((p for p in cands if p.get(field) is not None), key=lambda p: -p[field])
        best = known[0][field] if known else 0.0
        out[mode] = ({point_key(p["params"]) for p in cands if p.get(field) is None}
                     | {point_key(p["params"]) for p in known[:most] if p[field] >= slack * best})
    return out
