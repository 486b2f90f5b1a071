"""Adapters as plugins: entry points register indexes; broken ones are reported and skipped."""

from __future__ import annotations

import json
import os
import sys
from importlib import metadata
from pathlib import Path

os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")

import pytest

from vdbbench.adapters import registry
from vdbbench.adapters.registry import AdapterUnavailable, adapter_class, index_names
from vdbbench.cli import main

EXAMPLE_SRC = Path(__file__).resolve().parents[1] / "examples" / "vdbbench-plugin-example" / "src"
PLUGINS = {
    "numpy-ivf": "vdbbench_plugin_example:NumpyIvfAdapter",
    "broken-import": "no_such_package_for_vdbbench:Index",
    "fails-to-build": "plugin_fixtures:FailsToBuild",
    "fails-to-search": "plugin_fixtures:FailsToSearch",
    "wrong-name": "plugin_fixtures:WrongName",
    "not-an-adapter": "plugin_fixtures:NotAnAdapter",
    "ivf": "plugin_fixtures:NotAnAdapter",  # a plugin cannot take over a built-in name
}


@pytest.fixture(autouse=True)
def _plugins(monkeypatch, tmp_path_factory):
    """The entry points an installed plugin package would declare (the example from its source)."""
    monkeypatch.syspath_prepend(str(EXAMPLE_SRC))
    monkeypatch.syspath_prepend(str(Path(__file__).parent))
    eps = metadata.EntryPoints(
        metadata.EntryPoint(name=n, value=v, group=registry.ENTRY_POINT_GROUP) for n, v in PLUGINS.items()
    )
    monkeypatch.setattr(registry.metadata, "entry_points", lambda group=None: eps.select(group=group))
    monkeypatch.setenv("VDBBENCH_DATA", str(tmp_path_factory.getbasetemp() / "data"))


def test_plugins_are_listed_after_the_built_ins_and_cannot_replace_one():
    names = index_names()
    assert names[:2] == ["ivf", "flat"] and names.count("ivf") == 1
    assert {"numpy-ivf", "broken-import", "fails-to-build"} <= set(names)
    assert adapter_class("ivf").__module__ == "vdbbench.bench.ours"


def test_a_plugin_that_cannot_load_says_which_and_why():
    with pytest.raises(AdapterUnavailable, match="broken-import: cannot import no_such_package_for_vdbbench"):
        adapter_class("broken-import")
    with pytest.raises(AdapterUnavailable, match="not a vdbbench.adapters.Adapter subclass"):
        adapter_class("not-an-adapter")
    with pytest.raises(AdapterUnavailable, match="names itself 'some-other-name'"):
        adapter_class("wrong-name")
    with pytest.raises(KeyError, match="unknown index 'nope'"):
        adapter_class("nope")


def test_the_example_plugin_runs_beside_ours_and_broken_plugins_are_skipped(tmp_path, capsys):
    out = tmp_path / "out"
    rc = main(["run", "--index", "ivf", "--dataset", "synth-sift-5k", "--threads", "1", "--mode", "batch",
               "--repeats", "1", "--rerank", "0", "--out", str(out),
               "--compare", "numpy-ivf,broken-import,fails-to-build,fails-to-search,not-an-adapter"])
    err = capsys.readouterr().err
    assert rc == 0, err
    assert "skipped broken-import: cannot import" in err
    assert "skipped not-an-adapter" in err
    assert "fails-to-build failed and was skipped: RuntimeError: out of coffee" in err
    assert "fails-to-search failed and was skipped: MemoryError: search blew up" in err
    plugin = json.loads((out / "numpy-ivf.json").read_text())
    assert plugin["index"]["source"].startswith("plugin")
    assert plugin["headline"][0]["recall10"] >= 0.95 and plugin["build"]["bytes"] > 0
    assert plugin["machine"]["vdbbench-plugin-example"] == "0.1.0"
    ours = json.loads((out / "ivf.json").read_text())
    assert ours["index"]["source"] == "built-in" and ours["run"]["paired_with"] == ["ivf", "numpy-ivf"]
    assert sorted(p.name for p in out.glob("*.json")) == ["ivf.json", "numpy-ivf.json"]
    assert "numpy-ivf" in (out / "table.md").read_text()


def test_a_broken_index_under_test_is_a_usage_error(tmp_path, capsys):
    rc = main(["run", "--index", "broken-import", "--dataset", "synth-sift-5k", "--out", str(tmp_path)])
    assert rc == 2 and "broken-import: cannot import" in capsys.readouterr().err


def test_the_index_under_test_failing_to_build_exits_1_after_the_peers_ran(tmp_path, capsys):
    rc = main(["run", "--index", "fails-to-build", "--compare", "numpy-ivf", "--dataset", "synth-sift-5k",
               "--threads", "1", "--mode", "batch", "--repeats", "1", "--nprobe", "8,16", "--out", str(tmp_path)])
    assert rc == 1 and "fails-to-build failed: RuntimeError: out of coffee" in capsys.readouterr().err
    assert (tmp_path / "numpy-ivf.json").exists()
