"""The leaderboard of a tournament: per model, over its rollouts (sessions), from their journals alone.

Per model: best QPS (median and range), its ratio to the start and to the reference (the project's
own engine measured by the harness on the same node, the journal's `reference` event), the
fraction of rollouts whose best reached `target` x the reference (Opt@K-style), the iterations,
tokens and cost it took to get to the best, and the accepted and flagged submissions. Raw QPS of
rollouts that ran on different nodes are not comparable; the ratios are (each is measured on one
node), and the table says when nodes differ.

A rollout that cannot count is listed, marked and left out of the medians and the fraction:
"missing" (a session the tournament's manifest names has no folder or no journal), "damaged
journal" (it is empty, or no event in it can be read) and "no result" (neither a final
measurement nor an accepted change). What a rollout without a result spent is still summed.
A manifest that cannot be read is said (`manifest_problems`, and a note): the rollouts are then the
session folders found, and a session it named that is missing cannot be listed. A session reached
by two arguments (a runs folder and one of its sessions) is one rollout.
"""

from __future__ import annotations

import json
import statistics
from collections import defaultdict
from pathlib import Path
from typing import Any, Mapping, Sequence

from vdbbench.agent.evaluation import final as final_mod
from vdbbench.agent.evaluation.eval_report import fmt_qps
from vdbbench.agent.reports import published as published_mod
from vdbbench.agent.reports.report import ReportError, best_curve, load_events, totals
from vdbbench.agent.reports.report_plots import plain_text
from vdbbench.agent.tournaments.tournament import MANIFEST

HTML_PAGES = ("report.html", "index.html", "session.html")


def _manifest(folder: Path) -> tuple[list[tuple[Path, str | None]], str | None]:
    """(folder, model) of each session the tournament's manifest in `folder` names, in its order,
    and None; or no session and what is wrong with the manifest when there is one that cannot be
    read (not JSON, or not the shape a tournament writes). No manifest: no session, no problem."""
    path = folder / MANIFEST
    if not path.exists():
        return [], None
    try:
        doc = json.loads(path.read_text(encoding="utf-8"))
    except UnicodeDecodeError:
        return [], "not UTF-8 text"
    except ValueError as exc:
        return [], f"not JSON: {exc}"
    except OSError as exc:
        return [], exc.strerror or str(exc)
    sessions = doc.get("sessions") if isinstance(doc, dict) else None
    if not isinstance(sessions, list):
        return [], 'no "sessions" list in it'
    named = []
    for i, s in enumerate(sessions, 1):
        run_id = s.get("run_id") if isinstance(s, dict) else None
        if not isinstance(run_id, str) or run_id in ("", ".", "..") or Path(run_id).name != run_id:
            return [], f'its session {i} has no "run_id" naming a folder beside it'
        model = s.get("model")
        if model is not None and not isinstance(model, str):
            return [], f'the "model" of its session {run_id} is not a name'
        named.append((folder / run_id, model))
    return named, None


def _key(p: Path) -> Path:
    """The path a session folder resolves to, so two spellings of one folder are one session."""
    try:
        return p.resolve()
    except (OSError, RuntimeError):  # a symlink loop, a folder that cannot be reached
        return p.absolute()


def find_runs(paths: Sequence[str | Path], problems: list[str] | None = None) -> list[tuple[Path, str | None]]:
    """Session folders from the arguments, each with the model the tournament's manifest names for
    it (None when none does): a session folder itself, or a folder holding sessions (a tournament's
    runs folder: the sessions its manifest names first, in its order, whether or not their folder
    or journal exists, then the other session folders in it, in name order). A session reached by
    more than one argument (a runs folder and one of its sessions, or one folder twice) is listed
    once, where it first came. Each manifest that cannot be read is appended to `problems` as a
    line saying so: its sessions are then only the folders found."""
    runs: dict[Path, tuple[Path, str | None]] = {}

    def add(run: Path, model: str | None) -> None:
        key = _key(run)
        if key not in runs:
            runs[key] = (run, model)
        elif runs[key][1] is None and model is not None:  # the manifest's model for a session named first
            runs[key] = (runs[key][0], model)

    for p in map(Path, paths):
        if (p / "journal.jsonl").is_file():
            add(p, None)
        elif p.is_dir():
            named, problem = _manifest(p)
            known = {r for r, _ in named}
            inner = sorted(d for d in p.iterdir() if (d / "journal.jsonl").is_file() and d not in known)
            unread = (f"{p / MANIFEST} cannot be read ({problem}): the rollouts are the session folders found; "
                      "sessions it names that are missing cannot be named") if problem else None
            if not named and not inner:
                raise ReportError(f"{p} holds no session (no journal.jsonl in it or in its folders)"
                                  + (f"; {unread}" if unread else ""))
            if unread and problems is not None:
                problems.append(unread)
            for run, model in named + [(d, None) for d in inner]:
                add(run, model)
        else:
            raise ReportError(f"{p} does not exist; expected a session folder or a folder of sessions")
    if not runs:
        raise ReportError("the leaderboard needs at least one session folder")
    return list(runs.values())


