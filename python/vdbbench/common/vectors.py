"""Vector normalisation shared by every index that runs cosine search as inner product."""

from __future__ import annotations

import numpy as np


def normalize_rows(x: np.ndarray) -> np.ndarray:
    """Unit-length float32 rows (zero rows stay zero): cosine search as inner product."""
    norms = np.linalg.norm(x, axis=1, keepdims=True)
    return np.ascontiguousarray(x / np.where(norms == 0, 1.0, norms), dtype=np.float32)
