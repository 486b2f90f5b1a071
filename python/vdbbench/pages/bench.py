"""The benchmark page (`vdbbench report RESULTS... -o report.html`): interactive recall/QPS Pareto
fronts per mode and thread count, concurrent-client curves when the results hold them, the
headline and index tables, build time, memory, machine and dataset, from result JSON files."""

from __future__ import annotations

from pathlib import Path
from typing import Any, Iterable, Sequence

from vdbbench.bench.report import fmt_bytes, fmt_params, headline_rows, ratio_text
from vdbbench.bench.results import held_recall, load_result, target_met
from vdbbench.pages.html import PALETTE, Raw, cards, document, esc, facts, figure, table, write

# Modes drawn as recall/QPS fronts; "concurrent" points have their own plots (QPS vs clients).
CONCURRENT = "concurrent"
# p99.9 latency of a concurrent point, under the spellings a result may use.
_P999_KEYS = ("p999_ms", "p99_9_ms", "p99.9_ms")


class PageError(ValueError):
    """Input a page cannot be made from; the message says what was expected."""


# ---------------------------------------------------------------------------------------------
# Reading results
# ---------------------------------------------------------------------------------------------


def load_results(paths: Iterable[str | Path]) -> list[tuple[Path, dict]]:
    """(path, result) of every result file named, and of every result file in the folders named.

    A file named explicitly must be a result (`load_result`'s ValueError otherwise); in a folder,
    other JSON files (a report's, a partial run's) are passed over, but a result file that cannot
    be read (truncated, empty, hand-edited, of another schema version) is an error, not left out
    of the page unsaid; and a folder with no result at all is an error.
    """
    out: list[tuple[Path, dict]] = []
    for p in map(Path, paths):
        if p.is_dir():
            found = []
            for f in sorted(p.glob("*.json")):
                if f.name.endswith(".partial.json"):
                    continue
                try:
                    found.append((f, load_result(f)))
                except ValueError:
                    if _foreign(f):
                        continue
                    raise
            if not found:
                raise PageError(f"{p}: no vdbbench result files (*.json) in this folder")
            out += found
        elif p.exists():
            out.append((p, load_result(p)))
        else:
            raise PageError(f"{p}: no such result file or folder")
    if not out:
        raise PageError("no results given")
    return out


def _foreign(path: Path) -> bool:
    """A readable JSON file that does not claim to be a vdbbench result (another tool's, a
    report's): neither a ``vdbbench.result`` schema of any version nor points and a headline."""
    import json

    try:
        data = json.loads(path.read_text())
    except (OSError, ValueError):
        return False  # unreadable: a damaged result as far as anyone can tell
    if not isinstance(data, dict):
        return True
    return not (str(data.get("schema", "")).startswith("vdbbench.result") or {"points", "headline"} <= data.keys())


def dataset_key(result: dict) -> tuple:
    """The data and the recall rule a result's headline was chosen under: results that differ in
    either do not share a headline table (their QPS are at different recalls)."""
    ds, run = result["dataset"], result.get("run") or {}
    return (ds.get("name"), ds.get("n"), ds.get("nq"), ds.get("sha256"),
            run.get("target_recall", 0.95), run.get("recall_confidence") or 0.0, run.get("k", 10))


def by_dataset(runs: Sequence[dict]) -> list[list[dict]]:
    """Results grouped by the dataset (and query set) they were measured on and the recall rule
    (target, confidence, k) their headlines were chosen under, in input order."""
    groups: dict[tuple, list[dict]] = {}
    for r in runs:
        groups.setdefault(dataset_key(r), []).append(r)
    return list(groups.values())


