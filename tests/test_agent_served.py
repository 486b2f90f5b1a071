"""The served cards (the seed's task as the leaderboard scores it): a session on a real server
built from agent/serve-skeleton, judged over HTTP; wrong servers refused; the cards themselves."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import time
from pathlib import Path

import numpy as np
import pytest

from vdbbench.agent.core.task import TaskError, load_task, parse_cpus

REPO = Path(__file__).resolve().parents[1]
SKELETON = REPO / "agent" / "serve-skeleton"
CARD = REPO / "agent" / "tasks" / "serve-from-scratch.toml"
ENGINE = "src/engine.rs"

needs_cargo = pytest.mark.skipif(shutil.which("cargo") is None, reason="needs a Rust toolchain (cargo)")

# The tests build the skeleton with a quicker release profile (a cargo config beside the sources
# overrides the crate's own for these builds only): its dependencies are compiled once per cargo
# folder, and each submission's crate in seconds. The code under test is the skeleton's.
TEST_PROFILE = "[profile.release]\nopt-level = 1\ncodegen-units = 16\nincremental = true\n"


def quick_profile(folder: Path) -> None:
    (folder / ".cargo").mkdir(exist_ok=True)
    (folder / ".cargo" / "config.toml").write_text(TEST_PROFILE)


def test_the_cards_are_served_and_start_from_the_serve_skeleton():
    for name, n in (("serve-from-scratch", 100_000), ("serve-from-scratch-1m", 0)):
        card = load_task(REPO / "agent" / "tasks" / f"{name}.toml")
        assert card.evaluation.served and card.evaluation.clients == 4 and card.evaluation.warmup == 1000
        assert card.start.subdir == "agent/serve-skeleton" and card.artifact == "serve_skeleton"
        assert card.is_editable("src/engine.rs") and card.is_editable("src/engine/ivf.rs")
        assert not any(card.is_editable(p) for p in ("src/main.rs", "src/api.rs", "Cargo.toml"))
        assert card.objective.clock_kind == "wall" and card.objective.recall_floor == 0.95
        assert card.dataset.n == n and (card.dataset.name == "sift-1m") == (n == 0)
        assert Path(card.prompts, "task.md").is_file() and card.transfer.datasets


def test_a_served_card_is_checked(tmp_path):
    text = CARD.read_text()
    for old, new, match in (('kind = "served"', 'kind = "remote"', "expected inprocess or served"),
                            ('clock = "wall"', 'clock = "cpu"', "wall clock"),
                            ('cpus = "0-3"', 'cpus = "3-1"', "core list"),
                            ("clients = 4", "clients = 0", "clients >= 1"),
                            ('source = "none"', 'source = "engine"', "source must be")):
        bad = tmp_path / "card.toml"
        bad.write_text(text.replace("\n[task]", "\n[task]").replace(old, new))
        with pytest.raises(TaskError, match=match):
            load_task(bad)
    assert parse_cpus("0-2,5") == [0, 1, 2, 5] and parse_cpus("") == []


def test_agent_run_refuses_a_malformed_core_list(capsys):
    from vdbbench.cli import main

    assert main(["agent", "run", "--task", str(CARD), "--model", "m", "--cpus", "0-x"]) == 2
    assert "--cpus: core list '0-x'" in capsys.readouterr().err


def test_cores_are_cut_to_the_machine_and_said():
    from vdbbench.agent.evaluation.served import pinned_cores

    have = sorted(os.sched_getaffinity(0))
    cores, note = pinned_cores(f"{have[0]}-{have[-1] + 4}")
    assert cores == have and f"of {have[0]}-{have[-1] + 4} asked" in note
    assert pinned_cores("") == ([], "not pinned")
    cores, note = pinned_cores("4000")
    assert cores == [] and "none of the cores 4000" in note


# -- the engines a scripted model submits (exact text of the skeleton's engine.rs) ------------

SCAN = "        for (row, &id) in s.ids.iter().enumerate() {\n"
PUSH = "            push_top_k(&mut best, top_k, l2_squared(query, v), id);\n"


def _engine() -> str:
    return (SKELETON / ENGINE).read_text()


def slowed() -> str:
    """The skeleton scanning every vector forty times over: the start of the test session, far
    slower than the plain scan whatever the client's own cost per request."""
    return _engine().replace(PUSH, "            let mut d = 0.0f32;\n            for _ in 0..40 {\n"
                                   "                d = std::hint::black_box(l2_squared(query, v));\n            }\n"
                                   "            push_top_k(&mut best, top_k, d, id);\n")


