"""The model's tools in one table: each tool's JSON schema beside the code that runs it. File
tools act on the session workspace (FileTools); harness tools build, test, measure and judge
through the session's public side (session_api.SessionApi; `submit` is the session's judge)."""

from __future__ import annotations

import json
import math
import os
import re
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

import numpy as np

from vdbbench.agent.core import workspace as wsp
from vdbbench.agent.core.task import TaskCard
from vdbbench.agent.core.workspace import PathRefused, resolve_path
from vdbbench.agent.evaluation import index_cache
from vdbbench.agent.evaluation.candidate import WorkerDied
from vdbbench.agent.evaluation.eval_report import EvalReport, fmt_qps
from vdbbench.agent.evaluation.judge import SequentialTest, robust_spread, short_of_margin
from vdbbench.agent.evaluation.machine_load import load_text
from vdbbench.agent.session import profiling
from vdbbench.agent.session.session_api import SessionApi as Session

MAX_READ_LINES = 400
MAX_READ_CHARS = 40_000
MAX_LIST = 400
MAX_SEARCH_HITS = 100  # lines a `search` shows
MAX_SEARCH_CHARS = 12_000
MAX_SEARCH_LINE = 200  # characters of one matching line shown
BENCHMARK_SECONDS = 20  # default: how long `benchmark` adds pairs after its first ones
BENCHMARK_MAX_SECONDS = 120
CHECK_SECONDS = 10  # `check`'s short paired benchmark: pairs added for at most this long
_SKIP_DIRS = {".git", "target", "__pycache__"}
_JSON_TYPES = {"string": (str,), "integer": (int,), "boolean": (bool,)}


def _fn(name: str, description: str, properties: dict | None = None, required: list[str] | None = None) -> dict:
    return {
        "type": "function",
        "function": {
            "name": name,
            "description": description,
            "parameters": {"type": "object", "properties": properties or {}, "required": required or [],
                           "additionalProperties": False},
        },
    }


@dataclass
class ToolResult:
    text: str
    ok: bool = True
    refused: bool = False


class ToolArgumentError(ValueError):
    """Arguments that do not fit the tool's schema; the message tells the model what was expected."""


def parse_arguments(name: str, raw: str | dict | None) -> dict:
    """The tool call's arguments as a dict, checked against the schema (names, types, required)."""
    schema = next((t["function"]["parameters"] for t in TOOL_SCHEMAS if t["function"]["name"] == name), None)
    if schema is None:
        raise ToolArgumentError(f"unknown tool {name!r}; the tools are: {', '.join(TOOL_NAMES)}")
    if raw is None or (isinstance(raw, str) and raw.strip() == ""):
        args: object = {}
    elif isinstance(raw, dict):
        args = raw
    else:
        try:
            args = json.loads(raw)
        except json.JSONDecodeError as exc:
            raise ToolArgumentError(f"the arguments of {name} are not valid JSON ({exc.msg} at character {exc.pos}); send a JSON object such as {_example(name)}") from None
    if not isinstance(args, dict):
        raise ToolArgumentError(f"the arguments of {name} must be a JSON object, got {type(args).__name__}; e.g. {_example(name)}")
    props = schema["properties"]
    unknown = set(args) - set(props)
    if unknown:
        raise ToolArgumentError(f"{name} has no argument(s) {', '.join(sorted(unknown))}; it takes: {', '.join(props) or 'nothing'}")
    missing = [r for r in schema["required"] if r not in args]
    if missing:
        raise ToolArgumentError(f"{name} needs the argument(s) {', '.join(missing)}; e.g. {_example(name)}")
    for key, value in args.items():
        want = props[key]["type"]
        ok = isinstance(value, _JSON_TYPES[want]) and (want == "boolean" or not isinstance(value, bool))
        if not ok:
            raise ToolArgumentError(f"{name}: argument {key!r} must be a {want}, got {type(value).__name__}")
        low = props[key].get("minimum")
        if low is not None and value < low:
            raise ToolArgumentError(f"{name}: argument {key!r} must be >= {low}, got {value}")
    return args


