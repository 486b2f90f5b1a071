"""The agent loop for real, offline: a scripted model and a loopback OpenAI-compatible server drive
sessions on the fixture engine (tests/fixtures/agent_task), with real cargo builds, real candidate
processes and the real judge. The planted redundant pass is worth ~4x, so no outcome here depends
on timing noise."""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import signal
import subprocess
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

from vdbbench.agent.core.journal import EVENT_TYPES, read_events
from vdbbench.agent.core.task import load_task
from vdbbench.agent.session.budget import price_table
from vdbbench.agent.session.loop import Session
from vdbbench.agent.session.model import OpenAIModel, ScriptedModel

FIXTURE = Path(__file__).parent / "fixtures" / "agent_task"
PYTHON_DIR = Path(__file__).resolve().parents[1] / "python"
LIB = "core/src/lib.rs"

pytestmark = pytest.mark.skipif(shutil.which("cargo") is None, reason="needs a Rust toolchain (cargo)")

# The edits of the scripted sessions (exact text of the fixture's core/src/lib.rs).
IMPROVE = ("const PASSES: usize = 4;", "const PASSES: usize = 1;")
BREAK_BUILD = ("fn l2(a: &[f32]", "fn l2(a: &[f32] oops")
BREAK_RECALL = ("self.data.chunks_exact(self.dim)) {", "self.data.chunks_exact(self.dim)).take(self.len() - self.len() / 8) {")
BREAK_TESTS = ("let mut ids_out = vec![-1i64; nq * k];", "let mut ids_out = vec![0i64; nq * k];")


def edit(old_new, path=LIB):
    return ("edit_file", {"path": path, "old": old_new[0], "new": old_new[1]})


@pytest.fixture(scope="module")
def cargo_target():
    """One cargo target folder shared by every agent test session (the same one the long-session
    tests use, under the repository's ignored target/): the first build takes about a minute,
    later ones are incremental."""
    target = Path(os.environ.get("VDBBENCH_AGENT_TARGET_DIR") or PYTHON_DIR.parent / "target" / "agent-fixture")
    old = os.environ.get("VDBBENCH_AGENT_TARGET_DIR")
    os.environ["VDBBENCH_AGENT_TARGET_DIR"] = str(target)
    yield target
    if old is None:
        os.environ.pop("VDBBENCH_AGENT_TARGET_DIR", None)
    else:
        os.environ["VDBBENCH_AGENT_TARGET_DIR"] = old


@pytest.fixture
def user_repo(tmp_path):
    """A user's checkout holding the fixture engine and its task card, committed."""
    repo = tmp_path / "user"
    shutil.copytree(FIXTURE, repo, ignore=shutil.ignore_patterns("target"))
    env = {**os.environ, "GIT_AUTHOR_NAME": "u", "GIT_AUTHOR_EMAIL": "u@x", "GIT_COMMITTER_NAME": "u", "GIT_COMMITTER_EMAIL": "u@x"}
    for cmd in (["init", "-q", "-b", "main"], ["add", "-A"], ["commit", "-q", "-m", "user work"]):
        subprocess.run(["git", *cmd], cwd=repo, check=True, env=env)
    (repo / "uncommitted.txt").write_text("work in progress\n")  # a dirty checkout must stay as it is
    return repo


def tree_hash(root: Path) -> str:
    """Every file and symlink under root, .git included, with its bytes and mode."""
    h = hashlib.sha256()
    for p in sorted(root.rglob("*")):
        rel = p.relative_to(root).as_posix()
        st = p.lstat()
        h.update(f"{rel}\0{st.st_mode}\0".encode())
        if p.is_file() and not p.is_symlink():
            h.update(p.read_bytes())
    return h.hexdigest()


def decisions(events):
    return [e for e in events if e["type"] == "decision"]


def git_log(ws: Path) -> list[str]:
    return subprocess.run(["git", "log", "--format=%H %s"], cwd=ws, capture_output=True, text=True, check=True).stdout.splitlines()


