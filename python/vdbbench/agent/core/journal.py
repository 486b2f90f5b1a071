"""The session journal: append-only JSONL events (docs/agent-journal.md), and reading them back."""

from __future__ import annotations

import json
import os
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path

EVENT_TYPES = frozenset(
    {
        "session_start", "model_call", "assistant", "tool_call", "tool_result", "build", "tests",
        "evaluation", "decision", "note", "compaction", "review", "audit", "budget_stop", "error",
        "session_end", "protocol", "reference", "transfer", "transfer_targets", "final",
    }
)
# Events after which a crash must not lose anything: written with fsync.
_DURABLE = frozenset({"decision", "audit", "budget_stop", "session_start", "session_end", "reference", "final"})


@dataclass(frozen=True)
class Outcome:
    """A decision's outcome as every reader shows it: legend label, colour, plot marker."""

    label: str
    color: str
    marker: str
    size: int
    zorder: int = 3
    measured: bool = True  # whether a submission with this outcome was timed


# Every outcome a decision can have, in the order of the plot's legend.
OUTCOMES: dict[str, Outcome] = {
    "accepted": Outcome("accepted", "#1a9850", "*", 150, zorder=5),
    "slower": Outcome("slower / no gain", "#7f7f7f", "o", 22),
    "recall_below_floor": Outcome("recall under floor", "#f46d43", "v", 32),
    "flagged": Outcome("flagged by audit", "#d73027", "X", 70, zorder=4),
    "build_failed": Outcome("build failed", "#8c510a", "s", 26, measured=False),
    "tests_failed": Outcome("tests failed", "#762a83", "D", 24, measured=False),
    "timed_out": Outcome("timed out", "#2166ac", "P", 34, measured=False),
    "crashed": Outcome("crashed", "#000000", "x", 30, measured=False),
    "no_change": Outcome("no change", "#bdbdbd", "|", 40, zorder=2, measured=False),
}


def event_time(t) -> float | None:
    """An event's `t` (ISO-8601) as a POSIX timestamp; None when missing or malformed."""
    if not isinstance(t, str):
        return None
    try:
        return datetime.fromisoformat(t.replace("Z", "+00:00")).timestamp()
    except ValueError:
        return None


def read_events(path: str | os.PathLike) -> list[dict]:
    """The events of a journal file, as resume, budgets and the live view read them: every line
    that can be read, in seq order (`read_journal`). A torn last line (crash mid-write) is left
    out; so is a damaged line in the middle, which no longer hides the events after it."""
    path = Path(path)
    if not path.exists():
        return []
    return read_journal(path)[0]


# The figures readers compute with: a value of another type (a damaged or hand-edited journal) is
# read as none, and named, rather than failing a report halfway with a traceback.
_NUMBERS = frozenset({
    "qps", "recall10", "best_qps_before", "best_qps_after", "gain", "best_qps_same_run", "fresh_recall10",
    "fresh_qps", "jump_factor", "prompt_tokens", "completion_tokens", "total_tokens", "cost_usd", "iteration",
})

# The shapes readers take apart: text, lists and objects of another type are read as none, too.
_SHAPES = {
    "commit": str, "message": str, "reason": str, "outcome": str, "diff_stat": str, "diff": str, "verdict": str,
    "content": str, "text": str, "findings": list, "tool_calls": list, "targets": list, "candidate": dict, "best": dict,
    "fresh": dict, "task": dict, "node": dict, "ratios": dict,
}
_KIND_NAMES = {str: "text", list: "a list", dict: "an object"}


# How every event line the journal writes begins (json.dumps of a dict whose first key is seq).
_EVENT_HEAD = b'{"seq": '


def _is_event(obj) -> bool:
    return isinstance(obj, dict) and isinstance(obj.get("type"), str)


