"""Resume on a journal damaged in the middle (an editor, a disk fault, a copy cut short, two files
joined): no accepted change that can be read is lost, the user is told which lines were skipped,
the file is never rewritten, and the best after resume is the branch's head with its journaled
figures. One real session on the fixture engine (two accepted changes, a dead model server at the
end), copied for each kind of damage; the resumes themselves build and time nothing."""

from __future__ import annotations

import json
import os
import shutil
import subprocess

import pytest

from vdbbench.agent.core.journal import read_events
from vdbbench.agent.core.task import load_task
from vdbbench.agent.session.loop import Session, SessionError
from vdbbench.agent.session.model import ModelUnavailable, ScriptedModel

from test_agent_loop import FIXTURE, LIB, git_log

pytestmark = pytest.mark.skipif(shutil.which("cargo") is None, reason="needs a Rust toolchain (cargo)")


def _edit(old, new):
    return ("edit_file", {"path": LIB, "old": old, "new": new})


def _dead_server(messages):
    raise ModelUnavailable("the endpoint is gone: connection refused after 3 attempts")


def _interrupt(messages):
    raise KeyboardInterrupt  # ends the resumed session without its final measurement


@pytest.fixture(scope="module")
def base_run(tmp_path_factory):
    """A session with iteration 1 accepted (four passes -> two), 2 no_change, 3 accepted (two ->
    one), then the model server dies: the session ends as it does then, resumable."""
    root = tmp_path_factory.mktemp("damaged")
    repo = root / "user"
    shutil.copytree(FIXTURE, repo, ignore=shutil.ignore_patterns("target"))
    card = repo / "task.toml"
    card.write_text(card.read_text().replace('[tests]\nmanifest = "core/Cargo.toml"\ntimeout_s = 300\n', "[tests]\nenabled = false\n"))
    env = {**os.environ, "GIT_AUTHOR_NAME": "u", "GIT_AUTHOR_EMAIL": "u@x", "GIT_COMMITTER_NAME": "u", "GIT_COMMITTER_EMAIL": "u@x"}
    for cmd in (["init", "-q", "-b", "main"], ["add", "-A"], ["commit", "-q", "-m", "user work"]):
        subprocess.run(["git", *cmd], cwd=repo, check=True, env=env)
    steps = [
        {"tool_calls": [_edit("const PASSES: usize = 4;", "const PASSES: usize = 2;"), ("submit", {"message": "two passes"})]},
        {"tool_calls": [("submit", {"message": "the same again"})]},
        {"tool_calls": [_edit("const PASSES: usize = 2;", "const PASSES: usize = 1;"), ("submit", {"message": "one pass"})]},
        _dead_server,
    ]
    session = Session.create(load_task(card), ScriptedModel(steps), root / "runs", "base")
    end = session.run()
    run = root / "runs" / "base"
    events = read_events(run / "journal.jsonl")
    decisions = [e for e in events if e["type"] == "decision"]
    assert end["reason"] == "model_unavailable"
    assert [d["outcome"] for d in decisions] == ["accepted", "no_change", "accepted"], [d["reason"] for d in decisions]
    return run, decisions


def _copy(base_run, tmp_path, damage=None):
    """A copy of the run with `damage(lines, at)` applied to its journal (`at`: the 0-based lines
    of the three decisions); the copy, its journal's bytes and `at`."""
    run, decisions = base_run
    copy = tmp_path / "run"
    shutil.copytree(run, copy, symlinks=True)
    path = copy / "journal.jsonl"
    lines = path.read_bytes().splitlines(keepends=True)
    at = [next(n for n, line in enumerate(lines) if json.loads(line)["seq"] == d["seq"]) for d in decisions]
    if damage is not None:
        damage(lines, at)
        path.write_bytes(b"".join(lines))
    return copy, path.read_bytes(), at


def _resume(run, steps=()):
    """Resume, submit the unchanged best once, and stop (an interrupt: no final measurement)."""
    model = ScriptedModel([*steps, {"tool_calls": [("submit", {"message": "unchanged"})]}, _interrupt])
    session = Session.resume(run, model)
    best = (session.best.commit, session.best.qps, session.best.recall10)
    with pytest.raises(KeyboardInterrupt):
        session.run()
    return session, best, model


def _check(run, before, base_run, session, best, capsys, skipped_line):
    """What every resume must hold: the old bytes kept, seqs never reused, the best the head's."""
    _, decisions = base_run
    one, three = decisions[0], decisions[2]
    data = (run / "journal.jsonl").read_bytes()
    assert data.startswith(before)  # read past and appended to, never rewritten
    new = [json.loads(line) for line in data[len(before):].splitlines()]
    old_seqs = [e["seq"] for e in read_events(run / "journal.jsonl") if e not in new]
    assert [e["seq"] for e in new] == sorted({e["seq"] for e in new}) and min(e["seq"] for e in new) > max(old_seqs)
    assert min(e["seq"] for e in new) >= before.count(b"\n")  # above the damaged line's seq too
    head = git_log(run / "workspace")[0].split()[0]
    assert head == three["commit"] and best == (three["commit"], three["qps"], three["recall10"])
    # The next submission is iteration 4, judged against that best.
    last = [e for e in new if e["type"] == "decision"][-1]
    assert (last["iteration"], last["outcome"]) == (4, "no_change") and three["commit"][:12] in last["reason"]
    assert session.facts().usage.submissions == 4
    accepted = [d["commit"] for d in session.facts().accepted]
    assert accepted == [one["commit"], three["commit"]]
    # The user was told, in one line, which line was skipped; the journal says it too.
    err = capsys.readouterr().err
    said = [line for line in err.splitlines() if f"line {skipped_line}" in line]
    assert len(said) == 1 and said[0].startswith("WARNING") and "kept as it is" in said[0], err
    assert any(e["type"] == "error" and e["where"] == "journal" and f"line {skipped_line}" in e["text"] for e in new)
    return new