def test_scripted_session_keeps_only_the_real_gain(cargo_target, user_repo, tmp_path):
    before = tree_hash(user_repo)
    steps = [
        {"tool_calls": [("list_files", {"path": "."}), ("read_file", {"path": LIB, "start_line": 1, "end_line": 20})]},
        {"tool_calls": [("write_file", {"path": "core/Cargo.toml", "content": "[package]\nname='x'\n"})]},
        {"tool_calls": [edit(IMPROVE), ("build", {}), ("run_tests", {}), ("benchmark", {})]},
        {"tool_calls": [("submit", {"message": "compute each distance once instead of four times"})]},
        {"tool_calls": [edit(BREAK_BUILD), ("submit", {"message": "broken signature"})]},
        {"tool_calls": [("revert_to_best", {}), edit(BREAK_RECALL), ("submit", {"message": "scan 7/8 of the base"})]},
        {"tool_calls": [("revert_to_best", {}), edit(BREAK_TESTS), ("submit", {"message": "pad with id 0"})]},
        {"tool_calls": [("revert_to_best", {}), ("submit", {"message": "same code again"})]},
        {"tool_calls": [("submit", {"message": "and again"}), ("note", {"text": "PASSES=1 was the win"})]},
    ]
    card = load_task(user_repo / "task.toml")
    model = ScriptedModel(steps)
    session = Session.create(card, model, tmp_path / "runs", "s1")
    end = session.run()
    events = read_events(tmp_path / "runs" / "s1" / "journal.jsonl")

    # The journal is well formed: known types, strictly increasing seq.
    assert [e["seq"] for e in events] == list(range(len(events)))
    assert {e["type"] for e in events} <= EVENT_TYPES
    assert end["reason"] == "model_finished"

    outcomes = [d["outcome"] for d in decisions(events)]
    assert outcomes == ["accepted", "build_failed", "recall_below_floor", "tests_failed", "no_change", "no_change"]
    by = {d["outcome"]: d for d in decisions(events)}
    assert "core/src/lib.rs:" in by["build_failed"]["reason"]  # compiler error with file:line
    assert "recall@10" in by["recall_below_floor"]["reason"] and by["recall_below_floor"]["recall10"] < 0.95
    assert "pads_when_k_exceeds_n" in by["tests_failed"]["reason"]  # the failing test, by name
    assert all(d["reason"] for d in decisions(events))
    acc = by["accepted"]
    assert acc["qps"] > 2 * acc["best_qps_before"] and acc["recall10"] >= 0.95

    # The refusal: reported to the model, journaled, and nothing written.
    refused = [e for e in events if e["type"] == "tool_result" and e.get("refused")]
    assert len(refused) == 1 and "not editable" in refused[0]["text"]
    ws = tmp_path / "runs" / "s1" / "workspace"
    assert (ws / "core" / "Cargo.toml").read_text() == (FIXTURE / "core" / "Cargo.toml").read_text()

    # Exactly one accepted commit on the session branch, with its metrics; the working copy is the best.
    log = git_log(ws)
    assert len(log) == 2 and log[0].split()[0] == acc["commit"] == end["best"]["commit"]
    message = subprocess.run(["git", "log", "-1", "--format=%B"], cwd=ws, capture_output=True, text=True).stdout
    assert "vdbbench-metrics: " in message and "QPS" in message
    assert "const PASSES: usize = 1;" in (ws / LIB).read_text()
    audits = [e for e in events if e["type"] == "audit"]
    assert len(audits) == 1 and audits[0]["verdict"] == "clean" and audits[0]["commit"] == acc["commit"]

    # Every tool call was answered by id, and the model saw each reason.
    calls = [e["id"] for e in events if e["type"] == "tool_call"]
    results = [e["id"] for e in events if e["type"] == "tool_result"]
    assert calls == results
    last_seen = model.seen[-1]
    tool_texts = [m["content"] for m in last_seen if m["role"] == "tool"]
    assert any(t.startswith("ACCEPTED") for t in tool_texts)
    assert any("REJECTED" in t and "build_failed" in t for t in tool_texts)
    # Three submissions without a gain in a row brought a strategic review.
    assert any(e["type"] == "review" for e in events)

    # The user's checkout, its .git and its uncommitted file are byte-for-byte as they were.
    assert tree_hash(user_repo) == before

    # The winning diff goes back to the user as a patch that applies to their checkout.
    from vdbbench.cli import main

    patch = tmp_path / "best.patch"
    assert main(["agent", "export", str(tmp_path / "runs" / "s1"), "-o", str(patch)]) == 0
    text = patch.read_text()
    assert "-const PASSES: usize = 4;" in text and "+const PASSES: usize = 1;" in text
    check = subprocess.run(["git", "apply", "--check", str(patch)], cwd=user_repo, capture_output=True, text=True)
    assert check.returncode == 0, check.stderr