def reference(events: Sequence[Mapping[str, Any]], before_seq: int | None = None) -> dict | None:
    """The reference measured in the journal: the last `reference` event before `before_seq` (the
    best's decision, so on the node the best was measured on), else the first one after it."""
    refs = [e for e in events if e.get("type") == "reference" and isinstance(e.get("qps"), (int, float)) and e["qps"] > 0]
    if not refs:
        return None
    if before_seq is not None:
        earlier = [e for e in refs if int(e.get("seq", 0)) <= before_seq]
        if earlier:
            return earlier[-1]
    return refs[0]


def _html(run: Path) -> str | None:
    """The session's HTML page (`vdbbench agent report RUN --html`), wherever in RUN it was written."""
    for name in HTML_PAGES:
        if (run / name).is_file():
            return str(run / name)
    pages = sorted(run.glob("*.html")) or sorted(run.glob("*/index.html"))
    return str(pages[0]) if pages else None


# The rows the leaderboard lists but cannot count (see the module's docstring), by `status`.
LEFT_OUT = ("missing", "damaged journal", "no result")
_FIGURES = ("task", "ended", "best_qps", "best_recall10", "baseline_qps", "speedup", "speedup_source", "final",
            "product_of_steps", "reference_qps", "reference_recall10", "vs_reference", "reached_target",
            "iterations_to_best", "tokens_to_best", "cost_to_best", "iterations_to_target", "tokens_to_target",
            "cost_to_target", "submissions", "accepted", "flagged", "tokens", "cost_usd", "wall_s", "resumes",
            "cpu_model", "html")


def _unread(run: Path, model: str | None, status: str, problem: str) -> dict[str, Any]:
    """The row of a rollout with no journal that can be read: every figure None."""
    return {"run": run.name, "path": str(run), "model": model or "?", "status": status,
            "problem": problem, "finished": False, **dict.fromkeys(_FIGURES), "transfer": [], "nodes": [],
            "journal_problems": []}


