"""The agent's tools on a plain workspace: path guard, exact-once edits, argument checking, task cards."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from vdbbench.agent.task import TaskError, load_task
from vdbbench.agent.tools import TOOL_NAMES, TOOL_SCHEMAS, FileTools, ToolArgumentError, parse_arguments

FIXTURE = Path(__file__).parent / "fixtures" / "agent_task"


@pytest.fixture
def card():
    return load_task(FIXTURE / "task.toml")


@pytest.fixture
def ws(tmp_path):
    (tmp_path / "core" / "src").mkdir(parents=True)
    (tmp_path / "core" / "src" / "lib.rs").write_text("fn a() {}\nfn b() {}\nfn b() {}\n")
    (tmp_path / "core" / "Cargo.toml").write_text("[package]\n")
    (tmp_path / "core" / "src" / "build.rs").write_text("fn main() {}\n")
    (tmp_path / "py").mkdir()
    (tmp_path / "py" / "lib.rs").write_text("// binding\n")
    return tmp_path


def test_schemas_cover_the_contract_tools():
    assert TOOL_NAMES == ["list_files", "read_file", "write_file", "edit_file", "build", "run_tests",
                          "benchmark", "profile", "submit", "revert_to_best", "note"]
    for schema in TOOL_SCHEMAS:
        json.dumps(schema)  # plain JSON, as the API expects
        assert schema["function"]["parameters"]["type"] == "object"


@pytest.mark.parametrize(
    "path, why",
    [
        ("/etc/passwd", "absolute"),
        ("../outside.rs", "'..'"),
        ("core/../../x.rs", "'..'"),
        ("core/Cargo.toml", "not editable"),
        ("core/src/build.rs", "not editable"),
        ("py/lib.rs", "not editable"),
        (".git/config", ".git"),
        ("~/x", "absolute"),
    ],
)
def test_writes_outside_the_editable_set_are_refused(ws, card, path, why):
    tools = FileTools(ws, card)
    before = {p: p.read_bytes() for p in ws.rglob("*") if p.is_file()}
    for result in (tools.write_file(path, "hacked"), tools.edit_file(path, "fn", "hacked")):
        assert not result.ok and result.refused
        assert why in result.text
    assert {p: p.read_bytes() for p in ws.rglob("*") if p.is_file()} == before
    assert not (ws.parent / "outside.rs").exists()


def test_symlinks_are_refused_even_inside_the_editable_set(ws, card, tmp_path_factory):
    outside = tmp_path_factory.mktemp("outside")
    (outside / "secret.rs").write_text("secret")
    os.symlink(outside, ws / "core" / "src" / "link")
    tools = FileTools(ws, card)
    for result in (tools.read_file("core/src/link/secret.rs"), tools.write_file("core/src/link/secret.rs", "x")):
        assert result.refused and "symbolic link" in result.text
    assert (outside / "secret.rs").read_text() == "secret"


def test_edit_must_match_exactly_once(ws, card):
    tools = FileTools(ws, card)
    missing = tools.edit_file("core/src/lib.rs", "fn c()", "fn d()")
    assert not missing.ok and "0 matches" in missing.text
    twice = tools.edit_file("core/src/lib.rs", "fn b() {}", "fn c() {}")
    assert not twice.ok and "occurs 2 times" in twice.text
    once = tools.edit_file("core/src/lib.rs", "fn a() {}", "fn a() { 1 }")
    assert once.ok and "line 1" in once.text
    assert (ws / "core" / "src" / "lib.rs").read_text().startswith("fn a() { 1 }\n")


def test_write_creates_new_files_in_editable_folders(ws, card):
    tools = FileTools(ws, card)
    res = tools.write_file("core/src/kernels/simd.rs", "pub fn f() {}\n")
    assert res.ok and (ws / "core/src/kernels/simd.rs").read_text() == "pub fn f() {}\n"


def test_read_numbers_lines_and_pages(ws, card):
    (ws / "core" / "src" / "long.rs").write_text("".join(f"// {i}\n" for i in range(1, 1001)))
    tools = FileTools(ws, card)
    res = tools.read_file("core/src/long.rs", start_line=10, end_line=12)
    assert "lines 10-12 of 1000" in res.text and "10| // 10" in res.text and "12| // 12" in res.text
    page = tools.read_file("core/src/long.rs")
    assert "start_line=401" in page.text
    assert tools.read_file("core/Cargo.toml").ok  # reading is allowed outside the editable set
    listing = tools.list_files(".").text
    assert "* core/src/lib.rs" in listing and "  core/Cargo.toml" in listing


def test_bad_arguments_say_what_was_expected():
    with pytest.raises(ToolArgumentError, match="not valid JSON"):
        parse_arguments("read_file", '{"path": ')
    with pytest.raises(ToolArgumentError, match="unknown tool 'rm_rf'"):
        parse_arguments("rm_rf", "{}")
    with pytest.raises(ToolArgumentError, match="needs the argument"):
        parse_arguments("edit_file", '{"path": "a"}')
    with pytest.raises(ToolArgumentError, match="must be a integer"):
        parse_arguments("read_file", '{"path": "a", "start_line": "3"}')
    with pytest.raises(ToolArgumentError, match="has no argument"):
        parse_arguments("build", '{"fast": true}')
    assert parse_arguments("build", "") == {}
    assert parse_arguments("submit", '{"message": "x"}') == {"message": "x"}


def test_task_card_errors_name_the_field(tmp_path):
    text = (FIXTURE / "task.toml").read_text()
    bad = tmp_path / "bad.toml"
    bad.write_text(text.replace("repeats = 5", "repeats = 3"))
    with pytest.raises(TaskError, match="repeats must be >= 5"):
        load_task(bad)
    bad.write_text(text.replace('paths = ["core/src/**"]', "paths = []"))
    with pytest.raises(TaskError, match=r"\[edit\] paths"):
        load_task(bad)
    bad.write_text(text.replace('name = "synth-float-3000"', 'name = "sift-1b"'))
    with pytest.raises(TaskError, match="sift-1b"):
        load_task(bad)
    bad.write_text(text + "\n[limits]\nbogus = 1\n")
    with pytest.raises(TaskError):
        load_task(bad)


def test_editable_globs(card):
    assert card.is_editable("core/src/lib.rs")
    assert card.is_editable("core/src/a/b/c.rs")
    assert not card.is_editable("core/Cargo.toml")
    assert not card.is_editable("core/src/build.rs")
    assert not card.is_editable("core/srcx/lib.rs")