def _example(name: str) -> str:
    schema = next(t["function"]["parameters"] for t in TOOL_SCHEMAS if t["function"]["name"] == name)
    sample = {"string": "...", "integer": 1, "boolean": True}
    return json.dumps({k: sample[v["type"]] for k, v in schema["properties"].items() if k in schema["required"]})


class FileTools:
    """list/read/write/edit inside the workspace, through the path guard."""

    def __init__(self, ws: Path, card: TaskCard):
        self.ws = ws
        self.card = card

    def _existing(self, path: str) -> Path | ToolResult:
        """`path` inside the workspace and present, or the refusal to hand back to the model."""
        try:
            root = resolve_path(self.ws, self.card, path, for_write=False)
        except PathRefused as exc:
            return ToolResult(str(exc), ok=False, refused=True)
        if not root.exists():
            return ToolResult(f"{path!r} does not exist in the workspace", ok=False)
        return root

    def list_files(self, path: str = ".") -> ToolResult:
        root = self._existing(path)
        if isinstance(root, ToolResult):
            return root
        if root.is_file():
            return ToolResult(self._entry(root))
        lines = []
        for dirpath, dirnames, filenames in os.walk(root):
            dirnames[:] = sorted(d for d in dirnames if d not in _SKIP_DIRS and not os.path.islink(os.path.join(dirpath, d)))
            for f in sorted(filenames):
                lines.append(self._entry(Path(dirpath) / f))
                if len(lines) >= MAX_LIST:
                    lines.append(f"... (listing cut at {MAX_LIST} files; list a sub-folder)")
                    return ToolResult("\n".join(lines))
        return ToolResult("\n".join(lines) if lines else f"{path!r} is empty")

    def _entry(self, p: Path) -> str:
        rel = p.relative_to(self.ws).as_posix()
        mark = "*" if self.card.is_editable(rel) else " "
        size = p.stat().st_size if p.exists() and not p.is_symlink() else 0
        return f"{mark} {rel} ({size} bytes)"

    def read_file(self, path: str, start_line: int | None = None, end_line: int | None = None) -> ToolResult:
        try:
            p = resolve_path(self.ws, self.card, path, for_write=False)
        except PathRefused as exc:
            return ToolResult(str(exc), ok=False, refused=True)
        if not p.is_file():
            return ToolResult(f"{path!r} is not a file in the workspace (use list_files to see what exists)", ok=False)
        try:
            text = p.read_text(encoding="utf-8")
        except UnicodeDecodeError:
            return ToolResult(f"{path!r} is not a UTF-8 text file", ok=False)
        lines = text.splitlines()
        n = len(lines)
        start = max(1, start_line or 1)
        end = min(n, end_line or (start + MAX_READ_LINES - 1), start + MAX_READ_LINES - 1)
        if n and start > n:
            return ToolResult(f"{path!r} has {n} lines; start_line {start} is past the end", ok=False)
        width = len(str(end))
        body, used = [], 0
        for i in range(start, end + 1):
            row = f"{i:>{width}}| {lines[i - 1]}"
            used += len(row) + 1
            if used > MAX_READ_CHARS:
                end = i - 1
                break
            body.append(row)
        head = f"{path} (lines {start}-{end} of {n}{'; editable' if self.card.is_editable(p.relative_to(self.ws).as_posix()) else '; read-only'})"
        more = f"\n... {n - end} more lines: read_file with start_line={end + 1}" if end < n else ""
        return ToolResult(head + "\n" + "\n".join(body) + more)

    def search(self, pattern: str, path: str | None = None, regex: bool = False, ignore_case: bool = False) -> ToolResult:
        """Lines matching `pattern` (literal, or a Python regular expression) as `file:line: text`,
        over the editable files (or the files under `path`), capped."""
        if pattern == "":
            return ToolResult("`pattern` is empty; give the text (or regular expression) to look for", ok=False)
        try:
            rx = re.compile(pattern if regex else re.escape(pattern), re.IGNORECASE if ignore_case else 0)
        except re.error as exc:
            return ToolResult(f"{pattern!r} is not a valid regular expression ({exc}); pass regex=false to search for it literally", ok=False)
        if path:
            root = self._existing(path)
            if isinstance(root, ToolResult):
                return root
            files = [root] if root.is_file() else list(self._walk(root))
        else:
            files = [f for f in self._walk(self.ws) if self.card.is_editable(f.relative_to(self.ws).as_posix())]
        hits, used, more, more_files, searched = [], 0, 0, set(), 0
        for f in files:
            try:
                text = f.read_text(encoding="utf-8")
            except (UnicodeDecodeError, OSError):
                continue  # binary or unreadable: not source
            searched += 1
            rel = f.relative_to(self.ws).as_posix()
            for i, line in enumerate(text.splitlines(), 1):
                if not rx.search(line):
                    continue
                shown = line.strip()
                shown = shown if len(shown) <= MAX_SEARCH_LINE else shown[:MAX_SEARCH_LINE] + " ..."
                row = f"{rel}:{i}: {shown}"
                if len(hits) < MAX_SEARCH_HITS and used + len(row) + 1 <= MAX_SEARCH_CHARS:
                    hits.append(row)
                    used += len(row) + 1
                else:
                    more += 1
                    more_files.add(rel)
        where = f"under {path!r}" if path else "in the editable files"
        if not hits:
            return ToolResult(f"no match for {pattern!r} {where} ({searched} files searched)")
        tail = (f"\n... and {more} more matching lines in {len(more_files)} file(s): narrow the pattern or the path"
                if more else "")
        return ToolResult("\n".join(hits) + tail)

    def _walk(self, root: Path):
        for dirpath, dirnames, filenames in os.walk(root):
            dirnames[:] = sorted(d for d in dirnames if d not in _SKIP_DIRS and not os.path.islink(os.path.join(dirpath, d)))
            for name in sorted(filenames):
                f = Path(dirpath) / name
                if not f.is_symlink():
                    yield f

    def write_file(self, path: str, content: str) -> ToolResult:
        try:
            p = resolve_path(self.ws, self.card, path, for_write=True)
        except PathRefused as exc:
            return ToolResult(str(exc), ok=False, refused=True)
        if p.is_dir():
            return ToolResult(f"{path!r} is a folder", ok=False)
        p.parent.mkdir(parents=True, exist_ok=True)
        # The guard checked every existing component; a freshly made parent is a plain folder.
        existed = p.exists()
        failed = _write_whole(p, content, path)
        if failed is not None:
            return failed
        return ToolResult(f"{'overwrote' if existed else 'created'} {path} ({len(content.splitlines())} lines)")

    def edit_file(self, path: str, old: str, new: str) -> ToolResult:
        try:
            p = resolve_path(self.ws, self.card, path, for_write=True)
        except PathRefused as exc:
            return ToolResult(str(exc), ok=False, refused=True)
        if not p.is_file():
            return ToolResult(f"{path!r} does not exist; use write_file to create it", ok=False)
        text = p.read_text(encoding="utf-8")
        if old == "":
            return ToolResult("`old` is empty; give the exact text to replace (or use write_file)", ok=False)
        count = text.count(old)
        if count == 0:
            hint = ""
            if old.strip() and text.count(old.strip()) == 1:
                hint = " (it does occur once without its leading/trailing whitespace: copy the exact text)"
            return ToolResult(f"edit not applied: `old` was not found in {path} (0 matches){hint}; read the file and copy the text exactly, including indentation", ok=False)
        if count > 1:
            return ToolResult(f"edit not applied: `old` occurs {count} times in {path}; include more surrounding lines so it matches exactly once", ok=False)
        at = text.index(old)
        updated = text[:at] + new + text[at + len(old):]
        failed = _write_whole(p, updated, path)
        if failed is not None:
            return failed
        first = text[:at].count("\n") + 1
        lines = updated.splitlines()
        last = first + new.count("\n")
        lo, hi = max(1, first - 2), min(len(lines), last + 2)
        snippet = "\n".join(f"{i}| {lines[i - 1]}" for i in range(lo, hi + 1))
        return ToolResult(f"edited {path} at line {first}:\n{snippet}")