def _distinct(runs: list[dict], paths: dict[int, Path]) -> list[dict]:
    """One section's results, an index measured more than once (`vdbbench report old/ new/` on
    the same data) named with its file in each: "ivf (old/ivf.json)". Same names drew the two
    as one legend group in one colour and tabulated two indistinguishable "ivf" rows."""
    from collections import Counter

    count = Counter(r["index"]["name"] for r in runs)
    out = []
    for r in runs:
        name = r["index"]["name"]
        if count[name] > 1:
            p = paths.get(id(r))
            where = f"{p.parent.name}/{p.name}" if p is not None else "?"
            if sum(1 for q in runs if q["index"]["name"] == name and paths.get(id(q)) is not None
                   and f"{paths[id(q)].parent.name}/{paths[id(q)].name}" == where) > 1:
                where = str(p)  # two folders of one name: the whole path tells them apart
            r = {**r, "index": {**r["index"], "name": f"{name} ({where})"}}
            paths[id(r)] = p
        out.append(r)
    return out


def ours_of(runs: Sequence[dict], ours: str | None = None) -> str | None:
    """The index the ratios are taken against: `ours` when given, else our engine when present."""
    from vdbbench.adapters.registry import OURS

    names = [r["index"]["name"] for r in runs]
    if ours:
        if ours not in names:
            raise PageError(f"--ours {ours!r} is not among the results ({', '.join(names)})")
        return ours
    return next((n for n in OURS if n in names), None)


def timed(p: dict) -> bool:
    """A point with a QPS measurement (a point only swept for recall has none to draw)."""
    return isinstance(p.get("qps"), (int, float)) and p["qps"] > 0


def pareto(points: Sequence[dict]) -> list[dict]:
    """The points no other point beats on both recall10 and QPS, by increasing recall."""
    front: list[dict] = []
    for p in sorted(points, key=lambda p: (-p["recall10"], -p["qps"])):
        if not front or p["qps"] > front[-1]["qps"]:
            front.append(p)
    return front[::-1]


def p999(p: dict) -> float | None:
    return next((p[k] for k in _P999_KEYS if p.get(k) is not None), None)


def _ms(v: Any) -> str:
    return "-" if v is None else f"{v:.3f}"


def _qps(v: Any) -> str:
    return "-" if v is None else f"{v:,.0f}"


# ---------------------------------------------------------------------------------------------
# Figures
# ---------------------------------------------------------------------------------------------


def _si(v: float) -> str:
    for div, unit in ((1e6, "M"), (1e3, "k")):
        if v >= div:
            return f"{v / div:g}{unit}"
    return f"{v:g}"


def log_axis(values: Iterable[float]) -> dict:
    """A log axis labelled at 1, 2 and 5 times the powers of ten the values span (plotly's own
    minor labels are bare digits: "2" could be 200 or 20k)."""
    import math

    vals = [v for v in values if v and v > 0]
    if not vals:
        return dict(type="log")
    lo, hi = math.floor(math.log10(min(vals))), math.ceil(math.log10(max(vals)))
    ticks = [m * 10.0 ** e for e in range(lo, hi + 1) for m in (1, 2, 5) if min(vals) / 2 <= m * 10.0 ** e <= max(vals) * 2]
    return dict(type="log", tickvals=ticks, ticktext=[_si(t) for t in ticks])


def _colors(runs: Sequence[dict]) -> dict[str, str]:
    return {r["index"]["name"]: PALETTE[i % len(PALETTE)] for i, r in enumerate(runs)}


def _hover_row(p: dict) -> list[str]:
    lat = f"p50 {_ms(p.get('p50_ms'))} ms, p99 {_ms(p.get('p99_ms'))} ms" if p.get("p50_ms") is not None else "batch: no per-query latency"
    ids = p.get("recall10_ids")
    return [fmt_params(p.get("params")), lat, "" if ids is None else f"id-overlap recall {ids:.4f}"]


_PARETO_HOVER = ("<b>%{fullData.legendgroup}</b><br>%{customdata[0]}<br>recall@10 %{x:.4f}<br>"
                 "QPS %{y:,.0f}<br>%{customdata[1]}<br>%{customdata[2]}<extra></extra>")


