"""Trained indexes kept between `benchmark` calls: an index built by one build is reused by the
next when no file that shapes it changed. The card's `[index_cache] paths` name those files
(k-means, the build and the quantizer, the stored layout, persistence); the key is the hash of
their contents with the data set, the constructor arguments and the entry, so a kernel or search
change benchmarks against the same trained index instead of training and filling it again.

The engine must have `save(path)` and a class method `load(path)` (the project's engine has
both); a build without them trains as before. Only `benchmark` uses the cache: a submission
always builds its index from scratch."""

from __future__ import annotations

import hashlib
import json
import subprocess
from dataclasses import dataclass
from pathlib import Path

from vdbbench.agent.core.task import TaskCard, _glob_match

KEEP = 2  # index files kept on disk (a 1M index is a few hundred MB)


@dataclass(frozen=True)
class CacheKey:
    key: str
    files: tuple[str, ...]  # the shaping files that went into it, workspace-relative


def _key(card: TaskCard, dataset: dict | None, files: dict[str, bytes]) -> CacheKey:
    h = hashlib.sha256()
    meta = {"entry": [card.entry.module, card.entry.cls], "build_args": card.entry.build_args,
            "dataset": {k: (dataset or {}).get(k) for k in ("name", "loaded", "n", "seed", "sha256")},
            "card_dataset": [card.dataset.name, card.dataset.seed, card.dataset.n, card.dataset.dim]}
    h.update(json.dumps(meta, sort_keys=True, default=str).encode())
    for rel in sorted(files):
        h.update(rel.encode() + b"\0" + hashlib.sha256(files[rel]).digest())
    return CacheKey(h.hexdigest()[:32], tuple(sorted(files)))


def _shaping(card: TaskCard, paths) -> list[str]:
    return sorted(p for p in paths if any(_glob_match(g, p) for g in card.index_cache.paths))


def working_key(ws: Path, card: TaskCard, dataset: dict | None) -> CacheKey | None:
    """The key of the index the working copy would build; None when the card names no shaping files."""
    if not card.index_cache.paths:
        return None
    listed = subprocess.run(["git", "ls-files", "-co", "--exclude-standard"], cwd=ws, capture_output=True,
                            text=True, check=True).stdout.splitlines()
    files = {rel: (ws / rel).read_bytes() for rel in _shaping(card, listed) if (ws / rel).is_file()}
    return _key(card, dataset, files)


def commit_key(ws: Path, card: TaskCard, dataset: dict | None, commit: str) -> CacheKey | None:
    """The key of the index the build of `commit` (the best) builds."""
    if not card.index_cache.paths or not commit:
        return None
    listed = subprocess.run(["git", "ls-tree", "-r", "--name-only", commit], cwd=ws, capture_output=True,
                            text=True, check=True).stdout.splitlines()
    files = {}
    for rel in _shaping(card, listed):
        files[rel] = subprocess.run(["git", "show", f"{commit}:{rel}"], cwd=ws, capture_output=True, check=True).stdout
    return _key(card, dataset, files)


class IndexCache:
    """run_dir/index-cache/<key>.idx, at most KEEP of them (the least recently used go)."""

    def __init__(self, run_dir: Path):
        self.dir = Path(run_dir) / "index-cache"

    def path(self, key: CacheKey) -> Path:
        self.dir.mkdir(parents=True, exist_ok=True)
        return self.dir / f"{key.key}.idx"

    def has(self, key: CacheKey) -> bool:
        return (self.dir / f"{key.key}.idx").is_file()

    def touch(self, key: CacheKey) -> None:
        p = self.dir / f"{key.key}.idx"
        if p.exists():
            p.touch()

    def prune(self, keep: int = KEEP) -> None:
        if not self.dir.is_dir():
            return
        files = sorted(self.dir.glob("*.idx"), key=lambda p: p.stat().st_mtime, reverse=True)
        for old in files[keep:]:
            old.unlink(missing_ok=True)
        for tmp in self.dir.glob("*.tmp*"):
            tmp.unlink(missing_ok=True)


def cache_text(key: CacheKey | None, how: str | None, card: TaskCard, loaded: dict) -> str:
    """The benchmark result's line about its index: reused or built, and which files decide that."""
    if key is None:
        return (f"index build: train {loaded.get('train_s', 0.0):.3f} s, add {loaded.get('add_s', 0.0):.3f} s "
                "(this card names no index-shaping files, so every benchmark builds the index)")
    shown = ", ".join(key.files[:12]) + (f" and {len(key.files) - 12} more" if len(key.files) > 12 else "")
    files = f"the files that shape the index ({', '.join(card.index_cache.paths)}: {shown or 'none present'})"
    if how == "hit":
        return (f"index: REUSED the trained index saved earlier ({loaded.get('load_s', 0.0):.2f} s to read it; no train/add): "
                f"none of {files} changed. If your change alters what train() or add() build from another file, "
                "pass rebuild=true.")
    if how == "stored":
        return (f"index build: train {loaded.get('train_s', 0.0):.3f} s, add {loaded.get('add_s', 0.0):.3f} s; saved, and "
                f"reused by the next benchmark while {files} stay as they are")
    if how == "unsupported":
        return (f"index build: train {loaded.get('train_s', 0.0):.3f} s, add {loaded.get('add_s', 0.0):.3f} s "
                "(the engine has no save(path)/load(path), so the index cannot be kept between benchmarks)")
    return f"index build: train {loaded.get('train_s', 0.0):.3f} s, add {loaded.get('add_s', 0.0):.3f} s"
