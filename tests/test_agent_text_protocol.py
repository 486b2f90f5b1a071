"""The text protocol for endpoints without tool calling (vdbbench.agent.text_protocol)."""

from __future__ import annotations

import json

import pytest

from vdbbench.agent.text_protocol import (
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
