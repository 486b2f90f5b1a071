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


def test_task_card_prices_reach_the_cost_table(tmp_path):
    """A card's [prices] table overrides the built-in prices, and --prices FILE overrides the card."""
    import argparse
    import shutil

    from vdbbench.agent.cli import _prices
    from vdbbench.agent.core.task import load_task

    src = Path(__file__).parent / "fixtures" / "agent_task"
    card_path = tmp_path / "task.toml"
    shutil.copytree(src, tmp_path, dirs_exist_ok=True, ignore=shutil.ignore_patterns("target"))
    card_path.write_text(card_path.read_text() + '\n[prices]\n"my-model" = { prompt = 2.0, completion = 8.0 }\n')
    card = load_task(card_path)
    assert card.prices == {"my-model": {"prompt": 2.0, "completion": 8.0}}
    table = _prices(argparse.Namespace(prices=None), card)
    assert table.cost_of("my-model", 1_000_000, 1_000_000) == 10.0
    override = tmp_path / "prices.json"
    override.write_text('{"my-model": {"prompt": 1.0, "completion": 1.0}}')
    assert _prices(argparse.Namespace(prices=str(override)), card).cost_of("my-model", 1_000_000, 0) == 1.0
