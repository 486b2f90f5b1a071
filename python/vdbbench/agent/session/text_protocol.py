"""The text protocol for endpoints without tool calling: tools described in the prompt, actions as fenced JSON blocks in the reply, results sent back as text."""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from typing import Any, Mapping, Sequence

FENCE_TAG = "action"
_OPEN = re.compile(r"^[ \t]*```[ \t]*action[ \t]*$", re.MULTILINE)
_ANY_FENCE = re.compile(r"^[ \t]*```[ \t]*(\S*)[ \t]*$")

NO_ACTION_HINT = (
    "Your reply had no ```action block, so nothing was done. Reply with at least one block:\n"
    '```action\n{"tool": "list_files", "args": {"path": "."}}\n```'
)


class ActionFormatError(ValueError):
    """A reply whose action blocks cannot be parsed; the message says what to fix and is meant for the model."""


@dataclass(frozen=True)
class ToolCall:
    id: str
    name: str
    arguments: dict[str, Any] = field(default_factory=dict)

    def as_dict(self) -> dict[str, Any]:
        """The journal's shape: {id, name, arguments}."""
        return {"id": self.id, "name": self.name, "arguments": dict(self.arguments)}


def _schema_fn(schema: Mapping[str, Any]) -> Mapping[str, Any]:
    return schema.get("function", schema) if isinstance(schema, Mapping) else {}


def render_tools_as_text(tool_schemas: Sequence[Mapping[str, Any]]) -> str:
    """A system-prompt section describing the tools (OpenAI function schemas) and the action format."""
    lines = [
        "## Tools",
        "",
        "This endpoint has no native tool calling. To use a tool, put one fenced block per call in",
        "your reply, tagged `action`, holding one JSON object with the tool name and its arguments:",
        "",
        "```action",
        '{"tool": "read_file", "args": {"path": "src/lib.rs", "start_line": 1, "end_line": 80}}',
        "```",
        "",
        "Several blocks in one reply run in order; their results come back in the next message,",
        "numbered like the blocks. The JSON must be valid: strings in double quotes, newlines inside",
        'strings written as \\n, quotes as \\". Text outside the blocks is for your reasoning.',
        "",
        "Available tools:",
    ]
    for schema in tool_schemas:
        fn = _schema_fn(schema)
        name = fn.get("name")
        if not name:
            raise ValueError(f"tool schema without a name: {schema!r}")
        params = fn.get("parameters") or {}
        props: Mapping[str, Any] = params.get("properties") or {}
        required = set(params.get("required") or ())
        lines.append("")
        lines.append(f"### {name}")
        if fn.get("description"):
            lines.append(str(fn["description"]).strip())
        if not props:
            lines.append("args: none (use {})")
        for arg, spec in props.items():
            kind = spec.get("type", "any") if isinstance(spec, Mapping) else "any"
            need = "required" if arg in required else "optional"
            desc = f" — {spec['description']}" if isinstance(spec, Mapping) and spec.get("description") else ""
            lines.append(f"- `{arg}` ({kind}, {need}){desc}")
    return "\n".join(lines)


def _line_col(text: str, pos: int) -> tuple[int, int]:
    line = text.count("\n", 0, pos) + 1
    col = pos - (text.rfind("\n", 0, pos) + 1) + 1
    return line, col


def _blocks(text: str) -> list[tuple[int, str]]:
    """(1-based line of the opening fence, body) of each ```action block."""
    lines = text.splitlines()
    out: list[tuple[int, str]] = []
    i = 0
    while i < len(lines):
        if _OPEN.match(lines[i]):
            start = i
            body: list[str] = []
            i += 1
            while i < len(lines) and not re.match(r"^[ \t]*```[ \t]*$", lines[i]):
                if _OPEN.match(lines[i]):
                    raise ActionFormatError(
                        f"action block opened on line {start + 1} is not closed before the next one on line {i + 1}: "
                        "end each block with a line holding only ```"
                    )
                body.append(lines[i])
                i += 1
            if i >= len(lines):
                raise ActionFormatError(
                    f"action block opened on line {start + 1} is never closed: end it with a line holding only ```"
                )
            out.append((start + 1, "\n".join(body)))
        i += 1
    return out


