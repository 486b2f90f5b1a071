"""Tournaments and the leaderboard.

The leaderboard is checked on hand-written journals; the tournament for real: two scripted models
served by a loopback OpenAI-compatible server (the real openai client in every session), two
rollouts each on the fixture task, real cargo builds and the real judge, on a local Ray with 2
CPUs. One Ray worker is killed in the middle of an evaluation and the driver itself is killed
later; `tournament --resume` finishes the job, and nothing accepted is lost.
"""

from __future__ import annotations

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

from test_agent_long_journal import JournalBuilder
from vdbbench.agent.core.journal import read_events
from vdbbench.agent.tournaments import leaderboard as lb
from vdbbench.agent.tournaments.tournament import TournamentError, load_config, session_state
from vdbbench.cli import main

FIXTURE = Path(__file__).parent / "fixtures" / "agent_task"
REPO = Path(__file__).resolve().parents[1]
LIB = "core/src/lib.rs"

# -- the leaderboard on hand-written journals ---------------------------------------------------

NODE_A = {"hostname": "node-a", "cpu_model": "Test CPU 3000", "cpus": 2}


def write_rollout(runs: Path, name: str, model: str, bests: list[float], reference: float | None,
                  flagged: int = 0, node=NODE_A, html: bool = False, cost: float = 0.01) -> Path:
    j = JournalBuilder()
    j.add("session_start", task={"path": "t.toml", "card": {"name": "fixture"}}, model=model, base_url=None,
          config={}, resumed=False, node=node)
    j.add("evaluation", split="heldout", candidate={"qps": 100.0, "recall10": 0.99}, best=None, gain=None, p_value=None)
    if reference is not None:
        j.add("reference", qps=reference, recall10=0.97)
    j.best_qps = 100.0
    for q in bests:
        j.tick(60).model_call(prompt_tokens=1000, completion_tokens=100, cost=cost)
        j.submit("accepted", qps=q, recall=0.97, message=f"to {q}")
    for _ in range(flagged):
        j.tick(60).model_call(cost=cost)
        j.submit("flagged", qps=10_000.0, recall=0.97, message="cache")
    j.tick(60).model_call(cost=cost)
    j.submit("slower", qps=90.0, recall=0.97)
    j.add("session_end", reason="model_stopped", best={"qps": j.best_qps}, totals={})
    run = runs / name
    j.write(run)
    if html:
        (run / "report.html").write_text("<html></html>")
    return run


def test_leaderboard_ranks_models_by_reached_target_and_cost_to_get_there(tmp_path):
    runs = tmp_path / "runs"
    write_rollout(runs, "a-r1", "model-a", [150.0, 300.0], reference=300.0, html=True)  # reaches 95% at iteration 2
    write_rollout(runs, "a-r2", "model-a", [290.0], reference=300.0)  # 290 >= 285: reached at iteration 1
    write_rollout(runs, "a-r3", "model-a", [200.0], reference=300.0, flagged=1)  # 200 < 285
    write_rollout(runs, "b-r1", "model-b", [120.0], reference=300.0)
    write_rollout(runs, "b-r2", "model-b", [130.0], reference=300.0)
    board = lb.leaderboard([runs], target=0.95)
    a, b = board["models"]
    assert a["model"] == "model-a" and b["model"] == "model-b"  # ranked by best / reference
    assert a["rollouts"] == 3 and a["finished"] == 3
    assert a["best_qps_median"] == 290.0 and (a["best_qps_min"], a["best_qps_max"]) == (200.0, 300.0)
    assert a["reached_target"] == 2 and a["with_reference"] == 3 and a["reached_fraction"] == pytest.approx(2 / 3)
    assert a["vs_reference_median"] == pytest.approx(290 / 300)
    assert a["accepted"] == 4 and a["flagged"] == 1
    assert a["iterations_to_best_median"] == 1  # 2, 1, 1
    assert a["iterations_to_target_median"] == 1.5  # 2 and 1, of the two that reached it
    rows = {r["run"]: r for r in board["rollouts"]}
    assert rows["a-r1"]["tokens_to_best"] == 2 * 1100 and rows["a-r1"]["cost_to_best"] == pytest.approx(0.02)
    assert rows["a-r1"]["html"].endswith("report.html") and rows["a-r2"]["html"] is None
    assert b["reached_fraction"] == 0.0 and b["speedup_median"] == pytest.approx(1.25)
    assert board["notes"] == []

    # The CLI: Markdown on stdout, JSON and the staircases PNG on request.
    out_json, png = tmp_path / "lb.json", tmp_path / "lb.png"
    assert main(["agent", "leaderboard", str(runs), "--json", str(out_json), "-o", str(png)]) == 0
    doc = json.loads(out_json.read_text())
    assert doc["schema"] == "vdbbench.agent-leaderboard/1" and [m["model"] for m in doc["models"]] == ["model-a", "model-b"]
    assert png.stat().st_size > 5000
    md = lb.to_markdown(doc)
    assert "| model-a | 3 (3) | 2.90x (0 of 3 measured) |" in md and "| 290 [200–300] |" in md
    assert "2/3 (67%)" in md and "[html](" in md
    assert "3.00x (product of accepted steps)" in md  # no final measurement here: the product, named as such


