"""The agent loop: ask the model, run its tool calls, judge each submission, journal everything.

The keep-or-discard policy in one paragraph: a submission is built, tested and measured
against the current best on held-out queries in interleaved repeats. It is kept (committed on
the session branch, becoming the new best) only when recall@10 stays at or above the floor,
the median QPS gain reaches the margin, the one-sided signed-rank test gives p below the
threshold, and the audit (static diff scan + re-evaluation on fresh queries) is clean.
Anything else is rejected with the reason, and the model's working copy is left as it was.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import shutil
import string
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

from vdbbench.agent import compaction, review
from vdbbench.agent import workspace as wsp
from vdbbench.agent.budget import Budgets, PriceTable, Usage, exceeded, price_table
from vdbbench.agent.evaluator import EvalReport, Evaluator, make_eval_data
from vdbbench.agent.journal import Journal
from vdbbench.agent.judge import Judge, decision_text
from vdbbench.agent.model import Model, ModelFinished, ModelUnavailable, ToolCall
from vdbbench.agent.task import TaskCard, load_task
from vdbbench.agent.tools import TOOL_SCHEMAS, FileTools, ToolArgumentError, ToolResult, parse_arguments

METRICS_TRAILER = "vdbbench-metrics: "
_SOURCE_PROMPTS = Path(__file__).resolve().parents[3] / "agent" / "prompts"


class SessionOver(Exception):
    """Control flow: the session ends, for the reason given."""

    def __init__(self, reason: str):
        super().__init__(reason)
        self.reason = reason


class BudgetStop(SessionOver):
    def __init__(self, which: str, limit: float, used: float):
        super().__init__(f"budget: {which}")
        self.which, self.limit, self.used = which, limit, used


class SessionError(RuntimeError):
    """The session cannot start or resume (the start version does not build, no journal...)."""


def find_prompts(card: TaskCard) -> Path:
    """The prompt templates: <card folder>/../prompts (agent/tasks -> agent/prompts), else the source tree's."""
    near = Path(card.path).parent.parent / "prompts"
    for cand in (near, _SOURCE_PROMPTS):
        if (cand / "system.md").is_file():
            return cand
    raise SessionError(f"no prompt templates found (looked in {near} and {_SOURCE_PROMPTS})")


def render(prompts: Path, template: str, **values) -> str:
    return string.Template((prompts / template).read_text(encoding="utf-8")).safe_substitute(values).strip()


@dataclass
class Best:
    commit: str
    qps: float | None
    recall10: float | None


def _fmt(q: float | None) -> str:
    return "?" if q is None else f"{q:,.0f}"


