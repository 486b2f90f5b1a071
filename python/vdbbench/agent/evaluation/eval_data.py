"""The data a judge measures on: the card's base vectors and its disjoint dev, held-out and fresh
query splits with exact ground truth (only the harness process holds them)."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from vdbbench.agent.core.task import TaskCard


@dataclass
class Split:
    queries: np.ndarray
    gt_ids: np.ndarray
    gt_dist: np.ndarray  # natural units (Euclidean for l2), as vdbbench.common.recall expects


@dataclass
class EvalData:
    """Base vectors and the three disjoint query splits; only the harness process holds these."""

    base: np.ndarray
    metric: str
    dev: Split
    heldout: Split
    fresh: Split
    dataset: dict | None = None  # what was loaded: name, synthetic (a replica stands in), note


def make_eval_data(card: TaskCard) -> EvalData:
    """The card's data set with disjoint dev, held-out and fresh query splits and exact ground truth.

    Generated sets draw all three splits from the generator's query process in one call (so they
    are disjoint draws of the same distribution); registered sets (e.g. sift-1m) split their own
    query file, which must hold enough queries.
    """
    from vdbbench.datasets import compute_groundtruth, load_dataset, synth

    ds = card.dataset
    nq = ds.dev_queries + ds.heldout_queries + ds.fresh_queries
    metric = ds.metric
    k = max(card.objective.k, 10)
    known = None  # ground truth that came with the data set, reused when deep enough
    identity = {"name": ds.name, "synthetic": True, "n": ds.n}
    if ds.generator == "synth_sift":
        base, queries = synth.synth_sift(ds.n, nq, seed=ds.seed, dim=ds.dim)
    elif ds.generator == "synth_float":
        base, queries = synth.synth_float(ds.n, nq, dim=ds.dim, seed=ds.seed)
    else:
        loaded = load_dataset(ds.name, seed=ds.seed, progress=False)
        base, queries, metric = loaded.train, loaded.test, loaded.metric
        if queries.shape[0] < nq:
            raise ValueError(f"data set {ds.name} has {queries.shape[0]} queries; the task's splits need {nq}")
        queries = queries[:nq]
        identity = {"name": ds.name, "loaded": loaded.name, "synthetic": bool(loaded.synthetic),
                    "n": int(base.shape[0]), "sha256": loaded.sha256}
        if loaded.synthetic:
            identity["note"] = f"{ds.name} is not available here (offline): its generated replica {loaded.name} was used"
        if loaded.neighbors is not None and loaded.distances is not None and loaded.neighbors.shape[1] >= k:
            known = (loaded.neighbors[:nq, :k], loaded.distances[:nq, :k])
    cuts = np.cumsum([ds.dev_queries, ds.heldout_queries])
    splits = []
    for rows in np.split(np.arange(nq), cuts):
        q = np.ascontiguousarray(np.asarray(queries, dtype=np.float32)[rows])
        if known is not None:
            ids, dist = np.ascontiguousarray(known[0][rows]), np.ascontiguousarray(known[1][rows])
        else:
            ids, dist = compute_groundtruth(base, q, metric, k=k)
        splits.append(Split(q, ids, dist))
    return EvalData(np.ascontiguousarray(base, dtype=np.float32), metric, *splits, dataset=identity)
