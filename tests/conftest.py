"""Shared pytest fixtures: a private data cache per test (VDBBENCH_DATA in a temporary folder)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest


def pytest_configure(config: pytest.Config) -> None:
    """The agent tests' cargo folder: one per pytest-xdist worker, "main" without xdist, unless
    VDBBENCH_AGENT_TARGET_DIR is set by the caller. The worker id is known only here (not when
    this file is imported), and workers inherit the controller's environment, so a value this
    hook set in the controller is replaced. Tests, and so their sessions, run one after another
    within a worker."""
    worker = getattr(config, "workerinput", {}).get("workerid", "main")
    if os.environ.get("VDBBENCH_AGENT_TARGET_DIR") and not os.environ.get("_VDBBENCH_TEST_TARGET_SET"):
        return
    os.environ["VDBBENCH_AGENT_TARGET_DIR"] = str(Path(__file__).resolve().parents[1] / "target" / f"agent-fixture-{worker}")
    os.environ["_VDBBENCH_TEST_TARGET_SET"] = "1"


#: Test files of a minute or more (measured, 2 cores), longest first. `pytest -n auto --dist
#: loadfile` hands files to the workers in collection order, so a long file collected late keeps
#: one worker busy after the other has finished (measured: 573 s of tests on one worker against
#: 442 s on the other, test_agent_installed.py last). Started first, they even the workers out.
#: A file missing here only runs in its usual place.
LONG_FILES_FIRST = (
    "test_agent_installed.py",
    "test_agent_loop.py",
    "test_perf_scripts.py",
    "test_agent_transfer.py",
    "test_agent_long_session.py",
    "test_agent_judge.py",
    "test_datasets_synth.py",
    "test_pages_browser.py",
    "test_agent_tools_session.py",
    "test_agent_tournament.py",
)


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """The long files first (`LONG_FILES_FIRST`); the order within a file, and of the others,
    stays as collected."""
    rank = {name: i for i, name in enumerate(LONG_FILES_FIRST)}
    items.sort(key=lambda item: rank.get(item.path.name, len(rank)))


@pytest.fixture
def data_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """An empty VDBBENCH_DATA folder for this test (no registry overrides), so no test reads or
    writes the user's ~/.cache/vdbbench; the folder is returned."""
    folder = tmp_path / "vdbbench-data"
    folder.mkdir()
    monkeypatch.setenv("VDBBENCH_DATA", str(folder))
    monkeypatch.delenv("VDBBENCH_REGISTRY", raising=False)
    return folder


@pytest.fixture
def unreachable_dataset(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> str:
    """A registered data set named "away" whose only source (127.0.0.1:9) refuses connections,
    with download retries not sleeping: what a user sees offline. Returns the name."""
    reg_file = tmp_path / "unreachable-registry.toml"
    reg_file.write_text(
        '[datasets.away]\nmetric = "l2"\ndim = 8\nn = 200\nnq = 10\n'
        '[[datasets.away.sources]]\nurl = "http://127.0.0.1:9/away.hdf5"\nformat = "ann-hdf5"\n'
    )
    monkeypatch.setenv("VDBBENCH_REGISTRY", str(reg_file))
    monkeypatch.setattr("vdbbench.datasets.download.time.sleep", lambda s: None)
    return "away"
