"""Tournaments under bad input and faults: every mistake in a config or an option is a one-line
usage error (exit 2) found before any session starts, never a traceback, a hang, or an error hours
later; a driver that is interrupted leaves the runs folder telling the truth and says how to carry
on. Fast: no session runs here unless said (small fakes instead).
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from test_agent_tournament import FIXTURE, write_config
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


# -- Ray addresses ----------------------------------------------------------------------------------

class FakeRay:
    """Stands in for the ray module: records init, and fails it when told to."""

    def __init__(self, fail: Exception | None = None):
        self.fail = fail
        self.inits: list[dict] = []

    def init(self, **kwargs):
        self.inits.append(kwargs)
        if self.fail is not None:
            raise self.fail

    def shutdown(self):
        pass


@pytest.mark.parametrize("address,message", [
    ("127.0.0.1:1", "cannot reach 127.0.0.1:1"),  # nothing listens: ray.init waited for minutes
    ("ray://127.0.0.1:1", "cannot reach 127.0.0.1:1"),
    ("head:port", "not a Ray address"),
    ("a b", "not a Ray address"),
])
def test_a_ray_address_that_cannot_be_reached_is_a_usage_error_at_once(cfg, capsys, monkeypatch, address, message):
    fake = FakeRay(fail=AssertionError("ray.init was called"))
    monkeypatch.setattr(tmod, "_import_ray", lambda: fake)
    err = usage_error(capsys, ["agent", "tournament", str(cfg), "--ray-address", address])
    assert err.startswith("vdbbench agent: error: --ray-address") and message in err
    assert not fake.inits and not (cfg.parent / "runs").exists()


def test_ray_refusing_to_start_or_connect_is_a_usage_error_and_writes_nothing(cfg, capsys, monkeypatch):
    import socket

    head = socket.create_server(("127.0.0.1", 0))  # something listens, but Ray refuses
    try:
        port = head.getsockname()[1]
        fake = FakeRay(fail=ValueError("Ray Client requires pip package `ray[client]`. If you installed the minimal Ray..."))
        monkeypatch.setattr(tmod, "_import_ray", lambda: fake)
        err = usage_error(capsys, ["agent", "tournament", str(cfg), "--ray-address", f"ray://127.0.0.1:{port}"])
        assert "pip install 'ray[client]'" in err
        assert not (cfg.parent / "runs").exists()  # so the corrected command needs no --resume
        fake.fail = ValueError("Invalid address format: x")
        err = usage_error(capsys, ["agent", "tournament", str(cfg), "--ray-address", f"127.0.0.1:{port}"])
        assert "Ray could not start or connect: Invalid address format" in err
        assert not (cfg.parent / "runs").exists()
    finally:
        head.close()


def test_the_local_ray_is_a_new_one_even_where_a_cluster_runs_on_this_machine():
    # ray.init() with no address joins a cluster that `ray start` left (or RAY_ADDRESS names) and
    # then refuses num_cpus: the README's plain command ended in a ValueError traceback there.
    fake = FakeRay()
    tmod._ray_init(fake, None, 2, lambda text: None)
    assert fake.inits == [{"address": "local", "num_cpus": 2, "include_dashboard": False, "log_to_driver": True}]


def test_the_ray_extra_brings_the_client_that_ray_addresses_need():
    import sys

    if sys.version_info >= (3, 11):
        import tomllib
    else:
        import tomli as tomllib
    project = tomllib.loads((Path(__file__).resolve().parents[1] / "pyproject.toml").read_text())["project"]
    assert any(req.replace(" ", "").startswith("ray[client]") for req in project["optional-dependencies"]["ray"])


# -- Ctrl-C of the driver -----------------------------------------------------------------------------

class InterruptedRay(FakeRay):
    """Sessions submitted as tasks; the driver's wait for them is interrupted (Ctrl-C)."""

    def remote(self, fn):
        ray = self

        class Task:
            def options(self, **kwargs):
                return self

            def remote(self, spec):
                ray.submitted.append(spec["run_id"])
                return object()

        self.submitted: list[str] = []
        return Task()

    def wait(self, refs, num_returns=1):
        raise KeyboardInterrupt


def unfinished_session(run: Path) -> None:
    """A session killed in its first evaluation: a journal without its end."""
    from test_agent_long_journal import JournalBuilder

    j = JournalBuilder()
    j.add("session_start", task={"path": "t.toml", "card": {"name": "fixture"}}, model="scripted-alpha", base_url=None,
          config={}, resumed=False, node={"hostname": "h", "cpu_model": "c", "cpus": 2})
    j.write(run)


def test_ctrl_c_of_the_driver_leaves_a_manifest_that_tells_the_truth_and_says_how_to_carry_on(cfg, tmp_path, capsys, monkeypatch):
    other = tmp_path / "elsewhere"  # not the config's runs folder
    fake = InterruptedRay()
    monkeypatch.setattr(tmod, "_import_ray", lambda: fake)

    def wait(refs, num_returns=1):  # alpha-r1 had journaled its start when Ctrl-C came
        unfinished_session(other / "alpha-r1")
        raise KeyboardInterrupt

    fake.wait = wait
    assert main(["agent", "tournament", str(cfg), "--num-cpus", "2", "--runs-dir", str(other)]) == 130
    err = capsys.readouterr().err
    assert fake.submitted == ["alpha-r1", "alpha-r2", "beta-r1", "beta-r2"]
    states = {s["run_id"]: s["state"] for s in json.loads((other / "tournament.json").read_text())["sessions"]}
    assert states == {"alpha-r1": "unfinished", "alpha-r2": "new", "beta-r1": "new", "beta-r2": "new"}  # not "running"
    assert "interrupted: 4 of 4 sessions have not finished" in err
    # The command to carry on names the same runs folder (without it --resume looked in the default one).
    assert f"vdbbench agent tournament {cfg} --runs-dir {other} --num-cpus 2 --resume" in err
