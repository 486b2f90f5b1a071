"""A builder of hand-written agent journals (docs/agent-journal.md) for the long-session modules' tests."""

from __future__ import annotations

import json
from datetime import datetime, timedelta, timezone
from pathlib import Path


class JournalBuilder:
    """Appends journal events with increasing seq, a controllable clock and the iteration count."""

    def __init__(self, start: datetime | None = None):
        self.events: list[dict] = []
        self.now = start or datetime(2026, 1, 1, 12, 0, 0, tzinfo=timezone.utc)
        self.iteration = 0
        self.best_qps: float | None = None
        self.best_recall: float | None = None

    def tick(self, seconds: float) -> "JournalBuilder":
        self.now += timedelta(seconds=seconds)
        return self

    def add(self, type_: str, **payload) -> dict:
        ev = {"seq": len(self.events), "t": self.now.isoformat().replace("+00:00", "Z"), "type": type_,
              "iteration": self.iteration}
        ev.update(payload)
        self.events.append(ev)
        return ev

    def start(self, resumed: bool = False, task: dict | None = None, **config) -> dict:
        task = task or {"path": "agent/tasks/fixture.toml",
                        "card": {"name": "fixture", "objective": "qps", "recall_floor": 0.95}}
        return self.add("session_start", task=task, model="scripted", base_url=None,
                        config=config, resumed=resumed)

    def model_call(self, prompt_tokens: int = 1000, completion_tokens: int = 100, cost: float = 0.0) -> dict:
        return self.add("model_call", prompt_tokens=prompt_tokens, completion_tokens=completion_tokens,
                        total_tokens=prompt_tokens + completion_tokens, cost_usd=cost, latency_s=0.5,
                        finish_reason="tool_calls", attempt=1, error=None)

    def tool(self, name: str, arguments: dict | None = None, text: str = "ok", ok: bool = True) -> None:
        cid = f"call_{len(self.events)}"
        self.add("tool_call", id=cid, name=name, arguments=arguments or {})
        self.add("tool_result", id=cid, name=name, ok=ok, text=text, seconds=0.1)

    def note(self, text: str) -> dict:
        self.tool("note", {"text": text})
        return self.add("note", text=text)

    def submit(self, outcome: str, qps: float | None = None, recall: float | None = None,
               message: str = "", reason: str = "", diff_stat: str = "", commit: str | None = None,
               fresh_qps: float | None = None) -> dict:
        """One submission: the submit tool call, an evaluation when the outcome had one, the decision."""
        self.iteration += 1
        self.tool("submit", {"message": message}, text=reason or outcome)
        before = self.best_qps
        if outcome in ("accepted", "slower", "recall_below_floor", "flagged") and qps is not None:
            self.add("evaluation", split="heldout",
                     candidate={"qps": qps, "recall10": recall, "recall10_ids": recall, "p50_ms": 1.0,
                                "repeats": 5, "qps_samples": [qps] * 5},
                     best=None if before is None else {"qps": before, "recall10": self.best_recall},
                     gain=None if before is None else qps / before - 1, p_value=0.01)
        if outcome == "accepted":
            commit = commit or f"{self.iteration:04x}" + "ab" * 18
            self.best_qps, self.best_recall = qps, recall
            self.add("audit", commit=commit, verdict="clean", findings=[],
                     fresh_qps=fresh_qps if fresh_qps is not None else qps, fresh_recall10=recall,
                     jump_factor=None if before is None else qps / before)
        return self.add("decision", outcome=outcome, qps=qps, recall10=recall, best_qps_before=before,
                        best_qps_after=self.best_qps, commit=commit if outcome == "accepted" else None,
                        message=message, reason=reason or outcome, diff_stat=diff_stat)

    def write(self, run_dir: Path) -> Path:
        run_dir.mkdir(parents=True, exist_ok=True)
        path = run_dir / "journal.jsonl"
        with path.open("w") as f:
            for ev in self.events:
                f.write(json.dumps(ev) + "\n")
        return path


def test_builder_numbers_events_and_iterations():
    j = JournalBuilder()
    j.start()
    j.submit("no_change")
    j.submit("accepted", qps=100.0, recall=0.97, message="first")
    assert [e["seq"] for e in j.events] == list(range(len(j.events)))
    decisions = [e for e in j.events if e["type"] == "decision"]
    assert [d["iteration"] for d in decisions] == [1, 2]
    assert decisions[1]["best_qps_after"] == 100.0 and decisions[1]["commit"]
