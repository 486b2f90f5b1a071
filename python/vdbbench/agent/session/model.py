"""Model clients: any OpenAI-compatible chat-completions endpoint (the `openai` SDK), with
retries, and a deterministic scripted model for offline tests."""

from __future__ import annotations

import json
import random
import time
from dataclasses import dataclass, field
from typing import Any, Callable, Protocol, Sequence


class ModelFinished(Exception):
    """The model has nothing more to say (a scripted model ran out of steps)."""


class ModelUnavailable(Exception):
    """The endpoint kept failing after every retry; the session stops cleanly and can resume."""


@dataclass
class ToolCall:
    id: str
    name: str
    arguments: str  # raw JSON text, exactly as the model sent it


@dataclass
class Attempt:
    """One request to the endpoint, journaled as a `model_call` event."""

    attempt: int
    latency_s: float
    error: str | None = None
    prompt_tokens: int | None = None
    completion_tokens: int | None = None
    total_tokens: int | None = None
    finish_reason: str | None = None


@dataclass
class ModelReply:
    content: str | None
    reasoning_content: str | None
    tool_calls: list[ToolCall]
    attempts: list[Attempt] = field(default_factory=list)

    def assistant_message(self) -> dict:
        """The reply as a conversation message; reasoning is kept so the model keeps its thread."""
        msg: dict[str, Any] = {"role": "assistant", "content": self.content or ""}
        if self.reasoning_content:
            msg["reasoning_content"] = self.reasoning_content
        if self.tool_calls:
            msg["tool_calls"] = [
                {"id": c.id, "type": "function", "function": {"name": c.name, "arguments": c.arguments}}
                for c in self.tool_calls
            ]
        return msg

    @property
    def usage(self) -> dict | None:
        last = self.attempts[-1] if self.attempts else None
        if last is None or last.prompt_tokens is None:
            return None
        return {"prompt_tokens": last.prompt_tokens, "completion_tokens": last.completion_tokens or 0}


class Model(Protocol):
    name: str

    def query(self, messages: Sequence[dict], tools: Sequence[dict]) -> ModelReply: ...


class MalformedResponse(ValueError):
    """A 200 answer that is not a chat completion (no message in its choice, a garbled body): a
    server fault, retried like a 5xx."""


def _retryable(exc: Exception) -> bool:
    import openai

    if isinstance(exc, (MalformedResponse, json.JSONDecodeError)):
        return True
    if isinstance(exc, (openai.APITimeoutError, openai.APIConnectionError, openai.RateLimitError,
                        openai.InternalServerError)):
        return True
    if isinstance(exc, openai.APIStatusError):
        return exc.status_code == 429 or exc.status_code >= 500
    return False


class OpenAIModel:
    """Chat completions with tools through the official `openai` SDK.

    Retries time-outs, connection errors, 429 and 5xx with exponential back-off (honouring
    Retry-After when the server sends one); other API errors end the call with ModelUnavailable.
    """

    def __init__(self, name: str, base_url: str | None = None, api_key: str | None = None, *,
                 timeout_s: float = 300.0, max_retries: int = 6, backoff_s: float = 2.0,
                 max_backoff_s: float = 120.0, temperature: float | None = None,
                 max_tokens: int | None = None, sleep: Callable[[float], None] = time.sleep):
        import openai

        self.name = name
        self.base_url = base_url
        self.client = openai.OpenAI(api_key=api_key or "EMPTY", base_url=base_url, timeout=timeout_s, max_retries=0)
        self.max_retries = max_retries
        self.backoff_s = backoff_s
        self.max_backoff_s = max_backoff_s
        self.temperature = temperature
        self.max_tokens = max_tokens
        self.sleep = sleep

    def _delay(self, attempt: int, exc: Exception) -> float:
        retry_after = None
        response = getattr(exc, "response", None)
        if response is not None:
            try:
                retry_after = float(response.headers.get("retry-after"))
            except (TypeError, ValueError):
                retry_after = None
        base = min(self.max_backoff_s, self.backoff_s * (2 ** attempt))
        return min(self.max_backoff_s, retry_after) if retry_after is not None else base * (0.5 + random.random() / 2)

    def query(self, messages: Sequence[dict], tools: Sequence[dict]) -> ModelReply:
        attempts: list[Attempt] = []
        kwargs: dict[str, Any] = {"model": self.name, "messages": list(messages)}
        if tools:
            kwargs["tools"] = list(tools)
            kwargs["tool_choice"] = "auto"
        if self.temperature is not None:
            kwargs["temperature"] = self.temperature
        if self.max_tokens is not None:
            kwargs["max_tokens"] = self.max_tokens
        for attempt in range(self.max_retries + 1):
            t0 = time.perf_counter()
            try:
                resp = self.client.chat.completions.create(**kwargs)
                reply = parse_completion(resp)
            except Exception as exc:  # noqa: BLE001 - classified below
                latency = time.perf_counter() - t0
                attempts.append(Attempt(attempt, latency, error=f"{type(exc).__name__}: {str(exc)[:500]}"))
                if not _retryable(exc) or attempt == self.max_retries:
                    err = ModelUnavailable(f"model endpoint failed after {attempt + 1} attempt(s): {type(exc).__name__}: {str(exc)[:500]}")
                    err.attempts = attempts  # type: ignore[attr-defined]
                    raise err from None
                self.sleep(self._delay(attempt, exc))
                continue
            latency = time.perf_counter() - t0
            usage = getattr(resp, "usage", None)
            choice = resp.choices[0] if getattr(resp, "choices", None) else None
            finish = getattr(choice, "finish_reason", None)
            attempts.append(Attempt(
                attempt, latency,
                prompt_tokens=_count(getattr(usage, "prompt_tokens", None)),
                completion_tokens=_count(getattr(usage, "completion_tokens", None)),
                total_tokens=_count(getattr(usage, "total_tokens", None)),
                finish_reason=finish if isinstance(finish, str) else None,
            ))
            reply.attempts = attempts
            return reply
        raise AssertionError("unreachable")