def rollout(run: Path, target: float, model: str | None = None) -> dict[str, Any]:
    """One session's row: its best, and what it cost to get there; `status` says whether it counts
    ("ok") or why not (LEFT_OUT, with the `problem` in words). `model`: the one the tournament's
    manifest names, for a row whose journal does not say."""
    if not (run / "journal.jsonl").is_file():
        where = ("holds no journal.jsonl (the session died before its journal began)" if run.is_dir()
                 else "does not exist (the session never started, or its folder was deleted)")
        return _unread(run, model, "missing", f"{run} {where}")
    try:
        events = load_events(run)
    except ReportError as exc:  # empty, or not one event in it can be read
        return _unread(run, model, "damaged journal", str(exc))
    except OSError as exc:
        return _unread(run, model, "damaged journal", f"{run / 'journal.jsonl'} cannot be read: {exc.strerror or exc}")
    info = totals(events)
    tokens = 0
    cost = 0.0
    at: dict[int, tuple[int, float]] = {}  # decision seq -> (tokens, cost) so far
    for e in events:
        if e.get("type") == "model_call":
            tokens += int(e.get("total_tokens") or 0)
            cost += float(e.get("cost_usd") or 0.0)
        elif e.get("type") == "decision":
            at[int(e.get("seq", -1))] = (tokens, cost)
    decs = [e for e in events if e.get("type") == "decision"]
    accepted = [d for d in decs if d.get("outcome") == "accepted"]
    last = accepted[-1] if accepted else None
    ref = reference(events, int(last["seq"]) if last else None)
    best = info["best_qps"]
    ref_qps = float(ref["qps"]) if ref else None
    # The first submission after which the best reached the target.
    to_target = None
    if ref_qps and best is not None:
        for d in accepted:
            if d.get("qps") is not None and float(d["qps"]) >= target * ref_qps:
                to_target = d
                break
        if to_target is None and info["baseline_qps"] and info["baseline_qps"] >= target * ref_qps:
            to_target = {"iteration": 0, "seq": -1}
    starts = [e for e in events if e.get("type") == "session_start"]
    nodes = []
    for s in starts:
        node = s.get("node") or {}
        label = node.get("hostname")
        if label and label not in nodes:
            nodes.append(label)
    cpu = next((s["node"].get("cpu_model") for s in reversed(starts) if isinstance(s.get("node"), dict)), None)
    end = events[-1] if events[-1].get("type") == "session_end" else None
    # The headline is the final measurement (the best against the start and the reference, timed
    # interleaved to a stated interval as the session ended); the product of the accepted steps'
    # gains is kept apart under its own name (each step measured once, at or above the margin).
    head = info["final"]
    speedup = info["speedup"]
    vs_ref = (head["reference"]["ratio"] if head and head.get("reference")
              else (best / ref_qps) if ref_qps and best else None)

    # Without a final measurement or an accepted change the rollout has no result: the start's
    # figures are no gain the model found, so the row has no speed-up, ratio or cost to its best.
    result = head is not None or last is not None
    if not result:
        speedup = vs_ref = to_target = None

    def cost_at(d):
        return at.get(int(d.get("seq", -1)), (0, 0.0))

    tok_best, cost_best = cost_at(last) if last is not None else (None, None)
    tok_target, cost_target = cost_at(to_target) if to_target is not None else (None, None)
    return {
        "run": run.name,
        "path": str(run),
        "model": info["model"] or model,
        "status": "ok" if result else "no result",
        "problem": None if result else f"nothing accepted, and no final measurement ({info['no_final']})",
        "task": info["task"],
        "finished": end is not None and end.get("reason") not in ("interrupted", "model_unavailable"),
        "ended": info["ended"],
        "best_qps": best,
        "best_recall10": info["best_recall10"],
        "baseline_qps": info["baseline_qps"],
        "speedup": speedup,
        "speedup_source": info["speedup_source"] if result else None,
        "final": head,
        "product_of_steps": info["product_of_steps"],
        "transfer": info["transfer_lines"],
        "reference_qps": ref_qps,
        "reference_recall10": ref.get("recall10") if ref else None,
        "vs_reference": vs_ref,
        "reached_target": (vs_ref is not None and vs_ref >= target) if vs_ref is not None else None,
        "iterations_to_best": int(last.get("iteration") or 0) if last else None,
        "tokens_to_best": tok_best,
        "cost_to_best": cost_best,
        "iterations_to_target": int(to_target.get("iteration") or 0) if to_target is not None else None,
        "tokens_to_target": tok_target,
        "cost_to_target": cost_target,
        "submissions": info["submissions"],
        "accepted": info["accepted"],
        "flagged": info["outcomes"].get("flagged", 0),
        "tokens": info["tokens"],
        "cost_usd": info["cost_usd"],
        "wall_s": info["wall_s"],
        "resumes": info["resumes"],
        "nodes": nodes,
        "cpu_model": cpu,
        "html": _html(run),
        "served": any(((s.get("task") or {}).get("card") or {}).get("evaluation", {}).get("kind") == "served" for s in starts),
        "journal_problems": info["journal_problems"],  # a damaged journal: the row is partial
    }


def _median(values):
    vals = [v for v in values if v is not None]
    return statistics.median(vals) if vals else None


def check_target(target: float) -> None:
    if not 0 < target <= 10:  # NaN fails too
        raise ReportError(f"--target must be a fraction of the reference QPS such as 0.95, got {target}")


