"""The agent session page (`vdbbench agent report RUN --html`): the staircase with one point per
submission coloured by outcome (click one: its diff, the verdict with its figures, the model's
message and its notes at that time), the accepted changes and the session's totals, all from
the journal (docs/agent-journal.md) and, for diffs the journal lacks, the session's git workspace."""

from __future__ import annotations

import re
import subprocess
from pathlib import Path
from typing import Any, Mapping, Sequence

from vdbbench.agent.evaluation import final as final_mod
from vdbbench.agent.reports.report import (
    OUTCOME_STYLE, accepted_table, best_curve, chained, fmt_duration, fmt_qps, journal_path, load_events, short_stat, totals,
)
from vdbbench.pages.html import Raw, cards, document, esc, facts, figure, script_json, table, write

# Plotly's marker for each outcome (the colours are the PNG staircase's, OUTCOME_STYLE).
SYMBOLS = {
    "accepted": "star", "slower": "circle", "recall_below_floor": "triangle-down", "flagged": "x",
    "build_failed": "square", "tests_failed": "diamond", "timed_out": "cross", "crashed": "x-thin-open",
    "no_change": "line-ns-open",
}
SIZES = {"accepted": 17, "flagged": 13, "slower": 9}
# The longest diff, message or note text a page embeds per submission (a rewrite of a whole
# crate can run to megabytes; the page stays light and says what it cut).
MAX_TEXT = 200_000
NO_DIFF = "diff not recorded"
_SHA = re.compile(r"[0-9a-fA-F]{4,64}")


def _label(outcome: str) -> str:
    return OUTCOME_STYLE.get(outcome, {}).get("label", outcome)


def _color(outcome: str) -> str:
    return OUTCOME_STYLE.get(outcome, {}).get("color", "#e377c2")


def _cut(text: Any, limit: int = MAX_TEXT) -> str | None:
    if text is None:
        return None
    text = str(text)
    if len(text) <= limit:
        return text
    return text[:limit] + f"\n… ({len(text) - limit:,} more characters not shown)"


# ---------------------------------------------------------------------------------------------
# Diffs
# ---------------------------------------------------------------------------------------------


def workspace_of(run: str | Path) -> Path:
    """The session's git workspace: <run folder>/workspace (the run may be named by its journal)."""
    return journal_path(run).parent / "workspace"


def commit_diff(ws: Path, commit: str | None) -> str | None:
    """The patch a commit of the session's workspace made on top of its parent (None when the
    workspace or the commit is gone, e.g. a flagged commit git has since collected)."""
    if not isinstance(commit, str) or not _SHA.fullmatch(commit) or not (ws / ".git").exists():
        return None  # an object name only: "--output=FILE" from a damaged journal made git write FILE
    try:
        res = subprocess.run(["git", "-C", str(ws), "show", "--no-color", "--no-ext-diff", "--format=", "--patch", commit, "--"],
                             capture_output=True, text=True, timeout=60, errors="replace")
    except (OSError, subprocess.SubprocessError):
        return None
    return res.stdout if res.returncode == 0 and res.stdout.strip() else None


# ---------------------------------------------------------------------------------------------
# Submissions
# ---------------------------------------------------------------------------------------------


def _figures(ev: Mapping[str, Any] | None) -> dict | None:
    """The parts of an evaluation event the page shows (candidate and best QPS samples, gain, p)."""
    if not ev:
        return None
    cand = ev.get("candidate") or {}
    best = ev.get("best") or {}
    return {
        "split": ev.get("split"), "gain": ev.get("gain"), "p_value": ev.get("p_value"),
        "qps": cand.get("qps"), "recall10": cand.get("recall10"), "recall10_ids": cand.get("recall10_ids"),
        "p50_ms": cand.get("p50_ms"), "repeats": cand.get("repeats"), "clock": cand.get("clock"),
        "samples": cand.get("qps_samples"), "best_qps": best.get("qps"), "best_samples": best.get("qps_samples"),
        "best_recall10": best.get("recall10"), "failure": ev.get("failure"),
    }