class Session:
    """One agent session in its run directory: workspace, builds, journal, conversation."""

    def __init__(self, run_dir: Path, card: TaskCard, model: Model, budgets: Budgets,
                 prices: PriceTable | None = None, on_event: Callable[[dict], None] | None = None):
        self.run_dir = run_dir
        self.card = card
        self.model = model
        self.budgets = budgets
        self.prices = prices or price_table()
        self.on_event = on_event
        self.ws = run_dir / "workspace"
        # One cargo target folder per session (incremental builds); tests share one across sessions.
        self.target = Path(os.environ.get("VDBBENCH_AGENT_TARGET_DIR") or run_dir / "target")
        self.builds = run_dir / "builds"
        self.journal = Journal(run_dir / "journal.jsonl")
        self.files = FileTools(self.ws, card)
        self.prompts = find_prompts(card)
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
        self._last_profile: str | None = None
        self._pending_user: list[str] = []
        self._idle = 0

    # -- journal ---------------------------------------------------------------------------
    def emit(self, type: str, **payload) -> dict:
        event = self.journal.append(type, **payload)
        if self.on_event is not None:
            try:
                self.on_event(event)
            except Exception:  # noqa: BLE001 - a display fault never stops the session
                pass
        return event

    def events(self) -> list[dict]:
        return self.journal.events()

    def usage(self) -> Usage:
        return Usage.from_journal(self.events())

    # -- creation and resume ---------------------------------------------------------------
    @classmethod
    def create(cls, card: TaskCard, model: Model, runs_dir: Path, run_id: str | None = None,
               budget_overrides: dict | None = None, prices: PriceTable | None = None,
               on_event: Callable[[dict], None] | None = None) -> "Session":
        run_id = run_id or time.strftime("%Y%m%d-%H%M%S-") + re.sub(r"[^A-Za-z0-9_.-]", "_", card.name)
        run_dir = Path(runs_dir) / run_id
        if run_dir.exists():
            raise SessionError(f"run directory {run_dir} already exists; use `vdbbench agent resume {run_dir}`")
        run_dir.mkdir(parents=True)
        shutil.copy2(card.path, run_dir / "task.toml")
        budgets = Budgets.merged(card.budgets, budget_overrides)
        (run_dir / "session.json").write_text(json.dumps({
            "card_path": card.path, "prompts": str(find_prompts(card)),
            "model": model.name, "base_url": getattr(model, "base_url", None),
            "budget_overrides": budget_overrides or {},
        }, indent=2))
        wsp.create_workspace(card, run_dir / "workspace")
        session = cls(run_dir, card, model, budgets, prices, on_event)
        session._start(resumed=False)
        return session

    @classmethod
    def resume(cls, run_dir: Path, model: Model, budget_overrides: dict | None = None,
               prices: PriceTable | None = None, on_event: Callable[[dict], None] | None = None) -> "Session":
        run_dir = Path(run_dir)
        if not (run_dir / "journal.jsonl").exists() or not (run_dir / "workspace" / ".git").exists():
            raise SessionError(f"{run_dir} is not a session run directory (no journal.jsonl or workspace)")
        meta = json.loads((run_dir / "session.json").read_text())
        card = load_task(run_dir / "task.toml")
        merged = {**meta.get("budget_overrides", {}), **{k: v for k, v in (budget_overrides or {}).items() if v is not None}}
        budgets = Budgets.merged(card.budgets, merged)
        session = cls(run_dir, card, model, budgets, prices, on_event)
        prompts = Path(meta.get("prompts", ""))
        if (prompts / "system.md").is_file():
            session.prompts = prompts
        session._start(resumed=True)
        return session

    def _start(self, resumed: bool) -> None:
        card = self.card
        self.emit("session_start", task={"path": card.path, "card": card.to_dict()}, model=self.model.name,
                  base_url=getattr(self.model, "base_url", None),
                  config={"budgets": self.budgets.as_dict(), "window_tokens": card.session.window_tokens,
                          "margin": card.objective.margin, "repeats": card.objective.repeats,
                          "recall_floor": card.objective.recall_floor, "review_every": card.session.review_every},
                  resumed=resumed)
        self.evaluator = Evaluator(card, make_eval_data(card), self.run_dir)
        if resumed:
            self._restore()
        else:
            self._baseline()
        summary = None
        if resumed:
            summary = compaction.build_state_summary(self.events(), card.to_dict())
        self.messages = [{"role": "system", "content": self._system_prompt()}]
        if summary:
            changed = wsp.diff_vs_best(self.ws, card, stat=True) or "none"
            self.messages.append({"role": "user", "content": summary + "\n\n" + render(self.prompts, "resume.md", changed=changed)})
        else:
            self.messages.append({"role": "user", "content": render(self.prompts, "begin.md")})

    def _system_prompt(self) -> str:
        c = self.card
        build_args = "".join(f", {k}={v!r}" for k, v in c.entry.build_args.items())
        search_args = ", ".join(f"{k}={v!r}" for k, v in c.entry.search_args.items())
        if self.best.qps is not None:
            best = f"{_fmt(self.best.qps)} QPS at recall@10 {self.best.recall10:.4f} (commit {self.best.commit[:12]})."
        else:
            best = "not measured yet."
        if self.best.recall10 is not None and self.best.recall10 < c.objective.recall_floor:
            best += f" NOTE: the current best misses the recall floor ({self.best.recall10:.4f} < {c.objective.recall_floor}); a submission must reach it."
        task = render(
            self.prompts, "task.md", name=c.name, description=c.description,
            editable="\n".join(f"- `{p}`" for p in c.editable), manifest=c.build.manifest,
            module=c.entry.module, cls=c.entry.cls, dim=c.dataset.dim, build_args=build_args,
            search_args=search_args, dataset=c.dataset.name, n=f"{c.dataset.n:,}", metric=c.dataset.metric,
            threads=c.objective.threads, recall_floor=c.objective.recall_floor,
            clock=("process's CPU time (all its threads)" if c.objective.clock_kind == "cpu" else "wall clock"),
            margin_pct=f"{c.objective.margin:.0%}", repeats=c.objective.repeats, p_value=c.objective.p_value,
            tests=(f"`cargo test` of `{c.tests.manifest or c.build.manifest}` must pass" if c.tests.enabled else "none"),
            best=best, hints=(f"## Hints\n{c.hints}" if c.hints else ""),
        )
        return render(self.prompts, "system.md") + "\n\n" + task

    def _baseline(self) -> None:
        """Build the start version as the first best and measure it once."""
        res = self._build_into(self.builds / "best")
        if not res.ok:
            self.emit("error", where="baseline build", text=res.errors)
            raise SessionError(f"the start version does not build:\n{res.errors}")
        head = wsp.head(self.ws)
        (self.builds / "best" / "COMMIT").write_text(head)
        report = self.evaluator.run("heldout", self.builds / "best" / f"{self.card.entry.leaf}.so", None)
        self.emit("evaluation", **report.journal_payload())
        if report.failure:
            raise SessionError(f"the start version fails under the harness: {report.failure.text}")
        self.best = Best(head, report.candidate.qps, report.candidate.recall10)

    def _restore(self) -> None:
        """Best = the session branch's head; a commit the journal missed (crash) is recovered."""
        events = self.events()
        self.journal.iteration = sum(1 for e in events if e.get("type") == "decision")
        head = wsp.head(self.ws)
        accepted = [e for e in events if e.get("type") == "decision" and e.get("outcome") == "accepted"]
        known = {e.get("commit") for e in accepted}
        baseline = next((e for e in events if e.get("type") == "evaluation" and e.get("best") is None
                         and e.get("iteration") == 0 and e.get("candidate")), None)
        if head not in known and head != wsp.start_commit(self.ws):
            msg = wsp.git(self.ws, "log", "-1", "--format=%B", head)
            metrics = {}
            for line in msg.splitlines():
                if line.startswith(METRICS_TRAILER):
                    metrics = json.loads(line[len(METRICS_TRAILER):])
            self.journal.iteration += 1
            self.emit("error", where="resume", text=f"commit {head[:12]} was accepted but its decision was not journaled (crash); recovered from the commit")
            self.emit("decision", outcome="accepted", qps=metrics.get("qps"), recall10=metrics.get("recall10"),
                      best_qps_before=metrics.get("best_qps_before"), best_qps_after=metrics.get("qps"), commit=head,
                      message=metrics.get("message", ""), reason="recovered from the workspace history after a crash",
                      diff_stat="")
            accepted.append({"commit": head, "qps": metrics.get("qps"), "recall10": metrics.get("recall10")})
        if accepted:
            last = accepted[-1]
            self.best = Best(head, last.get("qps"), last.get("recall10"))
        elif baseline:
            self.best = Best(head, baseline["candidate"]["qps"], baseline["candidate"]["recall10"])
        else:
            self.best = Best(head, None, None)
        marker = self.builds / "best" / "COMMIT"
        lib = self.builds / "best" / f"{self.card.entry.leaf}.so"
        if not (lib.exists() and marker.exists() and marker.read_text().strip() == head):
            src = self.run_dir / "best-src"
            wsp.export_tree(self.ws, head, src)
            res = wsp.build(src, self.card, self.target, self.builds / "best")
            self.emit("build", ok=res.ok, seconds=round(res.seconds, 3), stderr_tail=res.stderr_tail[-1500:], what="best (resume)")
            if not res.ok:
                raise SessionError(f"the best commit {head[:12]} no longer builds:\n{res.errors}")
            marker.write_text(head)
        if self.best.qps is None:
            self._baseline_measure_only()

    def _baseline_measure_only(self) -> None:
        report = self.evaluator.run("heldout", self.builds / "best" / f"{self.card.entry.leaf}.so", None)
        self.emit("evaluation", **report.journal_payload())
        if report.candidate:
            self.best = Best(self.best.commit, report.candidate.qps, report.candidate.recall10)

    # -- the loop --------------------------------------------------------------------------
    def run(self) -> dict:
        reason = "finished"
        try:
            while True:
                self.step()
        except BudgetStop as stop:
            self.emit("budget_stop", which=stop.which, limit=stop.limit, used=stop.used)
            reason = stop.reason
        except SessionOver as over:
            reason = over.reason
        except ModelFinished:
            reason = "model_finished"
        except KeyboardInterrupt:
            self._end("interrupted")
            raise
        return self._end(reason)

    def _end(self, reason: str) -> dict:
        u = self.usage()
        event = self.emit("session_end", reason=reason,
                          best={"commit": self.best.commit, "qps": self.best.qps, "recall10": self.best.recall10},
                          totals={"tool_calls": u.tool_calls, "tokens": u.tokens, "cost_usd": round(u.cost_usd, 6),
                                  "wall_s": round(u.wall_s, 3), "submissions": u.submissions})
        self.journal.close()
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
            self.messages.append({"role": "user", "content": render(self.prompts, "nudge.md", left=left)})
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
            args = parse_arguments(call.name, call.arguments)
            result = self._dispatch(call.name, args)
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

    def _dispatch(self, name: str, args: dict) -> ToolResult:
        if name in ("list_files", "read_file", "write_file", "edit_file"):
            return getattr(self.files, name)(**args)
        return getattr(self, f"tool_{name}")(**args)

    def _fingerprint(self) -> str:
        return hashlib.sha256((self.best.commit + "\n" + wsp.diff_vs_best(self.ws, self.card)).encode()).hexdigest()

    def _build_into(self, out_dir: Path):
        res = wsp.build(self.ws, self.card, self.target, out_dir)
        self.emit("build", ok=res.ok, seconds=round(res.seconds, 3), stderr_tail=res.stderr_tail[-1500:],
                  errors=res.errors)
        return res

    def _build_current(self) -> tuple[bool, str, bool]:
        """(ok, text, rebuilt): the working copy built into builds/current, reused when unchanged."""
        fp = self._fingerprint()
        if fp == self._built_fp:
            return self._built_ok, ("build ok (unchanged since the last build)" if self._built_ok else self._built_text), False
        res = self._build_into(self.builds / "current")
        self._built_fp, self._built_ok = fp, res.ok
        self._built_text = f"build ok ({res.seconds:.1f} s)" if res.ok else f"build failed ({res.seconds:.1f} s):\n{res.errors}"
        return res.ok, self._built_text, True

    @property
    def _current_lib(self) -> Path:
        return self.builds / "current" / f"{self.card.entry.leaf}.so"

    @property
    def _best_lib(self) -> Path:
        return self.builds / "best" / f"{self.card.entry.leaf}.so"

    def tool_build(self) -> ToolResult:
        ok, text, _ = self._build_current()
        return ToolResult(text, ok=ok)

    def _run_tests(self):
        """cargo test of the working copy; a pass is remembered until the code changes."""
        fp = self._fingerprint()
        if self._tested is not None and self._tested[0] == fp:
            return self._tested[1]
        res = wsp.run_tests(self.ws, self.card, self.target)
        self.emit("tests", ok=res.ok, seconds=round(res.seconds, 3), summary=res.summary, output_tail=res.output_tail[-1500:])
        self._tested = (fp, res)
        return res

    def tool_run_tests(self) -> ToolResult:
        if not self.card.tests.enabled:
            return ToolResult("this task has no Rust tests; build and benchmark instead")
        res = self._run_tests()
        if res.ok:
            return ToolResult(f"tests passed ({res.seconds:.1f} s): {res.summary}")
        return ToolResult(f"tests FAILED ({res.seconds:.1f} s): {res.summary}\n{res.failures}", ok=False)

    def _compare_text(self, report: EvalReport, what: str) -> str:
        c, b = report.candidate, report.best
        floor = self.card.objective.recall_floor
        lines = [f"{what}: your working copy {_fmt(c.qps)} QPS, recall@10 {c.recall10:.4f} "
                 f"({'meets' if c.recall10 >= floor else 'MISSES'} the floor {floor})"]
        if b is not None:
            lines.append(f"current best measured in the same run: {_fmt(b.qps)} QPS, recall@10 {b.recall10:.4f}; "
                         f"median gain {report.gain:+.1%} (p={report.p_value if report.p_value is not None else float('nan'):.3f}; "
                         f"the margin to beat is {self.card.objective.margin:.0%})")
        lines.append(f"per-repeat QPS: yours {', '.join(_fmt(q) for q in c.qps_samples)}"
                     + (f"; best {', '.join(_fmt(q) for q in b.qps_samples)}" if b else ""))
        lines.append(f"QPS timed on the {c.clock} clock" + (f" (wall-clock QPS {_fmt(c.wall_qps)})" if c.clock != "wall" else "")
                     + f"; index build: train {c.train_s:.3f} s, add {c.add_s:.3f} s")
        return "\n".join(lines)

    def tool_benchmark(self) -> ToolResult:
        ok, text, _ = self._build_current()
        if not ok:
            return ToolResult(f"cannot benchmark: {text}", ok=False)
        report = self.evaluator.run("dev", self._current_lib, self._best_lib)
        self.emit("evaluation", **report.journal_payload())
        if report.failure:
            return ToolResult(f"benchmark failed ({report.failure.outcome}): {report.failure.text}", ok=False)
        if report.best_failure:
            return ToolResult(f"the best build failed under the harness ({report.best_failure.text}); yours:\n"
                              + self._compare_text(EvalReport("dev", report.candidate, None, None, None), "dev queries"), ok=False)
        return ToolResult(self._compare_text(report, "dev queries"))

    def tool_profile(self) -> ToolResult:
        ok, text, _ = self._build_current()
        if not ok:
            return ToolResult(f"cannot profile: {text}", ok=False)
        report = self.evaluator.run("dev", self._current_lib, None, stats=True)
        if report.failure:
            return ToolResult(f"profile failed ({report.failure.outcome}): {report.failure.text}", ok=False)
        c = report.candidate
        head = f"one search of {len(self.evaluator.data.dev.queries) // max(1, c.repeats)} dev queries: {_fmt(c.qps)} QPS, {c.p50_ms:.4f} ms/query"
        if c.stats:
            flat = dict(_flatten(c.stats))
            wall = flat.get("wall_s") or sum(v for k, v in flat.items() if k.endswith("_s") and isinstance(v, (int, float)))
            rows = []
            for k, v in flat.items():
                share = ""
                if k.endswith("_s") and k != "wall_s" and isinstance(v, (int, float)) and wall:
                    share = f"  ({100 * v / wall:.1f}% of the search)"
                rows.append(f"  {k}: {v}{share}")
            body = "\n".join(rows)
            text = f"{head}\nlast_search_stats():\n{body}"
        else:
            text = (f"{head}\nthis engine has no last_search_stats(); add per-stage counters and seconds to it "
                    "if you want a breakdown (routing, prescore, rerank, top-k)")
        self._last_profile = text
        return ToolResult(text)

    def tool_revert_to_best(self) -> ToolResult:
        wsp.revert_to_best(self.ws, self.card)
        return ToolResult(f"the editable files are back at the best version (commit {self.best.commit[:12]})")

    def tool_note(self, text: str) -> ToolResult:
        self.emit("note", text=text)
        return ToolResult("noted")

    # -- submit: the judge -----------------------------------------------------------------
    def tool_submit(self, message: str) -> ToolResult:
        used = self.usage().submissions
        if self.budgets.iterations is not None and used >= self.budgets.iterations:
            return ToolResult(f"submission not run: the iteration budget ({self.budgets.iterations}) is used up", ok=False)
        self.journal.iteration = used + 1
        it = self.journal.iteration
        judge = Judge(self.card, self.ws, self.builds, self.evaluator, self.emit, self._build_current, self._run_tests)
        before = self.best.qps
        decision = judge.submit(message, self.best.commit, before, it)
        if decision.accepted:
            self.best = Best(decision.commit, decision.candidate.qps, decision.candidate.recall10)
        self._last_diff_stat = decision.diff_stat
        self.emit("decision", **decision.journal_fields(), best_qps_before=before, best_qps_after=self.best.qps,
                  message=message)
        if not decision.accepted and review.should_review(self.events(), self.card.session.review_every):
            prompt = review.review_prompt(self.events(), self._last_profile)
            self.emit("review", text=prompt)
            self._pending_user.append(prompt)
        return ToolResult(decision_text(decision, it), ok=decision.accepted)


def _flatten(d, prefix=""):
    for k, v in d.items():
        if isinstance(v, dict):
            yield from _flatten(v, f"{prefix}{k}.")
        else:
            yield f"{prefix}{k}", v