def test_leaderboard_without_a_reference_leaves_the_target_empty_and_says_so(tmp_path, capsys):
    runs = tmp_path / "runs"
    write_rollout(runs, "a-r1", "model-a", [300.0], reference=None)
    write_rollout(runs, "b-r1", "model-b", [200.0], reference=None,
                  node={"hostname": "node-b", "cpu_model": "Other CPU", "cpus": 8})
    board = lb.leaderboard([runs / "a-r1", runs / "b-r1"], target=0.95)
    assert all(m["reached_fraction"] is None and m["vs_reference_median"] is None for m in board["models"])
    assert board["ranked_by"] == "speedup_median"
    assert any("no session journaled a reference" in n for n in board["notes"])
    assert any("2 nodes" in n for n in board["notes"])  # raw QPS across nodes are not comparable
    md = lb.to_markdown(board)
    assert "| model-a | 1 (1) | 3.00x (0 of 1 measured) |  |  | 3.00x | 300 [300–300] |" in md


def test_leaderboard_bad_input_is_a_usage_error(tmp_path, capsys):
    assert main(["agent", "leaderboard", str(tmp_path / "nope")]) == 2
    assert "does not exist" in capsys.readouterr().err
    (tmp_path / "empty").mkdir()
    assert main(["agent", "leaderboard", str(tmp_path / "empty")]) == 2
    assert "holds no session" in capsys.readouterr().err
    write_rollout(tmp_path / "runs", "a-r1", "m", [200.0], reference=None)
    assert main(["agent", "leaderboard", str(tmp_path / "runs"), "--target", "0"]) == 2


# -- the config -----------------------------------------------------------------------------------

def write_config(path: Path, task: Path, base_url: str, runs: Path, rollouts: int = 2, extra: str = "",
                 models: tuple[str, ...] = ("alpha", "beta")) -> Path:
    prices = {"alpha": "{ prompt = 1.0, completion = 4.0 }", "beta": "{ prompt = 0.5, completion = 2.0 }"}
    tables = "".join(f"""
[[models]]
label = "{m}"
name = "scripted-{m}"
base_url = "{base_url}"
api_key_env = "VDBBENCH_TEST_{m.upper()}_KEY"
prices = {prices[m]}
tool_protocol = "native"
max_retries = 2
""" for m in models)
    path.write_text(f"""
[tournament]
name = "scripted"
task = "{task}"
rollouts = {rollouts}
runs_dir = "{runs}"
{extra}

[budgets]
iterations = 6
tool_calls = 60
{tables}""")
    return path