def _count(value) -> int | None:
    """A token count as the server sent it, as an int (None when it is not a count)."""
    if isinstance(value, bool):
        return None
    try:
        return int(value) if value is not None else None
    except (TypeError, ValueError):
        return None


def _text(value) -> str:
    """Tool-call arguments as raw JSON text: a server that sends an object gets it re-encoded."""
    if value is None:
        return ""
    return value if isinstance(value, str) else json.dumps(value)


def parse_completion(resp) -> ModelReply:
    """The assistant message of a chat completion, tolerant of what real servers send;
    MalformedResponse when its choice has no message."""
    if not getattr(resp, "choices", None):
        return ModelReply(content="", reasoning_content=None, tool_calls=[])
    if not isinstance(resp.choices, list):
        raise MalformedResponse(f"`choices` is a {type(resp.choices).__name__}, not a list")
    msg = getattr(resp.choices[0], "message", None)
    if msg is None or isinstance(msg, (str, int, float, list, dict)):
        raise MalformedResponse("the completion's choice has no assistant message")
    content = getattr(msg, "content", None)
    extra = getattr(msg, "model_extra", None) or {}
    reasoning = getattr(msg, "reasoning_content", None) or extra.get("reasoning_content") or extra.get("reasoning")
    calls = []
    raw_calls = getattr(msg, "tool_calls", None) or []
    if not isinstance(raw_calls, list):
        raise MalformedResponse(f"`tool_calls` is a {type(raw_calls).__name__}, not a list")
    for n, tc in enumerate(raw_calls):
        fn = getattr(tc, "function", None)
        tc_id = getattr(tc, "id", None)
        name = getattr(fn, "name", None) if fn else None
        calls.append(ToolCall(
            id=tc_id if isinstance(tc_id, str) and tc_id else f"call_{n}_{random.randrange(1 << 30):x}",
            name=name if isinstance(name, str) else "",
            arguments=_text(getattr(fn, "arguments", None)) if fn else "",
        ))
    return ModelReply(content=content if content is None or isinstance(content, str) else str(content),
                      reasoning_content=reasoning if isinstance(reasoning, str) else None, tool_calls=calls)


# -- the deterministic model of offline tests -------------------------------------------------

Step = Callable[[Sequence[dict]], "dict | ModelReply"]


class ScriptedModel:
    """Replays a script: each step is a dict ``{"content": ..., "tool_calls": [(name, args), ...]}``
    (args a dict, or a raw string to send malformed JSON) or a function of the conversation
    returning one. Token use is the conversation's size in characters / 4, so budgets and
    compaction behave as with a real endpoint."""

    def __init__(self, steps: Sequence[dict | Step], name: str = "scripted"):
        self.steps = list(steps)
        self.name = name
        self.base_url = None
        self.position = 0
        self.seen: list[list[dict]] = []  # the conversation at each call, for assertions

    def query(self, messages: Sequence[dict], tools: Sequence[dict]) -> ModelReply:
        if self.position >= len(self.steps):
            raise ModelFinished("the script has no more steps")
        step = self.steps[self.position]
        self.position += 1
        self.seen.append([dict(m) for m in messages])
        spec = step(messages) if callable(step) else step
        if isinstance(spec, ModelReply):
            return spec
        calls = []
        for n, call in enumerate(spec.get("tool_calls", [])):
            name, args = call[0], call[1]
            raw = args if isinstance(args, str) else json.dumps(args)
            calls.append(ToolCall(id=f"call_{self.position}_{n}", name=name, arguments=raw))
        prompt_chars = sum(len(str(m.get("content") or "")) for m in messages)
        completion = len(spec.get("content") or "") + sum(len(c.arguments) for c in calls)
        p, c = prompt_chars // 4 + 1, completion // 4 + 1
        return ModelReply(
            content=spec.get("content", ""), reasoning_content=spec.get("reasoning_content"),
            tool_calls=calls,
            attempts=[Attempt(0, 0.0, prompt_tokens=p, completion_tokens=c, total_tokens=p + c,
                              finish_reason="tool_calls" if calls else "stop")],
        )
