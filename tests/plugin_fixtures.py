"""Adapters that break in each way a third-party plugin can, for tests/test_plugins.py."""

from __future__ import annotations

import numpy as np

from vdbbench.adapters import Adapter, BuildInfo, ParamSpace


class FailsToBuild(Adapter):
    name = "fails-to-build"

    def build_params(self):
        return {}

    def build(self, base: np.ndarray) -> BuildInfo:
        raise RuntimeError("out of coffee")

    def search(self, queries, k, params, threads):
        raise AssertionError("never reached")

    def param_space(self):
        return ParamSpace("x", 1, 1, (1,))


class FailsToSearch(FailsToBuild):
    name = "fails-to-search"

    def build(self, base):
        return BuildInfo(0.0, 0.0, 0)

    def search(self, queries, k, params, threads):
        raise MemoryError("search blew up")


class WrongName(FailsToSearch):
    name = "some-other-name"


class NotAnAdapter:
    name = "not-an-adapter"
