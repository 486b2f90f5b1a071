"""The agent's tools on a plain workspace: path guard, exact-once edits, search, argument checking,
the profile's rendering of engine stats, the task text's data facts, task cards."""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

import pytest

from vdbbench.agent.core.task import TaskError, load_task
from vdbbench.agent.evaluation.eval_data import EvalData, Split
from vdbbench.agent.session import profiling, prompts
from vdbbench.agent.session.machine import machine
from vdbbench.agent.session.tools import (
    MAX_SEARCH_HITS, TOOL_NAMES, TOOL_SCHEMAS, FileTools, ToolArgumentError, benchmark_stop, parse_arguments,
)

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
    assert TOOL_NAMES == ["list_files", "read_file", "search", "write_file", "edit_file", "build", "run_tests",
                          "benchmark", "profile", "check", "submit", "revert_to_best", "note"]
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


def test_search_finds_lines_in_the_editable_sources(ws, card):
    tools = FileTools(ws, card)
    res = tools.search("fn b()")
    assert res.ok and res.text.splitlines() == ["core/src/lib.rs:2: fn b() {}", "core/src/lib.rs:3: fn b() {}"]
    # Literal by default: "(" is no regex group; regex=true takes a Python regular expression.
    assert tools.search("fn [ab]").text.startswith("no match")
    assert len(tools.search(r"fn [ab]\(\)", regex=True).text.splitlines()) == 3
    assert tools.search("FN A", ignore_case=True).text == "core/src/lib.rs:1: fn a() {}"
    # The binding is not editable: not searched unless asked for by path (reading it is allowed).
    assert tools.search("binding").text.startswith("no match")
    assert tools.search("binding", path="py").text == "py/lib.rs:1: // binding"
    bad = tools.search("fn (", regex=True)
    assert not bad.ok and "not a valid regular expression" in bad.text
    assert tools.search("x", path="../").refused


def test_search_output_is_capped_and_says_what_was_left_out(ws, card):
    (ws / "core" / "src" / "many.rs").write_text("".join(f"let hit_{i} = {i};\n" for i in range(500)))
    (ws / "core" / "src" / "wide.rs").write_text("let hit = \"" + "x" * 5000 + "\";\n")
    res = FileTools(ws, card).search("hit")
    lines = res.text.splitlines()
    assert len(lines) == MAX_SEARCH_HITS + 1
    assert lines[0] == "core/src/many.rs:1: let hit_0 = 0;"
    assert lines[-1] == f"... and {501 - MAX_SEARCH_HITS} more matching lines in 2 file(s): narrow the pattern or the path"
    wide = FileTools(ws, card).search("hit", path="core/src/wide.rs").text
    assert wide.startswith("core/src/wide.rs:1: ") and len(wide) < 300 and wide.endswith(" ...")


def test_new_tool_arguments_are_checked():
    assert parse_arguments("search", {"pattern": "x", "regex": True}) == {"pattern": "x", "regex": True}
    with pytest.raises(ToolArgumentError, match="'regex' must be a boolean"):
        parse_arguments("search", {"pattern": "x", "regex": "yes"})
    with pytest.raises(ToolArgumentError, match="'nprobe' must be >= 1"):
        parse_arguments("benchmark", {"nprobe": 0})
    with pytest.raises(ToolArgumentError, match="'rerank' must be a integer"):
        parse_arguments("profile", {"rerank": True})
    assert parse_arguments("benchmark", {"nprobe": 48, "rerank": 0, "max_seconds": 5}) == {"nprobe": 48, "rerank": 0, "max_seconds": 5}


def test_benchmark_stops_when_the_interval_is_clear_of_zero_or_inside_the_margin(card):
    from vdbbench.agent.evaluation.judge import SequentialTest

    test = SequentialTest.for_card(card)  # margin 3%, the judge's per-look bound
    assert benchmark_stop(test, [0.1]) is None  # one pair: no interval yet
    assert "clear of zero" in benchmark_stop(test, [0.30, 0.31, 0.29])  # a 4x-planted-pass kind of gain
    assert "clear of zero" in benchmark_stop(test, [-0.20, -0.21, -0.19])  # a clear regression
    assert benchmark_stop(test, [0.08, -0.10, 0.02]) is None  # unclear: more pairs
    assert "within +-3%" in benchmark_stop(test, [0.001, -0.001, 0.0005, -0.0008, 0.0002, 0.0])  # no effect, known


STATS = {"nq": 150, "threads": 1, "routing_s": 0.002, "prescore_s": 0.006, "rerank_s": 0.001, "topk_s": 0.0005,
         "wall_s": 0.01, "lists_probed": 4800, "timers": {"route_tile": 0.0015, "seed_bound": 0.0004,
                                                           "prescore": {"tiles": 0.005}},
         "build": {"simd": "avx2", "tile_rows": 4}}


