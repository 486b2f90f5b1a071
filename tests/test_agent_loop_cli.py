"""`vdbbench agent` command line: usage errors exit 2 with a message saying what was wrong."""

from __future__ import annotations

from pathlib import Path

import pytest

from vdbbench.cli import main

FIXTURE = Path(__file__).parent / "fixtures" / "agent_task"


def test_run_needs_a_key_or_a_local_endpoint(monkeypatch, tmp_path, capsys):
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    code = main(["agent", "run", "--task", str(FIXTURE / "task.toml"), "--model", "m", "--runs-dir", str(tmp_path)])
    assert code == 2
    assert "OPENAI_API_KEY" in capsys.readouterr().err
    assert not any(tmp_path.iterdir())  # nothing was started


def test_bad_task_card_is_a_usage_error(tmp_path, capsys):
    card = tmp_path / "card.toml"
    card.write_text((FIXTURE / "task.toml").read_text().replace("repeats = 5", "repeats = 2"))
    code = main(["agent", "run", "--task", str(card), "--model", "m", "--base-url", "http://127.0.0.1:9/v1",
                 "--runs-dir", str(tmp_path / "runs")])
    assert code == 2
    err = capsys.readouterr().err
    assert "repeats must be >= 5" in err and str(card) in err
    assert main(["agent", "run", "--task", str(tmp_path / "missing.toml"), "--model", "m"]) == 2
    assert "does not exist" in capsys.readouterr().err


@pytest.mark.parametrize("sub", ["resume", "export"])
def test_resume_and_export_need_a_run_folder(tmp_path, capsys, sub):
    argv = ["agent", sub, str(tmp_path / "nope")] + (["-o", str(tmp_path / "x.patch")] if sub == "export" else [])
    assert main(argv) == 2
    assert "not a session run folder" in capsys.readouterr().err


def test_bad_budget_is_a_usage_error(tmp_path, capsys, monkeypatch):
    monkeypatch.setenv("OPENAI_API_KEY", "k")
    code = main(["agent", "run", "--task", str(FIXTURE / "task.toml"), "--model", "m", "--max-wall", "soon",
                 "--runs-dir", str(tmp_path)])
    assert code == 2
    assert "wall time" in capsys.readouterr().err
