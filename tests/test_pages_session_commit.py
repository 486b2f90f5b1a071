"""The session page reads diffs from the workspace by commit name only."""

from __future__ import annotations

import subprocess

from vdbbench.pages.session import commit_diff, session_page

from test_agent_long_journal import JournalBuilder


def _git(cwd, *args):
    return subprocess.run(["git", "-c", "user.name=t", "-c", "user.email=t@x", *args], cwd=cwd, check=True,
                          capture_output=True, text=True).stdout.strip()


def test_a_commit_that_is_a_git_option_writes_no_file(tmp_path):
    # The decision's commit went to `git show` as it was: "--output=FILE" in a journal (damaged, or
    # shared from another node) made `vdbbench agent report --html` create or overwrite FILE.
    ws = tmp_path / "run" / "workspace"
    ws.mkdir(parents=True)
    _git(ws, "init", "-q")
    (ws / "lib.rs").write_text("const A: u32 = 1;\n")
    _git(ws, "add", "lib.rs")
    _git(ws, "commit", "-qm", "start")
    (ws / "lib.rs").write_text("const A: u32 = 2;\n")
    _git(ws, "commit", "-qam", "two")
    sha = _git(ws, "rev-parse", "HEAD")
    target = tmp_path / "victim.txt"
    target.write_text("keep me\n")
    j = JournalBuilder()
    j.start()
    j.add("evaluation", split="heldout", candidate={"qps": 100.0, "recall10": 0.97}, best=None, gain=None)
    j.best_qps, j.best_recall = 100.0, 0.97
    j.submit("accepted", qps=120.0, recall=0.97, message="bad", commit=f"--output={target}")
    j.submit("accepted", qps=150.0, recall=0.97, message="good", commit=sha)
    j.write(tmp_path / "run")
    page = session_page(tmp_path / "run")
    assert target.read_text() == "keep me\n"
    assert commit_diff(ws, f"--output={target}") is None and "+const A: u32 = 2;" in commit_diff(ws, sha)
    assert "+const A: u32 = 2;" in page