def _salvage(raw: bytes) -> list[dict]:
    """The whole events inside a damaged line: a line glued onto the torn head of another (a cut
    copy, then more appended; two files joined) or two lines whose newline was lost. The line is
    cut where each event begins; a piece that is not one whole event object is left out. (Inside
    an event's text a quote is escaped, so the head cannot appear there.)"""
    starts, i = [], raw.find(_EVENT_HEAD)
    while i != -1:
        starts.append(i)
        i = raw.find(_EVENT_HEAD, i + 1)
    found = []
    for a, b in zip(starts, starts[1:] + [len(raw)]):
        try:
            ev = json.loads(raw[a:b].decode("utf-8"))
        except (UnicodeDecodeError, json.JSONDecodeError):
            continue
        if _is_event(ev):
            found.append(ev)
    return found


def _checked(ev: dict, n: int, problems: list[str]) -> dict:
    """The event of line n with every figure or shape of the wrong type read as none, and named."""
    for key, kind in sorted(_SHAPES.items()):
        v = ev.get(key)
        if v is not None and not isinstance(v, kind):
            problems.append(f"line {n}: the {ev['type']}'s {key} is not {_KIND_NAMES[kind]} ({repr(v)[:40]}): read as none")
            ev[key] = None
    for where, obj in [("", ev)] + [(f"{k}.", ev[k]) for k in ("candidate", "best", "fresh") if isinstance(ev.get(k), dict)]:
        for key in sorted(_NUMBERS & obj.keys()):
            v = obj[key]
            if v is not None and (isinstance(v, bool) or not isinstance(v, (int, float))):
                problems.append(f"line {n}: the {ev['type']}'s {where}{key} is not a number ({repr(v)[:40]}): read as none")
                obj[key] = None
    return ev


def read_journal(path: str | os.PathLike) -> tuple[list[dict], list[str]]:
    """A journal read for a report: its events in seq order and, in words, what was wrong with the
    file (empty when it is whole). A damaged line does not hide the events after it: it is left
    out and named. A torn last line, a line that is not UTF-8, not JSON or not an event object, an
    event repeated under its seq (counted once), two different events under one seq (both kept,
    in file order) and events out of seq order (read in seq order) each add a problem, so a
    reader can mark its figures as partial. Whole events glued into a damaged line are read."""
    events, problems, _ = read_journal_lines(path)
    return events, problems


def read_journal_lines(path: str | os.PathLike) -> tuple[list[dict], list[str], list[int]]:
    """`read_journal`, and the numbers of the lines (1-based) it could not read whole: damaged
    lines left out, or read only in part (the whole events glued into them); a torn last line is
    not among them (the journal drops it on opening, a crash's cut write)."""
    events: list[dict] = []
    problems: list[str] = []
    skipped: list[int] = []
    data = Path(path).read_bytes()
    lines = data.split(b"\n")
    tail = lines.pop()  # b"" when the file ends with a newline
    for n, raw in enumerate(lines, start=1):
        if not raw.strip():
            continue
        try:
            ev = json.loads(raw.decode("utf-8"))
        except (UnicodeDecodeError, json.JSONDecodeError) as exc:
            skipped.append(n)
            whole = _salvage(raw)
            if whole:
                problems.append(f"line {n} is damaged: the {len(whole)} whole event(s) in it (seq "
                                f"{', '.join(str(e.get('seq')) for e in whole)}) read, the rest left out")
                for ev in whole:
                    events.append(_checked(ev, n, problems))
            elif isinstance(exc, UnicodeDecodeError):
                problems.append(f"line {n} is not UTF-8 text: left out")
            else:
                problems.append(f"line {n} is not JSON (damaged): left out")
            continue
        if not _is_event(ev):
            skipped.append(n)
            problems.append(f"line {n} is not a journal event (an object with a type): left out")
            continue
        events.append(_checked(ev, n, problems))
    if tail.strip():
        problems.append(f"the last line ({len(lines) + 1}) is cut short (a crash mid-write, or the session "
                        "is writing it now): left out")
    seqs = [e.get("seq") if isinstance(e.get("seq"), int) and not isinstance(e.get("seq"), bool) else None
            for e in events]
    if any(s is None for s in seqs):
        problems.append(f"{sum(s is None for s in seqs)} events have no seq (an older or hand-written journal): "
                        "read in file order")
        return events, problems, skipped
    kept: list[dict] = []
    by_seq: dict[int, dict] = {}
    reused = 0
    for ev in events:
        first = by_seq.get(ev["seq"])
        if first is None:
            by_seq[ev["seq"]] = ev
            kept.append(ev)
        elif first == ev:
            problems.append(f"event seq {ev['seq']} ({ev['type']}) is in the journal twice: counted once")
        else:
            reused += 1
            kept.append(ev)
            problems.append(f"seq {ev['seq']} names two different events ({first['type']} and {ev['type']}): "
                            "both kept, in file order")
    order = [e["seq"] for e in kept]
    if not reused and any(b < a for a, b in zip(order, order[1:])):
        problems.append("events are out of seq order in the file: read in seq order")
        kept.sort(key=lambda e: e["seq"])
    return kept, problems, skipped