def pareto_figure(runs: Sequence[dict], mode: str, threads: int, target: float | None):
    """One (mode, threads): each index's front as a line, all its timed points faint, its
    headline point as a star; hovering any point shows its parameters, recall, QPS, latency."""
    import plotly.graph_objects as go

    # points sit at the recall the run held them to (its lower bound under --recall-confidence,
    # as the headline and the target line do), not at a mean the rule did not judge them by
    held = _held(runs)

    def at(p: dict) -> dict:
        return dict(p, recall10=held_recall(p)) if held else p

    hover = _PARETO_HOVER.replace("recall@10 ", f"recall@10{held} ")
    colors = _colors(runs)
    fig = go.Figure()
    for r in runs:
        name = r["index"]["name"]
        pts = [at(p) for p in r["points"] if p.get("mode") == mode and p.get("threads") == threads and timed(p)]
        if not pts:
            continue
        front = pareto(pts)
        color = colors[name]
        fig.add_trace(go.Scatter(
            x=[p["recall10"] for p in pts], y=[p["qps"] for p in pts], mode="markers", name=f"{name} (all points)",
            legendgroup=name, showlegend=False, marker=dict(color=color, size=6, opacity=0.3),
            customdata=[_hover_row(p) for p in pts], hovertemplate=hover))
        fig.add_trace(go.Scatter(
            x=[p["recall10"] for p in front], y=[p["qps"] for p in front], mode="lines+markers", name=name,
            legendgroup=name, line=dict(color=color, width=2), marker=dict(color=color, size=7),
            customdata=[_hover_row(p) for p in front], hovertemplate=hover))
        head = next((at(h) for h in r.get("headline") or [] if h.get("mode") == mode and h.get("threads") == threads
                     and h.get("qps") is not None), None)
        if head:
            fig.add_trace(go.Scatter(
                x=[head["recall10"]], y=[head["qps"]], mode="markers", name=f"{name} headline", legendgroup=name,
                showlegend=False, marker=dict(color=color, size=15, symbol="star", line=dict(color="black", width=1)),
                customdata=[_hover_row(head)[:2] + [
                    "the headline" + (f" (paired re-timing: {head['qps_paired']:,.0f} QPS)" if head.get("qps_paired") else "")]],
                hovertemplate=hover))
    if target is not None:
        fig.add_vline(x=target, line=dict(color="gray", dash="dash", width=1),
                      annotation_text=f"target {target:g}", annotation_position="top left")
    fig.update_layout(title=f"{mode} @ {threads} thread{'s' if threads != 1 else ''}",
                      xaxis_title=f"recall@10{held} (k-nn, ann-benchmarks)", yaxis_title="queries per second (log)",
                      yaxis=log_axis(p["qps"] for r in runs for p in r["points"]
                                     if p.get("mode") == mode and p.get("threads") == threads and timed(p)),
                      hovermode="closest",
                      legend=dict(font=dict(size=11), orientation="h", yanchor="top", y=-0.16, x=0))
    return fig


def _series_key(p: dict) -> tuple:
    return (fmt_params(p.get("params")), p.get("threads"))


def concurrent_points(result: dict) -> list[dict]:
    """A result's concurrent measurements as points (params, threads, clients, qps, latencies,
    recall10): the levels of its ``concurrent`` block, which is where `vdbbench run --mode
    concurrent` writes them (docs/result-schema.md), and any points of mode "concurrent"."""
    out = [p for p in result["points"] if p.get("mode") == CONCURRENT]
    c = result.get("concurrent")
    if isinstance(c, dict):
        for level in c.get("levels") or []:
            out.append({"params": c.get("params"), "threads": c.get("threads_per_call", 1), "mode": CONCURRENT,
                        "recall10": c.get("recall10"), **level})
    return out


def concurrent_series(runs: Sequence[dict]) -> list[tuple[str, str, list[dict]]]:
    """(index, label, points by clients) for every index and parameter set measured concurrently."""
    out = []
    for r in runs:
        name = r["index"]["name"]
        groups: dict[tuple, list[dict]] = {}
        for p in concurrent_points(r):
            if timed(p) and p.get("clients") is not None:
                groups.setdefault(_series_key(p), []).append(p)
        for (params, threads), pts in groups.items():
            label = f"{name} {params}" + (f" ({threads}t)" if threads not in (None, 1) else "")
            out.append((name, label, sorted(pts, key=lambda p: p["clients"])))
    return out


