"""`vdbbench compare A B`: what changed between two results (headline QPS, recall, build, bytes)."""

from __future__ import annotations

from rich.table import Table

from vdbbench.bench.report import fmt_bytes, fmt_params
from vdbbench.bench.results import headline_entry


def _ratio(a, b) -> str:
    return f"{b / a:.2f}x" if a and b is not None else "-"


def compare_table(a: dict, b: dict, name_a: str = "A", name_b: str = "B") -> Table:
    """Rows: each headline (mode/threads) QPS, recall and params, then build and memory; B/A ratios."""
    t = Table(title=f"{name_a}: {a['index']['name']} on {a['dataset']['name']}  vs  "
                    f"{name_b}: {b['index']['name']} on {b['dataset']['name']}", header_style="bold")
    for col in ("what", name_a, name_b, "B / A"):
        t.add_column(col, justify="left" if col == "what" else "right")
    keys = []
    for h in a["headline"] + b["headline"]:
        if (h["mode"], h["threads"]) not in keys:
            keys.append((h["mode"], h["threads"]))
    for mode, threads in keys:
        ha, hb = headline_entry(a, mode, threads), headline_entry(b, mode, threads)
        qa, qb = (ha or {}).get("qps"), (hb or {}).get("qps")
        t.add_row(f"headline QPS {mode} @ {threads}t",
                  f"{qa:,.0f}" if qa else "missed", f"{qb:,.0f}" if qb else "missed", _ratio(qa, qb))
        t.add_row("  recall10", f"{ha['recall10']:.4f}" if ha else "-", f"{hb['recall10']:.4f}" if hb else "-", "")
        t.add_row("  params", fmt_params(ha and ha["params"]), fmt_params(hb and hb["params"]), "")
        if mode == "single":
            pa, pb = (ha or {}).get("p99_ms"), (hb or {}).get("p99_ms")
            t.add_row("  p99 ms", f"{pa:.3f}" if pa else "-", f"{pb:.3f}" if pb else "-", _ratio(pa, pb))
    for key in ("train_s", "add_s"):
        va, vb = a["build"][key], b["build"][key]
        t.add_row(f"build {key}", f"{va:.2f}", f"{vb:.2f}", _ratio(va, vb))
    t.add_row("bytes", fmt_bytes(a["build"]["bytes"]), fmt_bytes(b["build"]["bytes"]),
              _ratio(a["build"]["bytes"], b["build"]["bytes"]))
    t.add_row("points", str(len(a["points"])), str(len(b["points"])), "")
    t.add_row("git", (a.get("git") or {}).get("commit", "-")[:10], (b.get("git") or {}).get("commit", "-")[:10], "")
    return t


def differences_in_setup(a: dict, b: dict) -> list[str]:
    """Warnings when the two results were not measured the same way."""
    out = []
    if a["dataset"]["sha256"] != b["dataset"]["sha256"]:
        out.append(f"different datasets: {a['dataset']['name']} vs {b['dataset']['name']}")
    if a["machine"].get("cpu") != b["machine"].get("cpu"):
        out.append(f"different CPUs: {a['machine'].get('cpu')} vs {b['machine'].get('cpu')}")
    ra, rb = a.get("run", {}), b.get("run", {})
    if ra.get("target_recall") != rb.get("target_recall"):
        out.append(f"different targets: {ra.get('target_recall')} vs {rb.get('target_recall')}")
    ca, cb = ra.get("recall_confidence") or 0.0, rb.get("recall_confidence") or 0.0
    if ca != cb:  # the headlines were chosen by different recall figures
        rule = lambda c: f"the {c:g} lower bound of recall10" if c else "the mean recall10"  # noqa: E731
        out.append(f"different recall rules: {rule(ca)} vs {rule(cb)} reaches the target")
    if ra.get("k") != rb.get("k"):
        out.append(f"different k: {ra.get('k')} vs {rb.get('k')}")
    if a["dataset"]["nq"] != b["dataset"]["nq"] and a["dataset"]["sha256"] == b["dataset"]["sha256"]:
        out.append(f"different queries: the first {a['dataset']['nq']:,} vs {b['dataset']['nq']:,}")
    return out