def leaderboard(runs: Sequence[str | Path], target: float = 0.95, published: bool = False) -> dict[str, Any]:
    """Rollouts grouped by model, best model first (by median best/reference ratio when every
    model with a result has one, else by median speed-up over the start, else by median best QPS;
    models without a result last). The medians and the fraction are over the rollouts that count
    (status "ok"); the sums of what was spent over every journal that can be read. A ReportError
    when no rollout's journal can be read."""
    check_target(target)
    manifest_problems: list[str] = []
    rows = [rollout(r, target, model) for r, model in find_runs(runs, manifest_problems)]
    read = [r for r in rows if r["status"] in ("ok", "no result")]
    if not read:
        raise ReportError("no rollout can be read: " + "; ".join(f"{r['run']}: {r['status']} ({r['problem']})" for r in rows))
    groups: dict[str, list[dict]] = defaultdict(list)
    for r in rows:
        groups[r["model"]].append(r)
    models = []
    for name, every in groups.items():
        rs = [r for r in every if r["status"] == "ok"]
        spent = [r for r in every if r["status"] in ("ok", "no result")]
        bests = [r["best_qps"] for r in rs if r["best_qps"] is not None]
        with_ref = [r for r in rs if r["reached_target"] is not None]
        reached = [r for r in with_ref if r["reached_target"]]
        models.append({
            "model": name,
            "rollouts": len(every),
            "finished": sum(r["finished"] for r in every),
            "with_result": len(rs),
            "missing": sum(r["status"] == "missing" for r in every),
            "damaged": sum(r["status"] == "damaged journal" for r in every),
            "no_result": sum(r["status"] == "no result" for r in every),
            "best_qps_median": _median(bests),
            "best_qps_min": min(bests) if bests else None,
            "best_qps_max": max(bests) if bests else None,
            "speedup_median": _median(r["speedup"] for r in rs),
            "measured": sum(r["final"] is not None for r in rs),  # rollouts whose × start is a final measurement
            "product_of_steps_median": _median(r["product_of_steps"] for r in rs),
            "vs_reference_median": _median(r["vs_reference"] for r in rs),
            "with_reference": len(with_ref),
            "reached_target": len(reached) if with_ref else None,
            "reached_fraction": (len(reached) / len(with_ref)) if with_ref else None,
            "iterations_to_best_median": _median(r["iterations_to_best"] for r in rs),
            "tokens_to_best_median": _median(r["tokens_to_best"] for r in rs),
            "cost_to_best_median": _median(r["cost_to_best"] for r in rs),
            "iterations_to_target_median": _median(r["iterations_to_target"] for r in reached),
            "accepted": sum(r["accepted"] for r in spent),
            "flagged": sum(r["flagged"] for r in spent),
            "tokens": sum(r["tokens"] for r in spent),
            "cost_usd": sum(r["cost_usd"] for r in spent),
            "runs": [r["run"] for r in every],
        })
    scored = [m for m in models if m["with_result"]]
    key = ("vs_reference_median" if all(m["vs_reference_median"] is not None for m in scored)
           else "speedup_median" if all(m["speedup_median"] is not None for m in scored) else "best_qps_median")
    models.sort(key=lambda m: (not m["with_result"], -(m[key] or 0.0)))
    counted = [r for r in rows if r["status"] == "ok"]
    cpus = sorted({r["cpu_model"] for r in read if r["cpu_model"]})
    hosts = sorted({h for r in read for h in r["nodes"]})
    notes = list(manifest_problems)
    if not any(r["reference_qps"] for r in read):
        notes.append("no session journaled a reference measurement (a `reference` event): the target column is empty")
    elif any(r["reference_qps"] is None for r in counted):
        notes.append("some sessions journaled no reference: their target is left out of the fraction")
    if len(cpus) > 1 or len(hosts) > 1:
        notes.append(f"the rollouts ran on {len(hosts)} nodes ({', '.join(cpus) or 'CPU unknown'}): compare the "
                     "ratios (x start, x reference), each measured on one node, not the raw QPS")
    for r in rows:
        if r["journal_problems"]:
            notes.append(f"{r['run']}: PARTIAL, its journal is damaged ({'; '.join(r['journal_problems'])}); "
                         "its figures are from the events that could be read")
    notes += [f"{line}; left out of the medians and the fraction" for line in left_out({"rollouts": rows})]
    tasks = sorted({r["task"] for r in read})
    if len(tasks) > 1:
        notes.append("the sessions are on different tasks: " + ", ".join(tasks))
    return {"schema": "vdbbench.agent-leaderboard/1", "target": target, "ranked_by": key, "notes": notes,
            "manifest_problems": manifest_problems,
            "nodes": hosts, "cpu_models": cpus, "models": models, "rollouts": rows,
            # The public leaderboard's rows, beside served sessions (or when asked): their machine's
            # figures, kept apart from every median above.
            "published": published_mod.load() if published or any(r.get("served") for r in rows) else None}