_CONC_HOVER = ("<b>%{fullData.name}</b><br>%{customdata[0]} clients<br>QPS %{customdata[1]}<br>"
               "p50 %{customdata[2]} ms, p99 %{customdata[3]} ms, p99.9 %{customdata[4]} ms<br>"
               "recall@10 %{customdata[5]}<extra></extra>")


def _conc_hover(p: dict) -> list[str]:
    r = p.get("recall10")
    return [str(p["clients"]), _qps(p["qps"]), _ms(p.get("p50_ms")), _ms(p.get("p99_ms")), _ms(p999(p)),
            "-" if r is None else f"{r:.4f}"]


def concurrent_figures(runs: Sequence[dict]):
    """QPS vs clients, and p99 latency vs QPS (p99.9 dotted), one line per index and parameters."""
    import plotly.graph_objects as go

    colors = _colors(runs)
    qps_fig, lat_fig = go.Figure(), go.Figure()
    dashes = ("solid", "dash", "dot", "dashdot")
    seen: dict[str, int] = {}
    for name, label, pts in concurrent_series(runs):
        n = seen[name] = seen.get(name, -1) + 1
        style = dict(color=colors[name], dash=dashes[n % len(dashes)], width=2)
        hover = [_conc_hover(p) for p in pts]
        qps_fig.add_trace(go.Scatter(x=[p["clients"] for p in pts], y=[p["qps"] for p in pts], name=label,
                                     mode="lines+markers", line=style, customdata=hover, hovertemplate=_CONC_HOVER))
        lat_fig.add_trace(go.Scatter(x=[p["qps"] for p in pts], y=[p.get("p99_ms") for p in pts], name=f"{label} p99",
                                     mode="lines+markers", line=style, customdata=hover, hovertemplate=_CONC_HOVER))
        if any(p999(p) is not None for p in pts):
            lat_fig.add_trace(go.Scatter(x=[p["qps"] for p in pts], y=[p999(p) for p in pts], name=f"{label} p99.9",
                                         mode="lines+markers", line=dict(color=colors[name], dash="dot", width=1),
                                         marker=dict(symbol="triangle-up", size=6), customdata=hover,
                                         hovertemplate=_CONC_HOVER))
    below = dict(font=dict(size=11), orientation="h", yanchor="top", y=-0.18, x=0)
    qps_fig.update_layout(title="throughput vs concurrent clients", xaxis_title="clients (one query per call each)",
                          yaxis_title="queries per second", hovermode="closest", legend=below)
    lat_fig.update_layout(title="tail latency vs throughput", xaxis_title="queries per second",
                          yaxis_title="latency (ms, log)", yaxis=log_axis(v for _, _, pts in concurrent_series(runs) for p in pts
                                         for v in (p.get("p99_ms"), p999(p))), hovermode="closest", legend=below)
    return qps_fig, lat_fig


# ---------------------------------------------------------------------------------------------
# Tables
# ---------------------------------------------------------------------------------------------


def _held(runs: Sequence[dict]) -> str:
    """What the target holds: "" for the mean recall, " (95% lower bound)" under --recall-confidence."""
    conf = max(((r.get("run") or {}).get("recall_confidence") or 0.0 for r in runs), default=0.0)
    return f" ({conf:.0%} lower bound)" if conf else ""


def headline_html(runs: Sequence[dict], ours: str | None, target: float) -> Raw:
    rows = headline_rows(list(runs), ours)
    cells, attrs = [], []
    for row in rows:
        cells.append([
            row["index"], f"{row['mode']} @ {row['threads']}t", "missed" if row["qps"] is None else _qps(row["qps"]),
            _qps(row["qps_paired"]), "-" if row["recall10"] is None else f"{row['recall10']:.4f}", row["params"],
            "-" if row["p50_ms"] is None else f"{row['p50_ms']:.3f} / {_ms(row['p99_ms'])}",
            ratio_text(row),
        ])
        attrs.append('class="ours"' if row["index"] == ours else ('class="missed"' if row["qps"] is None else ""))
    headers = ["index", "mode", f"QPS @ recall>={target:g}{_held(runs)}", "paired QPS", "recall@10", "params", "p50 / p99 ms",
               f"{ours or 'ours'} / this"]
    return table(headers, cells, left=(0, 1, 5), row_attrs=attrs)