def wrong_ids() -> str:
    return _engine().replace("best.into_iter().map(|(d, id)| (id, d.sqrt())).collect()",
                             "best.into_iter().map(|(d, id)| (id ^ 1, d.sqrt())).collect()")


def hard_coded() -> str:
    return _engine().replace("        let s = self.store.read().unwrap();\n        let mut best",
                             "        return (0..top_k as u64).map(|id| (id, 1.0)).collect();\n"
                             "        #[allow(unreachable_code)]\n        let s = self.store.read().unwrap();\n        let mut best")


def under_the_gate() -> str:
    """Scans only the first 88% of the vectors: recall@10 about 0.88, under the 0.95 gate."""
    return _engine().replace(SCAN, "        for (row, &id) in s.ids.iter().enumerate().take(s.ids.len() * 88 / 100) {\n")


@pytest.fixture
def served_repo(tmp_path):
    """A user's repository holding the serve skeleton with a slowed engine, and a small
    served card starting from it (3,000 vectors, short repeats, a transfer target of another seed)."""
    repo = tmp_path / "user"
    shutil.copytree(SKELETON, repo / "server", ignore=shutil.ignore_patterns("target"))
    (repo / "server" / ENGINE).write_text(slowed())
    quick_profile(repo / "server")
    card = CARD.read_text()
    for old, new in (('subdir = "agent/serve-skeleton"', 'subdir = "server"'),
                     ('prompts = "serve-prompts"', f'prompts = "{CARD.parent / "serve-prompts"}"'),
                     ('name = "synth-sift-100k"\n', 'name = "synth-sift-3000"\n'),
                     ("dev_queries = 300\nheldout_queries = 2000\nfresh_queries = 300",
                      "dev_queries = 100\nheldout_queries = 500\nfresh_queries = 100"),
                     ("warmup = 1000", "warmup = 100"),
                     ('datasets = [{ name = "synth-sift-100k", seed = 1, queries = 200, label = "synth-sift-100k (seed 1)" }]',
                      'datasets = [{ name = "synth-sift-3000", seed = 1, queries = 100 }]'),
                     ("repeats = 5\n", "repeats = 5\nrepeat_seconds = 0.3\ndev_repeat_seconds = 0.1\n"),
                     ("max_seconds = 300", "max_seconds = 4")):
        assert old in card, old
        card = card.replace(old, new)
    (repo / "task.toml").write_text(card)
    env = {**os.environ, "GIT_AUTHOR_NAME": "u", "GIT_AUTHOR_EMAIL": "u@x", "GIT_COMMITTER_NAME": "u", "GIT_COMMITTER_EMAIL": "u@x"}
    for cmd in (["init", "-q", "-b", "main"], ["add", "-A"], ["commit", "-q", "-m", "slowed skeleton"]):
        subprocess.run(["git", *cmd], cwd=repo, check=True, env=env)
    return repo