def test_candidate_faults_are_rejections_not_a_dead_harness(cargo_target, user_repo, tmp_path):
    card_path = user_repo / "task.toml"
    # A short time limit (the spinning candidate costs this much), still ample for a healthy
    # evaluation of the fixture (~1-2 s) on a busy machine.
    text = card_path.read_text().replace("eval_timeout_s = 60", "eval_timeout_s = 20").replace("memory_mb = 4096", "memory_mb = 2048")
    card_path.write_text(text)
    panic = ("let nq = queries.len() / self.dim;", "let nq = queries.len() / self.dim;\n        if nq > 20 { panic!(\"boom\"); }")
    hang = ("let nq = queries.len() / self.dim;", "let nq = queries.len() / self.dim;\n        while nq > 20 { std::hint::spin_loop(); }")
    hog = ("let nq = queries.len() / self.dim;", "let nq = queries.len() / self.dim;\n        if nq > 20 { let v = vec![1u8; 1 << 40]; std::hint::black_box(&v); }")
    steps = [
        {"tool_calls": [edit(panic), ("submit", {"message": "panics on big batches"})]},
        {"tool_calls": [("revert_to_best", {}), edit(hang), ("submit", {"message": "spins forever"})]},
        {"tool_calls": [("revert_to_best", {}), edit(hog), ("submit", {"message": "asks for a terabyte"})]},
        {"tool_calls": [("revert_to_best", {}), edit(IMPROVE), ("submit", {"message": "the real gain, still judged"})]},
    ]
    session = Session.create(load_task(card_path), ScriptedModel(steps), tmp_path / "runs", "faults")
    end = session.run()
    events = read_events(tmp_path / "runs" / "faults" / "journal.jsonl")
    got = {d["message"]: d for d in decisions(events)}
    assert got["the real gain, still judged"]["outcome"] == "accepted", got["the real gain, still judged"]["reason"]
    assert got["panics on big batches"]["outcome"] == "crashed" and "boom" in got["panics on big batches"]["reason"]
    assert got["spins forever"]["outcome"] == "timed_out" and "killed" in got["spins forever"]["reason"]
    assert got["asks for a terabyte"]["outcome"] == "crashed"
    assert "memory allocation" in got["asks for a terabyte"]["reason"] or "SIGABRT" in got["asks for a terabyte"]["reason"]
    assert got["the real gain, still judged"]["outcome"] == "accepted"
    assert end["reason"] == "model_finished"  # the spinning candidate was ended by its deadline, not waited on
    # No candidate process (nor anything in its process group) outlived its evaluation.
    assert len(session.evaluator.spawned) >= 8
    for pid in session.evaluator.spawned:
        with pytest.raises(ProcessLookupError):
            os.killpg(pid, 0)


# -- a loopback OpenAI-compatible endpoint ------------------------------------------------------

class FakeEndpoint:
    """chat.completions on 127.0.0.1: replays scripted replies (a dict, an int HTTP status, or a
    callable returning one), records every request body; when the script runs out it answers
    plain text without tool calls."""

    def __init__(self, script):
        self.script = list(script)
        self.requests: list[dict] = []
        self.lock = threading.Lock()
        outer = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *a):
                pass

            def do_POST(self):
                body = json.loads(self.rfile.read(int(self.headers.get("Content-Length", 0))) or b"{}")
                with outer.lock:
                    outer.requests.append(body)
                    item = outer.script.pop(0) if outer.script else {"content": "I am done."}
                if callable(item):
                    item = item()
                if isinstance(item, int):
                    data = json.dumps({"error": {"message": f"status {item}", "type": "server_error"}}).encode()
                    self.send_response(item)
                else:
                    data = json.dumps(completion(item, len(outer.requests))).encode()
                    self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()
        self.base_url = f"http://127.0.0.1:{self.server.server_address[1]}/v1"

    def close(self):
        self.server.shutdown()
        self.server.server_close()


