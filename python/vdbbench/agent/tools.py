"""The model's tools in one table: each tool's JSON schema beside the code that runs it. File
tools act on the session workspace (FileTools); harness tools build, test, measure and judge
through the session (the functions below; `submit` is the session's judge)."""

from __future__ import annotations

import json
import os
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Callable

from vdbbench.agent import workspace as wsp
from vdbbench.agent.eval_report import EvalReport, fmt_qps
from vdbbench.agent.review import stats_stages
from vdbbench.agent.task import TaskCard
from vdbbench.agent.workspace import PathRefused, resolve_path

if TYPE_CHECKING:
    from vdbbench.agent.loop import Session

MAX_READ_LINES = 400
MAX_READ_CHARS = 40_000
MAX_LIST = 400
_SKIP_DIRS = {".git", "target", "__pycache__"}


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
        ok = isinstance(value, str) if want == "string" else (isinstance(value, int) and not isinstance(value, bool))
        if not ok:
            raise ToolArgumentError(f"{name}: argument {key!r} must be a {want}, got {type(value).__name__}")
    return args


def _example(name: str) -> str:
    schema = next(t["function"]["parameters"] for t in TOOL_SCHEMAS if t["function"]["name"] == name)
    return json.dumps({k: ("..." if v["type"] == "string" else 1) for k, v in schema["properties"].items() if k in schema["required"]})


class FileTools:
    """list/read/write/edit inside the workspace, through the path guard."""

    def __init__(self, ws: Path, card: TaskCard):
        self.ws = ws
        self.card = card

    def list_files(self, path: str = ".") -> ToolResult:
        try:
            root = resolve_path(self.ws, self.card, path, for_write=False)
        except PathRefused as exc:
            return ToolResult(str(exc), ok=False, refused=True)
        if not root.exists():
            return ToolResult(f"{path!r} does not exist in the workspace", ok=False)
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
        p.write_text(content, encoding="utf-8")
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
        p.write_text(updated, encoding="utf-8")
        first = text[:at].count("\n") + 1
        lines = updated.splitlines()
        last = first + new.count("\n")
        lo, hi = max(1, first - 2), min(len(lines), last + 2)
        snippet = "\n".join(f"{i}| {lines[i - 1]}" for i in range(lo, hi + 1))
        return ToolResult(f"edited {path} at line {first}:\n{snippet}")


# -- harness tools: they act through the session ----------------------------------------------

def build(s: "Session") -> ToolResult:
    ok, text, _ = s._build_current()
    return ToolResult(text, ok=ok)


def run_tests(s: "Session") -> ToolResult:
    if not s.card.tests.enabled:
        return ToolResult("this task has no Rust tests; build and benchmark instead")
    res = s._run_tests()
    if res.ok:
        return ToolResult(f"tests passed ({res.seconds:.1f} s): {res.summary}")
    return ToolResult(f"tests FAILED ({res.seconds:.1f} s): {res.summary}\n{res.failures}", ok=False)


def compare_text(s: "Session", report, what: str) -> str:
    """A dev-split measurement as the model reads it: yours, the best's, the gain, per-repeat QPS."""
    c, b = report.candidate, report.best
    floor = s.card.objective.recall_floor
    lines = [f"{what}: your working copy {fmt_qps(c.qps)} QPS, recall@10 {c.recall10:.4f} "
             f"({'meets' if c.recall10 >= floor else 'MISSES'} the floor {floor})"]
    if b is not None:
        spread = f", per-pair spread {report.spread:.1%}" if report.spread is not None else ""
        lines.append(f"current best measured in the same run: {fmt_qps(b.qps)} QPS, recall@10 {b.recall10:.4f}; "
                     f"gain {report.gain:+.1%} over {report.pairs} interleaved pairs{spread} "
                     f"(the margin to beat is {s.card.objective.margin:.0%}; a submission is judged the same way "
                     f"on held-out queries, with more pairs while unclear)")
    lines.append(f"per-repeat QPS: yours {', '.join(fmt_qps(q) for q in c.qps_samples)}"
                 + (f"; best {', '.join(fmt_qps(q) for q in b.qps_samples)}" if b else ""))
    lines.append(f"QPS timed on the {c.clock} clock" + (f" (wall-clock QPS {fmt_qps(c.wall_qps)})" if c.clock != "wall" else "")
                 + f"; index build: train {c.train_s:.3f} s, add {c.add_s:.3f} s")
    return "\n".join(lines)


def benchmark(s: "Session") -> ToolResult:
    ok, text, _ = s._build_current()
    if not ok:
        return ToolResult(f"cannot benchmark: {text}", ok=False)
    report = s.evaluator.run("dev", s._current_lib, s._best_lib)
    s.emit("evaluation", **report.journal_payload())
    if report.failure:
        return ToolResult(f"benchmark failed ({report.failure.outcome}): {report.failure.text}", ok=False)
    if report.best_failure:
        return ToolResult(f"the best build failed under the harness ({report.best_failure.text}); yours:\n"
                          + compare_text(s, EvalReport("dev", report.candidate, None, None, None), "dev queries"), ok=False)
    return ToolResult(compare_text(s, report, "dev queries"))