@needs_cargo
@pytest.mark.slow
def test_a_served_session_accepts_a_real_gain_and_refuses_wrong_servers(served_repo, tmp_path):
    """Builds of the skeleton judged through their HTTP servers: the unslowed scan is accepted
    (and holds on the transfer target), a server returning wrong ids, one returning a hard-coded
    answer and one under the recall gate are refused with the reason; no server outlives it."""
    from vdbbench.agent.core.journal import read_events
    from vdbbench.agent.session.loop import Session
    from vdbbench.agent.session.model import ScriptedModel

    os.environ.setdefault("VDBBENCH_AGENT_TARGET_DIR", str(REPO / "target" / "agent-fixture"))

    def put(text: str, message: str) -> dict:
        return {"tool_calls": [("write_file", {"path": ENGINE, "content": text}), ("submit", {"message": message})]}

    steps = [
        {"tool_calls": [("profile", {}), ("benchmark", {"max_seconds": 2})]},
        put(_engine(), "scan once"),
        put(wrong_ids(), "wrong ids"),
        put(hard_coded(), "hard-coded"),
        put(under_the_gate(), "skip the tail"),
        {"tool_calls": [("write_file", {"path": "src/main.rs", "content": "fn main() {}"})]},
    ]
    model = ScriptedModel(steps)
    session = Session.create(load_task(served_repo / "task.toml"), model, tmp_path / "runs", "served")
    session.run()
    events = read_events(tmp_path / "runs" / "served" / "journal.jsonl")
    dec = [e for e in events if e["type"] == "decision"]
    outcomes = [d["outcome"] for d in dec]
    assert outcomes[0] == "accepted", [(d["outcome"], d["reason"]) for d in dec]
    assert dec[0]["gain"] > 0.5 and dec[0]["pairs"] >= 5 and dec[0]["clock"] == "wall"
    assert dec[0]["recall10"] == 1.0 and dec[0]["fresh_recall10"] == 1.0
    assert outcomes[1:] == ["recall_below_floor", "flagged", "recall_below_floor"], [d["reason"] for d in dec]
    assert dec[1]["recall10"] < 0.2
    assert "anti-cheat" in dec[2]["reason"] and "Jaccard" in dec[2]["reason"]
    assert 0.8 < dec[3]["recall10"] < 0.95 and "under the floor 0.95" in dec[3]["reason"]
    # the transfer target (another draw of the generator) was checked on the accepted server
    transfer = [e for e in events if e["type"] == "transfer"]
    assert transfer and transfer[0]["holds"] and transfer[0]["targets"]
    # every evaluation says how the servers were run; the baseline is the start alone
    evals = [e for e in events if e["type"] == "evaluation"]
    assert all(e["dataset"]["server"]["clients"] == 4 for e in evals)
    assert all("exact-id" in e["dataset"]["server"]["recall"] for e in evals)
    # benchmark compared the servers; profile timed the server alone; main.rs is not editable
    results = [e for e in events if e["type"] == "tool_result"]
    by_name = {}
    for r in results:
        by_name.setdefault(r["name"], []).append(r)
    prof = by_name["profile"][0]
    assert prof["ok"] and "4 clients, one query per request" in prof["text"], prof["text"]
    assert re.search(r"own CPU time [0-9.]+ ms/query", prof["text"]) and "perf" in prof["text"]
    assert by_name["benchmark"][0]["ok"] and "current best" in by_name["benchmark"][0]["text"]
    assert by_name["write_file"][-1]["refused"]
    # the final measurement timed best against start through their servers
    final = [e for e in events if e["type"] == "final"]
    assert final and final[-1]["targets"], final
    # the system prompt is the served one
    assert "POST /search" in model.seen[0][0]["content"]
    for pid in session.evaluator.spawned:
        with pytest.raises(ProcessLookupError):
            os.kill(pid, 0)


