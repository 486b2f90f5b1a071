"""Rich tables and markdown for results: the headline table with ratios to ours, and live progress."""

from __future__ import annotations

from rich.console import Console
from rich.progress import Progress, SpinnerColumn, TextColumn, TimeElapsedColumn
from rich.table import Table

from vdbbench.bench.bandwidth import bound_share

from vdbbench.bench.results import headline_entry


def fmt_params(params: dict | None) -> str:
    return " ".join(f"{k}={v}" for k, v in params.items()) if params else "-"


def fmt_bytes(n: int | None) -> str:
    if n is None:
        return "-"
    for unit in ("B", "KiB", "MiB", "GiB"):
        if n < 1024 or unit == "GiB":
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1024
    return str(n)


def paired_ratio(ours: dict, peer: dict) -> float:
    """ours/peer QPS, from the interleaved re-timing when both have it (see bench.paired)."""
    if ours.get("qps_paired") and peer.get("qps_paired"):
        return ours["qps_paired"] / peer["qps_paired"]
    return ours["qps"] / peer["qps"]


def ratio_spread(ours: dict, peer: dict) -> tuple[float, float] | None:
    """The lowest and highest per-round ratio ours/peer of the paired re-timing (round i of one
    over round i of the other: the rounds alternate, so each pair shared a stretch of machine
    load), or None when either side has no rounds."""
    a, b = ours.get("qps_paired_samples") or [], peer.get("qps_paired_samples") or []
    rounds = [x / y for x, y in zip(a, b) if y]
    return (min(rounds), max(rounds)) if rounds else None


def retimed_together(a: dict, b: dict) -> bool:
    """Whether results a and b had their headlines re-timed in turns in one run: each names the
    other in ``run.paired_with``. Two results of the same data from two runs into one folder may
    both carry ``qps_paired``, but from different sessions: no interleaved pair of each other."""
    def partners(r):
        return (r.get("run") or {}).get("paired_with") or []

    return a is b or (a["index"]["name"] in partners(b) and b["index"]["name"] in partners(a))


def headline_rows(runs: list[dict], ours: str | None = None) -> list[dict]:
    """One row per index and mode/threads: headline QPS, recall, params, build, ratio ours/this
    (`paired_ratio` when the two were re-timed together, `retimed_together`; else of the
    sweeps' QPS, with ``ratio_paired`` False)."""
    ref = next((r for r in runs if r["index"]["name"] == ours), None)
    rows = []
    for r in runs:
        b = r["build"]
        together = ref is not None and retimed_together(ref, r)
        for h in r["headline"]:
            mine = headline_entry(ref, h["mode"], h["threads"]) if ref else None
            ratio = spread = None
            if mine and h["qps"]:
                ratio = paired_ratio(mine, h) if together else mine["qps"] / h["qps"]
                spread = ratio_spread(mine, h) if together and mine is not h else None
            rows.append({
                "index": r["index"]["name"],
                "mode": h["mode"],
                "threads": h["threads"],
                "qps": h["qps"],
                "qps_paired": h.get("qps_paired"),
                "recall10": h["recall10"],
                "params": fmt_params(h["params"]),
                "p50_ms": h["p50_ms"],
                "p99_ms": h["p99_ms"],
                "build_s": b["train_s"] + b["add_s"],
                "cached": b.get("cached", False),
                "bytes": b["bytes"],
                "ratio": ratio,
                "ratio_paired": together,
                "ratio_spread": spread,
            })
    rows.sort(key=lambda x: (x["mode"], x["threads"], x["index"] != ours, x["index"]))
    return rows


def _cells(row: dict, ours: str | None) -> list[str]:
    def num(v, f):
        return "-" if v is None else format(v, f)

    return [
        row["index"],
        f"{row['mode']} @ {row['threads']}t",
        "missed" if row["qps"] is None else f"{row['qps']:,.0f}",
        "-" if row["qps_paired"] is None else f"{row['qps_paired']:,.0f}",
        num(row["recall10"], ".4f"),
        row["params"],
        "-" if row["p50_ms"] is None else f"{row['p50_ms']:.3f} / {row['p99_ms']:.3f}",
        f"{row['build_s']:.1f}" + (" (cached)" if row["cached"] else ""),
        fmt_bytes(row["bytes"]),
        ratio_text(row),
    ]


def ratio_text(row: dict) -> str:
    """'2.27x (2.10-2.41)' with the spread of the paired rounds' ratios (`ratio_spread`);
    '2.27x (unpaired)' when the two were not re-timed together (`retimed_together`)."""
    if row["ratio"] is None:
        return "-"
    if not row.get("ratio_paired", True):
        return f"{row['ratio']:.2f}x (unpaired)"
    spread = row.get("ratio_spread")
    return f"{row['ratio']:.2f}x" + (f" ({spread[0]:.2f}-{spread[1]:.2f})" if spread else "")