# The machine's own fields; any other key of `machine` is a library's version (faiss, hnswlib,
# scann, usearch, a plugin's own: docs/result-schema.md).
_MACHINE_KEYS = {"cpu", "cores", "simd", "platform", "python", "read_gbps_1t", "faiss_compile"}


def _version(r: dict) -> str:
    """The library the index ran on and its version (vdbbench's own for our engine), and the
    SIMD level it ran at where its library says."""
    m = r.get("machine") or {}
    libs = [f"{k} {v}" for k, v in m.items() if k not in _MACHINE_KEYS and isinstance(v, (str, int, float)) and v]
    name = ", ".join(libs) if libs else f"vdbbench {r.get('vdbbench_version') or '?'}"
    return name + (f", SIMD {m['simd']}" if m.get("simd") else "")


def indexes_html(runs: Sequence[dict], ours: str | None, paths: dict[int, Path]) -> Raw:
    """One row per index: build parameters, version, build time, memory, points, target met."""
    cells, attrs = [], []
    for r in sorted(runs, key=lambda r: (r["index"]["name"] != ours, r["index"]["name"])):
        b, n = r["build"], r["dataset"].get("n")
        build_s = (b.get("train_s") or 0.0) + (b.get("add_s") or 0.0)
        pts = r["points"]
        n_timed = sum(timed(p) for p in pts)
        cells.append([
            r["index"]["name"], fmt_params(r["index"].get("params")), _version(r),
            f"{build_s:.1f}" + (" (cached)" if b.get("cached") else ""),
            f"{b.get('train_s') or 0:.1f} / {b.get('add_s') or 0:.1f}", fmt_bytes(b.get("bytes")),
            f"{b['bytes'] / n:,.0f}" if b.get("bytes") and n else "-",
            f"{len(pts)}" + (f" ({len(pts) - n_timed} recall only)" if n_timed < len(pts) else ""),
            "yes" if target_met(r) else "no", str(paths.get(id(r), "")),
        ])
        attrs.append('class="ours"' if r["index"]["name"] == ours else "")
    headers = ["index", "build parameters", "version", "build s", "train / add s", "memory", "bytes / vector",
               "points", "target met", "file"]
    return table(headers, cells, left=(0, 1, 2, 9), row_attrs=attrs)


def concurrent_html(runs: Sequence[dict]) -> Raw:
    cells = []
    for _, label, pts in concurrent_series(runs):
        for p in pts:
            cells.append([label, p["clients"], _qps(p["qps"]), _ms(p.get("p50_ms")), _ms(p.get("p99_ms")),
                          _ms(p999(p)), "-" if p.get("recall10") is None else f"{p['recall10']:.4f}"])
    return table(["index and parameters", "clients", "QPS", "p50 ms", "p99 ms", "p99.9 ms", "recall@10"], cells)


# ---------------------------------------------------------------------------------------------
# The page
# ---------------------------------------------------------------------------------------------


def _dataset_facts(ds: dict, nq_total: Any) -> Raw:
    gen = ds.get("synthetic")
    return facts([
        ("dataset", ds.get("name")),
        ("vectors", f"n={ds.get('n', 0):,}, dim={ds.get('dim')}, metric {ds.get('metric')}"),
        ("queries", f"{ds.get('nq', 0):,}" + (f" of {nq_total:,}" if nq_total and nq_total != ds.get("nq") else "")),
        ("origin", "generated replica (synthetic data, not the real set)" if gen else (ds.get("source") or "real data")),
        ("requested", ds.get("requested")),
        ("why the replica", ds.get("fallback_reason")),
        ("sha256", ds.get("sha256")),
    ])