def _last(window: Sequence[Mapping[str, Any]], type_: str, pred=lambda e: True) -> Mapping[str, Any] | None:
    return next((e for e in reversed(window) if e.get("type") == type_ and pred(e)), None)


def submissions(events: Sequence[Mapping[str, Any]], ws: Path | None = None) -> list[dict]:
    """One record per submission (decision), with everything the page shows when it is clicked.

    The events after the previous decision and up to this one are this submission's: its build,
    tests, held-out and fresh evaluations, audit, and the model's reply that called `submit`.
    The diff is the decision's own (`diff`) when the journal holds it, else the accepted (or
    flagged) commit's from the workspace, else marked as not recorded.
    """
    out: list[dict] = []
    window: list[Mapping[str, Any]] = []
    notes: list[dict] = []
    tool_calls = 0
    for e in events:
        kind = e.get("type")
        if kind == "note":
            notes.append({"iteration": e.get("iteration"), "text": _cut(e.get("text"), 20_000)})
        if kind == "tool_call":
            tool_calls += 1
        if kind != "decision":
            window.append(e)
            continue
        heldout = _last(window, "evaluation", lambda w: w.get("split", "heldout") == "heldout")
        fresh = _last(window, "evaluation", lambda w: w.get("split") == "fresh")
        audit = _last(window, "audit")
        said = _last(window, "assistant", lambda w: any(isinstance(c, dict) and c.get("name") == "submit"
                                                        for c in w.get("tool_calls") or []))
        build, tests = _last(window, "build"), _last(window, "tests")
        outcome = str(e.get("outcome"))
        diff, source = e.get("diff"), "journal"
        if not diff and ws is not None:
            commit = e.get("commit") if outcome == "accepted" else (audit or {}).get("commit") if outcome == "flagged" else None
            diff, source = commit_diff(ws, commit), f"git show {str(commit)[:12]} (session workspace)"
        out.append({
            "n": len(out), "seq": e.get("seq"), "t": e.get("t"), "iteration": e.get("iteration"),
            "outcome": outcome, "label": _label(outcome), "color": _color(outcome),
            "qps": e.get("qps"), "recall10": e.get("recall10"), "best_qps_before": e.get("best_qps_before"),
            "best_qps_after": e.get("best_qps_after"), "commit": e.get("commit"),
            "message": _cut(e.get("message"), 20_000), "reason": _cut(e.get("reason"), 50_000),
            "diff_stat": short_stat(e.get("diff_stat")), "diff": _cut(diff) if diff else None,
            "diff_source": source if diff else NO_DIFF,
            "heldout": _figures(heldout), "fresh": _figures(fresh),
            "audit": None if not audit else {k: audit.get(k) for k in ("verdict", "findings", "fresh_qps", "fresh_recall10", "jump_factor", "commit")},
            "build": None if not build else {"ok": build.get("ok"), "seconds": build.get("seconds")},
            "tests": None if not tests else {"ok": tests.get("ok"), "summary": tests.get("summary"), "seconds": tests.get("seconds")},
            "said": None if not said else _cut(said.get("content"), 20_000),
            "reasoning": None if not said else _cut(said.get("reasoning_content"), 20_000),
            "notes": list(notes), "tool_calls": tool_calls,
        })
        window = []
    return out


def references(events: Sequence[Mapping[str, Any]]) -> list[dict]:
    """The reference lines (the project's own engine on the task): the last `reference` event per label."""
    refs: dict[str, dict] = {}
    for e in events:
        if e.get("type") == "reference" and isinstance(e.get("qps"), (int, float)) and e["qps"] > 0:
            label = str(e.get("label") or e.get("name") or e.get("engine") or "reference engine")
            refs[label] = {"label": label, "qps": float(e["qps"]), "recall10": e.get("recall10")}
    return list(refs.values())


# ---------------------------------------------------------------------------------------------
# The staircase
# ---------------------------------------------------------------------------------------------

_HOVER = ("<b>iteration %{x}: %{customdata[1]}</b><br>%{customdata[2]}<br>%{customdata[3]}"
          "<br><i>click for the diff and the verdict</i><extra></extra>")


