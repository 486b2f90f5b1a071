"""The view of a running session, fed with journal events: a rich live panel, or one plain line per decision for CI logs."""

from __future__ import annotations

import sys
import time
from collections import deque
from dataclasses import dataclass, field
from typing import Any, Iterable, Mapping, TextIO

from vdbbench.agent.core.facts import Facts
from vdbbench.agent.core.journal import OUTCOMES, event_time
from vdbbench.agent.evaluation.eval_report import fmt_qps
from vdbbench.agent.reports.report import terminal_text
from vdbbench.agent.session.budget import Budgets

def _clock(seconds: float) -> str:
    s = int(seconds)
    return f"{s // 3600:d}:{s % 3600 // 60:02d}:{s % 60:02d}"


@dataclass
class SessionState(Facts):
    """What the view shows: the journal's facts (updated event by event, no rescans, so
    6000-call sessions stay cheap) plus what is happening right now."""

    last_outcome: str | None = None
    last_verdict: str | None = None  # the decision's label ("under the margin (+0.3% < 3%)"), else its outcome
    last_message: str = ""
    last_reason: str = ""
    activity: str = "starting"
    stopped: str | None = None
    recent: deque = field(default_factory=lambda: deque(maxlen=6))

    @property
    def best_recall_shown(self) -> float | None:
        return self.best_recall if self.accepted else None

    def elapsed(self, now: float | None = None) -> float:
        """Wall seconds across segments; the live segment runs to `now` (default: the clock)."""
        return super().elapsed(now if now is not None else time.time())

    def apply(self, ev: Mapping[str, Any]) -> None:
        super().apply(ev)
        kind = ev.get("type")
        if kind == "session_start":
            self.activity = "resumed" if ev.get("resumed") else "started"
            self.stopped = None
        elif kind == "model_call":
            self.activity = "thinking" if not ev.get("error") else f"model error: {terminal_text(ev.get('error'))[:60]}"
        elif kind == "tool_call":
            self.activity = f"tool: {terminal_text(ev.get('name'))[:60]}"
        elif kind == "build":
            self.activity = "built" if ev.get("ok") else "build failed"
        elif kind == "evaluation":
            self.activity = f"evaluated ({ev.get('split')})"
        elif kind == "reference":
            self.activity = "measured the reference"
        elif kind == "decision":
            self.last_outcome = ev.get("outcome")
            self.last_verdict = ev.get("verdict") or ev.get("outcome")
            self.last_message = terminal_text(" ".join(str(ev.get("message") or "").split()))
            self.last_reason = terminal_text(" ".join(str(ev.get("reason") or "").split()))
            self.recent.append((ev.get("iteration"), ev.get("outcome"), ev.get("qps"), self.last_message,
                                ev.get("verdict") or ev.get("outcome")))
            self.activity = "decided"
        elif kind == "compaction":
            self.activity = f"compacted {ev.get('before_tokens')} -> {ev.get('after_tokens')} tokens"
        elif kind == "review":
            self.activity = "strategic review"
        elif kind == "budget_stop":
            self.stopped = f"budget {ev.get('which')}: {ev.get('used')} of {ev.get('limit')}"
            self.activity = "stopped"
        elif kind == "session_end":
            self.stopped = self.stopped or f"ended: {ev.get('reason')}"
            self.activity = "ended"


def _colour(outcome: str | None) -> str:
    o = OUTCOMES.get(str(outcome))
    return "" if o is None else (f"bold {o.color}" if outcome in ("accepted", "flagged") else o.color)


def decision_line(state: SessionState, ev: Mapping[str, Any], now: float | None = None) -> str:
    """The quiet mode's plain line for a decision."""
    parts = [f"[it {ev.get('iteration')}] {ev.get('verdict') or ev.get('outcome')}"]
    if ev.get("qps") is not None:
        parts.append(f"{fmt_qps(ev.get('qps'), missing='—')} QPS")
    if ev.get("recall10") is not None:
        parts.append(f"recall {float(ev['recall10']):.4f}")
    parts.append(f"best {fmt_qps(state.best_qps, missing='—')}")
    parts.append(f"tools {state.tool_calls}, tokens {state.tokens:,}, ${state.cost_usd:.2f}, {_clock(state.elapsed(now))}")
    msg = state.last_message[:80]
    line = " | ".join(parts)
    if msg:
        line += f" | {msg}"
    if ev.get("outcome") != "accepted" and state.last_reason:
        line += f" — {state.last_reason[:100]}"
    return line


