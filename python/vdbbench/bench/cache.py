"""On-disk cache of built peer indexes, keyed by dataset sha256 and index configuration."""

from __future__ import annotations

import hashlib
import json
import math
import os
from pathlib import Path

from vdbbench.adapters.interface import Adapter, BuildInfo


def data_dir() -> Path:
    """VDBBENCH_DATA, else ~/.cache/vdbbench (datasets, ground truth and indexes live there)."""
    env = os.environ.get("VDBBENCH_DATA")
    return Path(env).expanduser() if env else Path.home() / ".cache" / "vdbbench"


def index_dir() -> Path:
    return data_dir() / "indexes"


def entry_path(adapter: Adapter, dataset_sha: str) -> Path:
    key = hashlib.sha256(f"{dataset_sha}|{adapter.cache_key()}".encode()).hexdigest()[:20]
    return index_dir() / f"{adapter.name}-{key}.index"


def load_cached(adapter: Adapter, dataset_sha: str) -> BuildInfo | None:
    """Load the adapter's index from the cache; its recorded build figures, marked cached."""
    path = entry_path(adapter, dataset_sha)
    meta_path = path.with_suffix(".json")
    if not (path.exists() and meta_path.exists()):
        return None
    try:
        meta = json.loads(meta_path.read_text())
        if meta.get("key") != adapter.cache_key() or meta.get("dataset_sha256") != dataset_sha:
            return None
        b = meta["build"]
        train_s, add_s, nbytes = b["train_s"], b["add_s"], b["bytes"]
        if not all(isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v) and v >= 0
                   for v in (train_s, add_s, *([] if nbytes is None else [nbytes]))):
            return None  # the build figures a result would report from this entry are not figures
        adapter.load(str(path))
    except (OSError, ValueError, RuntimeError, KeyError, TypeError, AttributeError):
        return None  # unreadable, damaged or foreign entry: rebuild (and overwrite it)
    return BuildInfo(train_s=train_s, add_s=add_s, bytes=nbytes, cached=True)


def store(adapter: Adapter, dataset_sha: str, info: BuildInfo) -> BuildInfo:
    """Save the adapter's index; bytes = the saved size when the adapter did not report it."""
    path = entry_path(adapter, dataset_sha)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(path.name + ".tmp")
    adapter.save(str(tmp))
    os.replace(tmp, path)
    nbytes = info.bytes if info.bytes is not None else path.stat().st_size
    info = BuildInfo(info.train_s, info.add_s, nbytes, cached=False)
    meta = {
        "key": adapter.cache_key(),
        "dataset_sha256": dataset_sha,
        "build": {"train_s": info.train_s, "add_s": info.add_s, "bytes": info.bytes},
    }
    path.with_suffix(".json").write_text(json.dumps(meta, indent=1) + "\n")
    return info