def _write_whole(p: Path, text: str, shown: str) -> ToolResult | None:
    """Write `text` to `p` whole or not at all (a temporary file renamed over it): a full disk
    must not leave the model's file truncated. None when written, else the result to return."""
    tmp = p.with_name(f".{p.name}.vdbbench-write")
    try:
        with open(tmp, "w", encoding="utf-8") as fh:
            fh.write(text)
            fh.flush()
            os.fsync(fh.fileno())
        if p.exists():
            os.chmod(tmp, p.stat().st_mode & 0o7777)
        os.replace(tmp, p)
    except OSError as exc:
        try:
            tmp.unlink(missing_ok=True)
        except OSError:
            pass
        return ToolResult(f"write not applied: {exc.strerror or exc} while writing {shown}; the file is unchanged "
                          "(the harness's disk may be full)", ok=False)
    return None


# -- harness tools: they act through the session ----------------------------------------------

def build(s: Session) -> ToolResult:
    ok, text, _ = s.build_current()
    return ToolResult(text, ok=ok)


def run_tests(s: Session) -> ToolResult:
    if not s.card.tests.enabled:
        return ToolResult("this task has no Rust tests; build and benchmark instead")
    res = s.run_tests()
    if res.ok:
        return ToolResult(f"tests passed ({res.seconds:.1f} s): {res.summary}")
    if not res.compiled:
        return ToolResult(f"build FAILED: the crate or its tests did not compile, so no test ran ({res.seconds:.1f} s):\n"
                          f"{res.failures}", ok=False)
    return ToolResult(f"tests FAILED ({res.seconds:.1f} s): {res.summary}\n{res.failures}", ok=False)