class LiveView:
    """Feed it every journal event (`feed`); use as a context manager around the session.

    quiet=True prints one plain line per decision, budget stop and session end, and one per
    compaction, strategic review and flagged audit (for CI logs);
    otherwise a rich Live panel shows iteration, best QPS, last outcome, tokens, cost, elapsed.
    """

    def __init__(self, quiet: bool = False, budgets: Budgets | None = None, console=None,
                 stream: TextIO | None = None, refresh_per_second: float = 4.0):
        self.quiet = quiet
        self.budgets = budgets or Budgets()
        self.state = SessionState()
        self.stream = stream or sys.stdout
        self._console = console
        self._live = None
        self._refresh = refresh_per_second

    # -- priming and feeding ---------------------------------------------------------------
    def prime(self, events: Iterable[Mapping[str, Any]]) -> None:
        """Load the past of a resumed session silently."""
        for ev in events:
            self.state.apply(ev)

    def feed(self, ev: Mapping[str, Any]) -> None:
        self.state.apply(ev)
        kind = ev.get("type")
        if self.quiet:
            if kind == "decision":
                self._print(decision_line(self.state, ev, now=event_time(ev.get("t"))))
            elif kind == "budget_stop":
                self._print(f"[stop] {self.state.stopped} — raise it and `vdbbench agent resume` to carry on")
            elif kind == "session_end":
                self._print(f"[end] {ev.get('reason')}: best {fmt_qps(self.state.best_qps, missing='—')} QPS after "
                            f"{len(self.state.decisions)} submissions, {self.state.tool_calls} tool calls, "
                            f"{self.state.tokens:,} tokens, ${self.state.cost_usd:.2f}")
            elif kind == "compaction":
                self._print(f"[compaction] {int(ev.get('before_tokens') or 0):,} -> {int(ev.get('after_tokens') or 0):,} tokens"
                            f" at iteration {self.state.iteration}")
            elif kind == "review":
                first = str(ev.get("text") or "").strip().splitlines()[:1]
                self._print(f"[review] {terminal_text(first[0].lstrip('# ')) if first else 'strategic review'}")
            elif kind == "audit" and ev.get("verdict") == "flagged":
                self._print(f"[audit] commit {str(ev.get('commit') or '?')[:12]} flagged: "
                            + terminal_text("; ".join(str(f) for f in (ev.get("findings") or [])[:2])[:200]))
            elif kind == "session_start":
                self._print(f"[start] {self.state.task} with {self.state.model}"
                            + (" (resumed)" if ev.get("resumed") else ""))
        elif self._live is not None:
            self._live.update(self.render(), refresh=kind in ("decision", "budget_stop", "session_end"))

    def _print(self, line: str) -> None:
        print(line, file=self.stream, flush=True)

    # -- the rich panel --------------------------------------------------------------------
    def _limit(self, used: Any, limit: Any, fmt=str) -> str:
        return fmt(used) + (f" / {fmt(limit)}" if limit is not None else "")

    def render(self, now: float | None = None):
        from rich.panel import Panel
        from rich.table import Table
        from rich.text import Text

        s, b = self.state, self.budgets
        grid = Table.grid(padding=(0, 2))
        grid.add_column(style="bold")
        grid.add_column()
        grid.add_column(style="bold")
        grid.add_column()
        speed = f" (×{s.speedup:.2f} the start)" if s.speedup else ""
        ref = f", {s.of_reference:.0%} of the reference" if s.of_reference else ""
        best = f"{fmt_qps(s.best_qps, missing='—')} QPS{speed}{ref}" + (f", recall {s.best_recall_shown:.4f}" if s.best_recall_shown is not None else "")
        last = Text(s.last_verdict or "—", style=_colour(s.last_outcome))
        grid.add_row("iteration", self._limit(s.iteration, b.iterations), "best", best)
        grid.add_row("tool calls", self._limit(s.tool_calls, b.tool_calls), "last outcome", last)
        grid.add_row("tokens", self._limit(s.tokens, b.tokens, lambda v: f"{int(v):,}"), "last change", Text(s.last_message[:70] or "—"))
        grid.add_row("cost", self._limit(s.cost_usd, b.cost_usd, lambda v: f"${float(v):.2f}"), "reason", Text(s.last_reason[:70] or "—"))
        grid.add_row("elapsed", self._limit(s.elapsed(now), b.wall_s, _clock), "now", Text(s.stopped or s.activity))
        grid.add_row("accepted", str(len(s.accepted)), "compactions / reviews", f"{s.compactions} / {s.reviews}")
        recent = Table.grid(padding=(0, 1))
        for it, outcome, qps, msg, verdict in s.recent:
            recent.add_row(f"it {it}", Text(str(verdict), style=_colour(outcome)),
                           fmt_qps(qps) if qps is not None else "", Text(msg[:60]))
        body = Table.grid()
        body.add_row(grid)
        if s.recent:
            body.add_row(Text("recent submissions", style="dim"))
            body.add_row(recent)
        # The model's text is Text, not markup: "[/]" in a message raised a MarkupError in the live
        # panel (in the session's own process), and "out[idx]" lost its index.
        return Panel(body, title=Text(f"vdbbench agent — {s.task} — {s.model}"), border_style="cyan")

    def __enter__(self) -> "LiveView":
        if not self.quiet:
            from rich.console import Console
            from rich.live import Live

            self._live = Live(self.render(), console=self._console or Console(), refresh_per_second=self._refresh,
                              transient=False, get_renderable=self.render)
            self._live.__enter__()
        return self

    def __exit__(self, *exc) -> None:
        if self._live is not None:
            self._live.update(self.render(), refresh=True)
            self._live.__exit__(*exc)
            self._live = None
