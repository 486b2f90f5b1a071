"""The agent loop: ask the model, run its tool calls, judge each submission, journal everything.

The keep-or-discard policy in one paragraph: a submission is built, tested and measured
against the current best on held-out queries in closely interleaved pairs of timed repeats
(`judge`). It is kept (committed on the session branch, becoming the new best) only when
recall@10 stays at or above the floor, a sequential test on the per-pair log-ratios finds the
gain real and at least the margin, and the audit (static diff scan, first-pass vs later-pass
speed, re-evaluation on fresh queries) is clean. Anything else is rejected with the reason,
and the model's working copy is left as it was.

The parts: the tool table (`tools`), the prompts (`prompts`), the journal's facts (`facts`),
the reference line (`reference`), the workspace (`workspace`), the judge (`judge`) and the
evaluator (`evaluator`).
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import shutil
import time
from pathlib import Path
from typing import Callable

from vdbbench.agent.core import workspace as wsp
from vdbbench.agent.core.facts import FREE_OUTCOME, Facts, Usage
from vdbbench.agent.core.journal import Journal
from vdbbench.agent.core.task import TaskCard, load_task
from vdbbench.agent.core.workspace import BuildResult, TestResult
from vdbbench.agent.evaluation import final
from vdbbench.agent.evaluation.eval_data import make_eval_data
from vdbbench.agent.evaluation.evaluator import Evaluator
from vdbbench.agent.evaluation.served import evaluator_for
from vdbbench.agent.evaluation.judge import Judge, decision_text
from vdbbench.agent.session import compaction, prompts, review, startup
from vdbbench.agent.session.budget import Budgets, PriceTable, exceeded, price_table
from vdbbench.agent.session.machine import machine
from vdbbench.agent.session.model import Model, ModelFinished, ModelUnavailable, ToolCall
from vdbbench.agent.session.node import node_info
from vdbbench.agent.session.session_api import Best, SessionError
from vdbbench.agent.session.tools import TOOL_SCHEMAS, ToolArgumentError, ToolResult, run_tool
from vdbbench.common.console import say_warning



class SessionOver(Exception):
    """Control flow: the session ends, for the reason given."""

    def __init__(self, reason: str):
        super().__init__(reason)
        self.reason = reason


class BudgetStop(SessionOver):
    def __init__(self, which: str, limit: float, used: float):
        super().__init__(f"budget: {which}")
        self.which, self.limit, self.used = which, limit, used


class Session:
    """One agent session in its run directory: workspace, builds, journal, conversation.

    The tools and the start-up steps use it through `session_api.SessionApi` (its public
    attributes and methods); the journal's facts are folded as events are written, once from the
    file when the session starts or resumes."""

    def __init__(self, run_dir: Path, card: TaskCard, model: Model, budgets: Budgets,
                 prices: PriceTable | None = None, on_event: Callable[[dict], None] | None = None,
                 prompt_dir=None):
        self.run_dir = Path(run_dir).resolve()
        self.card = card
        self.model = model
        self.budgets = budgets
        self.prices = prices or price_table()
        self.on_event = on_event
        self.ws = self.run_dir / "workspace"
        # One cargo target folder per session (incremental builds); tests share one across sessions.
        self.target = Path(os.environ.get("VDBBENCH_AGENT_TARGET_DIR") or self.run_dir / "target").resolve()
        self.builds = self.run_dir / "builds"
        self.journal = Journal(self.run_dir / "journal.jsonl")
        self._facts = Facts.fold(self.journal.events())  # then kept current by emit()
        self.prompts = prompt_dir if prompt_dir is not None else prompts.for_card(card)
        self.machine = machine()
        self.evaluator: Evaluator | None = None
        self.messages: list[dict] = []
        self.last_usage: dict | None = None
        self._text_protocol_journaled = False
        self.best = Best("", None, None)
        self._built_fp: str | None = None
        self._built_ok = False
        self._built_text = ""
        self._tested: tuple[str, object] | None = None  # (fingerprint, TestResult) of the last test run
        self._last_diff_stat = ""
        self.last_profile: str | None = None
        self._pending_user: list[str] = []
        self._idle = 0

    # -- journal ---------------------------------------------------------------------------
    def emit(self, type: str, **payload) -> dict:
        event = self.journal.append(type, **payload)
        self._facts.apply(event)
        if self.on_event is not None:
            try:
                self.on_event(event)
            except Exception:  # noqa: BLE001 - a display fault never stops the session
                pass
        return event

    def events(self) -> list[dict]:
        return self.journal.events()

    def facts(self) -> Facts:
        """The journal's facts so far (the same as folding the whole file, without reading it)."""
        return self._facts

    def usage(self) -> Usage:
        return self.facts().usage

    # -- creation and resume ---------------------------------------------------------------
    @classmethod
    def create(cls, card: TaskCard, model: Model, runs_dir: Path, run_id: str | None = None,
               budget_overrides: dict | None = None, prices: PriceTable | None = None,
               on_event: Callable[[dict], None] | None = None) -> "Session":
        run_id = run_id or time.strftime("%Y%m%d-%H%M%S-") + re.sub(r"[^A-Za-z0-9_.-]", "_", card.name)
        run_dir = Path(runs_dir).resolve() / run_id
        if run_dir.exists():
            raise SessionError(f"run directory {run_dir} already exists; use `vdbbench agent resume {run_dir}`")
        run_dir.mkdir(parents=True)
        shutil.copy2(card.path, run_dir / "task.toml")
        prompts.keep_with_run(card, run_dir)
        budgets = Budgets.merged(card.budgets, budget_overrides)
        (run_dir / "session.json").write_text(json.dumps({
            "card_path": card.path, "prompts": "run folder" if card.prompts else "package",
            "model": model.name, "base_url": getattr(model, "base_url", None),
            "budget_overrides": budget_overrides or {},
        }, indent=2))
        wsp.create_workspace(card, run_dir / "workspace")
        session = cls(run_dir, card, model, budgets, prices, on_event, prompts.for_run(run_dir))
        session._start(resumed=False)
        return session

    @classmethod
    def resume(cls, run_dir: Path, model: Model, budget_overrides: dict | None = None,
               prices: PriceTable | None = None, on_event: Callable[[dict], None] | None = None) -> "Session":
        run_dir = Path(run_dir).resolve()
        if not (run_dir / "journal.jsonl").exists() or not (run_dir / "workspace" / ".git").exists():
            raise SessionError(f"{run_dir} is not a session run directory (no journal.jsonl or workspace)")
        meta = json.loads((run_dir / "session.json").read_text())
        # The copy's relative paths mean what they meant beside the original card.
        card = load_task(run_dir / "task.toml", origin=meta.get("card_path"))
        merged = {**meta.get("budget_overrides", {}), **{k: v for k, v in (budget_overrides or {}).items() if v is not None}}
        budgets = Budgets.merged(card.budgets, merged)
        session = cls(run_dir, card, model, budgets, prices, on_event, prompts.for_run(run_dir))
        try:
            startup.check_resumable(session)
        except SessionError:
            session.journal.close()  # nothing was written
            raise
        session._start(resumed=True)
        return session

    def _start(self, resumed: bool) -> None:
        card = self.card
        self.emit("session_start", task={"path": card.path, "card": card.to_dict()}, model=self.model.name,
                  base_url=getattr(self.model, "base_url", None),
                  config={"budgets": self.budgets.as_dict(), "window_tokens": card.session.window_tokens,
                          "margin": card.objective.margin, "repeats": card.objective.repeats,
                          "recall_floor": card.objective.recall_floor, "review_every": card.session.review_every},
                  machine={"cpu": self.machine.cpu, "cores": self.machine.cores, "simd": self.machine.simd,
                           "caches": self.machine.caches},
                  resumed=resumed, node=node_info())
        if resumed and self.journal.problems:  # read past, kept as it is: said once, and journaled
            damage = startup.damage_text(self.journal)
            say_warning(damage)
            self.emit("error", where="journal", text=damage)
        self.evaluator = evaluator_for(card, make_eval_data(card), self.run_dir)
        startup.announce_transfer(self)
        if resumed:
            startup.restore(self)
        else:
            startup.measure_reference(self, startup.baseline(self))
        # The system message stays the same all session long (so endpoints can cache the prompt);
        # what moves, the current best, is stated in the first user message and in each verdict.
        self.messages = [{"role": "system", "content": self.system_prompt()}]
        best = prompts.best_text(self.card, self.best.qps, self.best.recall10, self.best.commit)
        if resumed:
            summary = compaction.build_state_summary(self.events(), card.to_dict())
            changed = wsp.diff_vs_best(self.ws, card, stat=True) or "none"
            self.messages.append({"role": "user", "content": summary + "\n\n" + prompts.render(
                self.prompts, "resume.md", changed=changed, best=best)})
        else:
            self.messages.append({"role": "user", "content": prompts.render(self.prompts, "begin.md", best=best)})

    def system_prompt(self) -> str:
        """The standing instructions and the task, with the data as loaded (its real size)."""
        data = self.evaluator.data if self.evaluator is not None else None
        return prompts.system_prompt(self.prompts, self.card, self.machine, data=data)


    # -- the loop --------------------------------------------------------------------------
    def run(self) -> dict:
        reason = "finished"
        try:
            while True:
                self.step()
        except BudgetStop as stop:
            self.emit("budget_stop", which=stop.which, limit=stop.limit, used=stop.used)
            reason = stop.reason
            self._final_turn(reason)
        except SessionOver as over:
            reason = over.reason
        except ModelFinished:
            reason = "model_finished"
        except KeyboardInterrupt:
            self._end("interrupted")
            raise
        return self._end(reason)

    def _final_turn(self, reason: str) -> None:
        """When the session stops before the model saw its last verdict, one more model turn shows
        it (no tools run); if that call fails, the report marks the verdict 'not seen by the model'."""
        last = self.facts().unseen_verdict
        if last is None:
            return
        verdict = next((m["content"] for m in reversed(self.messages) if m.get("role") == "tool"
                        and str(m.get("content", "")).startswith(("ACCEPTED", "REJECTED"))), last.get("reason") or "")
        self.messages.append({"role": "user", "content": prompts.render(self.prompts, "final.md", reason=reason, verdict=verdict)})
        try:
            self._maybe_compact()
            reply = self.model.query(self.messages, [])
        except (ModelUnavailable, ModelFinished) as exc:
            for a in getattr(exc, "attempts", []):
                self._journal_attempt(a)
            self.emit("error", where="final turn", text=f"the last verdict was not shown to the model: {exc}")
            return
        for a in reply.attempts:
            self._journal_attempt(a)
        self.emit("assistant", content=reply.content, reasoning_content=reply.reasoning_content, tool_calls=[], final=True)
        self.messages.append({"role": "assistant", "content": reply.content or ""})

    def _end(self, reason: str) -> dict:
        if reason != "interrupted" and self.evaluator is not None:
            try:  # the session's result as a measurement: best vs start (and reference) on every target
                final.of_session(self, reason)
            except Exception as exc:  # noqa: BLE001 - the session still ends, and says why there is no figure
                self.emit("error", where="final measurement", text=f"{type(exc).__name__}: {exc}")
        u = self.usage()
        event = self.emit("session_end", reason=reason,
                          best={"commit": self.best.commit, "qps": self.best.qps, "recall10": self.best.recall10},
                          totals={"tool_calls": u.tool_calls, "tokens": u.tokens, "cost_usd": round(u.cost_usd, 6),
                                  "wall_s": round(u.wall_s, 3), "submissions": u.submissions})
        self.journal.close()
        if self.evaluator is not None:
            self.evaluator.close()  # the best's kept worker, if the card keeps one
        return event

    def check_budgets(self) -> None:
        hit = exceeded(self.budgets, self.usage())
        if hit:
            raise BudgetStop(*hit)

    def step(self) -> None:
        """One model turn: query, then execute every tool call of the reply, each answered by id."""
        self.check_budgets()
        self._maybe_compact()
        try:
            reply = self.model.query(self.messages, TOOL_SCHEMAS)
        except ModelUnavailable as exc:
            for a in getattr(exc, "attempts", []):
                self._journal_attempt(a)
            self.emit("error", where="model", text=str(exc))
            raise SessionOver("model_unavailable") from None
        for a in reply.attempts:
            self._journal_attempt(a)
        using_text = getattr(self.model, "using_text", None)  # the text-protocol wrapper's current mode
        if using_text and not self._text_protocol_journaled:
            self._text_protocol_journaled = True
            self.emit("protocol", protocol="text", reason="tool calls refused by the endpoint, or --tool-protocol text")
        self.emit("assistant", content=reply.content, reasoning_content=reply.reasoning_content,
                  tool_calls=[{"id": c.id, "name": c.name, "arguments": c.arguments} for c in reply.tool_calls])
        self.messages.append(reply.assistant_message())
        self.last_usage = reply.usage
        if self.last_usage is not None:
            self.last_usage["n_messages"] = len(self.messages)
        if not reply.tool_calls:
            self._idle += 1
            left = self.card.session.max_idle_replies - self._idle
            if left <= 0:
                raise SessionOver("model_stopped")
            self.messages.append({"role": "user", "content": prompts.render(self.prompts, "nudge.md", left=left)})
            return
        self._idle = 0
        for call in reply.tool_calls:
            result = self.execute(call)
            self.messages.append({"role": "tool", "tool_call_id": call.id, "content": result.text})
        for text in self._pending_user:
            self.messages.append({"role": "user", "content": text})
        self._pending_user.clear()

    def _journal_attempt(self, a) -> None:
        cost = self.prices.cost_of(self.model.name, a.prompt_tokens, a.completion_tokens) if a.prompt_tokens is not None else 0.0
        self.emit("model_call", prompt_tokens=a.prompt_tokens, completion_tokens=a.completion_tokens,
                  total_tokens=a.total_tokens, cost_usd=cost, latency_s=round(a.latency_s, 3),
                  finish_reason=a.finish_reason, attempt=a.attempt, error=a.error)

    def _maybe_compact(self) -> None:
        window = self.card.session.window_tokens
        reserve = min(8192, window // 8)
        if not compaction.needs_compaction(self.messages, window, reserve, self.last_usage):
            return
        before = compaction.estimate_tokens(self.messages, self.last_usage)
        self.messages = compaction.compact(self.messages, self.events(), self.card.to_dict(), window,
                                           keep_recent_turns=4, reserve=reserve, last_usage=self.last_usage)
        after = compaction.chars_tokens(self.messages)
        summary = next((m["content"] for m in self.messages if m.get("role") == "user"
                        and str(m.get("content", "")).startswith(compaction.SUMMARY_HEADER)), "")
        self.last_usage = None
        self.emit("compaction", before_tokens=before, after_tokens=after, summary=summary)

    # -- tools -----------------------------------------------------------------------------
    def execute(self, call: ToolCall) -> ToolResult:
        try:
            shown_args = json.loads(call.arguments) if call.arguments.strip() else {}
        except (json.JSONDecodeError, AttributeError):
            shown_args = call.arguments
        self.emit("tool_call", id=call.id, name=call.name, arguments=shown_args)
        t0 = time.perf_counter()
        try:
            result = run_tool(self, call.name, call.arguments)
        except ToolArgumentError as exc:
            result = ToolResult(f"error: {exc}", ok=False)
        except (SessionOver, KeyboardInterrupt):
            raise
        except Exception as exc:  # noqa: BLE001 - a harness fault is survived and reported
            self.emit("error", where=f"tool {call.name}", text=f"{type(exc).__name__}: {exc}")
            result = ToolResult(f"harness error while running {call.name}: {type(exc).__name__}: {exc}", ok=False)
        self.emit("tool_result", id=call.id, name=call.name, ok=result.ok, refused=result.refused,
                  text=result.text, seconds=round(time.perf_counter() - t0, 3))
        return result

    def _fingerprint(self) -> str:
        return hashlib.sha256((self.best.commit + "\n" + wsp.diff_vs_best(self.ws, self.card)).encode()).hexdigest()

    def build_into(self, out_dir: Path) -> BuildResult:
        """Build the working copy into `out_dir`, journaled."""
        res = wsp.build(self.ws, self.card, self.target, out_dir)
        self.emit("build", ok=res.ok, seconds=round(res.seconds, 3), stderr_tail=wsp.tail(res.stderr_tail),
                  errors=res.errors, warnings=res.warnings)
        return res

    def build_current(self) -> tuple[bool, str, bool]:
        """(ok, text, rebuilt): the working copy built into builds/current, reused when unchanged."""
        fp = self._fingerprint()
        if fp == self._built_fp:
            return self._built_ok, ("build ok (unchanged since the last build)" if self._built_ok else self._built_text), False
        res = self.build_into(self.builds / "current")
        self._built_fp, self._built_ok = fp, res.ok
        if res.ok:
            self._built_text = f"build ok ({res.seconds:.1f} s)" + (f"\n{res.warnings}" if res.warnings else "")
        else:
            self._built_text = f"build failed ({res.seconds:.1f} s):\n{res.errors}"
        return res.ok, self._built_text, True

    @property
    def current_lib(self) -> Path:
        return self.builds / "current" / self.card.artifact

    @property
    def best_lib(self) -> Path:
        return self.builds / "best" / self.card.artifact

    def run_tests(self) -> TestResult:
        """cargo test of the working copy; a pass is remembered until the code changes."""
        fp = self._fingerprint()
        if self._tested is not None and self._tested[0] == fp:
            return self._tested[1]
        res = wsp.run_tests(self.ws, self.card, self.target)
        self.emit("tests", ok=res.ok, seconds=round(res.seconds, 3), summary=res.summary,
                  output_tail=wsp.tail(res.output_tail), compiled=res.compiled)
        self._tested = (fp, res)
        return res

    # -- submit: the judge -----------------------------------------------------------------
    def submit(self, message: str) -> ToolResult:
        usage = self.usage()
        if self.budgets.iterations is not None and usage.iterations >= self.budgets.iterations:
            return ToolResult(f"submission not run: the iteration budget ({self.budgets.iterations}) is used up", ok=False)
        self.journal.iteration = usage.submissions + 1
        it = self.journal.iteration
        judge = Judge(self.card, self.ws, self.builds, self.evaluator, self.emit, self.build_current, self.run_tests)
        before = self.best.qps
        decision = judge.submit(message, self.best.commit, before, it)
        if decision.accepted:
            self.best = Best(decision.commit, decision.candidate.qps, decision.candidate.recall10)
        self._last_diff_stat = decision.diff_stat
        self.emit("decision", **decision.journal_fields(), best_qps_before=before, best_qps_after=self.best.qps,
                  message=message)
        facts = self.facts()
        if not decision.accepted and review.review_due(facts, self.card.session.review_every):
            prompt = review.review_prompt(facts.decisions, self.last_profile)
            self.emit("review", text=prompt)
            self._pending_user.append(prompt)
        text = decision_text(decision, it)
        if decision.outcome == FREE_OUTCOME:
            left = (f" ({self.budgets.iterations - self.usage().iterations} left)" if self.budgets.iterations is not None else "")
            text += f"\nThis submission did not spend an iteration of the budget{left}: failing tests are refused before any timing."
        if decision.accepted:
            text += "\nCurrent best: " + prompts.best_text(self.card, self.best.qps, self.best.recall10, self.best.commit)
        return ToolResult(text, ok=decision.accepted)