def _overrides(nprobe: int | None, rerank: int | None) -> dict:
    return {k: v for k, v in (("nprobe", nprobe), ("rerank", rerank)) if v is not None}


def _pct(x: float) -> str:
    return f"{x:+.1%}"


def benchmark_stop(test: SequentialTest, log_ratios) -> str | None:
    """Why `benchmark` can stop adding pairs, or None: the judge's interval of the gain is clear of
    zero, or lies within +-margin (no gain worth submitting, no loss to fear)."""
    if len(log_ratios) < 2:
        return None
    _, lo, hi = test.bounds(log_ratios)
    if lo > 0 or hi < 0:
        return "its interval is clear of zero"
    target = math.log1p(test.margin)
    if -target < lo and hi < target:
        return f"its interval lies within +-{test.margin:.0%} (the margin)"
    return None


def compare_text(s: Session, report: EvalReport, what: str, overrides: dict | None = None, why: str = "") -> str:
    """A dev-split measurement as the model reads it, every figure on the judged clock: both QPS, the
    gain with its interval, the per-pair gains it comes from, and what the judge's rule says."""
    c, b = report.candidate, report.best
    floor = s.card.objective.recall_floor
    clock = "process CPU time" if c.clock == "cpu" else "wall clock"
    args = (" with " + ", ".join(f"{k}={v}" for k, v in overrides.items()) + " (the best keeps the card's search arguments)"
            if overrides else "")
    lines = [f"{what}: {c.batch:,} queries per search call, every figure on the {c.clock} clock ({clock})",
             f"your working copy{args}: {fmt_qps(c.qps)} QPS, recall@10 {c.recall10:.4f} "
             f"({'meets' if c.recall10 >= floor else 'MISSES'} the floor {floor})"]
    if b is not None and report.log_ratios:
        test = SequentialTest.for_card(s.card)
        d = report.log_ratios
        m, lo, hi = test.bounds(d)
        level = 1 - 2 * test.alpha_look
        lines.append(f"current best, timed in turns with it: {fmt_qps(b.qps)} QPS, recall@10 {b.recall10:.4f}")
        interval = (f"interval {_pct(math.expm1(lo))} .. {_pct(math.expm1(hi))} ({level:.0%}, the judge's bound per look)"
                    if len(d) > 1 else "no interval from one pair")
        stopped = why or {"cap": "the pair cap was reached", "recall": "recall fell under the floor"}.get(report.stopped, "")
        lines.append(f"gain {_pct(report.gain)} over {len(d)} interleaved pairs, {interval}"
                     + (f"; stopped: {stopped}" if stopped else ""))
        lines.append("per-pair gains: " + ", ".join(_pct(math.expm1(x)) for x in d))
        loaded = bool((report.load or {}).get("loaded"))
        verdict = test.decide(d, loaded)
        if len(d) < test.min_pairs:
            judged = f"too few pairs for the judge's rule (it times at least {test.min_pairs})"
        elif verdict == "accept":
            judged = "these pairs would pass the judge's rule"
        elif verdict == "reject":
            judged = f"these pairs would fail the judge's rule: {short_of_margin(test, d, loaded)}"
        else:
            judged = f"the judge would still be undecided on these pairs ({short_of_margin(test, d, loaded)})"
        lines.append(f"{judged}; a submission is judged the same way on held-out queries you never see")
    lines.append(noise_text(report.log_ratios, report.load))
    return "\n".join(lines)


