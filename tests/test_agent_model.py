"""The model client against a loopback OpenAI-compatible server: retries, back-off, errors, parsing."""

from __future__ import annotations

import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from vdbbench.agent.session.model import ModelFinished, ModelUnavailable, OpenAIModel, ScriptedModel
from vdbbench.agent.session.tools import TOOL_SCHEMAS


class Server:
    """Replays (status, headers, body) triples on 127.0.0.1 and records each request."""

    def __init__(self, replies):
        self.replies = list(replies)
        self.requests = []
        outer = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *a):
                pass

            def do_POST(self):
                outer.requests.append(json.loads(self.rfile.read(int(self.headers["Content-Length"]))))
                status, headers, body = outer.replies.pop(0)
                data = json.dumps(body).encode()
                self.send_response(status)
                for k, v in headers.items():
                    self.send_header(k, v)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        threading.Thread(target=self.httpd.serve_forever, daemon=True).start()
        self.url = f"http://127.0.0.1:{self.httpd.server_address[1]}/v1"

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.httpd.shutdown()
        self.httpd.server_close()


def ok(message: dict, usage=(120, 30)) -> tuple:
    return 200, {}, {"id": "c", "object": "chat.completion", "created": 0, "model": "m",
                     "choices": [{"index": 0, "message": {"role": "assistant", **message}, "finish_reason": "stop"}],
                     "usage": {"prompt_tokens": usage[0], "completion_tokens": usage[1], "total_tokens": sum(usage)}}


def err(status: int, headers=None) -> tuple:
    return status, headers or {}, {"error": {"message": f"failure {status}", "type": "x"}}


def model(url, sleeps, retries=3):
    return OpenAIModel("m", base_url=url, api_key="k", max_retries=retries, backoff_s=0.5, sleep=sleeps.append)


def test_429_and_5xx_are_retried_with_backoff_and_retry_after():
    sleeps = []
    with Server([err(429, {"Retry-After": "7"}), err(503), ok({"content": "hi"})]) as srv:
        reply = model(srv.url, sleeps).query([{"role": "user", "content": "x"}], TOOL_SCHEMAS)
    assert reply.content == "hi"
    assert [a.attempt for a in reply.attempts] == [0, 1, 2]
    assert "429" in reply.attempts[0].error and "503" in reply.attempts[1].error
    assert reply.attempts[2].prompt_tokens == 120 and reply.attempts[2].completion_tokens == 30
    assert sleeps[0] == 7.0  # the server's Retry-After
    assert 0.5 <= sleeps[1] <= 1.0  # exponential back-off with jitter (second attempt)


def test_a_client_error_is_not_retried_and_the_attempts_are_kept():
    sleeps = []
    with Server([err(400)]) as srv:
        with pytest.raises(ModelUnavailable, match="400") as info:
            model(srv.url, sleeps).query([{"role": "user", "content": "x"}], TOOL_SCHEMAS)
    assert sleeps == [] and len(info.value.attempts) == 1


def test_retries_run_out():
    sleeps = []
    with Server([err(500)] * 3) as srv:
        with pytest.raises(ModelUnavailable, match="after 3 attempt"):
            model(srv.url, sleeps, retries=2).query([{"role": "user", "content": "x"}], TOOL_SCHEMAS)
    assert len(sleeps) == 2 and len(srv.requests) == 3


def test_tool_calls_reasoning_and_what_is_sent():
    msg = {"content": None, "reasoning_content": "think first",
           "tool_calls": [{"id": "a1", "type": "function", "function": {"name": "read_file", "arguments": '{"path": "x"}'}},
                          {"id": "a2", "type": "function", "function": {"name": "build", "arguments": ""}}]}
    with Server([ok(msg)]) as srv:
        reply = model(srv.url, []).query([{"role": "user", "content": "x"}], TOOL_SCHEMAS)
        sent = srv.requests[0]
    assert [(c.id, c.name, c.arguments) for c in reply.tool_calls] == [("a1", "read_file", '{"path": "x"}'), ("a2", "build", "")]
    assert reply.reasoning_content == "think first"
    back = reply.assistant_message()
    assert back["reasoning_content"] == "think first" and [c["id"] for c in back["tool_calls"]] == ["a1", "a2"]
    assert sent["model"] == "m" and sent["tool_choice"] == "auto"
    assert [t["function"]["name"] for t in sent["tools"]][:2] == ["list_files", "read_file"]


def test_scripted_model_replays_and_finishes():
    m = ScriptedModel([{"tool_calls": [("build", {}), ("read_file", '{"path": ')]}])
    reply = m.query([{"role": "user", "content": "go"}], TOOL_SCHEMAS)
    assert [c.name for c in reply.tool_calls] == ["build", "read_file"]
    assert reply.tool_calls[1].arguments == '{"path": '  # malformed on purpose, as scripted
    assert reply.usage["prompt_tokens"] >= 1
    with pytest.raises(ModelFinished):
        m.query([], TOOL_SCHEMAS)


def test_a_reply_that_is_not_a_completion_is_retried_and_odd_fields_are_normalised():
    # A choice without its message (a proxy's or a buggy server's 200) crashed the loop with an
    # AttributeError out of parse_completion; arguments sent as a JSON object and token counts
    # sent as strings crashed it later (str methods on a dict, arithmetic on "12").
    no_message = (200, {}, {"id": "c", "object": "chat.completion", "created": 0, "model": "m",
                            "choices": [{"index": 0, "finish_reason": "stop"}]})
    odd = ok({"content": 5, "tool_calls": [{"id": "a", "type": "function",
                                            "function": {"name": "note", "arguments": {"text": "x"}}}]})
    odd[2]["usage"] = {"prompt_tokens": "12", "completion_tokens": "3", "total_tokens": "15"}
    sleeps = []
    with Server([no_message, odd]) as srv:
        reply = model(srv.url, sleeps).query([{"role": "user", "content": "x"}], TOOL_SCHEMAS)
    assert "no assistant message" in reply.attempts[0].error and len(sleeps) == 1
    assert reply.content == "5"
    assert [(c.name, json.loads(c.arguments)) for c in reply.tool_calls] == [("note", {"text": "x"})]
    assert reply.usage == {"prompt_tokens": 12, "completion_tokens": 3} and reply.attempts[-1].total_tokens == 15
    with Server([no_message] * 2) as srv:
        with pytest.raises(ModelUnavailable, match="no assistant message"):  # the session stops cleanly, resumable
            model(srv.url, [], retries=1).query([{"role": "user", "content": "x"}], TOOL_SCHEMAS)