def completion(item: dict, n: int) -> dict:
    calls = [{"id": f"srv_{n}_{i}", "type": "function", "function": {"name": name, "arguments": args if isinstance(args, str) else json.dumps(args)}}
             for i, (name, args) in enumerate(item.get("tool_calls", []))]
    message = {"role": "assistant", "content": item.get("content"), "reasoning_content": item.get("reasoning_content")}
    if calls:
        message["tool_calls"] = calls
    return {"id": f"cmpl-{n}", "object": "chat.completion", "created": 0, "model": "fake",
            "choices": [{"index": 0, "message": message, "finish_reason": "tool_calls" if calls else "stop"}],
            "usage": {"prompt_tokens": 1000 + n, "completion_tokens": 50, "total_tokens": 1050 + n}}


def test_real_openai_client_against_a_loopback_server(cargo_target, user_repo, tmp_path):
    script = [
        500,  # a server error: retried with back-off
        {"reasoning_content": "Look before editing.", "content": "Reading.",
         "tool_calls": [("list_files", {"path": "core"}), ("read_file", {"path": LIB, "start_line": 1, "end_line": 8})]},
        {"tool_calls": [("edit_file", '{"path": "core/src/lib.rs", "old": '), ("no_such_tool", {})]},
        {"tool_calls": [edit(IMPROVE), ("submit", {"message": "one pass"})]},
    ]
    server = FakeEndpoint(script)
    try:
        model = OpenAIModel("fake-model", base_url=server.base_url, api_key="test-key", backoff_s=0.01, max_retries=3)
        prices = price_table().with_overrides({"fake-model": {"prompt": 2.0, "completion": 8.0}})
        session = Session.create(load_task(user_repo / "task.toml"), model, tmp_path / "runs", "http", prices=prices)
        end = session.run()
    finally:
        server.close()
    events = read_events(tmp_path / "runs" / "http" / "journal.jsonl")
    calls = [e for e in events if e["type"] == "model_call"]
    assert calls[0]["error"] and "500" in calls[0]["error"] and calls[0]["attempt"] == 0
    assert calls[1]["error"] is None and calls[1]["attempt"] == 1 and calls[1]["prompt_tokens"] == 1002
    # The two calls of one reply were each answered by id, in the next request.
    second = server.requests[2]["messages"]
    assistant = [m for m in second if m["role"] == "assistant"][0]
    assert assistant["reasoning_content"] == "Look before editing."
    answered = [m["tool_call_id"] for m in second if m["role"] == "tool"]
    assert answered == ["srv_2_0", "srv_2_1"]
    # Malformed arguments and an unknown tool went back to the model as errors, by id.
    third = server.requests[3]["messages"]
    errors = {m["tool_call_id"]: m["content"] for m in third if m["role"] == "tool" and m["tool_call_id"].startswith("srv_3_")}
    assert "not valid JSON" in errors["srv_3_0"] and "unknown tool 'no_such_tool'" in errors["srv_3_1"]
    # The tools were sent as JSON-schema functions.
    assert {t["function"]["name"] for t in server.requests[1]["tools"]} >= {"submit", "edit_file", "benchmark"}
    assert [d["outcome"] for d in decisions(events)] == ["accepted"]
    assert end["reason"] == "model_stopped"  # the script ran out: three replies without a tool call
    assert end["totals"]["tokens"] > 0
    # Cost from the usage of each answered call and the price table: 2 USD / 1M prompt, 8 / 1M completion.
    priced = [c for c in calls if c["prompt_tokens"] is not None]
    assert end["totals"]["cost_usd"] == pytest.approx(
        sum(c["prompt_tokens"] * 2e-6 + c["completion_tokens"] * 8e-6 for c in priced), rel=1e-6)