def test_config_is_checked_with_messages_that_say_what_was_expected(tmp_path):
    cfg = write_config(tmp_path / "t.toml", FIXTURE / "task.toml", "http://127.0.0.1:9/v1", tmp_path / "runs")
    t = load_config(cfg)
    assert [s["run_id"] for s in t.sessions()] == ["alpha-r1", "alpha-r2", "beta-r1", "beta-r2"]
    assert t.sessions()[0]["model"]["prices"] == {"prompt": 1.0, "completion": 4.0}
    bad = {
        'rollouts = 2': ('rollouts = 0', "rollouts must be a whole number from 1"),
        'name = "scripted"\n': ('name = "a b"\n', "plain name"),
        f'task = "{FIXTURE / "task.toml"}"': ('task = "missing.toml"', "does not exist"),
        'iterations = 6': ('iterations = -1', "[budgets]"),
        'label = "beta"': ('label = "alpha"', "share the label"),
        'tool_protocol = "native"\nmax_retries = 2\n\n[[models]]': ('tool_protocol = "smoke"\nmax_retries = 2\n\n[[models]]', "tool_protocol"),
        'prices = { prompt = 1.0, completion = 4.0 }': ('prices = { prompt = 1.0 }', "prices must be"),
    }
    for old, (new, message) in bad.items():
        cfg.write_text(cfg.read_text().replace(old, new))
        with pytest.raises(TournamentError, match=message.replace("[", r"\[")):
            load_config(cfg)
        cfg.write_text(cfg.read_text().replace(new, old))
    with pytest.raises(TournamentError, match="does not exist"):
        load_config(tmp_path / "none.toml")


def test_resume_needs_a_started_tournament_and_a_start_needs_a_fresh_folder(tmp_path, capsys):
    cfg = write_config(tmp_path / "t.toml", FIXTURE / "task.toml", "http://127.0.0.1:9/v1", tmp_path / "runs")
    assert main(["agent", "tournament", str(cfg), "--resume", "--local"]) == 2
    assert "nothing to resume" in capsys.readouterr().err
    (tmp_path / "runs").mkdir()
    (tmp_path / "runs" / "tournament.json").write_text("{}")
    assert main(["agent", "tournament", str(cfg), "--local"]) == 2
    assert "--resume" in capsys.readouterr().err


# -- scripted models on a loopback endpoint -------------------------------------------------------

# Each scripted model plays its moves in order; a move is done once its submit message shows in
# the conversation (its own call, or the resumed summary's list of decisions), so the policy holds
# no state: a session resumed after a crash replays exactly the moves whose decision was lost.
MOVES = {
    "scripted-alpha": [
        ("alpha: one distance pass instead of four", [("const PASSES: usize = 4;", "const PASSES: usize = 1;")], False),
        ("alpha: scan 7/8 of the base", [("self.data.chunks_exact(self.dim)) {",
                                          "self.data.chunks_exact(self.dim)).take(self.len() - self.len() / 8) {")], True),
    ],
    "scripted-beta": [  # the same gain, one failed build later
        ("beta: broken signature", [("fn l2(a: &[f32]", "fn l2(a: &[f32] oops")], False),
        ("beta: one distance pass instead of four", [("const PASSES: usize = 4;", "const PASSES: usize = 1;")], False),
    ],
}


def next_move(model: str, messages: list[dict]) -> dict:
    seen = []
    for m in messages:
        seen.append(str(m.get("content") or ""))
        for call in m.get("tool_calls") or []:
            seen.append(call["function"]["arguments"])
    text = "\n".join(seen)
    for message, edits, benchmark in MOVES[model]:
        if json.dumps(message)[1:-1] not in text and message not in text:
            calls = [("revert_to_best", {})] + [("edit_file", {"path": LIB, "old": o, "new": n}) for o, n in edits]
            calls += [("benchmark", {})] if benchmark else []
            return {"tool_calls": calls + [("submit", {"message": message})]}
    return {"content": "I have nothing more to try."}


