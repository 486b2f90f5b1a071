"""IVF defaults shared by our engine's adapter, the faiss IVF peers and the dataset calibration:
nlist, the rerank rule and where the 4-bit prefilter exists (the engine's own, asked of it) and the k-means training sample."""

from __future__ import annotations

from collections.abc import Iterable

import numpy as np


def _engine():
    # Imported on first use, so that `import vdbbench.common` (every CLI start-up) does not load
    # the compiled extension (see vdbbench/__init__.py).
    from vdbbench import _rust_vdb

    return _rust_vdb


def default_nlist(n: int) -> int:
    """The number of IVF lists used unless told otherwise: the engine's round(4 sqrt(n)), in 1..n."""
    return _engine().default_nlist(n)


def supports_reorder(dim: int, metric: str, storage: str) -> bool:
    """Whether our IvfIndex of this dim, metric and storage has the 4-bit prefilter (a search's
    ``reorder``): the engine's own rule, so a sweep offers the knob only where it is accepted."""
    return bool(_engine().supports_reorder(dim, metric, storage))


def check_rerank(values: Iterable[int], k: int) -> tuple[int, ...]:
    """The rerank depths as a tuple; ValueError (the engine's InvalidInput) unless each is 0
    (u8 results alone) or >= k.

    The engine applies the same rule on every search; this lets a sweep refuse bad values before
    anything is built, with the engine's own message.
    """
    out = tuple(int(v) for v in values)
    engine = _engine()
    for r in out:
        engine.check_rerank(r, k)
    return out


def train_sample_size(n: int, nlist: int) -> int:
    """Vectors given to k-means: 64 per list (faiss' own guidance is 39..256), at most all n."""
    return min(n, max(64 * nlist, 10_000))


def train_sample(base: np.ndarray, nlist: int, seed: int = 0) -> np.ndarray:
    """The same seeded random subset of the base vectors, for ours and every faiss peer."""
    m = train_sample_size(base.shape[0], nlist)
    if m >= base.shape[0]:
        return base
    rows = np.sort(np.random.default_rng(seed).choice(base.shape[0], size=m, replace=False))
    return np.ascontiguousarray(base[rows])