def noise_text(log_ratios, load: dict | None) -> str:
    """How far a timing can be trusted: the machine's load while it ran, and the spread of its pairs."""
    text = f"timing conditions: {load_text(load)}"
    if log_ratios and len(log_ratios) > 1:
        sd = float(np.std(log_ratios, ddof=1))
        text += (f"; measured noise: per-pair spread {sd:.1%} (robust {robust_spread(log_ratios):.1%}), pair ratios "
                 f"{math.exp(min(log_ratios)):.3f} .. {math.exp(max(log_ratios)):.3f}")
    return text


def _index_caches(s: Session, rebuild: bool, with_best: bool = True) -> tuple[index_cache.CacheKey | None, dict | None]:
    """The working copy's index key and the index files of candidate (and best, when its process is
    not kept) for this benchmark; (None, None) when the card names no index-shaping files."""
    dataset = s.evaluator.data.dataset
    key = index_cache.working_key(s.ws, s.card, dataset)
    if key is None:
        return None, None
    cache = index_cache.IndexCache(s.run_dir)
    if rebuild:
        cache.path(key).unlink(missing_ok=True)
    files = {"candidate": cache.path(key)}
    if with_best and not s.card.limits.keep_best_worker:
        best = index_cache.commit_key(s.ws, s.card, dataset, s.best.commit)
        if best is not None:
            files["best"] = cache.path(best)
    return key, files