class ScriptedEndpoint:
    """chat.completions on 127.0.0.1 for the scripted models above (chosen by the request's model)."""

    def __init__(self):
        self.requests = 0
        outer = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *a):
                pass

            def do_POST(self):
                body = json.loads(self.rfile.read(int(self.headers.get("Content-Length", 0))) or b"{}")
                outer.requests += 1
                reply = next_move(body["model"], body["messages"])
                n = outer.requests
                calls = [{"id": f"c{n}_{i}", "type": "function", "function": {"name": name, "arguments": json.dumps(args)}}
                         for i, (name, args) in enumerate(reply.get("tool_calls", []))]
                message = {"role": "assistant", "content": reply.get("content")}
                if calls:
                    message["tool_calls"] = calls
                prompt = sum(len(str(m.get("content") or "")) for m in body["messages"]) // 4
                data = json.dumps({
                    "id": f"cmpl-{n}", "object": "chat.completion", "created": 0, "model": body["model"],
                    "choices": [{"index": 0, "message": message, "finish_reason": "tool_calls" if calls else "stop"}],
                    "usage": {"prompt_tokens": prompt, "completion_tokens": 60, "total_tokens": prompt + 60},
                }).encode()
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        threading.Thread(target=self.server.serve_forever, daemon=True).start()
        self.base_url = f"http://127.0.0.1:{self.server.server_address[1]}/v1"

    def close(self):
        self.server.shutdown()
        self.server.server_close()


@pytest.fixture
def user_repo(tmp_path):
    repo = tmp_path / "user"
    shutil.copytree(FIXTURE, repo, ignore=shutil.ignore_patterns("target"))
    # The fresh-query re-check times one small batch; on a machine shared with builds and other
    # sessions it can come out at half speed, and these tests are not about the audit.
    card = repo / "task.toml"
    card.write_text(card.read_text().replace("[session]\n", "[session]\nfresh_tolerance = 0.85\n"))
    env = {**os.environ, "GIT_AUTHOR_NAME": "u", "GIT_AUTHOR_EMAIL": "u@x", "GIT_COMMITTER_NAME": "u", "GIT_COMMITTER_EMAIL": "u@x"}
    for cmd in (["init", "-q", "-b", "main"], ["add", "-A"], ["commit", "-q", "-m", "user work"]):
        subprocess.run(["git", *cmd], cwd=repo, check=True, env=env)
    return repo


def driver_env() -> dict:
    target = os.environ.get("VDBBENCH_AGENT_TARGET_DIR") or str(REPO / "target" / "agent-fixture")
    return {**os.environ, "PYTHONPATH": f"{REPO / 'python'}{os.pathsep}{os.environ.get('PYTHONPATH', '')}",
            "VDBBENCH_AGENT_TARGET_DIR": target, "VDBBENCH_TEST_ALPHA_KEY": "alpha-key", "VDBBENCH_TEST_BETA_KEY": "beta-key",
            "RAY_DISABLE_USAGE_STATS": "1", "RAY_USAGE_STATS_ENABLED": "0"}


def decisions(run: Path) -> list[dict]:
    return [e for e in read_events(run / "journal.jsonl") if e["type"] == "decision"]


def accepted_commits(run: Path) -> set[str]:
    return {d["commit"] for d in decisions(run) if d["outcome"] == "accepted"}


def git_log(ws: Path) -> list[str]:
    return subprocess.run(["git", "log", "--format=%H"], cwd=ws, capture_output=True, text=True, check=True).stdout.split()


# -- processes, read from /proc (Linux) -----------------------------------------------------------

def _proc(pid: int, name: str) -> str:
    try:
        return Path(f"/proc/{pid}/{name}").read_bytes().replace(b"\0", b" ").decode(errors="replace")
    except OSError:
        return ""