def test_killed_harness_resumes_without_losing_the_accepted_change(cargo_target, user_repo, tmp_path):
    release = threading.Event()

    def hold():
        release.wait(120)
        return {"content": "..."}

    script = [{"tool_calls": [edit(IMPROVE), ("submit", {"message": "one pass"})]}, hold]
    server = FakeEndpoint(script)
    runs = tmp_path / "runs"
    env = {**os.environ, "PYTHONPATH": f"{PYTHON_DIR}{os.pathsep}{os.environ.get('PYTHONPATH', '')}",
           "OPENAI_API_KEY": "test-key"}
    proc = subprocess.Popen(
        [sys.executable, "-m", "vdbbench", "agent", "run", "--task", str(user_repo / "task.toml"), "--model", "fake",
         "--base-url", server.base_url, "--runs-dir", str(runs), "--run-id", "k", "--quiet"],
        env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, start_new_session=True)
    journal = runs / "k" / "journal.jsonl"
    try:
        deadline = time.monotonic() + 900  # a hang guard only: a loaded machine takes minutes
        while time.monotonic() < deadline and len(server.requests) < 2:
            assert proc.poll() is None, proc.stdout.read().decode()
            time.sleep(0.2)
        accepted = [d for d in decisions(read_events(journal)) if d["outcome"] == "accepted"]
        assert len(accepted) == 1, proc.stdout.read().decode() if proc.poll() is not None else "no decision yet"
        os.killpg(proc.pid, signal.SIGKILL)  # mid-session: the model call is in flight
        proc.wait(30)
    finally:
        release.set()
        server.close()
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
    commit = accepted[0]["commit"]
    assert read_events(journal)[-1]["type"] != "session_end"

    # A second copy of the run, killed between its commit and the journal line of the decision.
    torn = tmp_path / "runs" / "torn"
    shutil.copytree(runs / "k", torn, symlinks=True)
    lines = (torn / "journal.jsonl").read_text().splitlines(keepends=True)
    cut = next(i for i, line in enumerate(lines) if json.loads(line)["type"] == "decision")
    (torn / "journal.jsonl").write_text("".join(lines[:cut]) + lines[cut][:25])  # and a torn last line

    # The killed run resumes through the command line (against a new endpoint), the torn copy in-process.
    for run in (runs / "k", torn):
        if run == torn:
            model = ScriptedModel([{"tool_calls": [("submit", {"message": "unchanged"})]}])
            session = Session.resume(run, model)
            assert session.best.commit == commit
            end = session.run()
            first_prompt = "\n".join(m["content"] for m in model.seen[0])
        else:
            server = FakeEndpoint([{"tool_calls": [("submit", {"message": "unchanged"})]}])
            try:
                out = subprocess.run(
                    [sys.executable, "-m", "vdbbench", "agent", "resume", str(run), "--base-url", server.base_url,
                     "--quiet"], env=env, capture_output=True, text=True, timeout=300)
            finally:
                server.close()
            assert out.returncode == 0, out.stderr
            assert "no_change" in out.stdout  # the quiet view's line for the decision
            end = read_events(run / "journal.jsonl")[-1]
            first_prompt = "\n".join(m["content"] or "" for m in server.requests[0]["messages"])
        events = read_events(run / "journal.jsonl")
        assert [e["seq"] for e in events] == list(range(len(events)))
        assert [d["outcome"] for d in decisions(events)] == ["accepted", "no_change"]
        assert end["type"] == "session_end"
        assert end["best"]["commit"] == commit and end["best"]["qps"] == pytest.approx(accepted[0]["qps"], rel=1e-3)
        assert [e["resumed"] for e in events if e["type"] == "session_start"] == [False, True]
        # The resumed model was told the state: the accepted change and its metrics.
        assert "one pass" in first_prompt
        assert git_log(run / "workspace")[0].split()[0] == commit


