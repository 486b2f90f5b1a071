"""Generated data sets, deterministic by seed (first cut; the datasets work calibrates them).

Signatures are the contract the rest of the project uses:
  synth_sift(n, nq, seed=0)  -> (base, queries): float32, integer values 0..255, norms ~512
  synth_float(n, nq, dim=64, seed=0) -> (base, queries): float32, real-valued
"""

from __future__ import annotations

import numpy as np


def synth_sift(n: int, nq: int, seed: int = 0, dim: int = 128) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    ncenters = max(8, int(np.sqrt(n + nq)))
    centers = rng.gamma(0.6, 1.0, size=(ncenters, dim))
    assign = rng.integers(0, ncenters, size=n + nq)
    x = centers[assign] + rng.gamma(0.6, 0.6, size=(n + nq, dim))
    x /= np.linalg.norm(x, axis=1, keepdims=True)
    x = np.minimum(x, 0.2)
    x /= np.linalg.norm(x, axis=1, keepdims=True)
    x = np.clip(np.rint(x * 512.0), 0, 255).astype(np.float32)
    return np.ascontiguousarray(x[:n]), np.ascontiguousarray(x[n:])


def synth_float(n: int, nq: int, dim: int = 64, seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    ncenters = max(8, int(np.sqrt(n + nq)))
    centers = rng.standard_normal((ncenters, dim)).astype(np.float32)
    assign = rng.integers(0, ncenters, size=n + nq)
    x = centers[assign] + 0.5 * rng.standard_normal((n + nq, dim)).astype(np.float32)
    x = x.astype(np.float32)
    return np.ascontiguousarray(x[:n]), np.ascontiguousarray(x[n:])
