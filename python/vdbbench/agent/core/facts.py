"""One fold of a session's journal into the facts its readers share: budgets (usage), the live
view, the report, compaction and resume all read `Facts`, so the baseline, the best, the
wall-time segments and the usage are derived in one place (docs/agent-journal.md)."""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field, fields
from typing import Any, Iterable, Mapping

from vdbbench.agent.core.journal import event_time

# A submission refused for failing tests is returned before any timing and is not an iteration
# of the budget (its decision is journaled all the same).
FREE_OUTCOME = "tests_failed"
# The axes a session's progress is measured along (report and compare plots).
PROGRESS_AXES = ("iterations", "tool_calls", "hours", "cost", "tokens")


@dataclass(frozen=True)
class Usage:
    """What a session has used so far, across all its resumes."""

    submissions: int = 0
    tool_calls: int = 0
    prompt_tokens: int = 0
    completion_tokens: int = 0
    tokens: int = 0
    cost_usd: float = 0.0
    wall_s: float = 0.0
    model_calls: int = 0
    free_submissions: int = 0  # submissions refused before timing that do not count as iterations (tests failed)

    @property
    def iterations(self) -> int:
        """Submissions that count against the iteration budget."""
        return self.submissions - self.free_submissions

    @classmethod
    def from_journal(cls, events: Iterable[Mapping[str, Any]]) -> "Usage":
        return Facts.fold(events).usage

    def plus_wall(self, seconds: float) -> "Usage":
        """The same usage with `seconds` more wall time (the live segment not yet journaled)."""
        d = {f.name: getattr(self, f.name) for f in fields(self)}
        d["wall_s"] += seconds
        return Usage(**d)


def _card_of(start: Mapping[str, Any]) -> dict:
    task = start.get("task") or {}
    card = task.get("card") if isinstance(task.get("card"), Mapping) else task
    return dict(card or {})


