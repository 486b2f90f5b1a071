"""Adapters: the typed interface an index implements to be benchmarked, and the registry of names.

Plugin authors import from here::

    from vdbbench.adapters import Adapter, BuildInfo, ParamSpace, RunOptions
"""

from vdbbench.adapters.interface import (
    Adapter,
    BuildInfo,
    ParamSpace,
    RunOptions,
    default_probe_ratio_sweep,
    default_reorder_sweep,
    default_rerank_sweep,
    ivf_primary,
    train_sample,
)
from vdbbench.adapters.registry import ENTRY_POINT_GROUP, AdapterUnavailable, adapter_class, index_names

__all__ = [
    "ENTRY_POINT_GROUP",
    "Adapter",
    "AdapterUnavailable",
    "BuildInfo",
    "ParamSpace",
    "RunOptions",
    "adapter_class",
    "default_probe_ratio_sweep",
    "default_reorder_sweep",
    "default_rerank_sweep",
    "index_names",
    "ivf_primary",
    "train_sample",
]