def test_profile_shows_every_field_of_the_stats_with_nested_timers():
    text = profiling.stats_text(STATS)
    # Stages as shares of wall x threads, what they leave out as overhead.
    assert "prescore: 0.006 s (60.0%)" in text and "routing: 0.002 s (20.0%)" in text
    assert "overhead (outside the stages): 0.0005 s (5.0%)" in text
    # The nested timers, each named (nested names dotted), in seconds with their share.
    assert "timers (named timers" in text
    assert "route_tile: 0.0015 s (15.0%)" in text and "seed_bound: 0.0004 s (4.0%)" in text
    assert "prescore.tiles: 0.005 s (50.0%)" in text
    # A nested mapping that is not timers, and the counters: shown as they are.
    assert "build: simd=avx2, tile_rows=4" in text
    assert "nq=150" in text and "lists_probed=4800" in text and "wall_s=0.01" in text and "threads=1" in text
    assert "no per-stage" in profiling.stats_text({"nq": 3, "timers": {"a": 1.0}})
    assert "last_search_stats() returned nothing" in profiling.stats_text(None)


def test_profile_says_when_perf_is_not_there():
    assert profiling.perf_missing("no-such-perf-here") == (
        "perf sampling: not available (no `no-such-perf-here` on this machine); the engine's timers above are all there is")
    assert (profiling.perf_missing() is None) == (shutil.which("perf") is not None)


def _data(n: int, dim: int, dataset: dict | None) -> EvalData:
    import numpy as np

    split = Split(np.zeros((2, dim), np.float32), np.zeros((2, 10), np.int64), np.zeros((2, 10), np.float32))
    return EvalData(np.zeros((n, dim), np.float32), "l2", split, split, split, dataset=dataset)


def test_the_task_text_states_the_data_as_loaded(card):
    import dataclasses

    sift = dataclasses.replace(card, dataset=dataclasses.replace(card.dataset, name="sift-1m", generator="", n=0, dim=4))
    # A registered set: the card does not know its size (n = 0); the loaded data does.
    assert prompts.data_text(sift) == "`sift-1m` (dimension 4, metric l2)"
    loaded = _data(1234, 4, {"name": "sift-1m", "loaded": "sift-1m", "synthetic": False})
    assert prompts.data_text(sift, loaded) == "`sift-1m` (1,234 base vectors of dimension 4, metric l2)"
    replica = _data(1234, 4, {"name": "sift-1m", "loaded": "synth-sift-1m", "synthetic": True})
    assert "loaded as `synth-sift-1m` (a generated replica" in prompts.data_text(sift, replica)
    system = prompts.system_prompt(prompts.packaged(), sift, machine(), loaded)
    assert "- Data: `sift-1m` (1,234 base vectors of dimension 4, metric l2)." in system
    assert "0 base vectors" not in prompts.system_prompt(prompts.packaged(), sift, machine())
    assert "$" not in system  # every template field filled


def test_a_write_that_fails_on_a_full_disk_leaves_the_file_as_it_was(ws, card):
    # write_text truncated the file before writing: when the disk filled up (here: the kernel's
    # file-size limit, which fails a write() just as ENOSPC does), the model's earlier edits to
    # that file were lost along with the new text. The write must be whole or not at all.
    resource = pytest.importorskip("resource")
    import signal

    tools = FileTools(ws, card)
    lib = ws / "core" / "src" / "lib.rs"
    before = lib.read_text()
    huge = "// " + "x" * 20_000 + "\n"
    old_limit = resource.getrlimit(resource.RLIMIT_FSIZE)
    old_handler = signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
    resource.setrlimit(resource.RLIMIT_FSIZE, (4096, old_limit[1]))
    try:
        edited = tools.edit_file("core/src/lib.rs", "fn a() {}", huge)
        written = tools.write_file("core/src/lib.rs", huge)
        created = tools.write_file("core/src/new.rs", huge)
    finally:
        resource.setrlimit(resource.RLIMIT_FSIZE, old_limit)
        signal.signal(signal.SIGXFSZ, old_handler)
    for res in (edited, written, created):
        assert not res.ok and "unchanged" in res.text, res.text
    assert lib.read_text() == before
    assert sorted(p.name for p in lib.parent.iterdir()) == ["build.rs", "lib.rs"]  # no half-written file left


@pytest.mark.parametrize("path, why", [("core/src/lib.rs\x00", "NUL"), ("core/src/lib.rs/x.rs", "is a file, not a folder")])
def test_paths_no_file_can_have_are_refused_not_harness_errors(ws, card, path, why):
    # A NUL in the path (ValueError) or a file used as a folder (FileExistsError, NotADirectoryError)
    # escaped the tools as exceptions: the model read "harness error", and the journal logged a
    # harness fault for what is bad model output.
    tools = FileTools(ws, card)
    for result in (tools.write_file(path, "x"), tools.edit_file(path, "fn", "x"), tools.read_file(path),
                   tools.list_files(path), tools.search("fn", path)):
        assert not result.ok and result.refused and why in result.text, result.text
    assert (ws / "core" / "src" / "lib.rs").read_text().startswith("fn a() {}")