def _hover(s: dict) -> list:
    figures = (f"{fmt_qps(s['qps'])} QPS" + (f", recall@10 {s['recall10']:.4f}" if s["recall10"] is not None else "")
               if s["qps"] is not None else "no QPS measured")
    msg = " ".join(str(s["message"] or "").split())
    return [s["n"], s["label"], figures, esc(msg[:90] + ("…" if len(msg) > 90 else ""))]


def staircase_figure(events: Sequence[Mapping[str, Any]], subs: Sequence[dict], refs: Sequence[dict]):
    """Best QPS vs iteration as a step line, one point per submission by outcome (submissions
    without a QPS in a strip below), and a dashed line per reference engine."""
    import plotly.graph_objects as go
    from plotly.subplots import make_subplots

    measured = [s for s in subs if s["qps"] is not None]
    unmeasured = [s for s in subs if s["qps"] is None]
    strip = [o for o in OUTCOME_STYLE if any(s["outcome"] == o for s in unmeasured)]
    strip += sorted({s["outcome"] for s in unmeasured} - set(strip))
    rows = 2 if strip else 1
    fig = make_subplots(rows=rows, cols=1, shared_xaxes=True, vertical_spacing=0.06,
                        row_heights=[0.78, 0.22] if strip else [1.0])
    last_it = max([int(s["iteration"] or 0) for s in subs] + [1])
    xs, ys = best_curve(events)
    # Points and line: the start's QPS times chained paired ratios (report.chained), not each
    # evaluation's own absolute QPS; the final measurement sits after the last submission.
    chain = {c["seq"]: c["point"] for c in chained(events)}
    head = final_mod.headline(events)
    if head is not None and ys:
        y = ys[0] * head["ratio"]
        bar = dict(type="data", symmetric=False, array=[ys[0] * head["hi"] - y], arrayminus=[y - ys[0] * head["lo"]]) if head.get("pairs") else None
        fig.add_trace(go.Scatter(x=[last_it + 0.5], y=[y], mode="markers", error_y=bar, name=f"final measurement: ×{head['ratio']:.2f} the start",
                                 marker=dict(symbol="diamond", color="#08519c", size=12),
                                 hovertemplate=f"final measurement: ×{head['ratio']:.3f} the start ({head['lo']:.3f}–{head['hi']:.3f}, 95%)<extra></extra>"),
                      row=1, col=1)
    if xs:
        sx, sy = list(xs) + ([last_it] if xs[-1] < last_it else []), list(ys) + ([ys[-1]] if xs[-1] < last_it else [])
        fig.add_trace(go.Scatter(x=sx, y=sy, mode="lines", line=dict(color="#1a9850", width=2.5, shape="hv"),
                                 name="best QPS", hovertemplate="best so far: %{y:,.0f} QPS<extra></extra>"), row=1, col=1)
    for outcome in list(OUTCOME_STYLE) + sorted({s["outcome"] for s in subs} - set(OUTCOME_STYLE)):
        pts = [s for s in measured if s["outcome"] == outcome]
        if pts:
            fig.add_trace(go.Scatter(
                x=[s["iteration"] for s in pts], y=[chain.get(s["seq"]) or s["qps"] for s in pts], mode="markers", name=_label(outcome),
                legendgroup=outcome, customdata=[_hover(s) for s in pts], hovertemplate=_HOVER,
                marker=dict(symbol=SYMBOLS.get(outcome, "circle"), color=_color(outcome), size=SIZES.get(outcome, 10),
                            line=dict(color="#333", width=0.8))), row=1, col=1)
        low = [s for s in unmeasured if s["outcome"] == outcome]
        if low:
            fig.add_trace(go.Scatter(
                x=[s["iteration"] for s in low], y=[_label(outcome)] * len(low), mode="markers", name=_label(outcome),
                legendgroup=outcome, showlegend=not pts, customdata=[_hover(s) for s in low], hovertemplate=_HOVER,
                marker=dict(symbol=SYMBOLS.get(outcome, "circle"), color=_color(outcome), size=11,
                            line=dict(color=_color(outcome), width=2))), row=2, col=1)
    for i, ref in enumerate(refs):
        fig.add_hline(y=ref["qps"], line=dict(color="#4d4d4d", dash="dash", width=1.3), row=1, col=1,
                      annotation_text=f"{ref['label']}: {fmt_qps(ref['qps'])} QPS", annotation_position="top left")
    qps_all = [s["qps"] for s in measured] + list(ys) + [r["qps"] for r in refs]
    qps_all = [q for q in qps_all if q and q > 0]
    log = bool(qps_all) and max(qps_all) / min(qps_all) > 20
    fig.update_yaxes(title_text="QPS (held-out queries" + (", log)" if log else ")"), type="log" if log else "linear",
                     row=1, col=1)
    if strip:
        fig.update_yaxes(categoryorder="array", categoryarray=[_label(o) for o in reversed(strip)], row=2, col=1)
        fig.update_xaxes(title_text="iteration (submission)", row=2, col=1)
    else:
        fig.update_xaxes(title_text="iteration (submission)", row=1, col=1)
    fig.update_xaxes(range=[-0.3, last_it + 1.2])
    fig.update_layout(title="Best QPS by iteration: one point per submission (click one)", hovermode="closest",
                      legend=dict(font=dict(size=11)), clickmode="event")
    return fig