def _confidence(runs: list[dict]) -> float:
    """The run's ``--recall-confidence`` (0 when off, or for a result from before it existed)."""
    return max((r.get("run", {}).get("recall_confidence") or 0.0 for r in runs), default=0.0)


def _headers(ours: str | None, target: float, confidence: float = 0.0) -> list[str]:
    held = f" ({confidence:.0%} lower bound)" if confidence else ""
    return [
        "index", "mode", f"QPS @ recall>={target:g}{held}", "paired QPS", "recall10", "params", "p50/p99 ms",
        "build s", "memory", f"{ours or 'ours'} / this",
    ]


def headline_table(runs: list[dict], ours: str | None, target: float, title: str = "") -> Table:
    table = Table(title=title or None, header_style="bold")
    for i, h in enumerate(_headers(ours, target, _confidence(runs))):
        table.add_column(h, justify="left" if i in (0, 1, 5) else "right", overflow="fold")
    for row in headline_rows(runs, ours):
        style = "bold" if row["index"] == ours else ("red" if row["qps"] is None else None)
        table.add_row(*_cells(row, ours), style=style)
    return table


def headline_markdown(runs: list[dict], ours: str | None, target: float) -> str:
    lines = ["| " + " | ".join(_headers(ours, target, _confidence(runs))) + " |", "|" + "---|" * 10]
    for row in headline_rows(runs, ours):
        lines.append("| " + " | ".join(_cells(row, ours)) + " |")
    if any(row.get("ratio_spread") for row in headline_rows(runs, ours)):
        lines += ["", f"{ours or 'ours'} / this: the ratio of the paired QPS, and in brackets the lowest and highest "
                  "ratio of single rounds of the interleaved re-timing."]
    return "\n".join(lines) + "\n"


def knob_text(name: str, sweep: dict) -> str:
    """One knob's sweep as a reader checks it: 'k_factor 1,2,4,8,16' (and which values a fast
    sweep skipped), or for an adaptive one 'nprobe 4-96 (adaptive within 1-4000)'."""
    values = sweep.get("values") or []
    shown = ",".join(f"{v:g}" if isinstance(v, float) else str(v) for v in values)
    if "adaptive" not in sweep:
        skipped = [v for v in values if v not in sweep.get("swept", values)]
        left = ",".join(f"{v:g}" if isinstance(v, float) else str(v) for v in skipped)
        return f"{name} {shown}" + (f" ({left} skipped: the step before did not pay)" if skipped else "")
    lo, hi = sweep["adaptive"]
    reached = f"{min(values)}-{max(values)} " if values else ""
    return f"{name} {reached}(adaptive within {lo}-{hi})"


def knobs_markdown(runs: list[dict]) -> str:
    """The knobs each index swept and over what (``run.knobs``): every index sweeps its own
    knobs over its own range, and a reader can check that no peer was held to a narrow one."""
    lines = []
    for r in runs:
        knobs = (r.get("run") or {}).get("knobs")
        if knobs:
            lines.append(f"- {r['index']['name']}: " + "; ".join(knob_text(k, v) for k, v in knobs.items()))
    if not lines:
        return ""
    return "\n".join(["", "Knobs swept (each index its own, over its own range; adaptive: stepped up until the "
                      "target was passed, then bisected, and a point or two above):", "", *lines]) + "\n"


def concurrent_rows(runs: list[dict]) -> list[dict]:
    """One row per index and client count of the concurrent mode (results that have one)."""
    rows = []
    for r in runs:
        c = r.get("concurrent")
        if not c:
            continue
        for level in c["levels"]:
            rows.append({"index": r["index"]["name"], "params": fmt_params(c["params"]),
                         "recall10": c["recall10"], **level})
    return rows


_CONC_HEADERS = ["index", "clients", "QPS", "p50 ms", "p99 ms", "p99.9 ms", "recall10", "params"]


def _conc_cells(row: dict) -> list[str]:
    return [row["index"], str(row["clients"]), f"{row['qps']:,.0f}", f"{row['p50_ms']:.3f}",
            f"{row['p99_ms']:.3f}", f"{row['p999_ms']:.3f}", f"{row['recall10']:.4f}", row["params"]]


def concurrent_table(runs: list[dict], title: str = "") -> Table:
    table = Table(title=title or None, header_style="bold")
    for i, h in enumerate(_CONC_HEADERS):
        table.add_column(h, justify="left" if i in (0, 7) else "right")
    for row in concurrent_rows(runs):
        table.add_row(*_conc_cells(row))
    return table