def _one_action(obj: Any, where: str, known: set[str] | None) -> tuple[str, dict[str, Any]]:
    if not isinstance(obj, Mapping):
        raise ActionFormatError(f"{where}: expected a JSON object like {{\"tool\": NAME, \"args\": {{...}}}}, got {type(obj).__name__}")
    name = obj.get("tool", obj.get("name"))
    if not isinstance(name, str) or not name:
        raise ActionFormatError(f"{where}: missing \"tool\" (the tool name as a string)")
    args = obj.get("args", obj.get("arguments", {}))
    if args is None:
        args = {}
    if not isinstance(args, Mapping):
        raise ActionFormatError(f"{where}: \"args\" of {name} must be a JSON object, got {type(args).__name__}")
    extra = set(obj) - {"tool", "name", "args", "arguments"}
    if extra:
        raise ActionFormatError(
            f"{where}: unexpected keys {sorted(extra)}; put the tool's arguments inside \"args\""
        )
    if known is not None and name not in known:
        raise ActionFormatError(f"{where}: unknown tool {name!r}; available: {', '.join(sorted(known))}")
    return name, dict(args)


def parse_actions(text: str, known_tools: Sequence[str] | None = None, id_prefix: str = "text") -> list[ToolCall]:
    """The tool calls in a reply's ```action blocks, in order (an empty list if there are none).

    A block holds one JSON object {"tool": NAME, "args": {...}} or a JSON list of them. Any
    malformed block raises ActionFormatError naming the block and what to fix, and then none of
    the reply's actions are run (a half-applied reply is harder to reason about than none).
    """
    known = set(known_tools) if known_tools is not None else None
    calls: list[ToolCall] = []
    for n, (line, body) in enumerate(_blocks(text), start=1):
        where = f"action block {n} (line {line})"
        if not body.strip():
            raise ActionFormatError(f"{where} is empty: put one JSON object inside")
        try:
            obj = json.loads(body)
        except json.JSONDecodeError as exc:
            bl, bc = _line_col(body, exc.pos)
            raise ActionFormatError(
                f"{where} is not valid JSON: {exc.msg} at line {bl}, column {bc} of the block "
                "(strings need double quotes; write newlines inside strings as \\n)"
            ) from None
        items = obj if isinstance(obj, list) else [obj]
        if not items:
            raise ActionFormatError(f"{where} holds an empty list: put at least one action in it")
        for j, item in enumerate(items, start=1):
            name, args = _one_action(item, where if len(items) == 1 else f"{where}, item {j}", known)
            calls.append(ToolCall(f"{id_prefix}_{len(calls) + 1}", name, args))
    return calls


def format_results_as_text(results: Sequence[Any]) -> str:
    """The tool results as one user message, numbered like the actions they answer.

    Each result is a mapping {id, name, text, ok?} (or a (ToolCall, text[, ok]) tuple).
    """
    parts = []
    for n, result in enumerate(results, start=1):
        if isinstance(result, Mapping):
            name, text, ok, cid = result.get("name"), result.get("text", ""), result.get("ok", True), result.get("id")
        else:
            call, text, *rest = result
            name, cid, ok = call.name, call.id, (rest[0] if rest else True)
        status = "ok" if ok else "error"
        parts.append(f"### result {n}: {name} ({status}{', ' + cid if cid else ''})\n{text}")
    if not parts:
        return "(no actions were run)"
    return "\n\n".join(parts)


_NO_TOOLS_HINTS = (
    "does not support tools", "tools are not supported", "tool calling is not supported",
    "tool_choice", "unsupported parameter: 'tools'", "unrecognized request argument supplied: tools",
    "extra inputs are not permitted", "function calling is not", "does not support function",
    "tool use is not supported", "\"auto\" tool choice requires",
)


def looks_like_no_tool_support(error: BaseException | str) -> bool:
    """Heuristic for detection: True when an endpoint's error says it refuses the `tools` parameter."""
    text = str(error).lower()
    return any(h in text for h in _NO_TOOLS_HINTS) and ("tool" in text or "function" in text)


# ---------------------------------------------------------------------------------------------
# A Model (vdbbench.agent.session.model's protocol) that speaks the text protocol to its endpoint
# ---------------------------------------------------------------------------------------------

FORMAT_ERROR_PREFIX = "Your reply could not be run, nothing was done: "