# ---------------------------------------------------------------------------------------------
# The page
# ---------------------------------------------------------------------------------------------

_SCRIPT = r"""
const SUBS = __SUBS__;
// The notes once: submission s saw the first s.notes of them (a copy per submission made the
// page grow with submissions x notes: 45 MB for 600 submissions and 300 short notes).
const NOTES = __NOTES__;
const fmtQ = v => v == null ? "—" : (v >= 10000 ? (v / 1000).toFixed(1) + "k" : Math.round(v).toLocaleString("en-US"));
const fmtR = v => v == null ? "—" : Number(v).toFixed(4);
function el(tag, attrs, ...kids) {
  const e = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs || {})) { if (k === "class") e.className = v; else e.setAttribute(k, v); }
  for (const k of kids) if (k != null) e.append(k instanceof Node ? k : String(k));
  return e;
}
function factList(pairs) {
  const dl = el("dl", {class: "facts"});
  for (const [k, v] of pairs) if (v != null && v !== "") dl.append(el("dt", {}, k), el("dd", {}, v));
  return dl;
}
function diffBlock(text) {
  const pre = el("pre", {class: "diff", id: "detail-diff"});
  for (const line of text.split("\n")) {
    let cls = null;
    if (line.startsWith("+++") || line.startsWith("---") || line.startsWith("diff ") || line.startsWith("index ")) cls = "meta";
    else if (line.startsWith("+")) cls = "add";
    else if (line.startsWith("-")) cls = "del";
    else if (line.startsWith("@@")) cls = "hunk";
    pre.append(cls ? el("span", {class: cls}, line) : line, "\n");
  }
  return pre;
}
function evalFacts(ev, what) {
  if (!ev) return null;
  const samples = s => s && s.length ? s.map(fmtQ).join(", ") : null;
  return [el("h4", {}, what), factList([
    ["candidate", ev.qps == null ? null : `${fmtQ(ev.qps)} QPS, recall@10 ${fmtR(ev.recall10)}` + (ev.p50_ms != null ? `, p50 ${Number(ev.p50_ms).toFixed(3)} ms` : "")],
    ["best", ev.best_qps == null ? null : `${fmtQ(ev.best_qps)} QPS` + (ev.best_recall10 != null ? `, recall@10 ${fmtR(ev.best_recall10)}` : "")],
    ["median gain", ev.gain == null ? null : (ev.gain >= 0 ? "+" : "") + (100 * ev.gain).toFixed(1) + "%"],
    ["p-value", ev.p_value == null ? null : Number(ev.p_value).toFixed(4)],
    ["repeats", ev.repeats == null ? null : `${ev.repeats}` + (ev.clock ? ` (${ev.clock} clock)` : "")],
    ["candidate QPS per repeat", samples(ev.samples)],
    ["best QPS per repeat", samples(ev.best_samples)],
    ["failure", ev.failure ? `${ev.failure.outcome}: ${ev.failure.text}` : null],
  ])];
}
function show(n) {
  const s = SUBS[n];
  if (!s) return;
  const box = document.getElementById("detail");
  box.replaceChildren();
  box.dataset.n = n;
  const badge = el("span", {class: "badge", style: `border-color:${s.color};color:${s.color}`}, s.label);
  box.append(el("h3", {id: "detail-title"}, `Iteration ${s.iteration} `, badge,
                el("span", {class: "muted"}, ` ${s.t || ""}`)));
  const left = el("div"), right = el("div");
  box.append(el("div", {class: "grid2"}, left, right));
  left.append(el("h4", {}, "Verdict"), el("pre", {id: "detail-reason"}, s.reason || "(no reason recorded)"));
  left.append(factList([
    ["QPS", s.qps == null ? "not measured" : `${fmtQ(s.qps)} (best before ${fmtQ(s.best_qps_before)}, after ${fmtQ(s.best_qps_after)})`],
    ["recall@10", s.recall10 == null ? null : fmtR(s.recall10)],
    ["build", s.build ? (s.build.ok ? "ok" : "failed") + (s.build.seconds != null ? ` in ${Number(s.build.seconds).toFixed(1)} s` : "") : null],
    ["tests", s.tests ? (s.tests.ok ? "passed" : "failed") + (s.tests.summary ? `: ${s.tests.summary}` : "") : null],
    ["audit", s.audit ? `${s.audit.verdict}` + (s.audit.findings && s.audit.findings.length ? `: ${s.audit.findings.join("; ")}` : "")
                       + (s.audit.fresh_qps != null ? ` (fresh queries: ${fmtQ(s.audit.fresh_qps)} QPS, recall@10 ${fmtR(s.audit.fresh_recall10)})` : "") : null],
    ["commit", s.commit],
    ["tool calls so far", s.tool_calls],
  ]));
  left.append(el("h4", {}, "The model's submit message"), el("pre", {id: "detail-message"}, s.message || "(empty)"));
  if (s.said) left.append(el("h4", {}, "What the model said with it"), el("pre", {}, s.said));
  if (s.reasoning) left.append(el("details", {}, el("summary", {}, "its reasoning"), el("pre", {}, s.reasoning)));
  const notes = el("div", {id: "detail-notes"});
  const seen = NOTES.slice(0, s.notes);
  if (seen.length) { const ul = el("ul"); for (const nt of seen) ul.append(el("li", {}, `(it ${nt.iteration}) ${nt.text}`)); notes.append(ul); }
  else notes.append(el("p", {class: "muted"}, "no notes yet"));
  left.append(el("h4", {}, `The model's notes at that time (${seen.length})`), notes);
  right.append(el("h4", {}, "Diff" + (s.diff_stat ? ` — ${s.diff_stat}` : "")),
               s.diff ? diffBlock(s.diff) : el("p", {id: "detail-diff", class: "muted"}, s.diff_source));
  if (s.diff) right.append(el("p", {class: "note"}, `from ${s.diff_source}`));
  for (const part of [evalFacts(s.heldout, "Held-out evaluation (interleaved with the best)"), evalFacts(s.fresh, "Fresh queries (audit)")])
    if (part) right.append(...part);
  document.querySelectorAll("tr[data-n]").forEach(tr => tr.classList.toggle("selected", tr.dataset.n == String(n)));
  if (location.hash !== `#it-${s.iteration}`) history.replaceState(null, "", `#it-${s.iteration}`);
}
function wire() {
  const gd = document.getElementById("staircase");
  if (gd && gd.on) gd.on("plotly_click", ev => {
    const p = ev.points && ev.points[0];
    if (p && p.customdata != null) {
      show(p.customdata[0]);
      // Bring the panel's top into view when it is below the window, and no further: the
      // staircase stays on screen for the next click where the window is tall enough.
      const top = document.getElementById("detail").getBoundingClientRect().top;
      if (top > window.innerHeight - 120) window.scrollBy(0, top - window.innerHeight + 240);
    }
  });
  document.querySelectorAll("tr[data-n]").forEach(tr => tr.addEventListener("click", () => show(Number(tr.dataset.n))));
  const m = /^#it-(\d+)$/.exec(location.hash);
  if (m) { const s = SUBS.find(x => String(x.iteration) === m[1]); if (s) show(s.n); }
}
wire();
"""


