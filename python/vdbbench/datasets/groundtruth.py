"""Exact top-K ground truth, computed in blocks (engine FlatIndex, else faiss, else numpy) and cached.

Distances are in the metric's natural units, as `vdbbench.common.recall` expects: Euclidean
(not squared) for "l2", 1 - cos for "cosine", -dot for "ip". Candidates come from the fastest
exact backend available in float32; their distances are then recomputed in float64 with the
shared `metric_distances` and re-sorted (ties to the smaller id), so the stored figures do not
depend on the backend.
"""

from __future__ import annotations

import hashlib
import os
import zipfile
from pathlib import Path

import numpy as np

from vdbbench.common.recall import metric_distances
from vdbbench.datasets.base import Dataset, DatasetError, check_metric, content_hash

DEFAULT_K = 100
QUERY_BLOCK = 1024
BASE_BLOCK = 1 << 18  # 262144 base vectors at a time
_NUMPY_SUB_BLOCK = 1 << 14
_EXTRA = 16  # candidates beyond K fetched in float32, so float64 re-sorting cannot miss one


def _backend() -> str:
    forced = os.environ.get("VDBBENCH_GT_BACKEND")
    if forced:
        if forced not in ("engine", "faiss", "numpy"):
            raise DatasetError(f"VDBBENCH_GT_BACKEND={forced!r}; expected engine, faiss or numpy")
        return forced
    try:
        import vdbbench._rust_vdb  # noqa: F401

        return "engine"
    except ImportError:
        pass
    try:
        import faiss  # noqa: F401

        return "faiss"
    except ImportError:
        return "numpy"


def _searcher(backend: str, base: np.ndarray, metric: str):
    """An exact index over one base block: ``search(queries, k) -> (score, local ids)``, smaller score better."""
    if backend == "engine":
        import vdbbench

        index = vdbbench.FlatIndex(dim=base.shape[1], metric=metric)
        index.add(base)

        def search(q, k):
            d, i = index.search(q, k=min(k, base.shape[0]))
            score = d if metric == "l2" else -d  # engine: squared L2, or similarity for ip/cosine
            return np.asarray(score, dtype=np.float32), np.asarray(i, dtype=np.int64)

        return search
    if backend == "faiss":
        import faiss

        if metric == "l2":
            index = faiss.IndexFlatL2(base.shape[1])
            index.add(base)
            return lambda q, k: index.search(q, min(k, base.shape[0]))
        index = faiss.IndexFlatIP(base.shape[1])
        index.add(_normalized(base) if metric == "cosine" else base)

        def search(q, k):
            d, i = index.search(_normalized(q) if metric == "cosine" else q, min(k, base.shape[0]))
            return -d, i

        return search
    # numpy: the (query block x base block) score matrix only, never nq x n.
    b = _normalized(base) if metric == "cosine" else base
    sq_norms = (b * b).sum(1)

    def search(q, k):
        qq = _normalized(q) if metric == "cosine" else q
        scores, ids = [], []
        for s0 in range(0, b.shape[0], _NUMPY_SUB_BLOCK):  # score matrices of at most 1024 x 16384
            sub = b[s0 : s0 + _NUMPY_SUB_BLOCK]
            if metric == "l2":
                score = sq_norms[None, s0 : s0 + sub.shape[0]] - 2.0 * (qq @ sub.T)  # + |q|^2, constant per row
            else:
                score = -(qq @ sub.T)
            kk = min(k, sub.shape[0])
            part = np.argpartition(score, kk - 1, axis=1)[:, :kk]
            scores.append(np.take_along_axis(score, part, axis=1))
            ids.append(part + s0)
        score, part = np.concatenate(scores, axis=1), np.concatenate(ids, axis=1)
        kk = min(k, score.shape[1])
        keep = np.argpartition(score, kk - 1, axis=1)[:, :kk]
        return np.take_along_axis(score, keep, axis=1), np.take_along_axis(part, keep, axis=1).astype(np.int64)

    return search


def _normalized(x: np.ndarray) -> np.ndarray:
    norms = np.linalg.norm(x, axis=1, keepdims=True)
    return np.ascontiguousarray(x / np.where(norms == 0, 1, norms), dtype=np.float32)


def exact_distances(base: np.ndarray, queries: np.ndarray, ids: np.ndarray, metric: str, block: int = 1024) -> np.ndarray:
    """Exact distances (natural units, float32) between each query and the given ids, in blocks."""
    out = np.empty(ids.shape, dtype=np.float32)
    for s in range(0, ids.shape[0], block):
        out[s : s + block] = metric_distances(metric, queries[s : s + block], base[ids[s : s + block]])
    return out


