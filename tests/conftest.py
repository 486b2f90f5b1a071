"""Shared pytest fixtures: a private data cache per test (VDBBENCH_DATA in a temporary folder)."""

from __future__ import annotations

from pathlib import Path

import pytest


@pytest.fixture
def data_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """An empty VDBBENCH_DATA folder for this test (no registry overrides), so no test reads or
    writes the user's ~/.cache/vdbbench; the folder is returned."""
    folder = tmp_path / "vdbbench-data"
    folder.mkdir()
    monkeypatch.setenv("VDBBENCH_DATA", str(folder))
    monkeypatch.delenv("VDBBENCH_REGISTRY", raising=False)
    return folder
