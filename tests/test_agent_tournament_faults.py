"""Tournaments under bad input and faults: every mistake in a config or an option is a one-line
usage error (exit 2) found before any session starts, never a traceback, a hang, or an error hours
later; a driver that is interrupted or cannot write leaves the runs folder telling the truth; the
leaderboard names what it is missing. Fast: no session runs here unless said (small fakes instead).
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from test_agent_tournament import FIXTURE, write_config, write_rollout
from vdbbench.agent.tournaments import leaderboard as lb
from vdbbench.agent.tournaments import tournament as tmod
from vdbbench.cli import main

DEAD_URL = "http://127.0.0.1:9/v1"


def exit_code(argv: list[str]) -> int:
    try:
        return main(argv)
    except SystemExit as exc:  # argparse's own refusals
        return exc.code


def usage_error(capsys, argv: list[str]) -> str:
    """Run the CLI, which must refuse with exit 2 and one line (no traceback); return that line."""
    assert exit_code(argv) == 2
    err = capsys.readouterr().err.strip()
    assert "Traceback" not in err, err
    return err.splitlines()[-1]


@pytest.fixture(autouse=True)
def no_sessions(monkeypatch):
    """No real session here: one that starts is a failure, and quick (never builds or calls a model)."""
    def refuse(spec):
        raise AssertionError(f"session {spec['run_id']} was started")

    monkeypatch.setattr(tmod, "run_session", refuse)


@pytest.fixture
def cfg(tmp_path):
    return write_config(tmp_path / "t.toml", FIXTURE / "task.toml", DEAD_URL, tmp_path / "runs")


def test_a_folder_given_as_the_config_is_a_usage_error(tmp_path, capsys):
    err = usage_error(capsys, ["agent", "tournament", str(tmp_path), "--local"])
    assert "is a folder" in err


@pytest.mark.parametrize("old,new,message", [
    ('base_url = "http://127.0.0.1:9/v1"', 'base_url = "not a url"', "base_url must be the http(s) URL"),
    ('base_url = "http://127.0.0.1:9/v1"', 'base_url = "127.0.0.1:8000/v1"', "base_url must be the http(s) URL"),
    ('base_url = "http://127.0.0.1:9/v1"', 'base_url = "http://host:port/v1"', "base_url must be the http(s) URL"),
    ('base_url = "http://127.0.0.1:9/v1"', "base_url = 5", "base_url must be the http(s) URL"),
    ('api_key_env = "VDBBENCH_TEST_ALPHA_KEY"', "api_key_env = 5", "api_key_env must be the name"),
    ('api_key_env = "VDBBENCH_TEST_ALPHA_KEY"', 'api_key_env = ""', "api_key_env must be the name"),
    ("max_retries = 2", "max_retries = -1", "max_retries must be a whole number >= 0"),
    ("max_retries = 2", 'timeout_s = "x"', "timeout_s must be seconds > 0"),
    ("max_retries = 2", "timeout_s = 0", "timeout_s must be seconds > 0"),
    ('name = "scripted-alpha"', 'name = "scripted-alpha"\nrollouts = true', "rollouts must be a whole number"),
    ('label = "alpha"', "label = 5", "label must be a plain name"),
    ("rollouts = 2", "rollouts = 100000000", "rollouts must be a whole number from 1 to 1000"),
    ("[budgets]", "[budget]", "unknown top-level keys ['budget']"),  # a typo would drop the budgets silently
])
def test_model_entries_and_tables_are_checked_before_any_session_starts(cfg, capsys, old, new, message):
    text = cfg.read_text()
    assert old in text
    cfg.write_text(text.replace(old, new, 1))
    err = usage_error(capsys, ["agent", "tournament", str(cfg), "--local"])
    assert message in err
    assert not (cfg.parent / "runs").exists()  # nothing was started or written


def test_budgets_that_are_not_a_table_are_a_usage_error(cfg, capsys):
    text = cfg.read_text()
    assert "[budgets]\niterations = 6\ntool_calls = 60\n" in text
    cfg.write_text("budgets = 3\n" + text.replace("[budgets]\niterations = 6\ntool_calls = 60\n", ""))
    err = usage_error(capsys, ["agent", "tournament", str(cfg), "--local"])
    assert "[budgets] must be a table" in err


@pytest.mark.parametrize("argv,message", [
    (["--num-cpus", "0"], "--num-cpus: expected a whole number >= 1"),
    (["--num-cpus", "-3"], "--num-cpus: expected a whole number >= 1"),
    (["--target", "-1"], "--target must be"),
    (["--target", "nan"], "--target must be"),
])
def test_bad_options_are_refused_before_any_session_runs(cfg, capsys, argv, message):
    err = usage_error(capsys, ["agent", "tournament", str(cfg), "--local", *argv])
    assert message in err
    assert not (cfg.parent / "runs").exists()  # --target was checked before hours of sessions, not after


def test_an_unwritable_runs_folder_is_a_usage_error(cfg, tmp_path, capsys):
    (tmp_path / "file").write_text("")
    err = usage_error(capsys, ["agent", "tournament", str(cfg), "--local", "--runs-dir", str(tmp_path / "file" / "runs")])
    assert "cannot write into the runs folder" in err


def test_more_cpus_per_session_than_the_local_ray_has_is_refused_not_a_hang(cfg, capsys, monkeypatch):
    class NoRay:  # never started: the check comes first
        def init(self, *a, **k):
            raise AssertionError("Ray was started")

    monkeypatch.setattr(tmod, "_import_ray", lambda: NoRay())
    cfg.write_text(cfg.read_text().replace("rollouts = 2", "rollouts = 2\ncpus_per_session = 4"))
    err = usage_error(capsys, ["agent", "tournament", str(cfg), "--num-cpus", "2"])
    assert "cpus_per_session = 4" in err and "2 CPUs of the local Ray" in err