class Journal:
    """Appends events with a strictly increasing ``seq``; continues the numbering on resume."""

    def __init__(self, path: str | os.PathLike):
        self.path = Path(path)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self._truncate_torn_tail()
        # What was wrong with the file as it was opened (a damaged line in the middle: the user's
        # editor, a disk fault, a cut copy or two files joined). It is read past, never rewritten:
        # new events go after it, and `problems` / `damaged_lines` say what was left out.
        existing: list[dict] = []
        self.problems: list[str] = []
        self.damaged_lines: list[int] = []
        lines = 0
        if self.path.exists():
            existing, self.problems, self.damaged_lines = read_journal_lines(self.path)
            lines = self.path.read_bytes().count(b"\n")
        seqs = [e["seq"] for e in existing if type(e.get("seq")) is int]
        # Past every seq in the file, a damaged line's too: one line holds one event, from seq 0.
        self.seq = max([s + 1 for s in seqs] + [lines])
        self.iteration = max((int(e.get("iteration") or 0) for e in existing), default=0)
        # Unbuffered: an event is in the file whole or not at all (see append).
        self._fd: int | None = os.open(self.path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)

    def _truncate_torn_tail(self) -> None:
        """Drop a half-written last line so the next event starts on a line of its own."""
        if not self.path.exists():
            return
        with self.path.open("rb") as fh:
            data = fh.read()
        if data and not data.endswith(b"\n"):
            cut = data.rfind(b"\n") + 1
            with self.path.open("r+b") as fh:
                fh.truncate(cut)

    def append(self, type: str, **payload) -> dict:
        if type not in EVENT_TYPES:
            raise ValueError(f"unknown journal event type {type!r}; expected one of {sorted(EVENT_TYPES)}")
        event = {
            "seq": self.seq,
            "t": datetime.now(timezone.utc).isoformat(timespec="milliseconds"),
            "type": type,
            "iteration": self.iteration,
            **payload,
        }
        line = (json.dumps(event, ensure_ascii=False, default=_jsonable) + "\n").encode("utf-8")
        fd = self._fd
        if fd is None:
            raise ValueError("the journal is closed")
        size = os.lseek(fd, 0, os.SEEK_END)
        try:
            view = memoryview(line)
            while view:
                view = view[os.write(fd, view):]
            if type in _DURABLE:
                os.fsync(fd)
        except BaseException:
            # A full disk (or an interrupt) mid-line: take the part written back out, so the event
            # is not half in the file, nor completed later by a buffer's retry under a seq the
            # next event reuses. The caller sees the error; the journal stays whole.
            try:
                os.ftruncate(fd, size)
            except OSError:
                pass
            raise
        self.seq += 1
        return event

    def events(self) -> list[dict]:
        return read_events(self.path)

    def __del__(self):
        fd = getattr(self, "_fd", None)
        if fd is not None:
            try:
                os.close(fd)
            except OSError:
                pass

    def close(self) -> None:
        if self._fd is not None:
            fd, self._fd = self._fd, None
            try:
                os.fsync(fd)
            finally:
                os.close(fd)


def _jsonable(obj):
    """numpy scalars and paths in payloads become plain JSON values."""
    if hasattr(obj, "item"):
        return obj.item()
    if isinstance(obj, Path):
        return str(obj)
    raise TypeError(f"not JSON-serialisable: {type(obj).__name__}")