def left_out(board: Mapping[str, Any]) -> list[str]:
    """One line per rollout that does not count, naming it, its model and what is wrong."""
    return [f"{r['run']} ({r['model']}): {r['status']}: {r['problem']}"
            for r in board["rollouts"] if r["status"] in LEFT_OUT]


# ---------------------------------------------------------------------------------------------
# Outputs
# ---------------------------------------------------------------------------------------------


def _q(v) -> str:
    return fmt_qps(v, compact=True, missing="")


def _x(v) -> str:
    return "" if v is None else f"{v:.2f}x"


def _usd(v) -> str:
    if v is None:
        return ""
    return f"${v:.2f}" if v >= 0.01 or v == 0 else f"${v:.4f}"


def _n(v) -> str:
    return "" if v is None else f"{v:g}"


def _tok(v) -> str:
    if v is None:
        return ""
    return f"{v / 1e6:.2f}M" if v >= 1e6 else (f"{v / 1e3:.0f}k" if v >= 1e4 else f"{v:,.0f}")


def to_markdown(board: Mapping[str, Any], png: str | None = None) -> str:
    t = board["target"]
    out = [f"| model | rollouts (finished) | × start (final) | × reference | reached {t:.0%} of reference | product of steps "
           "| best QPS median [min–max] | iterations to best | tokens to best | cost to best | accepted | flagged |",
           "|---|---|---|---|---|---|---|---|---|---|---|---|"]
    for m in board["models"]:
        measured = "" if m["measured"] == m["with_result"] else f" ({m['measured']} of {m['with_result']} measured)"
        reached = "" if m["reached_fraction"] is None else f"{m['reached_target']}/{m['with_reference']} ({m['reached_fraction']:.0%})"
        best = f"{_q(m['best_qps_median'])} [{_q(m['best_qps_min'])}–{_q(m['best_qps_max'])}]" if m["best_qps_median"] is not None else ""
        out_of = [f"{m[k]} {status}" for k, status in zip(("missing", "damaged", "no_result"), LEFT_OUT) if m[k]]
        out.append(
            f"| {m['model']} | {m['rollouts']} ({m['finished']}){'; left out: ' + ', '.join(out_of) if out_of else ''} "
            f"| {_x(m['speedup_median'])}{measured} "
            f"| {_x(m['vs_reference_median'])} | {reached} | {_x(m['product_of_steps_median'])} "
            f"| {best} "
            f"| {_n(m['iterations_to_best_median'])} "
            f"| {_tok(m['tokens_to_best_median'])} | {_usd(m['cost_to_best_median'])} | {m['accepted']} | {m['flagged']} |")
    out.append("")
    out.append("Medians over each model's rollouts. × start (final): the final measurement, the best timed against the start "
               "(and × reference: against the reference), paired and interleaved to a +-2% interval as the session ended; "
               "a rollout without one (interrupted) counts its product of steps, and the cell says how many were measured. "
               "Product of steps: the accepted changes' gains as each was measured when accepted, multiplied (not the result: "
               "every accepted gain is measured at or above the margin, and false accepts add phantom steps). "
               "Left out of the medians and the fraction: a rollout missing, with a damaged journal (none of it can be "
               "read), or with no result (neither a final measurement nor an accepted change); accepted and flagged "
               "count every journal that can be read.")
    for n in board["notes"]:
        out.append(f"Note: {n}.")
    out += ["", "| session | model | × start (final, 95% interval) | × reference | product of steps | transfer | best QPS | recall@10 "
            "| iterations to best | accepted | flagged | ended | node | page |",
            "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|"]
    for r in board["rollouts"]:
        if r["status"] in ("missing", "damaged journal"):
            out.append(f"| {r['run']} ({r['status']}) | {r['model']} | {r['status']}: {r['problem']} "
                       f"|  |  |  |  |  |  |  |  | {r['status']} |  |  |")
            continue
        rec = "" if r["best_recall10"] is None else f"{r['best_recall10']:.4f}"
        page = f"[html]({r['html']})" if r["html"] else ""
        if r["status"] != "ok":
            head = r["status"]
        elif r["final"]:
            head = final_mod.fmt_ratio(r["final"])
        else:
            head = f"{_x(r['speedup'])} ({r['speedup_source']})"
        marks = (" (partial: damaged journal)" if r["journal_problems"] else "") + ("" if r["status"] == "ok" else f" ({r['status']})")
        out.append(f"| {r['run']}{marks} | {r['model']} | {head} | {_x(r['vs_reference'])} | {_x(r['product_of_steps'])} "
                   f"| {'; '.join(r['transfer'])} | {_q(r['best_qps'])} | {rec} "
                   f"| {_n(r['iterations_to_best'])} | {r['accepted']} | {r['flagged']} | {r['ended'] or 'running or died'} "
                   f"| {', '.join(r['nodes']) or '?'} | {page} |")
    if png:
        out += ["", f"Staircases: {png}"]
    if board.get("published"):
        out += ["", published_mod.markdown().rstrip("\n")]
    return "\n".join(out) + "\n"