def concurrent_markdown(runs: list[dict], target: float | None = None) -> str:
    """The concurrent levels (as the page's concurrent table), and with ``target`` the indexes
    whose concurrent point misses it."""
    rows = concurrent_rows(runs)
    if not rows:
        return ""
    c = next(r["concurrent"] for r in runs if r.get("concurrent"))
    per_level = f", {c['duration_s']:g} s per level" if c.get("duration_s") else ""
    workers = "HTTP clients" if c.get("workers") == "http" else "threads"
    lines = ["", f"Concurrent clients ({workers}, one query per call{per_level}; QPS is the total over clients):", "",
             "| " + " | ".join(_CONC_HEADERS) + " |", "|" + "---|" * len(_CONC_HEADERS)]
    lines += ["| " + " | ".join(_conc_cells(row)) + " |" for row in rows]
    missed = [r["index"]["name"] for r in runs if r.get("concurrent") and not r["concurrent"].get("reaches_target")]
    if target is not None and missed:
        lines += ["", f"Concurrent point below recall10 >= {target:g}: {', '.join(missed)}."]
    return "\n".join(lines) + "\n"


def done_text(result: dict) -> str:
    """The line an index's progress ends on: its points and best headline QPS (or that it missed
    the target) when the run timed recall/QPS points, and its concurrent levels when the run
    measured them (a --mode concurrent run has no headline: "0 points; target missed" said
    nothing of what it measured)."""
    run = result.get("run") or {}
    modes = run.get("modes") or []
    parts = []
    if any(m != "concurrent" for m in modes) or not modes:
        best = [h["qps"] for h in result["headline"] if h["qps"] is not None]
        parts.append(f"{len(result['points'])} points; "
                     + (f"best {max(best):,.0f} QPS" if best else "target missed"))
    c = result.get("concurrent")
    if c and c["levels"]:
        levels = ", ".join(f"{lv['qps']:,.0f} QPS @ {lv['clients']} client{'s' if lv['clients'] > 1 else ''}"
                           for lv in c["levels"])
        parts.append(f"concurrent at {fmt_params(c['params'])} (recall10 {c['recall10']:.4f}"
                     f"{'' if c.get('reaches_target') else ', target missed'}): {levels}")
    elif "concurrent" in modes:
        parts.append("concurrent: no point to measure")
    return "done: " + "; ".join(parts)


class RichReporter:
    """Live progress through builds and sweeps: one spinner line per index, points counted."""

    def __init__(self, console: Console):
        self.progress = Progress(
            SpinnerColumn(), TextColumn("[bold]{task.fields[index]}"), TextColumn("{task.description}"),
            TextColumn("[dim]{task.completed} points"), TimeElapsedColumn(), console=console, transient=False,
        )
        self.tasks: dict[str, int] = {}

    def __enter__(self):
        self.progress.__enter__()
        return self

    def __exit__(self, *exc):
        return self.progress.__exit__(*exc)

    def _task(self, index: str) -> int:
        if index not in self.tasks:
            self.tasks[index] = self.progress.add_task("", index=index, total=None)
        return self.tasks[index]

    def phase(self, index: str, text: str) -> None:
        self.progress.update(self._task(index), description=text)
        if not self.progress.console.is_terminal:  # logs and CI: a line per step, no live redraw
            self.progress.console.print(f"{index}: {text}", highlight=False)

    def advance(self, index: str) -> None:
        self.progress.advance(self._task(index))

    def done(self, index: str, text: str) -> None:
        self.progress.update(self._task(index), description=text)
        self.progress.stop_task(self._task(index))


def _bytes_per_query(run: dict, params: dict, mode: str, threads: int) -> float | None:
    """Bytes one query reads at `params` in `mode` at `threads`, from that point's engine counters
    (bytes_scanned / nq); results written before single-mode points kept counters fall back to a
    batch point's."""
    def per_query(p):
        st = p.get("stages") or {}
        return st["bytes_scanned"] / st["nq"] if st.get("bytes_scanned") and st.get("nq") else None

    same = [p for p in run["points"] if p["params"] == params]
    for p in same:
        if p.get("mode") == mode and p.get("threads") == threads and per_query(p):
            return per_query(p)
    return next((per_query(p) for p in same if per_query(p)), None)