def _machine_facts(runs: Sequence[dict]) -> Raw:
    m = dict(runs[0].get("machine") or {})
    for r in runs:  # faiss's version and build flags live in the peers' results
        for k, v in (r.get("machine") or {}).items():
            if m.get(k) is None:
                m[k] = v
    simd = m.get("simd")
    git = runs[0].get("git") or {}
    return facts([
        ("CPU", f"{m.get('cpu')}, {m.get('cores')} cores" + (f", SIMD {simd}" if simd else "")),
        ("one-core read bandwidth", f"{m['read_gbps_1t']:.1f} GB/s" if m.get("read_gbps_1t") else None),
        ("platform", m.get("platform")),
        ("python", m.get("python")),
        ("faiss", f"{m['faiss']}" + (f" ({m['faiss_compile']})" if m.get("faiss_compile") else "") if m.get("faiss") else None),
        ("vdbbench", runs[0].get("vdbbench_version")),
        ("git", (git.get("commit") or "")[:12] + (" (dirty)" if git.get("dirty") else "") if git else None),
        ("measured", " to ".join(dict.fromkeys([min(times), max(times)])) if (times := sorted(str(r["created"]) for r in runs if r.get("created"))) else None),
    ])


def _run_facts(run: dict) -> Raw:
    return facts([
        ("target", f"recall@10 >= {run.get('target_recall', 0.95):g}, k={run.get('k', 10)}"),
        ("modes / threads", f"{', '.join(run.get('modes') or [])} at {', '.join(map(str, run.get('threads') or []))} threads"),
        ("timing", f"{run.get('repeats')} batch repeats after {run.get('warmup', 0)} warm-up, {run.get('stat', 'median')} kept; "
                   f"{run.get('single_queries')} queries timed one by one" if run.get("repeats") else None),
        ("recall", run.get("recall_note")),
        ("paired re-timing", ", ".join(run["paired_with"]) if run.get("paired_with") else None),
    ])


def _summary(runs: Sequence[dict]) -> str:
    """One line under the dataset's heading: what was measured, on what, against which target."""
    ds, m, run = runs[0]["dataset"], runs[0].get("machine") or {}, runs[0].get("run") or {}
    origin = ("a generated replica: synthetic vectors, not the real set" if ds.get("synthetic")
              else f"real data ({ds.get('source') or ds.get('name')})")
    simd = next((r["machine"].get("simd") for r in runs if (r.get("machine") or {}).get("simd")), None)
    return (f'<p>{ds.get("n", 0):,} vectors of dim {esc(ds.get("dim"))} ({esc(ds.get("metric"))}), '
            f'{ds.get("nq", 0):,} queries; {esc(origin)}. {len(runs)} index{"es" if len(runs) != 1 else ""}, '
            f'target recall@10 >= {run.get("target_recall", 0.95):g}{_held(runs)}; measured on {esc(m.get("cpu"))}, '
            f'{esc(m.get("cores"))} cores' + (f", SIMD {esc(simd)}" if simd else "") + ".</p>")