def _totals_html(info: dict, refs: Sequence[dict]) -> Raw:
    head = info.get("final")
    result = (f"×{head['ratio']:.3f} ({head['lo']:.3f}–{head['hi']:.3f}, 95%{', cap reached' if head.get('stopped') == 'cap' else ''})"
              if head else f"not measured ({info['speedup_source']}: ×{info['speedup']:.2f})" if info["speedup"] else "not measured")
    items = [("× start: final measurement", result)]
    if head and head.get("reference") and info.get("reference_source") != "start":
        items.append(("× reference: final measurement", final_mod.fmt_ratio(head["reference"])))
    items += [(f"transfer: {r['label']}", final_mod.target_line(r)) for r in (head or {}).get("transfer") or []]
    if info.get("product_of_steps") is not None:
        items.append(("product of accepted steps", f"×{info['product_of_steps']:.3f}"))
    items += [("submissions", info["submissions"]), ("accepted", info["accepted"]), ("best QPS", fmt_qps(info["best_qps"])),
             ("start QPS", fmt_qps(info["baseline_qps"])), ("tool calls", f"{info['tool_calls']:,}"),
             ("model calls", f"{info['model_calls']:,}"), ("tokens", f"{info['tokens']:,}"),
             ("cost", f"${info['cost_usd']:.2f}"), ("wall time", fmt_duration(info["wall_s"]))]
    for ref in refs:
        ratio = f" (best ×{info['best_qps'] / ref['qps']:.2f})" if info["best_qps"] else ""
        items.append((ref["label"], f"{fmt_qps(ref['qps'])} QPS{ratio}"))
    outcomes = " ".join(f'<span class="badge" style="border-color:{_color(o)};color:{_color(o)}">{esc(_label(o))}: {n}</span>'
                        for o, n in sorted(info["outcomes"].items(), key=lambda kv: -kv[1]))
    more = facts([
        ("final measurement", info.get("no_final")),
        ("tokens", f"{info['prompt_tokens']:,} prompt, {info['completion_tokens']:,} completion"),
        ("long-run events", f"{info['compactions']} compactions, {info['reviews']} strategic reviews, {info['resumes']} resumes"),
        ("budget stops", "; ".join(info["budget_stops"]) or None),
        ("ended", info["ended"]),
        ("best commit", info["best_commit"]),
    ])
    return Raw(cards(items) + f"<p>{outcomes}</p>" + more)


