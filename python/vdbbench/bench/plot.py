"""Recall-vs-QPS Pareto fronts (ann-benchmarks style, log QPS) from result files, as a PNG."""

from __future__ import annotations

from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

from vdbbench.bench.results import held_recall, measured_on  # noqa: E402
from vdbbench.common.recall import RECALL_TARGET  # noqa: E402


def pareto_front(points: list[tuple[float, float]]) -> list[tuple[float, float]]:
    """(recall, qps) pairs no other pair beats on both; sorted by recall."""
    front: list[tuple[float, float]] = []
    for recall, qps in sorted(points, key=lambda p: (-p[0], -p[1])):
        if not front or qps > front[-1][1]:
            front.append((recall, qps))
    return sorted(front)


def _confidence(result: dict) -> float:
    """The run's ``--recall-confidence`` (0: points were held to their mean recall)."""
    return (result.get("run") or {}).get("recall_confidence") or 0.0


def series(result: dict) -> dict[tuple[str, int], list[tuple[float, float]]]:
    """Per (mode, threads), the (recall, qps) of every point of one result, recall as the run held
    points to the target (`held_recall`: the lower bound recall10_low under --recall-confidence,
    else the mean recall10), so the axis and the target line follow the headline's rule."""
    held = bool(_confidence(result))
    out: dict[tuple[str, int], list[tuple[float, float]]] = {}
    for p in result["points"]:
        if p.get("qps") is not None:  # a point only swept for recall has no QPS to draw
            recall = held_recall(p) if held else p["recall10"]
            out.setdefault((p["mode"], p["threads"]), []).append((recall, p["qps"]))
    return out


def _rule(result: dict) -> str:
    conf = _confidence(result)
    return f"the {conf:.0%} lower bound of its recall" if conf else "its mean recall"


# One colour per index, a line style per mode, a marker per thread count: 7 indexes x 4
# series stay readable where a single colour cycle would repeat.
_LINES = {"batch": "-", "single": "--"}
_MARKERS = "os^Dv<>"


def plot_results(runs: list[dict], out: Path, target: float | None = None, title: str | None = None) -> Path:
    """Draw every series' Pareto front (all points faint) into ``out`` (PNG)."""
    if not runs:
        raise ValueError("nothing to plot: no results given")
    ds0 = runs[0]["dataset"]
    for r in runs[1:]:  # one set of axes, one title: fronts measured on other data do not belong
        ds = r["dataset"]
        if (measured_on(r), r.get("run", {}).get("k")) != (measured_on(runs[0]), runs[0].get("run", {}).get("k")):
            raise ValueError(f"{r['index']['name']} was measured on {ds['name']} (nq={ds['nq']:,}, "
                             f"k={r.get('run', {}).get('k')}), {runs[0]['index']['name']} on {ds0['name']} "
                             f"(nq={ds0['nq']:,}, k={runs[0].get('run', {}).get('k')}): plot each "
                             "dataset's results on their own (vdbbench report gives each dataset a section)")
        if _confidence(r) != _confidence(runs[0]):  # one axis: one recall rule (mean or a lower bound)
            raise ValueError(f"{r['index']['name']} was held to {_rule(r)}, {runs[0]['index']['name']} to "
                             f"{_rule(runs[0])}: plot each rule's results on their own (vdbbench report gives "
                             "each rule a section)")
    if not any(series(r) for r in runs):
        raise ValueError("nothing to plot: these results hold no timed recall/QPS points (a --mode concurrent "
                         "run's levels are in its concurrent.png and in vdbbench report's page)")
    if target is None:
        target = runs[0].get("run", {}).get("target_recall", RECALL_TARGET)
    fig, ax = plt.subplots(figsize=(9, 6), dpi=110)
    colors = plt.get_cmap("tab10").colors
    thread_counts = sorted({p["threads"] for r in runs for p in r["points"]})
    for i, r in enumerate(runs):
        color = colors[i % len(colors)]
        for (mode, threads), pts in sorted(series(r).items()):
            front = pareto_front(pts)
            marker = _MARKERS[thread_counts.index(threads) % len(_MARKERS)]
            ax.plot([p[0] for p in front], [p[1] for p in front], ls=_LINES.get(mode, ":"), marker=marker,
                    ms=4, color=color, label=f"{r['index']['name']} {mode} @ {threads}t")
            ax.scatter([p[0] for p in pts], [p[1] for p in pts], s=8, alpha=0.25, color=color)
    ax.axvline(target, color="gray", ls="--", lw=1)
    # x in data units, y in axes units: the label sits on top of the line whatever the QPS range.
    ax.text(target, 1.0, f" target {target:g}", color="gray", va="bottom", transform=ax.get_xaxis_transform())
    ax.set_yscale("log")
    conf = _confidence(runs[0])
    ax.set_xlabel(f"recall@{runs[0].get('run', {}).get('k', 10)}"  # --k: recall@k
                  + (f", {conf:.0%} lower bound" if conf else "") + " (k-nn, ann-benchmarks)")
    ax.set_ylabel("queries per second (log)")
    ds = runs[0]["dataset"]
    ax.set_title(title or f"{ds['name']}{' (generated)' if ds.get('synthetic') else ''}: n={ds['n']:,}, nq={ds['nq']:,}")
    ax.grid(True, which="both", alpha=0.3)
    ax.legend(fontsize=7, loc="lower left")
    fig.tight_layout()
    out = Path(out)
    fig.savefig(out)
    plt.close(fig)
    return out


def plot_concurrent(runs: list[dict], out: Path, title: str | None = None) -> Path:
    """Two panels from the results' concurrent levels: QPS against clients, and p50/p99 latency
    against QPS (each marker one client count)."""
    runs = [r for r in runs if r.get("concurrent")]
    if not runs:
        raise ValueError("nothing to plot: no result has concurrent levels (run with --mode concurrent)")
    fig, (left, right) = plt.subplots(1, 2, figsize=(12, 5), dpi=110)
    colors = plt.get_cmap("tab10").colors
    for i, r in enumerate(runs):
        color, levels = colors[i % len(colors)], r["concurrent"]["levels"]
        clients = [lv["clients"] for lv in levels]
        qps = [lv["qps"] for lv in levels]
        name = r["index"]["name"]
        left.plot(clients, qps, marker="o", color=color, label=name)
        right.plot(qps, [lv["p99_ms"] for lv in levels], marker="o", color=color, label=f"{name} p99")
        right.plot(qps, [lv["p50_ms"] for lv in levels], marker=".", ls=":", color=color, label=f"{name} p50")
        for x, y, c in zip(qps, [lv["p99_ms"] for lv in levels], clients):
            right.annotate(str(c), (x, y), textcoords="offset points", xytext=(3, 3), fontsize=7, color=color)
    left.set_xscale("log", base=2)
    ticks = sorted({lv["clients"] for r in runs for lv in r["concurrent"]["levels"]})
    left.set_xticks(ticks, [str(t) for t in ticks])
    left.minorticks_off()
    left.set_xlabel("concurrent clients (one query per call)")
    left.set_ylabel("queries per second")
    left.grid(True, which="both", alpha=0.3)
    left.legend(fontsize=8)
    right.set_yscale("log")
    right.set_xlabel("queries per second")
    right.set_ylabel("latency, ms (log; labels: clients)")
    right.grid(True, which="both", alpha=0.3)
    right.legend(fontsize=7)
    ds = runs[0]["dataset"]
    fig.suptitle(title or f"{ds['name']}: concurrent clients, n={ds['n']:,}")
    fig.tight_layout()
    out = Path(out)
    fig.savefig(out)
    plt.close(fig)
    return out