def _section(runs: Sequence[dict], ours: str | None, paths: dict[int, Path], n: int) -> str:
    ds = runs[0]["dataset"]
    run = runs[0].get("run") or {}
    target = run.get("target_recall", 0.95)
    names = [r["index"]["name"] for r in runs]
    # ours measured more than once here (`_distinct`): the ratios are to the first file named
    ours_here = ours if ours in names else next((n for n in names if ours and n.startswith(f"{ours} (")), None)
    badge = ('<span class="badge warn">generated replica</span>' if ds.get("synthetic")
             else '<span class="badge good">real data</span>')
    parts = [f'<section class="dataset" id="ds{n}"><h2>{esc(ds.get("name"))} {badge} '
             f'<span class="muted">n={ds.get("n", 0):,}, nq={ds.get("nq", 0):,}</span></h2>', _summary(runs)]
    combos = sorted({(p.get("mode"), p.get("threads")) for r in runs for p in r["points"]
                     if p.get("mode") != CONCURRENT and timed(p)}, key=lambda mt: (str(mt[0]), mt[1] or 0))
    parts.append("<h3>Recall / QPS Pareto fronts</h3><p class=\"note\">Lines: each index's Pareto front; faint dots: "
                 "every timed point; star: the headline. Hover a point for its parameters, recall, QPS and latency; "
                 "click a legend entry to hide an index, drag to zoom, double-click to zoom out.</p>")
    figs = [figure(pareto_figure(runs, mode, threads, target), f"pareto-{n}-{mode}-{threads}", height=480)
            for mode, threads in combos]
    parts.append('<div class="grid2">' + "".join(f"<div>{f}</div>" for f in figs) + "</div>")
    if not combos:
        parts.append('<p class="note">No timed recall/QPS points in these results.</p>')
    untimed = sum(1 for r in runs for p in r["points"] if not timed(p))
    if untimed:
        parts.append(f'<p class="note">{untimed} points were only swept for recall (not timed) and are not drawn.</p>')
    parts.append(f"<h3>Headline: highest QPS at recall@10 >= {target:g}{_held(runs)}</h3>"
                 + headline_html(runs, ours_here, target))
    if ours_here and len(runs) > 1:
        parts.append(f'<p class="note">{esc(ours_here)} / this: ratio of QPS, from the interleaved re-timing of the '
                     "headline points (paired QPS) when both were re-timed together in one run, so both sides saw the "
                     "same machine load; marked unpaired otherwise (the sweeps' own QPS, e.g. of two runs).</p>")
    if concurrent_series(runs):
        qps_fig, lat_fig = concurrent_figures(runs)
        parts.append("<h3>Concurrent clients</h3><p class=\"note\">Each client issues one query per call for a fixed "
                     "duration; QPS is the total over clients.</p>")
        parts.append(f'<div class="grid2"><div>{figure(qps_fig, f"conc-qps-{n}")}</div>'
                     f'<div>{figure(lat_fig, f"conc-lat-{n}")}</div></div>')
        parts.append(concurrent_html(runs))
    parts.append("<h3>Indexes: build time and memory</h3>" + indexes_html(runs, ours_here, paths))
    parts.append('<div class="grid2"><div><h3>Dataset</h3>' + _dataset_facts(ds, ds.get("nq_total")) + "</div>"
                 "<div><h3>Machine</h3>" + _machine_facts(runs) + "</div></div>")
    parts.append("<h3>Run</h3>" + _run_facts(run))
    parts.append("</section>")
    html = "\n".join(parts)
    k = run.get("k", 10)  # one k a section (`dataset_key`): a run with --k 20 measured recall@20
    return html if k == 10 else html.replace("recall@10", f"recall@{k}")


def benchmark_page(results: Sequence[tuple[Path, dict]], ours: str | None = None, title: str | None = None) -> str:
    """The page's HTML for these (path, result) pairs: one section per dataset."""
    if not results:
        raise PageError("no results given")
    results = list({Path(p).resolve(): (p, r) for p, r in results}.values())  # a file named twice: once
    runs = [r for _, r in results]
    paths = {id(r): p for p, r in results}
    ours = ours_of(runs, ours)
    groups = [_distinct(g, paths) for g in by_dataset(runs)]
    runs = [r for g in groups for r in g]
    names = ", ".join(sorted({g[0]["dataset"]["name"] for g in groups}))
    title = title or f"vdbbench results: {names}"
    head = [f"<h1>{esc(title)}</h1>"]
    head.append(cards([("indexes", len(runs)), ("datasets", len(groups)),
                       ("points", sum(len(r["points"]) for r in runs)),
                       ("ours", ours or "none among these results")]))
    if len(groups) > 1:
        head.append("<p>Datasets: " + ", ".join(f'<a href="#ds{i}">{esc(g[0]["dataset"]["name"])}</a>'
                                                for i, g in enumerate(groups)) + "</p>")
    body = "\n".join(head + [_section(g, ours, paths, i) for i, g in enumerate(groups)])
    body += f'\n<footer>Written by <code>vdbbench report</code> from {len(runs)} result file(s); self-contained ' \
            "(plotly.js inlined), it needs no server and no network.</footer>"
    return document(title, body)


def write_benchmark_page(paths: Iterable[str | Path], out: str | Path, ours: str | None = None,
                         title: str | None = None) -> Path:
    return write(out, benchmark_page(load_results(paths), ours=ours, title=title))