def _accepted_html(events, subs: Sequence[dict]) -> Raw:
    by_seq_commit = {s["commit"]: s["n"] for s in subs if s["outcome"] == "accepted" and s["commit"]}
    rows, attrs = [], []
    for r in accepted_table(events):
        rows.append([
            r["iteration"], f"{fmt_qps(r['qps_before'])} → {fmt_qps(r['qps_after'])}",
            f"×{r['gain']:.2f}" if r["gain"] else "—", f"{r['recall10']:.4f}" if r["recall10"] is not None else "—",
            r["message"] or "(no message)", r["diff_stat"] or "—", (r["commit"] or "")[:12], r["audit"] or "—",
        ])
        n = by_seq_commit.get(r["commit"])
        attrs.append(f'class="clickable" data-n="{n}"' if n is not None else "")
    if not rows:
        return Raw('<p class="muted">No change was accepted in this session.</p>')
    return table(["it", "QPS before → after", "gain", "recall@10", "change", "diff", "commit", "audit"], rows,
                 left=(4, 5, 6, 7), row_attrs=attrs, id="accepted")


def _submissions_html(subs: Sequence[dict]) -> Raw:
    rows, attrs = [], []
    for s in subs:
        msg = " ".join(str(s["message"] or "").split())
        rows.append([s["iteration"], s["label"], fmt_qps(s["qps"]) if s["qps"] is not None else "—",
                     f"{s['recall10']:.4f}" if s["recall10"] is not None else "—", msg[:120] + ("…" if len(msg) > 120 else ""),
                     s["diff_stat"] or "—", "yes" if s["diff"] else "no"])
        attrs.append(f'class="clickable" data-n="{s["n"]}" style="color:{s["color"]}"')
    return table(["it", "outcome", "QPS", "recall@10", "message", "diff stat", "diff"], rows, left=(1, 4, 5),
                 row_attrs=attrs, id="submissions")


