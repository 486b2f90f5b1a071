"""The public leaderboard's rules and rows: `--max-tool-calls 50` counts tool calls as that
leaderboard counts them, and its published rows are shown as reference, labelled with their
machine, never in the medians."""

from __future__ import annotations

import json
import shutil

import pytest

from test_agent_loop import FakeEndpoint, cargo_target, user_repo  # noqa: F401 - fixtures


@pytest.mark.skipif(shutil.which("cargo") is None, reason="needs a Rust toolchain (cargo)")
@pytest.mark.slow
def test_max_tool_calls_50_counts_every_call_as_the_leaderboard_does(cargo_target, user_repo, tmp_path, capsys):  # noqa: F811
    """Every tool call counts, one with broken arguments or an unknown name too; the limit is
    checked before each model call, so the calls of the reply that crosses it all run (the
    leaderboard's agent checks `used >= total` at the top of its loop the same way): replies of
    three calls stop after the 17th reply, at 51 calls."""
    from vdbbench.agent.core.journal import read_events
    from vdbbench.cli import main

    reply = {"tool_calls": [("list_files", {}), ("read_file", '{"path": '), ("no_such_tool", {})]}
    server = FakeEndpoint([reply] * 40)
    try:
        rc = main(["agent", "run", "--task", str(user_repo / "task.toml"), "--model", "local", "--base-url", server.base_url,
                   "--runs-dir", str(tmp_path / "runs"), "--run-id", "fifty", "--max-tool-calls", "50", "--quiet"])
    finally:
        server.close()
    assert rc == 0
    events = read_events(tmp_path / "runs" / "fifty" / "journal.jsonl")
    calls = [e for e in events if e["type"] == "tool_call"]
    assert len(calls) == 51 and len(server.requests) == 17
    stop = next(e for e in events if e["type"] == "budget_stop")
    assert (stop["which"], stop["limit"], stop["used"]) == ("tool_calls", 50, 51)
    end = events[-1]
    assert end["type"] == "session_end" and end["reason"] == "budget: tool_calls" and end["totals"]["tool_calls"] == 51
    results = [e for e in events if e["type"] == "tool_result"]
    assert sum(not r["ok"] for r in results) == 34  # the broken and unknown calls counted all the same
    start = next(e for e in events if e["type"] == "session_start")
    assert start["config"]["budgets"]["tool_calls"] == 50


def test_published_rows_are_facts_with_their_source_and_machine():
    from vdbbench.agent.reports import published

    data = published.load()
    assert data["source"].startswith("https://github.com/KCORES/vector-db-bench/") and data["source_commit"] in data["source"]
    assert "Xeon Platinum 8269CY" in data["machine"] and "4 cores" in data["machine"]
    opus = next(r for r in data["rows"] if r["entry"] == "claude-opus-4.6-turn-1")
    assert round(opus["qps"]) == 3548 and opus["recall10"] > 0.95 and opus["tool_calls_used"] == 50
    best = published.best_per_model()
    assert best[0]["model"] == "anthropic/claude-opus-4.6" and best[0]["entries"] == 3
    assert all(r["recall_passed"] for r in best)  # an entry under the gate is no model's best
    assert [r["qps"] for r in best] == sorted((r["qps"] for r in best), reverse=True)
    text = published.markdown()
    assert "their machine: 4 cores of an Intel Xeon Platinum 8269CY" in text and "not measured here" in text
    assert "| anthropic/claude-opus-4.6 | claude-opus-4.6-turn-1 | 3,548 | 0.9590 | 50 | 3 |" in text
    assert data["source"] in text and "evaluate-entry" in text


def _journal(run, kind: str, qps: float) -> None:
    """A finished session's journal: start (of a card of `kind`), one accepted change, the end."""
    run.mkdir(parents=True)
    card = {"name": "serve-from-scratch", "evaluation": {"kind": kind}}
    events = [
        {"type": "session_start", "seq": 1, "t": "2026-12-06T08:00:00+00:00", "iteration": 0, "model": "m",
         "task": {"path": "card.toml", "card": card}, "config": {}, "resumed": False, "node": {"hostname": "h"}},
        {"type": "evaluation", "seq": 2, "t": "2026-12-06T08:00:01+00:00", "iteration": 0, "split": "heldout",
         "candidate": {"qps": 10.0, "recall10": 1.0}, "best": None},
        {"type": "decision", "seq": 3, "t": "2026-12-06T08:00:02+00:00", "iteration": 1, "outcome": "accepted",
         "qps": qps, "recall10": 0.97, "gain": qps / 10 - 1, "commit": "a" * 40, "reason": "ok", "message": "x"},
        {"type": "session_end", "seq": 4, "t": "2026-12-06T08:00:03+00:00", "iteration": 1, "reason": "finished",
         "best": {"commit": "a" * 40, "qps": qps, "recall10": 0.97}, "totals": {}},
    ]
    (run / "journal.jsonl").write_text("".join(json.dumps(e) + "\n" for e in events))


def test_the_leaderboard_shows_published_rows_beside_served_sessions_only(tmp_path):
    from vdbbench.agent.tournaments.leaderboard import leaderboard, to_markdown

    _journal(tmp_path / "served" / "a", "served", 4000.0)
    _journal(tmp_path / "inproc" / "b", "inprocess", 4000.0)
    board = leaderboard([tmp_path / "served"])
    text = to_markdown(board)
    assert board["published"] and "Published reference" in text and "their machine" in text
    # ours stand alone in the medians: one model, one rollout, its own QPS
    assert [m["model"] for m in board["models"]] == ["m"] and board["models"][0]["best_qps_median"] == 4000.0
    assert text.index("Published reference") > text.index("| session |")  # after our rows, in a section of its own
    board = leaderboard([tmp_path / "inproc"])
    assert board["published"] is None and "Published reference" not in to_markdown(board)
    assert "Published reference" in to_markdown(leaderboard([tmp_path / "inproc"], published=True))


def test_the_session_page_of_a_served_session_shows_the_published_rows(tmp_path):
    from vdbbench.pages.session import session_page

    _journal(tmp_path / "a", "served", 4000.0)
    page = session_page(tmp_path / "a")
    assert 'id="published"' in page and "Xeon Platinum 8269CY" in page and "claude-opus-4.6-turn-1" in page
    _journal(tmp_path / "b", "inprocess", 4000.0)
    assert 'id="published"' not in session_page(tmp_path / "b")
