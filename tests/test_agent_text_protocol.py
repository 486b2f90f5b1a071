"""The text protocol for endpoints without tool calling (vdbbench.agent.session.text_protocol)."""

from __future__ import annotations

import json

import pytest

from vdbbench.agent.session.text_protocol import (
    ActionFormatError,
    ToolCall,
    format_results_as_text,
    looks_like_no_tool_support,
    parse_actions,
    render_tools_as_text,
)

SCHEMAS = [
    {"type": "function", "function": {
        "name": "read_file", "description": "Read a file of the workspace.",
        "parameters": {"type": "object", "properties": {
            "path": {"type": "string", "description": "relative to the workspace"},
            "start_line": {"type": "integer"}}, "required": ["path"]}}},
    {"type": "function", "function": {
        "name": "write_file", "description": "Replace a file.",
        "parameters": {"type": "object", "properties": {"path": {"type": "string"}, "content": {"type": "string"}},
                       "required": ["path", "content"]}}},
    {"type": "function", "function": {"name": "build", "description": "Build the candidate.",
                                       "parameters": {"type": "object", "properties": {}}}},
]
TOOLS = ["read_file", "write_file", "build"]


def test_rendered_tools_name_every_tool_argument_and_the_format():
    text = render_tools_as_text(SCHEMAS)
    assert "```action" in text
    assert "### read_file" in text and "`path` (string, required) — relative to the workspace" in text
    assert "`start_line` (integer, optional)" in text
    assert "### build" in text and "args: none" in text
    with pytest.raises(ValueError, match="without a name"):
        render_tools_as_text([{"type": "function", "function": {}}])


def test_well_formed_single_action_with_code_in_a_string():
    code = 'fn main() {\n    println!("```not a fence```");\n}\n'
    reply = (
        "I will rewrite the file.\n\n```action\n"
        + json.dumps({"tool": "write_file", "args": {"path": "src/lib.rs", "content": code}})
        + "\n```\nThen build."
    )
    calls = parse_actions(reply, TOOLS)
    assert calls == [ToolCall("text_1", "write_file", {"path": "src/lib.rs", "content": code})]
    assert calls[0].as_dict()["arguments"]["content"] == code


def test_several_actions_in_blocks_and_in_a_list_keep_their_order():
    reply = (
        '```action\n{"tool": "read_file", "args": {"path": "a.rs"}}\n```\n'
        "some thinking\n"
        '```action\n[{"tool": "build", "args": {}}, {"tool": "read_file", "arguments": {"path": "b.rs"}}]\n```\n'
        "```rust\nlet x = 1;\n```\n"
        '```action\n{"tool": "build"}\n```'
    )
    calls = parse_actions(reply, TOOLS, id_prefix="it7")
    assert [(c.id, c.name, c.arguments) for c in calls] == [
        ("it7_1", "read_file", {"path": "a.rs"}),
        ("it7_2", "build", {}),
        ("it7_3", "read_file", {"path": "b.rs"}),
        ("it7_4", "build", {}),
    ]
    assert parse_actions("just thinking, no action yet") == []


@pytest.mark.parametrize(
    "reply, message",
    [
        ('```action\n{"tool": "read_file", "args": {"path": "a.rs"}\n```', r"action block 1 \(line 1\) is not valid JSON: Expecting ',' delimiter"),
        ("```action\n{'tool': 'build'}\n```", "double quotes"),
        ('```action\n{"tool": "build"}\n', "never closed"),
        ('```action\n{"tool": "build"}\n```action\n{"tool": "build"}\n```', "not closed before the next one"),
        ("```action\n\n```", "is empty"),
        ('```action\n{"args": {"path": "x"}}\n```', 'missing "tool"'),
        ('```action\n{"tool": "read_file", "args": "a.rs"}\n```', '"args" of read_file must be a JSON object'),
        ('```action\n{"tool": "read_file", "path": "a.rs"}\n```', r"unexpected keys \['path'\]"),
        ('```action\n{"tool": "rm_rf", "args": {}}\n```', "unknown tool 'rm_rf'; available: build, read_file, write_file"),
        ('```action\n[]\n```', "empty list"),
        ('```action\n"build"\n```', "expected a JSON object"),
        ('ok\n```action\n{"tool": "build"}\n```\n```action\n[{"tool": "build"}, 3]\n```', r"action block 2 \(line 5\), item 2"),
    ],
)
def test_malformed_replies_raise_a_message_the_model_can_act_on(reply, message):
    with pytest.raises(ActionFormatError, match=message):
        parse_actions(reply, TOOLS)


def test_results_are_numbered_like_the_actions():
    calls = parse_actions('```action\n[{"tool": "build"}, {"tool": "read_file", "args": {"path": "x"}}]\n```')
    text = format_results_as_text([
        {"id": calls[0].id, "name": "build", "ok": False, "text": "error[E0425]: cannot find value `y`"},
        (calls[1], "fn x() {}"),
    ])
    assert text.startswith("### result 1: build (error, text_1)\nerror[E0425]")
    assert "### result 2: read_file (ok, text_2)\nfn x() {}" in text
    assert format_results_as_text([]) == "(no actions were run)"