def _published_html() -> Raw:
    """The public leaderboard's published rows beside a served session: their machine's figures,
    labelled, in a section of their own (no figure of this session is compared with them here)."""
    from vdbbench.agent.reports import published

    return Raw(f'<h2 id="published">{esc(published.heading())}</h2>'
               + table(published.HEADERS, published.table_rows(), left=(0, 1, 6), id="published-rows")
               + f'<p class="note">{esc(published.caption())}</p>')


def session_page(run: str | Path, title: str | None = None) -> str:
    """The session page's HTML for a run folder (or its journal file)."""
    events = load_events(run)
    ws = workspace_of(run)
    subs = submissions(events, ws if ws.exists() else None)
    refs = references(events)
    info = totals(events)
    start = next((e for e in events if e.get("type") == "session_start"), {})
    run_name = journal_path(run).parent.name
    title = title or f"Agent session {run_name}: {info['task']} ({info['model']})"
    where = [f"task <b>{esc(info['task'])}</b>", f"model <b>{esc(info['model'])}</b>"]
    where += [f"endpoint {esc(info['base_url'])}"] if info.get("base_url") else []
    where += [f"started {esc(start.get('t'))}", f"run folder <code>{esc(journal_path(run).parent)}</code>"]
    body = [f"<h1>{esc(title)}</h1>", f'<p class="muted">{" · ".join(where)}</p>']
    if info["journal_problems"]:
        body.append('<div id="partial"><p><span class="badge bad">partial</span> <b>The journal is damaged: the figures '
                    "on this page are from the events that could be read.</b></p><ul>"
                    + "".join(f"<li>{esc(p)}</li>" for p in info["journal_problems"]) + "</ul></div>")
    body.append("<h2>Totals</h2>" + _totals_html(info, refs))
    body.append("<h2>Staircase</h2>")
    if subs:
        body.append(figure(staircase_figure(events, subs, refs), "staircase", height=560))
        body.append('<p class="note">Green line: the best QPS so far. Each submission is one point, coloured by its '
                    "outcome; those without a QPS (build or tests failed, no change...) sit in the strip below. "
                    "Click a point (or a row below) for its diff, verdict, message and notes.</p>")
        body.append('<div id="detail"><p class="muted" id="detail-hint">Click a submission on the staircase, '
                    "or a row of the tables, to see its diff, the verdict with its figures, the model's message "
                    "and its notes at that time.</p></div>")
    else:
        body.append('<p class="muted">No submission yet.</p>')
    body.append("<h2>Accepted changes</h2>" + _accepted_html(events, subs))
    body.append('<p class="note">gain: the median over interleaved repeats against the best in the same run.</p>')
    body.append(f"<h2>All submissions ({len(subs)})</h2>" + _submissions_html(subs))
    if ((start.get("task") or {}).get("card") or {}).get("evaluation", {}).get("kind") == "served":
        body.append(_published_html())
    body.append(f"<footer>Written by <code>vdbbench agent report --html</code> from {esc(journal_path(run))} "
                f"({len(events):,} events); self-contained (plotly.js inlined), it needs no server and no network."
                "</footer>")
    notes = subs[-1]["notes"] if subs else []  # each submission's notes are a prefix of these
    page_subs = [{**s, "notes": len(s["notes"])} for s in subs]
    head, rest = _SCRIPT.split("__SUBS__", 1)  # one pass: the data may hold the other placeholder
    mid, tail = rest.split("__NOTES__", 1)
    return document(title, "\n".join(body), head + script_json(page_subs) + mid + script_json(notes) + tail)


def write_session_page(run: str | Path, out: str | Path, title: str | None = None) -> Path:
    return write(out, session_page(run, title=title))