@plain_text
def staircases(board: Mapping[str, Any], out_png: str | Path) -> Path:
    """One panel per model, its rollouts' best-QPS staircases in it, the target line when known."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from matplotlib.ticker import MaxNLocator

    models = board["models"]
    by_run = {r["run"]: r for r in board["rollouts"]}
    fig, axes = plt.subplots(1, len(models), figsize=(4.2 * len(models) + 1, 4.2), dpi=110, sharey=True, squeeze=False)
    for ax, m in zip(axes[0], models):
        drawn = False
        for run in m["runs"]:
            r = by_run[run]
            label = f"{run}: {_q(r['best_qps'])}" if r["status"] == "ok" else f"{run}: {r['status']}"
            xs, ys = best_curve(load_events(r["path"])) if r["status"] in ("ok", "no result") else ([], [])
            if not xs:  # named in the legend, nothing to draw
                ax.plot([], [], " ", label=label)
                continue
            drawn = True
            line = ax.step(xs, ys, where="post", lw=1.8, label=label)[0]
            if r["reference_qps"]:
                ax.axhline(board["target"] * r["reference_qps"], color=line.get_color(), ls=":", lw=1)
        ax.set_title(f"{m['model']} ({m['rollouts']} rollouts)", fontsize=10)
        ax.set_xlabel("iteration (submission)")
        if not drawn:
            ax.set_xlim(0, 1)
        ax.xaxis.set_major_locator(MaxNLocator(integer=True))
        ax.grid(True, alpha=0.3)
        ax.legend(fontsize=7.5, loc="lower right")
    axes[0][0].set_ylabel("best QPS so far" + (f" (dotted: {board['target']:.0%} of reference)"
                                               if any(r["reference_qps"] for r in board["rollouts"]) else ""))
    out_png = Path(out_png)
    out_png.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(out_png, bbox_inches="tight")
    plt.close(fig)
    return out_png


def write_all(board: Mapping[str, Any], png: Path | None, markdown: Path | None, json_path: Path | None) -> str:
    if png is not None:
        staircases(board, png)
    text = to_markdown(board, str(png) if png else None)
    if markdown is not None:
        markdown.parent.mkdir(parents=True, exist_ok=True)
        markdown.write_text(text)
    if json_path is not None:
        json_path.parent.mkdir(parents=True, exist_ok=True)
        json_path.write_text(json.dumps(board, indent=2, default=str) + "\n")
    return text