def _flatten(d: dict, prefix: str = ""):
    for k, v in d.items():
        if isinstance(v, dict):
            yield from _flatten(v, f"{prefix}{k}.")
        else:
            yield f"{prefix}{k}", v


def profile(s: "Session") -> ToolResult:
    """One measured search of the dev queries and its per-stage breakdown: the `<stage>_s` entries
    of last_search_stats() as shares of the search (whole-search times such as wall_s are not
    stages), and the other entries as they are."""
    ok, text, _ = s._build_current()
    if not ok:
        return ToolResult(f"cannot profile: {text}", ok=False)
    report = s.evaluator.run("dev", s._current_lib, None, stats=True)
    if report.failure:
        return ToolResult(f"profile failed ({report.failure.outcome}): {report.failure.text}", ok=False)
    c = report.candidate
    head = f"one search of {len(s.evaluator.data.dev.queries) // max(1, c.repeats)} dev queries: {fmt_qps(c.qps)} QPS, {c.p50_ms:.4f} ms/query"
    if not c.stats:
        text = (f"{head}\nthis engine has no last_search_stats(); add per-stage counters and seconds to it "
                "if you want a breakdown (routing, prescore, rerank, top-k)")
    else:
        flat = dict(_flatten(c.stats))
        shares, other = stats_stages(flat)
        wall, threads = flat.get("wall_s"), flat.get("threads")
        basis = f"wall_s {wall:.4g} s x {threads or 1} thread(s)" if isinstance(wall, (int, float)) else "the stages' sum"
        rows = [f"  {name}: {sec:.4g} s ({100 * share:.1f}%)" for name, sec, share in shares]
        text = head + (f"\nstages (seconds and share of the search's thread-time, {basis}):\n" + "\n".join(rows)
                       if rows else "\nlast_search_stats() has no per-stage `<stage>_s` seconds")
        if other:
            text += "\nother statistics: " + ", ".join(f"{k}={v}" for k, v in other.items())
    s._last_profile = text
    return ToolResult(text)


def revert_to_best(s: "Session") -> ToolResult:
    wsp.revert_to_best(s.ws, s.card)
    return ToolResult(f"the editable files are back at the best version (commit {s.best.commit[:12]})")


def note(s: "Session", text: str) -> ToolResult:
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

TOOLS: dict[str, Tool] = {t.name: t for t in (
    Tool("list_files", "List the files under a folder of the workspace; editable ones are marked with '*'.",
         lambda s, **a: s.files.list_files(**a), {"path": {**_PATH, "default": "."}}),
    Tool("read_file", "Read a text file with line numbers (at most 400 lines per call).",
         lambda s, **a: s.files.read_file(**a),
         {"path": _PATH, "start_line": {"type": "integer", "minimum": 1}, "end_line": {"type": "integer", "minimum": 1}},
         ("path",)),
    Tool("write_file", "Create or overwrite an editable file with the given content.",
         lambda s, **a: s.files.write_file(**a), {"path": _PATH, "content": {"type": "string"}}, ("path", "content")),
    Tool("edit_file", "Replace the text `old` with `new` in an editable file; `old` must occur exactly once.",
         lambda s, **a: s.files.edit_file(**a),
         {"path": _PATH, "old": {"type": "string"}, "new": {"type": "string"}}, ("path", "old", "new")),
    Tool("build", "Build the candidate extension (release profile); returns the first compiler errors, or the warnings.", build),
    Tool("run_tests", "Run the candidate's Rust tests (cargo test); returns failing tests and their assertion text.", run_tests),
    Tool("benchmark", "Quick measurement on the development queries: QPS and recall@10 of your working copy against the current best, interleaved.", benchmark),
    Tool("profile", "Per-stage time breakdown of one search of your working copy (from last_search_stats, when the engine has it).", profile),
    Tool("submit", "Full evaluation of your working copy on held-out queries; accepted (and committed) only if recall@10 stays at or above the floor and QPS beats the best by the margin with significance.",
         lambda s, **a: s.tool_submit(**a),
         {"message": {"type": "string", "description": "one line: what you changed and why it should be faster"}}, ("message",)),
    Tool("revert_to_best", "Discard every change in the editable files and return to the best accepted version.", revert_to_best),
    Tool("note", "Write a note to your own memory; notes survive context compaction.", note,
         {"text": {"type": "string"}}, ("text",)),
)}
TOOL_SCHEMAS = [t.schema for t in TOOLS.values()]
TOOL_NAMES = list(TOOLS)


def run_tool(session: "Session", name: str, raw_arguments: str | dict | None) -> ToolResult:
    """Check the arguments against the tool's schema and run it (ToolArgumentError when they do not fit)."""
    args = parse_arguments(name, raw_arguments)
    return TOOLS[name].run(session, **args)