def bandwidth_markdown(runs: list[dict]) -> str:
    """Bytes per stored vector, and each headline point's read rate against the one-core read
    bandwidth measured in the same run (indexes whose engine counts the bytes it reads)."""
    lines = []
    for r in runs:
        gbps = r["machine"].get("read_gbps_1t")
        n = r["dataset"]["n"]
        for h in r["headline"]:
            bpq = _bytes_per_query(r, h["params"], h["mode"], h["threads"]) if h["qps"] else None
            if bpq is None or not gbps:
                continue
            qps = h.get("qps_paired") or h["qps"]
            rate, share = bound_share(bpq, qps, h["threads"], gbps)
            if not lines:
                lines += ["", f"Memory and bandwidth (one-core read bandwidth measured in this run: {gbps:.1f} GB/s; "
                          "a share above 1 means the bytes came from the caches):", "",
                          "| index | mode | bytes/vector stored | bytes read/query | GB/s read | share of bandwidth |",
                          "|---|---|---|---|---|---|"]
            per_vec = f"{r['build']['bytes'] / n:,.0f}" if r["build"].get("bytes") else "-"
            lines.append(f"| {r['index']['name']} | {h['mode']} @ {h['threads']}t | {per_vec} | {bpq:,.0f} | "
                         f"{rate:.1f} | {share:.2f} of {h['threads']} core{'s' if h['threads'] > 1 else ''} |")
    return "\n".join(lines) + ("\n" if lines else "")


def served_rows(runs: list[dict]) -> list[dict]:
    """One row per served target and client count (results of `vdbbench run --target`)."""
    rows = []
    for r in runs:
        c = r.get("concurrent")
        if not c or c.get("workers") != "http":
            continue
        for lv in c["levels"]:
            rs = lv.get("qps_rounds") or [lv["qps"]]
            rows.append({"index": r["index"]["name"], "spread": f"{min(rs):,.0f}-{max(rs):,.0f}", **lv,
                         "cheat": "pass" if lv["anti_cheat"]["passed"] else "FAIL",
                         "ceiling": lv.get("client_ceiling_qps"), "ratio": _served_ratio(r, lv["clients"])})
    return rows


def _served_ratio(result: dict, clients: int) -> str:
    ratio = (result.get("served") or {}).get("ratios") or {}
    one = (ratio.get("by_clients") or {}).get(str(clients))
    if not one:
        return ""
    return f"{one['median']:.2f}x [{one['low']:.2f}-{one['high']:.2f}] of {ratio['over']}"


_SERVED_HEADERS = ["server", "clients", "QPS", "QPS rounds", "p50 ms", "p95 ms", "p99 ms", "recall10 ids",
                   "recall10 tie-aware", "anti-cheat", "failed", "client ceiling QPS", "ratio (per-round range)"]


def _served_cells(row: dict) -> list[str]:
    tie = row.get("recall10")
    ceiling = row.get("ceiling")
    return [row["index"], str(row["clients"]), f"{row['qps']:,.0f}", row["spread"], f"{row['p50_ms']:.3f}",
            f"{row['p95_ms']:.3f}", f"{row['p99_ms']:.3f}", f"{row['recall10_ids']:.4f}",
            "-" if tie is None else f"{tie:.4f}", row["cheat"], str(row.get("errors", 0)),
            "-" if not ceiling else f"{ceiling:,.0f}" + (" (client-bound)" if row.get("client_bound") else ""),
            row["ratio"]]


def served_table(runs: list[dict], title: str = "") -> Table:
    table = Table(title=title or None, header_style="bold")
    for i, h in enumerate(_SERVED_HEADERS):
        table.add_column(h, justify="left" if i in (0, 3, 9, 12) else "right")
    for row in served_rows(runs):
        table.add_row(*_served_cells(row))
    return table


def served_markdown(runs: list[dict], target: float) -> str:
    """The served levels as a markdown table, with how they were measured."""
    rows = served_rows(runs)
    if not rows:
        return ""
    run = next(r for r in runs if r.get("served"))["run"]
    lines = ["", f"Served over HTTP (one query per request; {run.get('rounds', 1)} interleaved round(s) per client "
             f"count, QPS of the median round; recall@10 gate {target:g} on exact ids, as the seed harness scores):",
             "", "| " + " | ".join(_SERVED_HEADERS) + " |", "|" + "---|" * len(_SERVED_HEADERS)]
    lines += ["| " + " | ".join(_served_cells(row)) + " |" for row in rows]
    for r in runs:
        k = (r.get("served") or {}).get("kcores_client") or {}
        if "benchmark" in k:
            b = k["benchmark"]
            lines.append(f"\n{r['index']['name']}, the seed harness's own client (concurrency {b.get('concurrency')}): "
                         f"{b['qps']:,.0f} QPS, recall {b['recall']:.4f}, p50 {b.get('p50_latency_ms', 0):.3f} ms, "
                         f"p99 {b.get('p99_latency_ms', 0):.3f} ms, anti-cheat "
                         f"{'pass' if (k.get('anti_cheat') or {}).get('passed') else 'FAIL'}.")
        elif k.get("error"):
            lines.append(f"\n{r['index']['name']}: the seed harness's client failed: {k['error']}")
        elif k.get("skipped"):
            lines.append(f"\n{r['index']['name']}: the seed harness's client not run ({k['skipped']}).")
    return "\n".join(lines) + "\n"