def test_detection_of_endpoints_that_refuse_tools():
    assert looks_like_no_tool_support("Error code: 400 - {'error': 'This model does not support tools'}")
    assert looks_like_no_tool_support(ValueError('"auto" tool choice requires --enable-auto-tool-choice'))
    assert not looks_like_no_tool_support("Error code: 429 - rate limited")


# -- the text-protocol model against a loopback OpenAI-compatible server ----------------------

import http.server  # noqa: E402
import threading  # noqa: E402

from vdbbench.agent.session.text_protocol import TextProtocolModel, to_text_messages  # noqa: E402


class _NoToolsServer(http.server.BaseHTTPRequestHandler):
    """Refuses any request with `tools` (as servers without tool calling do) and answers the
    others with the next scripted reply text."""

    requests: list[dict] = []
    replies: list[str] = []

    def do_POST(self):  # noqa: N802 - the http.server API
        body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        type(self).requests.append(body)
        if "tools" in body:
            self._send(400, {"error": {"message": "This model does not support tools", "type": "invalid_request_error"}})
            return
        text = type(self).replies.pop(0)
        self._send(200, {
            "id": "c1", "object": "chat.completion", "created": 0, "model": body["model"],
            "choices": [{"index": 0, "finish_reason": "stop", "message": {"role": "assistant", "content": text}}],
            "usage": {"prompt_tokens": 100, "completion_tokens": 20, "total_tokens": 120},
        })

    def _send(self, status, payload):
        data = json.dumps(payload).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def log_message(self, *args):
        pass


@pytest.fixture
def no_tools_server():
    _NoToolsServer.requests, _NoToolsServer.replies = [], []
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _NoToolsServer)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_address[1]}/v1"
    server.shutdown()
    server.server_close()


CONVERSATION = [
    {"role": "system", "content": "You optimize a Rust engine."},
    {"role": "user", "content": "Begin."},
    {"role": "assistant", "content": "Reading.", "tool_calls": [
        {"id": "call_1", "type": "function", "function": {"name": "read_file", "arguments": '{"path": "src/lib.rs"}'}}]},
    {"role": "tool", "tool_call_id": "call_1", "content": "1 fn main() {}"},
]


def test_conversation_is_rewritten_for_an_endpoint_without_tools():
    out = to_text_messages(CONVERSATION, SCHEMAS)
    assert [m["role"] for m in out] == ["system", "user", "assistant", "user"]
    assert out[0]["content"].startswith("You optimize a Rust engine.") and "### write_file" in out[0]["content"]
    assert out[2]["content"] == 'Reading.\n\n```action\n{"tool": "read_file", "args": {"path": "src/lib.rs"}}\n```'
    assert out[3]["content"] == "### result 1: read_file (ok, call_1)\n1 fn main() {}"
    assert parse_actions(out[2]["content"], TOOLS)[0].arguments == {"path": "src/lib.rs"}


def test_auto_mode_falls_back_to_text_and_returns_a_malformed_reply_to_the_model(no_tools_server):
    from vdbbench.agent.session.model import OpenAIModel

    _NoToolsServer.replies = [
        "Let me build.\n```action\n{\"tool\": \"build\", \"args\": {}\n```",  # malformed JSON
        "Fixed.\n```action\n{\"tool\": \"build\", \"args\": {}}\n```\n```action\n"
        "{\"tool\": \"read_file\", \"args\": {\"path\": \"src/lib.rs\", \"start_line\": 3}}\n```",
        "```action\n{\"tool\": \"build\"}\n```",
    ]
    inner = OpenAIModel("local-test", base_url=no_tools_server, api_key="x", max_retries=0)
    model = TextProtocolModel(inner, mode="auto")
    reply = model.query(CONVERSATION, SCHEMAS)
    assert [(c.name, json.loads(c.arguments)) for c in reply.tool_calls] == [
        ("build", {}), ("read_file", {"path": "src/lib.rs", "start_line": 3})]
    assert len({c.id for c in reply.tool_calls}) == 2
    # The refused native call, then the malformed reply, then the corrected one: all counted.
    assert [a.error is not None for a in reply.attempts] == [True, False, False]
    assert sum(a.total_tokens or 0 for a in reply.attempts) == 240
    reqs = _NoToolsServer.requests
    assert "tools" in reqs[0] and "tools" not in reqs[1] and "tools" not in reqs[2]
    assert "### read_file" in reqs[1]["messages"][0]["content"]
    assert reqs[2]["messages"][-1]["content"].startswith("Your reply could not be run, nothing was done: action block 1")
    assert "not valid JSON" in reqs[2]["messages"][-1]["content"]
    # Once switched, it stays on the text protocol: no more requests with tools.
    again = model.query(CONVERSATION, SCHEMAS)
    assert [c.name for c in again.tool_calls] == ["build"] and "tools" not in reqs[3]
    with pytest.raises(ValueError, match="'text' or 'auto'"):
        TextProtocolModel(inner, mode="native")
