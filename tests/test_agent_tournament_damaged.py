"""The leaderboard of a tournament whose sessions are missing, damaged or without a result.

Every model of the manifest is listed; a rollout whose folder is missing, whose journal cannot be
read, or that has no result (neither a final measurement nor an accepted change) is marked in the
table and the plot, named on stderr, and left out of the medians and the reached-target fraction
(never counted as zeros); the command exits 0 while one rollout can be read; nothing that was
written before (the sessions, the manifest) is changed. Fast: journals written by hand, no
session runs (a fake stands in for it).
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from test_agent_long_journal import JournalBuilder
from test_agent_tournament import FIXTURE, NODE_A, write_config, write_rollout
from vdbbench.agent.tournaments import leaderboard as lb
from vdbbench.agent.tournaments import tournament as tmod
from vdbbench.cli import main

DEAD_URL = "http://127.0.0.1:9/v1"
RUN_IDS = ["alpha-r1", "alpha-r2", "beta-r1", "beta-r2"]


def tournament_folder(tmp_path: Path) -> tuple[tmod.Tournament, Path]:
    """A runs folder with the manifest a tournament of alpha and beta (two rollouts each) writes."""
    cfg = write_config(tmp_path / "t.toml", FIXTURE / "task.toml", DEAD_URL, tmp_path / "runs")
    t = tmod.load_config(cfg)
    runs = Path(t.runs_dir)
    runs.mkdir(parents=True)
    tmod._write_manifest(t, {s["run_id"]: {"state": "finished"} for s in t.sessions()})
    return t, runs


def start(j: JournalBuilder, model: str, reference: float | None = 300.0) -> None:
    j.add("session_start", task={"path": "t.toml", "card": {"name": "fixture"}}, model=model, base_url=None,
          config={}, resumed=False, node=NODE_A)
    j.add("evaluation", split="heldout", candidate={"qps": 100.0, "recall10": 0.99}, best=None, gain=None, p_value=None)
    if reference is not None:
        j.add("reference", qps=reference, recall10=0.97)
    j.best_qps = 100.0


def no_accepted_change(run: Path, model: str, end: str | None = "model_stopped", final: bool = False) -> Path:
    """A session none of whose submissions was accepted; with `final`, the final measurement (the
    best is the start: 1.00x by definition) ends it."""
    j = JournalBuilder()
    start(j, model)
    j.tick(60).model_call(cost=0.01)
    j.submit("slower", qps=90.0, recall=0.97)
    if final:
        j.add("final", best_commit="s" * 40, start_commit="s" * 40, reason=end, interval=0.02, reference_is_start=False,
              targets=[{"key": "here", "label": "the card's data", "stopped": "same",
                        "ratios": {"start": {"ratio": 1.0, "lo": 1.0, "hi": 1.0, "half": 0.0, "pairs": 0}},
                        "recall10": {"best": 0.99, "start": 0.99}}])
    if end:
        j.add("session_end", reason=end, best={"qps": 100.0}, totals={})
    j.write(run)
    return run


def snapshot(runs: Path) -> dict[str, bytes]:
    return {str(p.relative_to(runs)): p.read_bytes() for p in sorted(runs.rglob("*")) if p.is_file()}


def leaderboard_cli(runs: Path, tmp_path: Path, capsys) -> tuple[int, str, str, dict]:
    before = snapshot(runs)
    code = main(["agent", "leaderboard", str(runs), "-o", str(tmp_path / "lb.png"), "--json", str(tmp_path / "lb.json")])
    out, err = capsys.readouterr()
    assert "Traceback" not in err, err
    assert snapshot(runs) == before  # the sessions and the manifest are read, never written
    doc = json.loads((tmp_path / "lb.json").read_text()) if code == 0 else {}
    return code, out, err, doc


def model_row(md: str, model: str) -> str:
    return next(line for line in md.splitlines() if line.startswith(f"| {model} |"))


def rollout_row(md: str, run: str) -> str:
    return next(line for line in md.splitlines() if line.startswith(f"| {run}"))


def test_sessions_the_manifest_names_but_that_are_missing_are_listed_and_left_out(tmp_path, capsys):
    t, runs = tournament_folder(tmp_path)
    write_rollout(runs, "alpha-r1", "scripted-alpha", [150.0, 300.0], reference=300.0)
    # alpha-r2 never started (the driver was interrupted); beta-r1 was deleted; beta-r2 died before
    # its journal began (its folder holds no journal).
    write_rollout(runs, "beta-r1", "scripted-beta", [120.0], reference=300.0)
    shutil.rmtree(runs / "beta-r1")
    (runs / "beta-r2").mkdir()
    code, out, err, doc = leaderboard_cli(runs, tmp_path, capsys)
    assert code == 0
    models = {m["model"]: m for m in doc["models"]}
    assert list(models) == ["scripted-alpha", "scripted-beta"]  # every model, the one without a result last
    alpha, beta = models["scripted-alpha"], models["scripted-beta"]
    assert alpha["rollouts"] == 2 and alpha["missing"] == 1 and alpha["with_result"] == 1
    assert alpha["speedup_median"] == pytest.approx(3.0)  # alpha-r1 alone, not the median with a zero
    assert alpha["vs_reference_median"] == pytest.approx(1.0) and alpha["reached_fraction"] == 1.0
    assert alpha["iterations_to_best_median"] == 2 and alpha["tokens_to_best_median"] == 2200
    assert beta["rollouts"] == 2 and beta["missing"] == 2 and beta["with_result"] == 0
    assert beta["speedup_median"] is None and beta["reached_fraction"] is None and beta["tokens_to_best_median"] is None
    assert doc["ranked_by"] == "vs_reference_median"  # a model without a result does not change the ranking
    rows = {r["run"]: r for r in doc["rollouts"]}
    assert list(rows) == RUN_IDS  # in the manifest's order
    assert {r: rows[r]["status"] for r in RUN_IDS} == {"alpha-r1": "ok", "alpha-r2": "missing",
                                                      "beta-r1": "missing", "beta-r2": "missing"}
    assert rows["alpha-r2"]["speedup"] is None and rows["alpha-r2"]["model"] == "scripted-alpha"
    assert "2 (1); left out: 1 missing" in model_row(out, "scripted-alpha")
    assert "2 (0); left out: 2 missing" in model_row(out, "scripted-beta")
    assert "missing" in rollout_row(out, "alpha-r2") and "no journal" in rollout_row(out, "beta-r2")
    for run in ("alpha-r2", "beta-r1", "beta-r2"):
        assert any(run in line and "missing" in line for line in err.splitlines()), err
    assert (tmp_path / "lb.png").stat().st_size > 5000


def test_an_empty_or_unreadable_journal_is_a_damaged_journal_left_out_and_a_torn_one_is_partial(tmp_path, capsys):
    t, runs = tournament_folder(tmp_path)
    write_rollout(runs, "alpha-r1", "scripted-alpha", [150.0, 300.0], reference=300.0)
    (runs / "alpha-r2").mkdir()
    (runs / "alpha-r2" / "journal.jsonl").write_text("")  # empty
    (runs / "beta-r1").mkdir()
    (runs / "beta-r1" / "journal.jsonl").write_bytes(b"\x00\x00\x00\n{not json\n")  # nothing in it can be read
    # beta-r2 is cut short after its accepted change: partial, its figures from what can be read.
    journal = write_rollout(runs, "beta-r2", "scripted-beta", [120.0], reference=300.0) / "journal.jsonl"
    lines = journal.read_text().splitlines(keepends=True)
    cut = next(i for i, line in enumerate(lines) if '"outcome": "slower"' in line)
    journal.write_text("".join(lines[:cut]) + lines[cut][:30])
    code, out, err, doc = leaderboard_cli(runs, tmp_path, capsys)
    assert code == 0
    rows = {r["run"]: r for r in doc["rollouts"]}
    assert {r: rows[r]["status"] for r in RUN_IDS} == {"alpha-r1": "ok", "alpha-r2": "damaged journal",
                                                      "beta-r1": "damaged journal", "beta-r2": "ok"}
    assert rows["beta-r1"]["model"] == "scripted-beta"  # from the manifest: the journal says nothing
    assert rows["beta-r2"]["journal_problems"] and rows["beta-r2"]["speedup"] == pytest.approx(1.2)
    models = {m["model"]: m for m in doc["models"]}
    assert models["scripted-alpha"]["damaged"] == 1 and models["scripted-alpha"]["speedup_median"] == pytest.approx(3.0)
    assert models["scripted-beta"]["damaged"] == 1 and models["scripted-beta"]["speedup_median"] == pytest.approx(1.2)
    assert "left out: 1 damaged journal" in model_row(out, "scripted-alpha")
    assert "damaged journal" in rollout_row(out, "alpha-r2") and "no events" in rollout_row(out, "alpha-r2")
    assert "(partial: damaged journal)" in rollout_row(out, "beta-r2")
    for run in ("alpha-r2", "beta-r1"):
        assert any(run in line and "damaged journal" in line for line in err.splitlines()), err
    assert (tmp_path / "lb.png").stat().st_size > 5000


def test_a_session_without_a_result_is_marked_and_not_counted_as_no_gain_or_zero_cost(tmp_path, capsys):
    t, runs = tournament_folder(tmp_path)
    write_rollout(runs, "alpha-r1", "scripted-alpha", [150.0, 300.0], reference=300.0)
    no_accepted_change(runs / "alpha-r2", "scripted-alpha")  # ended, nothing accepted, no final measurement
    no_accepted_change(runs / "beta-r1", "scripted-beta", end=None)  # interrupted before anything was accepted
    no_accepted_change(runs / "beta-r2", "scripted-beta", final=True)  # nothing accepted, measured: 1.00x
    code, out, err, doc = leaderboard_cli(runs, tmp_path, capsys)
    assert code == 0
    models = {m["model"]: m for m in doc["models"]}
    alpha, beta = models["scripted-alpha"], models["scripted-beta"]
    assert alpha["speedup_median"] == pytest.approx(3.0) and alpha["reached_fraction"] == 1.0
    assert alpha["tokens_to_best_median"] == 2200 and alpha["cost_to_best_median"] == pytest.approx(0.02)
    assert alpha["cost_usd"] == pytest.approx(0.03 + 0.01)  # what the rollout without a result spent is still spent
    assert alpha["no_result"] == 1 and alpha["with_result"] == 1
    assert beta["tokens_to_best_median"] is None and beta["reached_fraction"] == 0.0
    assert beta["no_result"] == 1 and beta["speedup_median"] == 1.0 and beta["measured"] == 1
    rows = {r["run"]: r for r in doc["rollouts"]}
    assert {r: rows[r]["status"] for r in RUN_IDS} == {"alpha-r1": "ok", "alpha-r2": "no result",
                                                      "beta-r1": "no result", "beta-r2": "ok"}
    for run in ("alpha-r2", "beta-r1"):
        assert rows[run]["speedup"] is None and rows[run]["vs_reference"] is None and rows[run]["reached_target"] is None
        assert "no result" in rollout_row(out, run)
        assert any(run in line and "no result" in line for line in err.splitlines()), err
    # Nothing was accepted: there is no best the model found, so nothing it cost to get there.
    assert rows["beta-r2"]["speedup"] == 1.0 and rows["beta-r2"]["tokens_to_best"] is None
    assert rows["beta-r2"]["iterations_to_best"] is None and rows["beta-r2"]["cost_to_best"] is None
    assert "left out: 1 no result" in model_row(out, "scripted-alpha")
    assert "1.00x |" in model_row(out, "scripted-beta")  # measured, so no "(k of n measured)"


def test_with_no_rollout_readable_the_leaderboard_is_refused_naming_each(tmp_path, capsys):
    t, runs = tournament_folder(tmp_path)
    (runs / "beta-r1").mkdir()
    (runs / "beta-r1" / "journal.jsonl").write_text("")
    code, out, err, doc = leaderboard_cli(runs, tmp_path, capsys)
    assert code == 2
    line = err.strip().splitlines()[-1]
    assert "no rollout can be read" in line
    assert all(run in line for run in RUN_IDS) and "damaged journal" in line and "missing" in line


@pytest.mark.parametrize("manifest, problem", [
    (b'{"schema": "vdbbench.agent-tournament/1", "sessions": [', "not JSON"),  # cut short as it was written
    (b"\xff\xfe{}", "not UTF-8"),
    (b'["alpha-r1", "alpha-r2"]', 'no "sessions" list'),
    (b'{"sessions": [{"model": "scripted-alpha"}]}', 'no "run_id"'),
    (b'{"sessions": [{"run_id": "../elsewhere", "model": "scripted-alpha"}]}', 'no "run_id"'),
])
def test_a_manifest_that_cannot_be_read_is_said_and_the_session_folders_found_are_the_rollouts(
        tmp_path, capsys, manifest, problem):
    t, runs = tournament_folder(tmp_path)
    write_rollout(runs, "alpha-r1", "scripted-alpha", [150.0, 300.0], reference=300.0)
    write_rollout(runs, "beta-r2", "scripted-beta", [120.0], reference=300.0)
    (runs / tmod.MANIFEST).write_bytes(manifest)  # alpha-r2 and beta-r1 are missing, and nothing can say so
    code, out, err, doc = leaderboard_cli(runs, tmp_path, capsys)  # the manifest is left as it is
    assert code == 0
    assert [r["run"] for r in doc["rollouts"]] == ["alpha-r1", "beta-r2"]
    assert all(r["status"] == "ok" for r in doc["rollouts"])
    said = [line for line in err.splitlines() if tmod.MANIFEST in line]
    assert len(said) == 1, err
    assert str(runs / tmod.MANIFEST) in said[0] and "cannot be read" in said[0] and problem in said[0]
    assert "the rollouts are the session folders found" in said[0] and "missing cannot be named" in said[0]
    assert doc["manifest_problems"] == [said[0].removeprefix("leaderboard: ")]
    assert any(tmod.MANIFEST in n and "cannot be read" in n for n in doc["notes"])
    assert f"{tmod.MANIFEST} cannot be read" in out  # the written leaderboard says it too


def test_a_session_reached_by_overlapping_paths_is_one_rollout(tmp_path, capsys, monkeypatch):
    t, runs = tournament_folder(tmp_path)
    write_rollout(runs, "alpha-r1", "scripted-alpha", [150.0, 300.0], reference=300.0)  # 3.00x
    write_rollout(runs, "alpha-r2", "scripted-alpha", [150.0], reference=300.0)  # 1.50x
    write_rollout(runs, "beta-r1", "scripted-beta", [120.0], reference=300.0)
    write_rollout(runs, "beta-r2", "scripted-beta", [110.0], reference=300.0)
    monkeypatch.chdir(tmp_path)
    # A session, then its runs folder (naming it again), the same folder spelt otherwise, and a
    # session of it once more, relative and through "..".
    args = [str(runs / "alpha-r1"), str(runs), "runs/./", "runs/beta-r1/../alpha-r1"]
    code = main(["agent", "leaderboard", *args, "-o", str(tmp_path / "lb.png"), "--json", str(tmp_path / "lb.json")])
    out, err = capsys.readouterr()
    assert code == 0, err
    doc = json.loads((tmp_path / "lb.json").read_text())
    assert [r["run"] for r in doc["rollouts"]] == RUN_IDS  # each once, where it first came
    models = {m["model"]: m for m in doc["models"]}
    assert models["scripted-alpha"]["rollouts"] == 2 and models["scripted-alpha"]["runs"] == ["alpha-r1", "alpha-r2"]
    assert models["scripted-alpha"]["speedup_median"] == pytest.approx(2.25)  # not the median of 3.0, 3.0, 1.5
    assert models["scripted-alpha"]["accepted"] == 3 and models["scripted-beta"]["rollouts"] == 2
    assert model_row(out, "scripted-alpha").startswith("| scripted-alpha | 2 (2) |")
    # A session named first, alone, whose journal says nothing takes the model the manifest names.
    (runs / "alpha-r2" / "journal.jsonl").write_text("")
    board = lb.leaderboard([runs / "alpha-r2", runs])
    assert [r["run"] for r in board["rollouts"]] == ["alpha-r2", "alpha-r1", "beta-r1", "beta-r2"]
    assert board["rollouts"][0]["model"] == "scripted-alpha" and board["rollouts"][0]["status"] == "damaged journal"


def test_the_tournament_writes_its_leaderboard_when_sessions_died_or_never_started(tmp_path, capsys, monkeypatch):
    cfg = write_config(tmp_path / "t.toml", FIXTURE / "task.toml", DEAD_URL, tmp_path / "runs")
    runs = tmp_path / "runs"

    def fake_session(spec):  # stands in for a session: no model, no build
        run, model = Path(spec["run_dir"]), spec["model"]["name"]
        if spec["run_id"] == "alpha-r2":
            raise RuntimeError("the worker was lost before the session began")
        if spec["run_id"] == "beta-r1":  # died as its journal was created
            run.mkdir()
            (run / "journal.jsonl").write_text("")
            raise RuntimeError("killed")
        write_rollout(runs, spec["run_id"], model, [150.0, 300.0] if model == "scripted-alpha" else [120.0], reference=300.0)
        return {"run_id": spec["run_id"], "reason": "model_stopped", "best": {}, "node": NODE_A}

    monkeypatch.setattr(tmod, "run_session", fake_session)
    monkeypatch.setattr(tmod, "_import_ray", lambda: None)
    assert main(["agent", "tournament", str(cfg), "--local"]) == 1  # two sessions did not finish
    out, err = capsys.readouterr()
    assert "Traceback" not in err
    md = (runs / "leaderboard.md").read_text()
    assert out == md
    assert "2 (1); left out: 1 missing" in model_row(md, "scripted-alpha")
    assert "2 (1); left out: 1 damaged journal" in model_row(md, "scripted-beta")
    assert "missing" in rollout_row(md, "alpha-r2") and "damaged journal" in rollout_row(md, "beta-r1")
    assert any("alpha-r2" in line and "missing" in line for line in err.splitlines()), err
    assert any("beta-r1" in line and "damaged journal" in line for line in err.splitlines()), err
    assert "--resume" in err.splitlines()[-1]
    board = json.loads((runs / "leaderboard.json").read_text())
    assert [r["run"] for r in board["rollouts"]] == RUN_IDS
    assert (runs / "leaderboard.png").stat().st_size > 5000
    states = {s["run_id"]: s["state"] for s in json.loads((runs / "tournament.json").read_text())["sessions"]}
    assert states == {"alpha-r1": "finished", "alpha-r2": "new", "beta-r1": "new", "beta-r2": "finished"}


def test_resuming_keeps_a_damaged_session_folder_aside_and_removes_only_unstarted_ones(tmp_path):
    """`run_session` starts a session with no readable journal event afresh: a folder whose journal
    is absent or empty is removed (nothing was decided there), one whose journal holds bytes that
    cannot be read is moved aside whole, never deleted."""
    runs = tmp_path / "runs"
    runs.mkdir()
    assert tmod.clear_unstarted(runs / "alpha-r1") is None  # no folder: nothing to do
    for name, journal in (("alpha-r2", None), ("beta-r1", b"")):
        d = runs / name
        (d / "workspace").mkdir(parents=True)
        if journal is not None:
            (d / "journal.jsonl").write_bytes(journal)
        assert tmod.clear_unstarted(d) is None and not d.exists()
    kept = []
    for _ in range(2):
        d = runs / "beta-r2"
        (d / "workspace").mkdir(parents=True)
        (d / "workspace" / "edit.rs").write_text("fn kept() {}")
        (d / "journal.jsonl").write_bytes(b"\x00\xff{not json\n")
        k = tmod.clear_unstarted(d)
        assert k is not None and not d.exists() and k.parent == runs
        assert k.name.startswith("beta-r2.damaged-")
        assert (k / "workspace" / "edit.rs").read_text() == "fn kept() {}"
        assert (k / "journal.jsonl").read_bytes() == b"\x00\xff{not json\n"
        kept.append(k)
    assert kept[0] != kept[1]  # a second one in the same second gets a name of its own