def benchmark(s: Session, nprobe: int | None = None, rerank: int | None = None,
              max_seconds: int | None = None, rebuild: bool = False) -> ToolResult:
    """Working copy against the best on the dev queries, in interleaved pairs added (after the
    card's `dev_repeats`) until the gain's interval is clear of zero or within the margin, or the
    time cap. The trained index is reused while no index-shaping file changed (index_cache)."""
    ok, text, _ = s.build_current()
    if not ok:
        return ToolResult(f"cannot benchmark: {text}", ok=False)
    overrides = _overrides(nprobe, rerank)
    cap = min(max(1, max_seconds or BENCHMARK_SECONDS), BENCHMARK_MAX_SECONDS)
    test = SequentialTest.for_card(s.card)
    why: list[str] = []
    started: list[float] = []

    def stop(log_ratios) -> bool:
        if not started:
            started.append(time.monotonic())
        reason = benchmark_stop(test, log_ratios)
        if reason is None and time.monotonic() - started[0] >= cap:
            reason = f"the {cap} s time cap"
        if reason:
            why.append(reason)
        return reason is not None

    key, caches = _index_caches(s, rebuild)
    report = s.evaluator.run("dev", s.current_lib, s.best_lib, stop=stop, search_args=overrides or None, caches=caches)
    loaded = s.evaluator.loaded.get("candidate", {})
    how = loaded.get("cache") if caches else None
    if caches:
        index_cache.IndexCache(s.run_dir).prune(keep=3)
    s.emit("evaluation", **report.journal_payload(), tool="benchmark", search_args=overrides or None,
           index_cache=how, index_key=key.key if key else None)
    index_line = index_cache.cache_text(key, how, s.card, loaded)
    if report.failure:
        return ToolResult(f"benchmark failed ({report.failure.outcome}): {report.failure.text}", ok=False)
    if report.best_failure:
        return ToolResult(f"the best build failed under the harness ({report.best_failure.text}); yours:\n"
                          + compare_text(s, EvalReport("dev", report.candidate, None, None, None, load=report.load),
                                         "dev queries", overrides) + "\n" + index_line, ok=False)
    return ToolResult(compare_text(s, report, "dev queries", overrides, why[-1] if why else "") + "\n" + index_line)


def check(s: Session) -> ToolResult:
    """What a submission of the working copy would meet, without spending an iteration: the build,
    the tests, and a short paired benchmark against the best."""
    ok, text, _ = s.build_current()
    if not ok:
        return ToolResult("check: the build FAILS, so a submission now would be rejected as build_failed and spend an "
                          f"iteration:\n{text}", ok=False)
    lines = [f"check: {text.splitlines()[0]}"]
    if s.card.tests.enabled:
        res = s.run_tests()
        if not res.ok:
            what = "do not compile" if not res.compiled else f"FAIL: {res.summary}"
            return ToolResult("\n".join(lines) + f"\ntests {what} ({res.seconds:.1f} s), so a submission now would be "
                              f"refused (that does not spend an iteration):\n{res.failures}", ok=False)
        lines.append(f"tests passed ({res.seconds:.1f} s): {res.summary}")
    else:
        lines.append("tests: this task has none")
    if wsp.is_clean(s.ws, s.card):
        lines.append("no change against the best: a submission now would be rejected as no_change")
        return ToolResult("\n".join(lines))
    bench = benchmark(s, max_seconds=CHECK_SECONDS)
    lines.append(f"short benchmark (at most {CHECK_SECONDS} s of added pairs; `benchmark` times longer):\n{bench.text}")
    return ToolResult("\n".join(lines), ok=bench.ok)