def evaluations_in_flight() -> list[tuple[int, Path]]:
    """(pid of the process that runs the session, run folder) for each candidate process now alive."""
    out = []
    for d in Path("/proc").iterdir():
        if not d.name.isdigit() or "harness_worker.py" not in _proc(int(d.name), "cmdline"):
            continue
        try:
            cwd = Path(os.readlink(d / "cwd"))
            ppid = int(_proc(int(d.name), "stat").rsplit(")", 1)[1].split()[1])
        except (OSError, IndexError, ValueError):
            continue
        if cwd.name == "eval-logs":
            out.append((ppid, cwd.parent))
    return out


def wait_for(cond, timeout: float, what: str, proc: subprocess.Popen, log: Path, poll: float = 0.02):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        got = cond()
        if got:
            return got
        if proc.poll() is not None:
            pytest.fail(f"the driver ended (status {proc.returncode}) before {what}:\n{log.read_text()[-4000:]}")
        time.sleep(poll)
    pytest.fail(f"timed out waiting for {what}:\n{log.read_text()[-4000:]}")


@pytest.mark.ray
@pytest.mark.heavy  # two minutes of rollouts on a local Ray: README, Test
@pytest.mark.skipif(shutil.which("cargo") is None, reason="needs a Rust toolchain (cargo)")
def test_tournament_on_local_ray_survives_a_killed_worker_and_a_dead_driver(user_repo, tmp_path):
    try:
        import ray  # noqa: F401
    except ImportError:
        pytest.skip("Ray is not installed (pip install '.[ray]'): the tournament on a Ray cluster was NOT tested")
    from vdbbench.agent.core import workspace as wsp
    from vdbbench.agent.core.task import load_task

    # Every session builds in a target folder of its own, copied from this warm one.
    seed = Path(driver_env()["VDBBENCH_AGENT_TARGET_DIR"])
    warm = wsp.build(user_repo, load_task(user_repo / "task.toml"), seed, tmp_path / "warm")
    assert warm.ok, warm.errors
    endpoint = ScriptedEndpoint()
    runs = tmp_path / "runs"
    cfg = write_config(tmp_path / "tournament.toml", user_repo / "task.toml", endpoint.base_url, runs,
                       extra=f'cargo_seed = "{seed}"')
    argv = [sys.executable, "-m", "vdbbench", "agent", "tournament", str(cfg), "--num-cpus", "2"]
    env = driver_env()
    log1 = tmp_path / "driver1.log"
    t0 = time.monotonic()
    with log1.open("wb") as out:
        driver = subprocess.Popen(argv, env=env, stdout=out, stderr=subprocess.STDOUT, start_new_session=True)
    try:
        # 1. Kill the Ray worker of a session in the middle of an evaluation that follows its
        #    accepted change: only that evaluation may be lost.
        def target():
            for pid, run in evaluations_in_flight():
                if accepted_commits(run) and "ray::" in _proc(pid, "cmdline") + _proc(pid, "comm"):
                    return pid, run
            return None

        worker, victim = wait_for(target, 600, "an evaluation after an accepted change", driver, log1)
        kept = accepted_commits(victim)
        os.kill(worker, signal.SIGKILL)
        killed_at = len(decisions(victim))

        # 2. Kill the driver (and the local Ray it started) once a session has finished and others have not.
        def one_finished():
            states = [session_state(runs / r) for r in ("alpha-r1", "alpha-r2", "beta-r1", "beta-r2")]
            return "finished" in states and any(s != "finished" for s in states)

        wait_for(one_finished, 600, "the first finished session", driver, log1, poll=0.1)
        os.killpg(driver.pid, signal.SIGKILL)
        driver.wait(30)
        unfinished = [r for r in ("alpha-r1", "alpha-r2", "beta-r1", "beta-r2") if session_state(runs / r) == "unfinished"]
        assert any(session_state(runs / r) != "finished" for r in ("alpha-r1", "alpha-r2", "beta-r1", "beta-r2"))

        # 3. `tournament --resume` picks up what the dead driver left.
        resumed = subprocess.run(argv + ["--resume"], env=env, capture_output=True, text=True, timeout=900)
        elapsed = time.monotonic() - t0
    finally:
        endpoint.close()
        if driver.poll() is None:
            os.killpg(driver.pid, signal.SIGKILL)
    assert resumed.returncode == 0, resumed.stdout[-3000:] + resumed.stderr[-6000:]
    print(f"\ntournament with a killed worker and a dead driver: {elapsed:.0f} s including Ray starts\n{resumed.stdout}")

    expected = {"alpha": ["accepted", "recall_below_floor"], "beta": ["build_failed", "accepted"]}
    for run in ("alpha-r1", "alpha-r2", "beta-r1", "beta-r2"):
        events = read_events(runs / run / "journal.jsonl")
        assert [e["seq"] for e in events] == list(range(len(events)))
        assert events[-1]["type"] == "session_end" and events[-1]["reason"] == "model_stopped", run
        assert [d["outcome"] for d in decisions(runs / run)] == expected[run.split("-")[0]], run
        best = events[-1]["best"]["commit"]
        assert git_log(runs / run / "workspace")[0] == best and best in accepted_commits(runs / run)
        starts = [e for e in events if e["type"] == "session_start"]
        assert all(s["node"]["hostname"] and s["node"]["cpu_model"] and s["node"].get("ray_node_id") for s in starts)
    # The killed session lost only the evaluation in flight: its accepted change is still its best,
    # and it resumed (a new segment) from its journal.
    final = read_events(victim / "journal.jsonl")
    assert kept <= accepted_commits(victim) and final[-1]["best"]["commit"] in kept
    assert sum(e["type"] == "session_start" and e["resumed"] for e in final) >= 1
    assert len(decisions(victim)) >= killed_at
    # Every session the dead driver left unfinished with a journal was resumed, not started again.
    for name in unfinished:
        starts = [e for e in read_events(runs / name / "journal.jsonl") if e["type"] == "session_start"]
        assert starts[0]["resumed"] is False and len([s for s in starts if not s["resumed"]]) == 1
        assert any(s["resumed"] for s in starts)

    board = json.loads((runs / "leaderboard.json").read_text())
    assert sorted(m["model"] for m in board["models"]) == ["scripted-alpha", "scripted-beta"]
    for m in board["models"]:
        assert m["rollouts"] == 2 and m["finished"] == 2 and m["accepted"] == 2 and m["flagged"] == 0
        assert m["reached_fraction"] == 1.0  # the fixture card's reference is its start version, journaled by every session
        assert m["cost_to_best_median"] > 0
    assert {m["model"]: m["iterations_to_best_median"] for m in board["models"]} == {"scripted-alpha": 1, "scripted-beta": 2}
    assert (runs / "leaderboard.png").stat().st_size > 5000
    assert "| scripted-alpha | 2 (2) |" in (runs / "leaderboard.md").read_text()
    manifest = json.loads((runs / "tournament.json").read_text())
    assert [s["state"] for s in manifest["sessions"]] == ["finished"] * 4
    # The sessions' own cargo folders on this node are gone once they finished.
    from vdbbench.agent.tournaments.tournament import _target_path

    assert not any(_target_path(spec).exists() for spec in load_config(cfg).sessions())