def compute_groundtruth(
    base: np.ndarray, queries: np.ndarray, metric: str, k: int = DEFAULT_K, backend: str | None = None,
    progress: bool = False,
) -> tuple[np.ndarray, np.ndarray]:
    """Exact top-``k`` (ids int64, distances float32) of every query, in blocks of queries and base."""
    check_metric(metric)
    n = base.shape[0]
    if n == 0:
        raise DatasetError("cannot compute ground truth over an empty base")
    k = min(k, n)
    backend = backend or _backend()
    fetch = min(n, k + _EXTRA)
    nq = queries.shape[0]
    ids_out = np.empty((nq, k), dtype=np.int64)
    dist_out = np.empty((nq, k), dtype=np.float32)
    q_starts = list(range(0, nq, QUERY_BLOCK))
    best_s = [np.zeros((min(QUERY_BLOCK, nq - q0), 0), np.float32) for q0 in q_starts]
    best_i = [np.zeros((min(QUERY_BLOCK, nq - q0), 0), np.int64) for q0 in q_starts]
    steps = len(q_starts) * len(range(0, n, BASE_BLOCK))
    with _maybe_progress(progress, steps, f"ground truth ({backend}, top-{k})") as advance:
        for b0 in range(0, n, BASE_BLOCK):  # one index per base block, every query block against it
            search = _searcher(backend, np.ascontiguousarray(base[b0 : b0 + BASE_BLOCK], dtype=np.float32), metric)
            for j, q0 in enumerate(q_starts):
                q = np.ascontiguousarray(queries[q0 : q0 + QUERY_BLOCK], dtype=np.float32)
                sc, ids = search(q, fetch)
                bs = np.concatenate([best_s[j], sc], axis=1)
                bi = np.concatenate([best_i[j], np.where(ids >= 0, ids + b0, -1)], axis=1)
                if bs.shape[1] > fetch:
                    keep = np.argpartition(bs, fetch - 1, axis=1)[:, :fetch]
                    bs, bi = np.take_along_axis(bs, keep, axis=1), np.take_along_axis(bi, keep, axis=1)
                best_s[j], best_i[j] = bs, bi
                advance()
    # Rescore the candidates exactly (float64), sort by (distance, id), keep k.
    for j, q0 in enumerate(q_starts):
        for r0 in range(0, best_i[j].shape[0], 128):
            cand = best_i[j][r0 : r0 + 128]
            rows = slice(q0 + r0, q0 + r0 + cand.shape[0])
            exact = metric_distances(metric, queries[rows], base[np.maximum(cand, 0)])
            exact[cand < 0] = np.inf
            order = np.lexsort((cand, exact), axis=1)[:, :k]
            ids_out[rows] = np.take_along_axis(cand, order, axis=1)
            dist_out[rows] = np.take_along_axis(exact, order, axis=1)
    return ids_out, dist_out


class _maybe_progress:
    def __init__(self, enabled: bool, total: int, label: str):
        self.enabled, self.total, self.label = enabled, total, label

    def __enter__(self):
        if not self.enabled:
            return lambda: None
        from rich.console import Console
        from rich.progress import Progress

        self._progress = Progress(console=Console(stderr=True), transient=True)
        self._progress.start()
        task = self._progress.add_task(self.label, total=self.total)
        return lambda: self._progress.advance(task)

    def __exit__(self, *exc):
        if self.enabled:
            self._progress.stop()
        return False


def groundtruth_key(ds: Dataset) -> str:
    """Cache key of the ground truth: a hash of (base, queries, metric) contents."""
    data_hash = ds.extra.get("content_sha256") or content_hash(ds.train, ds.test)
    ds.extra["content_sha256"] = data_hash
    return hashlib.sha256(f"gt/1 {ds.metric} {data_hash}".encode()).hexdigest()


def ensure_groundtruth(ds: Dataset, cache_dir: str | os.PathLike | None = None, k: int = DEFAULT_K,
                       progress: bool = True) -> Dataset:
    """Give ``ds`` exact neighbors/distances, from ``cache_dir`` (default $VDBBENCH_DATA/groundtruth)
    when computed before; returns ds."""
    if cache_dir is None:
        from vdbbench.datasets.registry import data_dir

        cache_dir = data_dir() / "groundtruth"
    if ds.has_groundtruth:
        ds.extra.setdefault("groundtruth", "from the data file")
        return ds
    key = groundtruth_key(ds)
    k_eff = min(k, ds.n)
    path = Path(cache_dir) / f"gt-{key[:24]}-k{k_eff}.npz"
    if path.exists():
        try:
            with np.load(path) as z:
                nb, di = z["neighbors"], z["distances"]
            if nb.shape == (ds.nq, k_eff) and di.shape == nb.shape:
                ds.neighbors, ds.distances = nb.astype(np.int64), di.astype(np.float32)
                ds.extra["groundtruth"] = f"cached: {path}"
                return ds
        except (OSError, ValueError, KeyError, EOFError, zipfile.BadZipFile):
            pass  # damaged cache entry (a cut or flipped .npz is a BadZipFile): recompute and overwrite it
    nb, di = compute_groundtruth(ds.train, ds.test, ds.metric, k=k_eff, progress=progress)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f"{path.name}.{os.getpid()}.tmp.npz")  # per process: concurrent writers never share it
    try:
        np.savez(tmp, neighbors=nb, distances=di)
        os.replace(tmp, path)
    except BaseException:
        tmp.unlink(missing_ok=True)  # a full disk or Ctrl-C leaves no half-written file behind
        raise
    ds.neighbors, ds.distances = nb, di
    ds.extra["groundtruth"] = f"computed, cached: {path}"
    return ds


def groundtruth_path(ds: Dataset, cache_dir: str | os.PathLike, k: int = DEFAULT_K) -> Path:
    """Where ``ensure_groundtruth`` keeps (or would keep) this data set's ground truth."""
    key = groundtruth_key(ds)
    return Path(cache_dir) / f"gt-{key[:24]}-k{min(k, ds.n)}.npz"