def test_a_full_disk_while_a_winner_becomes_the_best_leaves_the_old_best_whole(cargo_target, user_repo, tmp_path, monkeypatch):
    # The disk fills up as the accepted library is copied to builds/best. The branch had already
    # moved: the session went on with its old best while HEAD was the winner ("no_change" for the
    # same edit) and judged every later submission against a truncated best library ("crashed").
    import errno

    import vdbbench.agent.evaluation.judge as judge_mod

    real_copy = judge_mod.shutil.copy2
    armed = []

    def copy2(src, dst, *a, **k):
        if armed and Path(dst).parent.name == "best":
            armed.clear()
            Path(dst).write_bytes(b"\x7fELF")  # what a write cut short by ENOSPC leaves
            raise OSError(errno.ENOSPC, "No space left on device")
        return real_copy(src, dst, *a, **k)

    steps = [{"tool_calls": [edit(IMPROVE), ("submit", {"message": "one pass"})]},
             {"tool_calls": [("submit", {"message": "one pass, the disk has room again"})]}]
    session = Session.create(load_task(user_repo / "task.toml"), ScriptedModel(steps), tmp_path / "runs", "full")
    start = session.best.commit
    monkeypatch.setattr(judge_mod.shutil, "copy2", copy2)
    armed.append(True)
    end = session.run()
    events = read_events(tmp_path / "runs" / "full" / "journal.jsonl")
    first = next(e for e in events if e["type"] == "tool_result" and e["name"] == "submit")
    assert not first["ok"] and "No space left" in first["text"]
    assert [d["outcome"] for d in decisions(events)] == ["accepted"], [d["reason"] for d in decisions(events)]
    commit = decisions(events)[0]["commit"]
    assert commit != start and git_log(session.ws)[0].split()[0] == commit and len(git_log(session.ws)) == 2
    assert end["best"]["commit"] == commit
    assert (session.builds / "best" / "COMMIT").read_text() == commit


def test_a_session_interrupted_before_its_reference_line_measures_it_on_resume(cargo_target, user_repo, tmp_path, monkeypatch):
    # Ctrl-C (or a kill) after the start version was measured but before the reference line was
    # journaled: the session resumed fine but never measured the reference, so its report,
    # page and leaderboard had no reference line for good.
    from vdbbench.agent.session import startup

    def interrupted(*a, **k):
        raise KeyboardInterrupt

    monkeypatch.setattr(startup, "measure_reference", interrupted)
    with pytest.raises(KeyboardInterrupt):
        Session.create(load_task(user_repo / "task.toml"), ScriptedModel([]), tmp_path / "runs", "ref")
    monkeypatch.undo()
    run = tmp_path / "runs" / "ref"
    assert not [e for e in read_events(run / "journal.jsonl") if e["type"] == "reference"]
    end = Session.resume(run, ScriptedModel([])).run()
    events = read_events(run / "journal.jsonl")
    refs = [e for e in events if e["type"] == "reference"]
    baseline = next(e for e in events if e["type"] == "evaluation" and e["best"] is None)
    assert len(refs) == 1 and refs[0]["source"] == "start" and refs[0]["qps"] == pytest.approx(baseline["candidate"]["qps"])
    assert end["reason"] == "model_finished"
    Session.resume(run, ScriptedModel([])).run()  # and only once
    assert len([e for e in read_events(run / "journal.jsonl") if e["type"] == "reference"]) == 1


def test_trees_sharing_a_target_folder_each_get_their_own_library(cargo_target, user_repo, tmp_path):
    """Two extracted trees of the same crate built in one target folder (the best version rebuilt
    on resume, or sessions sharing a folder) must each get a library built from their own code,
    even though extracted files carry their old commit times."""
    from vdbbench.agent.core import workspace as wsp

    card = load_task(user_repo / "task.toml")
    probe = ("import sys, importlib.machinery as m, numpy as np\n"
             "mod = m.ExtensionFileLoader('fixture_vdb', sys.argv[1]).load_module()\n"
             "i = mod.IvfIndex(dim=2); i.add(np.zeros((1, 2), np.float32))\n"
             "print(int(i.search(np.zeros((1, 2), np.float32), k=3)[1][0, 2]))\n")
    pads = []
    for n, pad in enumerate(("-1", "-7")):
        lib = user_repo / LIB
        lib.write_text(lib.read_text().replace("vec![-1i64; nq * k]", f"vec![{pad}i64; nq * k]"))
        # Commits dated long ago: `git archive` stamps the files with that date, older than any build.
        old = {**os.environ, "GIT_COMMITTER_DATE": "2001-01-01T00:00:00+00:00", "GIT_AUTHOR_DATE": "2001-01-01T00:00:00+00:00"}
        subprocess.run(["git", "-c", "user.name=u", "-c", "user.email=u@x", "commit", "-q", "--allow-empty", "-am", f"pad {pad}"],
                       cwd=user_repo, check=True, env=old)
        ws = tmp_path / f"tree{n}"
        wsp.create_workspace(card, ws)
        res = wsp.build(ws, card, cargo_target, tmp_path / f"lib{n}")
        assert res.ok, res.errors
        out = subprocess.run([sys.executable, "-c", probe, str(res.library)], capture_output=True, text=True, check=True)
        pads.append(int(out.stdout))
        lib.write_text(lib.read_text().replace(f"vec![{pad}i64; nq * k]", "vec![-1i64; nq * k]"))
    assert pads == [-1, -7]