def profile(s: Session, nprobe: int | None = None, rerank: int | None = None, perf: bool = True) -> ToolResult:
    """Timed dev searches of the working copy in one process: QPS, every field of the last call's
    last_search_stats(), and perf samples of the same process where the machine has perf."""
    served = s.card.evaluation.served
    if served and (nprobe is not None or rerank is not None):
        return ToolResult("this task's engine is a server: its search settings are in your code, not arguments", ok=False)
    ok, text, _ = s.build_current()
    if not ok:
        return ToolResult(f"cannot profile: {text}", ok=False)
    overrides = _overrides(nprobe, rerank)
    queries = s.evaluator.data.dev.queries[s.evaluator.slices("dev")[0]]
    key, caches = (None, None) if served else _index_caches(s, False, with_best=False)
    try:
        proc = s.evaluator.spawn(s.current_lib, "profile", time.monotonic() + s.card.limits.eval_timeout_s) if served else None
        p = profiling.run_profile(s.current_lib, s.card, s.evaluator.data.base, queries, s.evaluator.logs,
                                  overrides or None, perf="perf" if perf else None,
                                  cache=(caches or {}).get("candidate"), proc=proc)
    except WorkerDied as exc:
        return ToolResult(f"profile failed ({exc.outcome}): {exc.text}", ok=False)
    if served:
        ev = s.card.evaluation
        text = (f"your server on the dev queries, {ev.clients} clients, one query per request: {p.repeats} timed repeats "
                f"({p.queries_timed:,} queries timed): {fmt_qps(p.qps)} QPS, {p.ms_per_query:.4f} ms/query on the wall clock; "
                f"the server process's own CPU time {p.cpu_ms_per_query:.4f} ms/query (all its threads: parsing, "
                f"search, answering)\ntiming conditions: {load_text(p.load)}"
                + (f"; measured noise: spread of the repeats' QPS {p.spread:.1%}" if p.spread is not None else "")
                + f"\nloading: {p.loaded.get('add_s', 0):.1f} s inserting the base, {p.loaded.get('train_s', 0):.1f} s of "
                  f"warm-up (an index built on the first search included)"
                + (f"\n{p.perf}" if p.perf else "\nperf sampling: not asked for"))
        s.last_profile = text
        return ToolResult(text)
    args = (" with " + ", ".join(f"{k}={v}" for k, v in overrides.items())) if overrides else ""
    text = (f"your working copy{args} on the dev queries: {p.repeats} timed repeats of search calls of {p.batch:,} "
            f"queries each ({p.queries_timed:,} queries timed): {fmt_qps(p.qps)} QPS, {p.ms_per_query:.4f} ms/query on "
            f"the {p.clock} clock\ntiming conditions: {load_text(p.load)}"
            + (f"; measured noise: spread of the repeats' QPS {p.spread:.1%}" if p.spread is not None else "")
            + f"\n{index_cache.cache_text(key, (p.loaded or {}).get('cache') if key else None, s.card, p.loaded or {})}"
            f"\nlast_search_stats() of the last call (one search of {p.batch:,} queries):\n"
            + profiling.stats_text(p.stats) + (f"\n{p.perf}" if p.perf else ""))
    s.last_profile = text
    return ToolResult(text)


def revert_to_best(s: Session) -> ToolResult:
    wsp.revert_to_best(s.ws, s.card)
    return ToolResult(f"the editable files are back at the best version (commit {s.best.commit[:12]})")


def note(s: Session, text: str) -> ToolResult:
    s.emit("note", text=text)
    return ToolResult("noted")


# -- the table ----------------------------------------------------------------------------------

@dataclass(frozen=True)
class Tool:
    name: str
    description: str
    run: Callable[..., ToolResult]  # run(session, **arguments)
    properties: dict | None = None
    required: tuple[str, ...] = ()

    @property
    def schema(self) -> dict:
        return {"type": "function", "function": {
            "name": self.name, "description": self.description,
            "parameters": {"type": "object", "properties": self.properties or {}, "required": list(self.required),
                           "additionalProperties": False}}}


_PATH = {"type": "string", "description": "path relative to the workspace root"}
_SEARCH_ARGS = {
    "nprobe": {"type": "integer", "minimum": 1, "description": "search with this nprobe instead of the card's (no rebuild)"},
    "rerank": {"type": "integer", "minimum": 0, "description": "search with this rerank instead of the card's (no rebuild)"},
}


def _files(s: Session) -> FileTools:
    return FileTools(s.ws, s.card)