def test_resume_after_a_dead_model_server_loses_nothing(base_run, tmp_path, capsys):
    run, before, _ = _copy(base_run, tmp_path)
    session, best, model = _resume(run)
    _, decisions = base_run
    assert best == (decisions[2]["commit"], decisions[2]["qps"], decisions[2]["recall10"])
    assert [d["outcome"] for d in session.facts().decisions] == ["accepted", "no_change", "accepted", "no_change"]
    assert "one pass" in model.seen[0][-1]["content"] and "two passes" in model.seen[0][-1]["content"]
    assert (run / "journal.jsonl").read_bytes().startswith(before) and "damage" not in capsys.readouterr().err


def test_a_damaged_line_between_two_accepted_changes_hides_neither(base_run, tmp_path, capsys):
    # The no_change decision's line, cut short (an editor, a copy cut short): resume read only
    # the events before it. The later accepted change was "recovered after a crash" as a second
    # iteration 2, the budget counted one submission too few, and the new events took the seqs
    # of the ones it could not see.
    def damage(lines, at):
        lines[at[1]] = lines[at[1]][:25] + b"\n"

    run, before, at = _copy(base_run, tmp_path, damage)
    session, best, _ = _resume(run)
    new = _check(run, before, base_run, session, best, capsys, at[1] + 1)
    assert not [e for e in new if e["type"] == "error" and e["where"] == "resume"]  # nothing to recover
    assert not [e for e in new if e["type"] == "decision" and e.get("recovered")]


def test_an_accepted_decision_on_a_damaged_line_is_recovered_from_its_commit(base_run, tmp_path, capsys):
    # Iteration 1's accepted decision zeroed by a disk fault: its commit is on the branch, with
    # its metrics trailer, so the change is journaled again from there, in its place (iteration
    # 1), and the best stays iteration 3's.
    def damage(lines, at):
        lines[at[0]] = b"\x00" * (len(lines[at[0]]) - 1) + b"\n"

    run, before, at = _copy(base_run, tmp_path, damage)
    session, best, _ = _resume(run)
    new = _check(run, before, base_run, session, best, capsys, at[0] + 1)
    _, decisions = base_run
    recovered = [e for e in new if e["type"] == "decision" and e.get("recovered")]
    assert len(recovered) == 1 and recovered[0]["commit"] == decisions[0]["commit"] and recovered[0]["iteration"] == 1
    assert recovered[0]["qps"] == pytest.approx(decisions[0]["qps"], rel=1e-3) and recovered[0]["message"] == "two passes"
    assert [d["iteration"] for d in session.facts().decisions] == [1, 2, 3, 4]


def test_the_bests_own_decision_on_a_damaged_line_is_recovered_from_its_commit(base_run, tmp_path, capsys):
    # The head's accepted decision garbled in the middle: recovered as iteration 3 with the
    # trailer's figures, which are the ones the decision journaled.
    def damage(lines, at):
        line = lines[at[2]]
        lines[at[2]] = line[:40] + b"#~" + line[60:]

    run, before, at = _copy(base_run, tmp_path, damage)
    line = at[2] + 1
    session, best, _ = _resume(run)
    _, decisions = base_run
    three = decisions[2]
    recovered = [e for e in (json.loads(x) for x in (run / "journal.jsonl").read_bytes()[len(before):].splitlines())
                 if e["type"] == "decision" and e.get("recovered")]
    assert len(recovered) == 1 and recovered[0]["commit"] == three["commit"] and recovered[0]["iteration"] == 3
    # The trailer rounds QPS to 3 decimals and recall to 6: the best is the journaled one, so rounded.
    assert best[0] == three["commit"] and best[1] == pytest.approx(three["qps"], rel=1e-6)
    assert best[2] == pytest.approx(three["recall10"], abs=1e-6)
    assert session.facts().usage.submissions == 4 and recovered[0]["best_qps_after"] == best[1]
    err = capsys.readouterr().err
    assert sum(f"line {line}" in x for x in err.splitlines()) == 1 and "iteration 3 (commit" in err


def test_a_journal_whose_accepted_change_is_not_on_the_branch_is_refused_untouched(base_run, tmp_path):
    # A journal joined from another run, or a branch moved by hand: the journal's last accepted
    # change is not in the workspace. Resuming judged later submissions against the head while
    # stating the journal's best figures; now it refuses, says what to do, and writes nothing.
    _, decisions = base_run
    run, before, _ = _copy(base_run, tmp_path)
    subprocess.run(["git", "update-ref", "refs/heads/session", decisions[0]["commit"]], cwd=run / "workspace", check=True)
    with pytest.raises(SessionError, match="not of one session") as info:
        Session.resume(run, ScriptedModel([]))
    assert "update-ref" in str(info.value) and decisions[2]["commit"][:12] in str(info.value)
    assert (run / "journal.jsonl").read_bytes() == before
