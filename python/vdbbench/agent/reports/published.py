"""The public vector-db-bench leaderboard's published rows, kept as reference beside served
sessions: facts copied from its results file (published_kcores.json names the source and the
commit), measured on their machine, shown labelled as such and never mixed into our medians."""

from __future__ import annotations

import functools
import json
from pathlib import Path
from typing import Any, Mapping, Sequence

DATA = Path(__file__).with_name("published_kcores.json")


@functools.lru_cache(maxsize=1)
def load() -> dict[str, Any]:
    """{title, source, source_commit, machine, task, recall, note, rows: [{model, entry, qps,
    recall10, recall_passed, tool_calls_used, result_source, date}]}."""
    return json.loads(DATA.read_text(encoding="utf-8"))


def best_per_model(rows: Sequence[Mapping[str, Any]] | None = None) -> list[dict[str, Any]]:
    """Each model's highest-QPS entry that passed the recall gate, best first, with how many
    entries (turns) the model has."""
    rows = load()["rows"] if rows is None else rows
    best: dict[str, dict[str, Any]] = {}
    count: dict[str, int] = {}
    for r in rows:
        count[r["model"]] = count.get(r["model"], 0) + 1
        if r.get("recall_passed") and (r["model"] not in best or r["qps"] > best[r["model"]]["qps"]):
            best[r["model"]] = dict(r)
    out = sorted(best.values(), key=lambda r: -r["qps"])
    for r in out:
        r["entries"] = count[r["model"]]
    return out


def heading() -> str:
    data = load()
    return f"Published reference: {data['title']} (their machine: {data['machine']}; not measured here)"


def caption() -> str:
    data = load()
    return (f"{data['task']}; {data['recall']}. {data['note']} Source: {data['source']}. To measure an entry on "
            "this machine with this judge: `vdbbench agent evaluate-entry FOLDER --task agent/tasks/serve-from-scratch-1m.toml`.")


HEADERS = ("model", "best entry", "QPS (their machine)", "recall@10", "tool calls", "entries", "date")


def table_rows() -> list[tuple]:
    return [(r["model"], r["entry"], f"{r['qps']:,.0f}", f"{r['recall10']:.4f}", r["tool_calls_used"], r["entries"], r["date"])
            for r in best_per_model()]


def markdown() -> str:
    out = [f"## {heading()}", "", "| " + " | ".join(HEADERS) + " |", "|---|---|---:|---:|---:|---:|---|"]
    out += ["| " + " | ".join(str(c) for c in row) + " |" for row in table_rows()]
    out += ["", caption()]
    return "\n".join(out) + "\n"