@needs_cargo
@pytest.mark.slow
def test_the_skeleton_server_is_exact_and_refuses_bad_input(tmp_path):
    """The skeleton as the harness builds it answers exact neighbours over HTTP (ids and
    distances as numpy computes them, ties to the smaller id) and refuses bad requests with a
    4xx JSON error while it keeps serving."""
    import http.client

    from vdbbench.agent.core import workspace as wsp
    from vdbbench.agent.evaluation.served import CandidateServer

    card = load_task(CARD)
    wsp.create_workspace(card, tmp_path / "ws")
    quick_profile(tmp_path / "ws")
    target = Path(os.environ.get("VDBBENCH_AGENT_TARGET_DIR") or REPO / "target" / "agent-fixture")
    res = wsp.build(tmp_path / "ws", card, target, tmp_path / "build")
    assert res.ok, res.errors
    assert res.library == tmp_path / "build" / "serve_skeleton" and os.access(res.library, os.X_OK)
    rng = np.random.default_rng(0)
    base = rng.integers(0, 4, size=(500, 8)).astype(np.float32)  # small integers: many ties
    queries = rng.integers(0, 4, size=(20, 8)).astype(np.float32)
    log = tmp_path / "server.log"
    server = CandidateServer(res.library, card, log, deadline=time.monotonic() + 60, cores=[])
    conn = http.client.HTTPConnection("127.0.0.1", server.port, timeout=10)

    def post(path, body):
        conn.request("POST", path, body=body if isinstance(body, str) else json.dumps(body),
                     headers={"Content-Type": "application/json"})
        r = conn.getresponse()
        return r.status, json.loads(r.read())

    try:
        status, body = post("/search", {"vector": queries[0].tolist(), "top_k": 10})
        assert status == 400 and "before any insert" in body["error"]
        status, body = post("/bulk_insert", {"vectors": [{"id": i, "vector": v.tolist()} for i, v in enumerate(base)]})
        assert status == 200 and body == {"status": "ok", "inserted": 500}
        for bad, word in (({"id": 3, "vector": base[0].tolist()}, "already held"),
                          ({"id": 900, "vector": [1.0, 2.0]}, "dimension 2"),
                          ({"id": 901, "vector": []}, "empty")):
            status, body = post("/insert", bad)
            assert status == 400 and word in body["error"], body
        status, body = post("/search", "{not json")
        assert 400 <= status < 500 and body["error"]
        status, body = post("/search", {"vector": queries[0].tolist(), "top_k": 0})
        assert status == 400 and "top_k" in body["error"]
        status, body = post("/insert", {"id": 500, "vector": queries[0].tolist()})
        assert status == 200 and body == {"status": "ok"}
        full = np.vstack([base, queries[:1]])
        exact = ((queries[:, None, :].astype(np.float64) - full[None, :, :]) ** 2).sum(-1)
        ref = np.lexsort((np.broadcast_to(np.arange(full.shape[0]), exact.shape), exact), axis=1)[:, :10]
        for q, want in zip(queries, ref):
            status, body = post("/search", {"vector": q.tolist(), "top_k": 10})
            got = body["results"]
            assert status == 200 and [r["id"] for r in got] == want.tolist()
            d = [r["distance"] for r in got]
            np.testing.assert_allclose(d, np.sqrt(((full[want] - q) ** 2).sum(1)), rtol=1e-6)
    finally:
        conn.close()
        server.stop()
    assert server.proc.returncode is not None


@needs_cargo
@pytest.mark.slow
def test_evaluate_entry_measures_a_server_folder_with_the_cards_judge(served_repo, tmp_path, capsys):
    """`vdbbench agent evaluate-entry`: a server folder built as it is and measured by the card's
    judge here, paired with the card's start; a folder named as a published entry gets its
    published row beside, said to be from their machine."""
    from vdbbench.cli import main

    entry = tmp_path / "claude-opus-4.6-turn-1"
    shutil.copytree(served_repo / "server", entry)
    (entry / ENGINE).write_text(_engine())
    manifest = (entry / "Cargo.toml").read_text()  # the quick profile in its own manifest, built as it is
    (entry / "Cargo.toml").write_text(manifest[:manifest.index("[profile.release]")] + TEST_PROFILE + "\n[workspace]\n")
    target = os.environ.get("VDBBENCH_AGENT_TARGET_DIR") or str(REPO / "target" / "agent-fixture")
    rc = main(["agent", "evaluate-entry", str(entry), "--task", str(served_repo / "task.toml"), "--against", "start",
               "--target-dir", target, "--out", str(tmp_path / "out"), "--json", str(tmp_path / "entry.json")])
    out = capsys.readouterr().out
    assert rc == 0, out
    result = json.loads((tmp_path / "entry.json").read_text())
    assert result["recall10_ids"] == 1.0 and result["passes_gate"] and result["fresh_recall10_ids"] == 1.0
    assert result["gain"] > 0.5 and result["pairs"] >= 5 and result["against"] == "start"  # the plain scan vs the slowed start
    assert result["server"]["clients"] == 4 and result["published"]["qps"] > 3000
    assert "passes the 0.95 gate" in out and "published for claude-opus-4.6-turn-1: 3,548 QPS" in out
    assert "Xeon Platinum 8269CY" in out and "not this one" in out
    assert main(["agent", "evaluate-entry", str(tmp_path / "nowhere"), "--task", str(served_repo / "task.toml")]) == 2
    assert "is not a folder" in capsys.readouterr().err
    assert main(["agent", "evaluate-entry", str(entry), "--task", str(REPO / "agent" / "tasks" / "from-scratch.toml")]) == 2
    assert "not a served card" in capsys.readouterr().err