def test_an_edit_older_than_another_trees_build_is_still_compiled(cargo_target, user_repo, tmp_path):
    """Sessions sharing a target folder: one writes a broken edit, another tree's build then
    starts in the folder, then the first builds. Its edit is older than that build, so cargo
    alone would call the other tree's library fresh and hand it back as this one's."""
    from vdbbench.agent.core import workspace as wsp

    card = load_task(user_repo / "task.toml")
    a, b = tmp_path / "a", tmp_path / "b"
    wsp.create_workspace(card, a)
    wsp.create_workspace(card, b)
    lib = b / LIB
    lib.write_text(lib.read_text().replace(*BREAK_BUILD))
    time.sleep(0.05)  # the edit strictly before the other build starts
    other = wsp.build(a, card, cargo_target, tmp_path / "lib-a")
    assert other.ok, other.errors
    broken = wsp.build(b, card, cargo_target, tmp_path / "lib-b")
    assert not broken.ok, f"a syntax error built in {broken.seconds:.2f} s: the other tree's library came back"
    assert "oops" in broken.errors
    # and the other tree, built again after it, gets its own library, not a failure
    again = wsp.build(a, card, cargo_target, tmp_path / "lib-a2")
    assert again.ok, again.errors


def test_reference_engine_is_built_from_its_own_revision_and_reported(cargo_target, user_repo, tmp_path):
    """A card whose reference is another revision of the engine (here the user's next commit, with
    the planted pass removed): built and measured once at the start, journaled as `reference`, and
    the report gives the best as a fraction of it."""
    from vdbbench.agent.reports import report

    lib = user_repo / LIB
    lib.write_text(lib.read_text().replace(*IMPROVE))
    subprocess.run(["git", "-c", "user.name=u", "-c", "user.email=u@x", "commit", "-q", "-am", "one pass"], cwd=user_repo, check=True)
    card_path = user_repo / "task.toml"
    text = card_path.read_text().replace('rev = "HEAD"', 'rev = "HEAD~1"', 1)
    text = text.replace('source = "start"', 'source = "engine"\nrev = "HEAD"\nmanifest = "py/Cargo.toml"\npackage = ""\nmodule = "fixture_vdb"')
    card_path.write_text(text)
    session = Session.create(load_task(card_path), ScriptedModel([]), tmp_path / "runs", "ref")
    end = session.run()
    assert end["reason"] == "model_finished"
    events = read_events(tmp_path / "runs" / "ref" / "journal.jsonl")
    refs = [e for e in events if e["type"] == "reference"]
    head = subprocess.run(["git", "rev-parse", "HEAD"], cwd=user_repo, capture_output=True, text=True).stdout.strip()
    assert len(refs) == 1 and refs[0]["source"] == "engine" and refs[0]["commit"] == head and refs[0]["cpu"]
    baseline = next(e for e in events if e["type"] == "evaluation" and e["best"] is None)["candidate"]["qps"]
    assert refs[0]["qps"] > 2 * baseline and refs[0]["recall10"] >= 0.95
    totals = report.totals(events)
    assert totals["reference_qps"] == refs[0]["qps"] and totals["of_reference"] == pytest.approx(baseline / refs[0]["qps"])
    assert any(e["type"] == "build" and e.get("what") == "reference" and e["ok"] for e in events)