def _as_action_blocks(tool_calls: Sequence[Mapping[str, Any]]) -> str:
    blocks = []
    for call in tool_calls:
        fn = call.get("function", call)
        raw = fn.get("arguments")
        try:
            args = json.loads(raw) if isinstance(raw, str) and raw.strip() else (raw or {})
        except json.JSONDecodeError:
            args = {"_unparsed": raw}
        blocks.append("```action\n" + json.dumps({"tool": fn.get("name"), "args": args}, ensure_ascii=False) + "\n```")
    return "\n".join(blocks)


def to_text_messages(messages: Sequence[Mapping[str, Any]], tool_schemas: Sequence[Mapping[str, Any]]) -> list[dict]:
    """A tool-calling conversation rewritten for an endpoint without tools: the tools described in
    the system prompt, the assistant's calls as action blocks, tool results as one user message."""
    tools_text = render_tools_as_text(tool_schemas)
    out: list[dict] = []
    names: dict[str, str] = {}
    pending: list[dict] = []

    def flush() -> None:
        if pending:
            out.append({"role": "user", "content": format_results_as_text(list(pending))})
            pending.clear()

    for m in messages:
        role = m.get("role")
        if role == "tool":
            cid = str(m.get("tool_call_id") or "")
            pending.append({"id": cid, "name": names.get(cid, "tool"), "text": str(m.get("content") or ""), "ok": True})
            continue
        flush()
        if role == "system":
            out.append({"role": "system", "content": f"{m.get('content') or ''}\n\n{tools_text}"})
        elif role == "assistant":
            calls = m.get("tool_calls") or []
            for call in calls:
                fn = call.get("function", call)
                names[str(call.get("id"))] = str(fn.get("name"))
            text = str(m.get("content") or "")
            if calls:
                text = (text + "\n\n" if text else "") + _as_action_blocks(calls)
            out.append({"role": "assistant", "content": text})
        else:
            out.append({"role": str(role), "content": m.get("content") or ""})
    flush()
    if not out or out[0].get("role") != "system":
        out.insert(0, {"role": "system", "content": tools_text})
    return out


class TextProtocolModel:
    """Wraps a model client (e.g. vdbbench.agent.session.model.OpenAIModel) for endpoints without tool
    calling. mode "text": always the text protocol; mode "auto": native tool calls until the
    endpoint refuses them (see looks_like_no_tool_support), then the text protocol for good.
    A malformed reply goes back to the model with the reason, up to `format_retries` times."""

    def __init__(self, inner, mode: str = "text", format_retries: int = 2):
        if mode not in ("text", "auto"):
            raise ValueError(f"text protocol mode must be 'text' or 'auto', got {mode!r}")
        self.inner = inner
        self.name = inner.name
        self.base_url = getattr(inner, "base_url", None)
        self.mode = mode
        self.using_text = mode == "text"
        self.format_retries = format_retries
        self._calls = 0

    def query(self, messages: Sequence[Mapping[str, Any]], tools: Sequence[Mapping[str, Any]]):
        from vdbbench.agent.session.model import ModelReply, ModelUnavailable
        from vdbbench.agent.session.model import ToolCall as LoopToolCall

        carried: list = []
        if not self.using_text:
            try:
                return self.inner.query(messages, tools)
            except ModelUnavailable as exc:
                if not looks_like_no_tool_support(exc):
                    raise
                carried = list(getattr(exc, "attempts", []))
                self.using_text = True
        known = [(_schema_fn(s).get("name")) for s in tools]
        convo = to_text_messages(messages, tools)
        for attempt in range(self.format_retries + 1):
            reply = self.inner.query(convo, [])
            carried += list(reply.attempts)
            text = reply.content or ""
            self._calls += 1
            try:
                actions = parse_actions(text, known, id_prefix=f"text{self._calls}")
            except ActionFormatError as exc:
                if attempt == self.format_retries:
                    return ModelReply(content=f"{text}\n\n[{FORMAT_ERROR_PREFIX}{exc}]", reasoning_content=reply.reasoning_content,
                                      tool_calls=[], attempts=carried)
                convo = convo + [{"role": "assistant", "content": text},
                                 {"role": "user", "content": f"{FORMAT_ERROR_PREFIX}{exc}"}]
                continue
            calls = [LoopToolCall(id=a.id, name=a.name, arguments=json.dumps(a.arguments)) for a in actions]
            return ModelReply(content=text, reasoning_content=reply.reasoning_content, tool_calls=calls, attempts=carried)
        raise AssertionError("unreachable")