# -- a session resumed on another node measures its best there first ----------------------------

def test_moved_since_last_segment_compares_hostname_and_cpu():
    from vdbbench.agent.session.node import moved_since_last_segment, node_info

    here = node_info()
    assert here["hostname"] and here["cpu_model"] and here["cpus"] >= 1
    start = lambda node: {"type": "session_start", "node": node}  # noqa: E731
    assert not moved_since_last_segment([start(NODE_A)])
    assert not moved_since_last_segment([start(NODE_A), {"type": "decision"}, start(dict(NODE_A, cpus=4))])
    assert moved_since_last_segment([start(NODE_A), start(dict(NODE_A, hostname="node-b"))])
    assert moved_since_last_segment([start(NODE_A), start(dict(NODE_A, cpu_model="Other CPU"))])
    assert not moved_since_last_segment([start(None), start(NODE_A)])  # an older journal: nothing to say


@pytest.mark.skipif(shutil.which("cargo") is None, reason="needs a Rust toolchain (cargo)")
def test_a_session_resumed_on_another_node_measures_its_best_there_before_judging(user_repo, tmp_path, monkeypatch):
    from vdbbench.agent.core.task import load_task
    from vdbbench.agent.session.loop import Session
    from vdbbench.agent.session.model import ScriptedModel

    monkeypatch.setenv("VDBBENCH_AGENT_TARGET_DIR", driver_env()["VDBBENCH_AGENT_TARGET_DIR"])
    run = tmp_path / "runs" / "moved"
    Session.create(load_task(user_repo / "task.toml"), ScriptedModel([]), run.parent, run.name).run()
    lines = (run / "journal.jsonl").read_text().splitlines()
    first = json.loads(lines[0])
    first["node"] = dict(first["node"], hostname="another-node")  # as if the first segment ran elsewhere
    (run / "journal.jsonl").write_text("\n".join([json.dumps(first)] + lines[1:]) + "\n")
    for moved in (True, False):  # the second resume runs where the first one did: no new measurement
        before = len(read_events(run / "journal.jsonl"))
        session = Session.resume(run, ScriptedModel([]))
        new = read_events(run / "journal.jsonl")[before:]
        measured = [e for e in new if e["type"] == "evaluation" and e["best"] is None]
        assert len(measured) == (1 if moved else 0)
        if moved:
            assert session.best.qps == measured[0]["candidate"]["qps"]
        session.run()