TOOLS: dict[str, Tool] = {t.name: t for t in (
    Tool("list_files", "List the files under a folder of the workspace; editable ones are marked with '*'.",
         lambda s, **a: _files(s).list_files(**a), {"path": {**_PATH, "default": "."}}),
    Tool("read_file", "Read a text file with line numbers (at most 400 lines per call).",
         lambda s, **a: _files(s).read_file(**a),
         {"path": _PATH, "start_line": {"type": "integer", "minimum": 1}, "end_line": {"type": "integer", "minimum": 1}},
         ("path",)),
    Tool("search", f"Find lines in the editable sources (or under `path`): `file:line: text` for each match, at most "
                   f"{MAX_SEARCH_HITS} lines. Literal text by default; regex=true for a Python regular expression.",
         lambda s, **a: _files(s).search(**a),
         {"pattern": {"type": "string"}, "path": {**_PATH, "description": "a file or folder to search instead of the editable files"},
          "regex": {"type": "boolean", "default": False}, "ignore_case": {"type": "boolean", "default": False}},
         ("pattern",)),
    Tool("write_file", "Create or overwrite an editable file with the given content.",
         lambda s, **a: _files(s).write_file(**a), {"path": _PATH, "content": {"type": "string"}}, ("path", "content")),
    Tool("edit_file", "Replace the text `old` with `new` in an editable file; `old` must occur exactly once.",
         lambda s, **a: _files(s).edit_file(**a),
         {"path": _PATH, "old": {"type": "string"}, "new": {"type": "string"}}, ("path", "old", "new")),
    Tool("build", "Build the candidate extension (release profile); returns the first compiler errors, or the warnings.", build),
    Tool("run_tests", "Run the candidate's Rust tests (cargo test); returns failing tests and their assertion text.", run_tests),
    Tool("benchmark", "Measure your working copy against the current best on the development queries, in interleaved "
                      "pairs added until the gain's interval is clear of zero (or within the margin, or a time cap). "
                      "nprobe/rerank search your copy with other parameters, without rebuilding. The trained index is "
                      "reused while no file that shapes it changed (the result says which files those are).", benchmark,
         {**_SEARCH_ARGS, "max_seconds": {"type": "integer", "minimum": 1,
                                          "description": f"time cap of the added pairs (default {BENCHMARK_SECONDS}, at most {BENCHMARK_MAX_SECONDS})"},
          "rebuild": {"type": "boolean", "default": False,
                      "description": "train and fill the index again even when no index-shaping file changed"}}),
    Tool("profile", "Where a search of your working copy spends its time: every field of the engine's "
                    "last_search_stats() (stage seconds, a nested `timers` dict of named seconds you may add, counters), "
                    "and perf samples of the hottest functions where the machine has perf. For a server: its QPS "
                    "through the task's clients, its own CPU time per query, and perf samples of the server process.", profile,
         {**_SEARCH_ARGS, "perf": {"type": "boolean", "default": True, "description": "also sample with perf (a few seconds more)"}}),
    Tool("check", "Before you submit: build, run the tests, and a short paired benchmark against the best; says what "
                  "a submission of the working copy would meet, without spending an iteration.", check),
    Tool("submit", "Full evaluation of your working copy on held-out queries; accepted (and committed) only if recall@10 stays at or above the floor and QPS beats the best by the margin with significance.",
         lambda s, **a: s.submit(**a),
         {"message": {"type": "string", "description": "one line: what you changed and why it should be faster"}}, ("message",)),
    Tool("revert_to_best", "Discard every change in the editable files and return to the best accepted version.", revert_to_best),
    Tool("note", "Write a note to your own memory; notes survive context compaction.", note,
         {"text": {"type": "string"}}, ("text",)),
)}
TOOL_SCHEMAS = [t.schema for t in TOOLS.values()]
TOOL_NAMES = list(TOOLS)


def run_tool(session: Session, name: str, raw_arguments: str | dict | None) -> ToolResult:
    """Check the arguments against the tool's schema and run it (ToolArgumentError when they do not fit)."""
    args = parse_arguments(name, raw_arguments)
    return TOOLS[name].run(session, **args)