@dataclass
class Facts:
    """The state of a session after the events applied so far (`apply` one at a time, or `fold`).

    Wall time sums segments (each session_start to the segment's last event), so the time a
    crashed session sat dead before `resume` is not charged. The baseline is the start version's
    own held-out measurement (an evaluation with no best, before the first submission), else what
    the first comparison measured the best at."""

    task: str = "?"
    model: str = "?"
    base_url: str | None = None
    card: dict = field(default_factory=dict)
    iteration: int = 0
    baseline_qps: float | None = None
    baseline_recall: float | None = None
    best_qps: float | None = None
    best_recall: float | None = None
    best_commit: str | None = None
    reference: dict | None = None  # the `reference` event: the project's engine on this card
    decisions: list = field(default_factory=list)
    accepted: list = field(default_factory=list)
    decided_iteration: int = 0  # the highest iteration a decision carries
    outcomes: Counter = field(default_factory=Counter)
    since_improvement: int = 0
    since_review: int = 0  # decisions without a gain since the last strategic review (or gain)
    notes: list = field(default_factory=list)
    audits: dict = field(default_factory=dict)  # commit -> audit event
    audits_by_iteration: dict = field(default_factory=dict)
    same_run_gain: dict = field(default_factory=dict)  # iteration -> candidate/best ratio of its held-out run
    progress: dict = field(default_factory=dict)  # decision seq -> {axis: how far the session was}
    curve: list = field(default_factory=list)  # (decision seq, best QPS after it)
    tool_calls: int = 0
    model_calls: int = 0
    prompt_tokens: int = 0
    completion_tokens: int = 0
    tokens: int = 0
    cost_usd: float = 0.0
    closed_wall_s: float = 0.0  # wall time of earlier segments (before resumes)
    segment_start: float | None = None  # journal time of the current segment's start
    last_event_t: float | None = None
    compactions: int = 0
    reviews: int = 0
    resumes: int = 0
    budget_stops: list = field(default_factory=list)
    ended: str | None = None
    unseen_verdict: dict | None = None  # the last decision, when the model never saw its verdict
    _own_baseline: bool = False

    @classmethod
    def fold(cls, events: Iterable[Mapping[str, Any]]) -> "Facts":
        facts = cls()
        for ev in events:
            facts.apply(ev)
        return facts

    # -- derived ---------------------------------------------------------------------------
    def elapsed(self, now: float | None = None) -> float:
        """Wall seconds across segments; the live segment runs to `now` (default: its last event)."""
        if self.segment_start is None:
            return self.closed_wall_s
        end = now if now is not None else (self.last_event_t or self.segment_start)
        return self.closed_wall_s + max(0.0, end - self.segment_start)

    @property
    def submissions(self) -> int:
        """Submissions so far: the decisions read, or the highest iteration a decision carries when
        that is more (a decision on a damaged journal line is gone, the submissions after it
        still say how many came before)."""
        return max(len(self.decisions), self.decided_iteration)

    @property
    def usage(self) -> Usage:
        return Usage(self.submissions, self.tool_calls, self.prompt_tokens, self.completion_tokens, self.tokens,
                     self.cost_usd, self.elapsed(), self.model_calls, self.outcomes.get(FREE_OUTCOME, 0))

    @property
    def speedup(self) -> float | None:
        return self.best_qps / self.baseline_qps if self.best_qps and self.baseline_qps else None

    @property
    def of_reference(self) -> float | None:
        """The best as a fraction of the reference (the project's engine on the same card)."""
        ref = (self.reference or {}).get("qps")
        return self.best_qps / ref if self.best_qps and ref else None

    # -- the fold --------------------------------------------------------------------------
    def apply(self, ev: Mapping[str, Any]) -> None:
        kind = ev.get("type")
        t = event_time(ev.get("t"))
        self.iteration = max(self.iteration, int(ev.get("iteration") or 0))
        if kind == "session_start":
            if self.segment_start is not None and self.last_event_t is not None:
                self.closed_wall_s += max(0.0, self.last_event_t - self.segment_start)
            self.segment_start = t
            if ev.get("resumed"):
                self.resumes += 1
            card = _card_of(ev)
            if not self.card:
                self.card = card
            path = str((ev.get("task") or {}).get("path") or "")
            self.task = card.get("name") or (path.rsplit("/", 1)[-1].rsplit(".", 1)[0] if path else self.task)
            if self.model == "?":  # the model the session started with names it
                self.model, self.base_url = ev.get("model") or "?", ev.get("base_url")
            self.ended = None
        elif self.segment_start is None and t is not None:
            self.segment_start = t
        if t is not None:
            self.last_event_t = t
        handler = getattr(self, f"_on_{kind}", None)
        if handler is not None:
            handler(ev)

    def _on_model_call(self, ev) -> None:
        self.model_calls += 1
        p, c = int(ev.get("prompt_tokens") or 0), int(ev.get("completion_tokens") or 0)
        self.prompt_tokens += p
        self.completion_tokens += c
        self.tokens += int(ev.get("total_tokens") or (p + c))
        self.cost_usd += float(ev.get("cost_usd") or 0.0)

    def _on_tool_call(self, ev) -> None:
        self.tool_calls += 1

    def _on_evaluation(self, ev) -> None:
        cand = ev.get("candidate") if isinstance(ev.get("candidate"), Mapping) else {}
        best = ev.get("best") if isinstance(ev.get("best"), Mapping) else None
        heldout = ev.get("split", "heldout") == "heldout"
        if best is None and heldout and not self.decisions and cand.get("qps") and not self._own_baseline:
            self.baseline_qps, self.baseline_recall = float(cand["qps"]), cand.get("recall10")
            self._own_baseline = True
            if not self.accepted:
                self.best_qps, self.best_recall = self.baseline_qps, self.baseline_recall
        elif best is not None and best.get("qps") and self.baseline_qps is None:
            self.baseline_qps = float(best["qps"])
            self.best_qps = self.best_qps or self.baseline_qps
        if heldout and ev.get("gain") is not None:
            self.same_run_gain[ev.get("iteration")] = 1.0 + float(ev["gain"])

    def _on_decision(self, ev) -> None:
        it = int(ev.get("iteration") or 0)
        if ev.get("recovered") and ev.get("outcome") == "accepted" and it < self.decided_iteration:
            self._on_earlier_accept(ev, it)
            return
        self.decided_iteration = max(self.decided_iteration, it)
        if self.baseline_qps is None and ev.get("best_qps_before"):
            self.baseline_qps = float(ev["best_qps_before"])
            self.best_qps = self.best_qps or self.baseline_qps
        self.decisions.append(dict(ev))
        self.outcomes[ev.get("outcome")] += 1
        if ev.get("best_qps_after") is not None:
            self.best_qps = float(ev["best_qps_after"])
        if ev.get("outcome") == "accepted":
            self.accepted.append(dict(ev))
            self.since_improvement = 0
            self.since_review = 0
            if ev.get("qps") is not None:
                self.best_qps = float(ev["qps"])
            self.best_recall, self.best_commit = ev.get("recall10"), ev.get("commit")
        else:
            self.since_improvement += 1
            self.since_review += 1
        self.unseen_verdict = dict(ev)  # until a later model call shows it
        self.curve.append((int(ev.get("seq", -1)), self.best_qps))
        self.progress[int(ev.get("seq", len(self.progress)))] = {
            "iterations": float(ev.get("iteration") or len(self.decisions)), "tool_calls": float(self.tool_calls),
            "hours": self.elapsed() / 3600.0, "cost": self.cost_usd, "tokens": self.tokens / 1e6,
        }

    def _on_earlier_accept(self, ev, it: int) -> None:
        """An accepted change of an earlier iteration, recovered on resume from its commit (its
        decision's line in the journal was damaged): it joins the decisions and the accepted
        changes in its iteration's place, and the best stays the later one."""
        def place(items: list) -> int:
            return next((i for i, d in enumerate(items) if int(d.get("iteration") or 0) > it), len(items))

        self.decisions.insert(place(self.decisions), dict(ev))
        self.accepted.insert(place(self.accepted), dict(ev))
        self.outcomes["accepted"] += 1

    def _on_assistant(self, ev) -> None:
        self.unseen_verdict = None  # the model answered after the verdict: it saw it

    def _on_note(self, ev) -> None:
        self.notes.append(ev.get("text", ""))

    def _on_audit(self, ev) -> None:
        self.audits[ev.get("commit")] = ev
        self.audits_by_iteration[ev.get("iteration")] = ev

    def _on_reference(self, ev) -> None:
        self.reference = dict(ev)

    def _on_compaction(self, ev) -> None:
        self.compactions += 1

    def _on_review(self, ev) -> None:
        self.reviews += 1
        self.since_review = 0

    def _on_budget_stop(self, ev) -> None:
        self.budget_stops.append(dict(ev))

    def _on_session_end(self, ev) -> None:
        self.ended = ev.get("reason")
