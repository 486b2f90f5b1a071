"""The cache of built peer indexes: a damaged entry is rebuilt, never the end of the index."""

from __future__ import annotations

import json

import numpy as np
import pytest

from vdbbench.adapters.interface import Adapter, BuildInfo, ParamSpace, RunOptions
from vdbbench.bench import cache


class Stub(Adapter):
    name = "stub-cache"
    cacheable = True

    def build_params(self):
        return {}

    def build(self, base):
        return BuildInfo(1.5, 0.5, 4096)

    def search(self, queries, k, params, threads):
        return np.zeros((len(queries), k), dtype=np.int64)

    def param_space(self):
        return ParamSpace(primary="x", start=1, stop=1)

    def cache_key(self):
        return "stub|v1"

    def save(self, path):
        open(path, "wb").write(b"index")

    def load(self, path):
        self.loaded = open(path, "rb").read()


@pytest.mark.parametrize("damage", [
    lambda m: m.pop("build"), lambda m: m.update(build=None), lambda m: m["build"].pop("train_s"),
    lambda m: m["build"].update(add_s="0.5"), lambda m: m["build"].update(train_s=float("nan")),
    lambda m: m["build"].update(bytes=-1),
])
def test_a_damaged_cache_entry_is_rebuilt_not_an_error(damage, tmp_path, monkeypatch):
    # a meta file with the right key but no (or broken) build figures raised KeyError/TypeError
    # out of load_cached: the run reported the peer as failed instead of rebuilding it, or
    # (NaN) carried the broken figure into the result's build time
    monkeypatch.setenv("VDBBENCH_DATA", str(tmp_path))
    adapter = Stub(4, 10, "l2", RunOptions())
    cache.store(adapter, "sha", BuildInfo(1.5, 0.5, 4096))
    assert cache.load_cached(adapter, "sha") == BuildInfo(1.5, 0.5, 4096, cached=True)
    meta_path = cache.entry_path(adapter, "sha").with_suffix(".json")
    meta = json.loads(meta_path.read_text())
    damage(meta)
    meta_path.write_text(json.dumps(meta))
    assert cache.load_cached(adapter, "sha") is None