@pytest.mark.skipif(shutil.which("cargo") is None, reason="needs a Rust toolchain (cargo)")
def test_without_ray_the_sessions_run_one_after_another_and_say_so(user_repo, tmp_path, monkeypatch, capsys):
    from vdbbench.agent.evaluation.timing_lock import ENV as LOCK_ENV
    from vdbbench.agent.tournaments import tournament as tmod

    env = driver_env()
    for name in ("VDBBENCH_AGENT_TARGET_DIR", "VDBBENCH_TEST_BETA_KEY"):
        monkeypatch.setenv(name, env[name])
    monkeypatch.delenv(LOCK_ENV, raising=False)
    monkeypatch.setattr(tmod, "_import_ray", lambda: None)  # as where Ray is not installed
    endpoint = ScriptedEndpoint()
    runs = tmp_path / "runs"
    cfg = write_config(tmp_path / "t.toml", user_repo / "task.toml", endpoint.base_url, runs, rollouts=1,
                       models=("beta",), extra=f'cargo_seed = "{env["VDBBENCH_AGENT_TARGET_DIR"]}"')
    try:
        assert main(["agent", "tournament", str(cfg)]) == 0
        err = capsys.readouterr().err
        assert "Ray is not installed" in err and "one after another" in err
        # --ray-address without Ray is refused with the line that installs it.
        assert main(["agent", "tournament", str(cfg), "--resume", "--ray-address", "127.0.0.1:1"]) == 2
        assert "pip install" in capsys.readouterr().err
    finally:
        endpoint.close()
    assert [d["outcome"] for d in decisions(runs / "beta-r1")] == ["build_failed", "accepted"]
    assert os.environ[LOCK_ENV] == tmod.default_timing_lock()  # the session timed under the node's lock
    assert (runs / "leaderboard.md").read_text().count("| scripted-beta | 1 (1) |") == 1
