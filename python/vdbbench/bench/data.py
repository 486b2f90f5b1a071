"""Dataset resolution for the benchmark: the datasets area's loader, else generated sets here."""

from __future__ import annotations

import re

import numpy as np

from vdbbench.datasets.base import Dataset

_SYNTH = re.compile(r"^synth-(sift|float)-(\d+)([km]?)$")


def _loader():
    try:
        from vdbbench.datasets import load_dataset  # provided by the datasets area
    except ImportError:
        return None
    return load_dataset


def known_names() -> list[str]:
    """Names to suggest when a dataset is unknown."""
    try:
        from vdbbench.datasets.registry import registry

        names = list(registry())
    except (ImportError, OSError, ValueError):
        names = ["sift-1m"]
    gen = ["synth-sift-20k", "synth-sift-100k", "synth-sift-1m", "synth-float-100k"]
    return names + [g for g in gen if g not in names]


def exact_ground_truth(base: np.ndarray, queries: np.ndarray, k: int = 100) -> tuple[np.ndarray, np.ndarray]:
    """Exact L2 top-k (ids, Euclidean distances) with faiss' flat index (blocked internally)."""
    import faiss

    index = faiss.IndexFlatL2(base.shape[1])
    index.add(base)
    d2, ids = index.search(queries, min(k, base.shape[0]))
    return ids.astype(np.int64), np.sqrt(np.maximum(d2, 0)).astype(np.float32)


def generated(name: str, nq: int | None = None) -> Dataset:
    """A generated set by name (`synth-sift-20k`, `synth-float-100k`...) with exact ground truth."""
    m = _SYNTH.match(name)
    if not m:
        raise KeyError(name)
    kind, num, unit = m.groups()
    n = int(num) * {"": 1, "k": 1_000, "m": 1_000_000}[unit]
    nq = nq or (10_000 if n >= 1_000_000 else 1_000)
    from vdbbench.datasets import synth

    base, queries = synth.synth_sift(n, nq) if kind == "sift" else synth.synth_float(n, nq)
    nb, dist = exact_ground_truth(base, queries)
    return Dataset(name, base, queries, "l2", nb, dist, synthetic=True, source="generated")


def resolve(name: str) -> Dataset:
    """Load ``name`` (a registry name or a path) through the datasets area, else generate it.

    KeyError names the valid choices when it is neither.
    """
    load = _loader()
    if load is not None:
        return load(name)
    try:
        return generated(name)
    except KeyError:
        raise KeyError(f"unknown dataset {name!r}; valid: {', '.join(known_names())}") from None
