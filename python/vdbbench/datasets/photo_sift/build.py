"""Build the ann-benchmarks HDF5 file of real SIFT descriptors and its manifest from a list of
photographs: group, extract, split, dedup, sample, exact ground truth, write, check."""

from __future__ import annotations

import json
import os
import sys
import time
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Callable

import numpy as np

from vdbbench.datasets.base import content_hash
from vdbbench.datasets.photo_sift.extract import DIM, dhash, extract_all, require_cv2
from vdbbench.datasets.photo_sift.sample import dedup, sample_rows, waterfill
from vdbbench.datasets.photo_sift.sources import DEB_PACKAGES, WHEELS, Image
from vdbbench.datasets.photo_sift.split import group_images, hash_order, pool_sides, split_query_base

SOURCE_ATTR = ("SIFT (OpenCV) from real photographs in Debian/PyPI packages; "
               "query images disjoint from base images; see manifest")


@dataclass
class Params:
    """What the set depends on besides the photographs; the defaults build `photo-sift-a`."""

    nbase: int = 500_000
    nquery: int = 10_000
    k: int = 100  # ground-truth neighbours per query
    seed: int = 20240601
    query_frac: float = 0.05  # the query side holds at least this share of the images ...
    min_query_pool: float = 3.0  # ... and this many times nquery distinct vectors
    max_side: int = 2560  # images whose longer side exceeds this are downscaled
    jobs: int = os.cpu_count() or 2  # SIFT worker processes (the result does not depend on it)
    phash_bits: int = 24  # images whose 256-bit dHash differ in fewer bits share a group
    leak_frac: float = 0.015  # a query image with at least this share of its probes close to one base image ...
    pool: str = "a"  # "a": one of two disjoint halves of the photographs (by whole groups); "all": every one
    leak_hits: int = 15  # ... and at least this many such probes moves its group to base

    def check(self) -> None:
        for name in ("nbase", "nquery", "k", "max_side", "jobs", "phash_bits", "leak_hits"):
            if getattr(self, name) < 1:
                raise ValueError(f"{name} must be >= 1, got {getattr(self, name)}")
        if self.seed < 0:
            raise ValueError(f"seed must be >= 0, got {self.seed}")
        if not 0 < self.query_frac < 1:
            raise ValueError(f"query_frac must be in (0, 1), got {self.query_frac}")
        if self.pool not in ("a", "all"):
            # pool b is held back on purpose: scenes the engine is never tuned on
            raise ValueError(f"pool must be 'a' or 'all', got {self.pool!r}")


def _log(msg: str) -> None:
    print(time.strftime("[%H:%M:%S]"), msg, file=sys.stderr, flush=True)


def exact_groundtruth(xb: np.ndarray, xq: np.ndarray, k: int) -> tuple[np.ndarray, np.ndarray]:
    """Top-k ids (int32) and Euclidean distances (float32) of integer-valued vectors: candidates
    from faiss IndexFlatL2, re-ranked in exact integer arithmetic, ties to the lower id."""
    import faiss

    kk = min(len(xb), k + 28)
    index = faiss.IndexFlatL2(DIM)
    index.add(xb)
    _, I = index.search(xq, kk)
    xbi, xqi = xb.astype(np.int32), xq.astype(np.int32)
    nbr = np.empty((len(xq), k), np.int32)
    dist = np.empty((len(xq), k), np.float32)
    for s in range(0, len(xq), 500):
        cand = I[s:s + 500]
        d2 = ((xbi[cand] - xqi[s:s + 500, None, :]) ** 2).sum(-1).astype(np.int64)
        o = np.argsort(d2 * (1 << 21) + cand, axis=1, kind="stable")[:, :k]
        nbr[s:s + 500] = np.take_along_axis(cand, o, 1)
        dist[s:s + 500] = np.sqrt(np.take_along_axis(d2, o, 1)).astype(np.float32)
    return nbr, dist


def write_hdf5(out: Path, xb, xq, nbr, dist, seed: int) -> None:
    """The ann-benchmarks layout, written to a temporary name and renamed into place."""
    import h5py

    out.parent.mkdir(parents=True, exist_ok=True)
    tmp = out.with_name(out.name + ".tmp")
    with h5py.File(tmp, "w") as f:
        f.attrs["type"] = "dense"
        f.attrs["distance"] = "euclidean"
        f.attrs["dimension"] = DIM
        f.attrs["point_type"] = "float"
        f.attrs["source"] = SOURCE_ATTR
        f.attrs["seed"] = seed
        f.create_dataset("train", data=xb)
        f.create_dataset("test", data=xq)
        f.create_dataset("neighbors", data=nbr)
        f.create_dataset("distances", data=dist)
    os.replace(tmp, out)


def check_file(out: Path, n: int, nq: int, k: int, seed: int) -> list[int]:
    """Read the file back and check a few queries' ground truth by plain numpy brute force
    (float64); returns the queries checked. Raises AssertionError naming what disagrees."""
    import h5py

    with h5py.File(out, "r") as f:
        assert f.attrs["distance"] == "euclidean" and int(f.attrs["dimension"]) == DIM
        assert f.attrs["point_type"] == "float"
        tr, te = f["train"], f["test"]
        nb_f, di_f = f["neighbors"][:], f["distances"][:]
        assert tr.dtype == np.float32 and te.dtype == np.float32
        assert nb_f.dtype == np.int32 and di_f.dtype == np.float32
        assert tr.shape == (n, DIM) and te.shape == (nq, DIM)
        assert nb_f.shape == (nq, k) and di_f.shape == (nq, k)
        trv = tr[:].astype(np.float64)
        tev = te[:].astype(np.float64)
    chk = np.random.default_rng(seed + 1).choice(nq, size=min(10, nq), replace=False)
    for qi in chk:
        d = np.sqrt(((trv - tev[qi]) ** 2).sum(1))
        top = np.sort(d)[:k]
        assert abs(d[nb_f[qi, 0]] - d.min()) < 1e-6, ("neighbors[:,0] is not the nearest", qi)
        assert np.allclose(di_f[qi], top, atol=1e-3), ("distances differ from brute force", qi)
        assert np.allclose(d[nb_f[qi]], di_f[qi], atol=1e-3), ("ids and distances disagree", qi)
    return chk.tolist()


def vector_stats(x: np.ndarray) -> dict:
    n = np.linalg.norm(x, axis=1)
    return {"count": int(len(x)), "norm_mean": round(float(n.mean()), 2),
            "norm_median": round(float(np.median(n)), 2),
            "norm_p1_p99": [round(float(v), 1) for v in np.percentile(n, [1, 99])],
            "zero_frac": round(float((x == 0).mean()), 4),
            "min": float(x.min()), "max": float(x.max()),
            "mean_value": round(float(x.mean()), 2),
            "frac_at_255": round(float((x == 255).mean()), 6)}


def build(images: list[Image], out: str | os.PathLike, params: Params | None = None, *,
          sources: dict | None = None, fetched: bool = False, log: Callable[[str], None] = _log) -> dict:
    """Write `out` (ann-benchmarks HDF5: train, test, neighbors, distances; Euclidean) and its
    manifest `out` minus .hdf5 plus .manifest.json, from `images`; returns the manifest.

    Deterministic for the images and `params` (the seed included), whatever `params.jobs`.
    `sources` (what `fetch.fetch_and_unpack` returns, or the folder given) goes into the manifest,
    with `fetched` (whether this run fetched them: the manifest's params.setup).
    """
    import faiss

    params = params or Params()
    params.check()
    cv2 = require_cv2()
    t0 = time.time()
    out = Path(out)
    keys = [im.key for im in images]
    paths = [im.path for im in images]
    n_img = len(images)
    log(f"{n_img} photographs listed from {len(set(k.split('/')[0] for k in keys))} sources")

    group_of, phash_pairs = group_images(keys, [im.group for im in images],
                                         np.stack([dhash(p) for p in paths]), params.phash_bits)
    groups = hash_order(group_of)
    log(f"{len(groups)} groups ({len(phash_pairs)} perceptual-hash near-identical pairs merged)")
    for a, b, dd in phash_pairs:
        log(f"   phash pair ({dd} bits): {a}  ~  {b}")

    t1 = time.time()
    res = extract_all(paths, params.max_side, params.jobs)
    desc = [r.desc for r in res]
    counts = np.array([len(d) for d in desc])
    log(f"SIFT: {counts.sum():,} descriptors from {n_img} images in {time.time() - t1:.0f}s "
        f"(per image: min {counts.min()}, median {int(np.median(counts))}, max {counts.max()}; "
        f"non-integer values corrected: {sum(r.nonint for r in res)})")

    if params.pool != "all":
        side, total = pool_sides(group_of, counts)
        keep = [i for i in range(n_img) if side[group_of[i]] == params.pool]
        keys = [keys[i] for i in keep]
        group_of = [group_of[i] for i in keep]
        desc = [desc[i] for i in keep]
        res = [res[i] for i in keep]
        counts, n_img = counts[keep], len(keep)
        groups = [g for g in groups if side[g] == params.pool]
        log(f"pool {params.pool}: {n_img} images in {len(groups)} groups, {counts.sum():,} descriptors "
            f"(halves: a {total[0]:,}, b {total[1]:,})")

    rng = np.random.default_rng(params.seed)
    sp = split_query_base(keys, group_of, groups, desc, counts, seed=params.seed, nquery=params.nquery,
                          query_frac=params.query_frac, min_query_pool=params.min_query_pool,
                          leak_hits=params.leak_hits, leak_frac=params.leak_frac, log=log)
    split = sp.split
    q_imgs = np.flatnonzero(split == 1)
    base_ids = np.flatnonzero(split == 0)
    log(f"split: {len(q_imgs)} query images in {len(sp.query_groups)} groups, "
        f"{n_img - len(q_imgs)} base images; leak check moved {len(sp.moved)} group(s)")

    def pool(ids):
        return (np.concatenate([desc[i] for i in ids]),
                np.concatenate([np.full(counts[i], i) for i in ids]))

    (xb_u, ob_u), (xq_u, oq_u), dropped = dedup(*pool(base_ids), *pool(q_imgs))
    log(f"dedup: dropped {dropped['base_within']:,} base and {dropped['query_within']:,} query duplicates, "
        f"{dropped['query_in_base']:,} query vectors also in base")

    qb = waterfill(np.bincount(ob_u, minlength=n_img), params.nbase, rng)
    qq = waterfill(np.bincount(oq_u, minlength=n_img), params.nquery, rng)
    sb, sq = sample_rows(ob_u, qb, rng), sample_rows(oq_u, qq, rng)
    xb = xb_u[sb].astype(np.float32)
    xq = xq_u[sq].astype(np.float32)
    ob, oq = ob_u[sb], oq_u[sq]
    log(f"sampled {len(xb):,} base vectors from {len(np.unique(ob))} images (per-image cap {qb.max()}), "
        f"{len(xq):,} query vectors from {len(np.unique(oq))} images (per-image cap {qq.max()})")
    if len(xb) < params.nbase:
        log(f"NOTE: only {len(xb):,} distinct base vectors available (asked {params.nbase:,})")
    if len(xq) == 0 or len(xb) == 0:
        raise ValueError("no query or no base vectors left after the split; more photographs are needed")

    k = min(params.k, len(xb))
    t2 = time.time()
    nbr, dist = exact_groundtruth(xb, xq, k)
    log(f"ground truth: top-{k} for {len(xq):,} queries in {time.time() - t2:.0f}s")

    write_hdf5(out, xb, xq, nbr, dist, params.seed)
    checked = check_file(out, len(xb), len(xq), k, params.seed)
    log(f"read-back check OK: brute-force numpy top-{k} matches for queries {checked}")

    nn1 = dist[:, 0]
    sampled = {i: int((oq == i).sum() if split[i] else (ob == i).sum()) for i in range(n_img)}
    manifest = {
        "output": str(out.resolve()),
        "built_by": "vdbbench datasets build",
        "content_sha256": content_hash(xb, xq),
        "params": {"setup": fetched, **asdict(params)},
        "opencv": cv2.__version__, "faiss": faiss.__version__, "numpy": np.__version__,
        "debian_packages": [p.name for p in DEB_PACKAGES], "pypi_wheels": list(WHEELS),
        "sources": sources or {},
        "images_listed": n_img, "groups": len(set(group_of)),
        "descriptors_extracted": int(counts.sum()),
        "dedup": dropped,
        "base": vector_stats(xb), "query": vector_stats(xq),
        "base_images_used": int(len(np.unique(ob))), "query_images_used": int(len(np.unique(oq))),
        "nn1_distance": {"mean": round(float(nn1.mean()), 1), "median": round(float(np.median(nn1)), 1),
                         "p1": round(float(np.percentile(nn1, 1)), 1),
                         "zero_frac": round(float((nn1 == 0).mean()), 5)},
        "moved_by_leak_check": sp.moved, "moved_report": sp.moved_report, "phash_pairs": phash_pairs,
        "leak_report": sp.leak_report,
        "images": [{"key": keys[i], "group": group_of[i], "split": "query" if split[i] else "base",
                    "size": list(res[i].size), "sift_size": list(res[i].sift_size),
                    "extracted": int(counts[i]), "sampled": sampled[i]} for i in range(n_img)],
        "runtime_s": round(time.time() - t0, 1),
    }
    path = manifest_path(out)
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(json.dumps(manifest, indent=1))
    os.replace(tmp, path)
    return manifest


def manifest_path(out: str | os.PathLike) -> Path:
    """The manifest beside a built file: photo-sift-a.hdf5 -> photo-sift-a.manifest.json."""
    out = Path(out)
    return out.with_name(out.stem + ".manifest.json")


def summary(manifest: dict) -> list[str]:
    """What a build prints at the end: sizes, value statistics, the leak check, the per-source mix."""
    lines = []
    for name, s in (("base ", manifest["base"]), ("query", manifest["query"])):
        lines.append(f"{name}: n={s['count']:,}  L2 norm mean {s['norm_mean']} median {s['norm_median']} "
                     f"(p1-p99 {s['norm_p1_p99']})  zero frac {s['zero_frac']:.3f}  "
                     f"min {s['min']:.0f} max {s['max']:.0f}  mean value {s['mean_value']}")
    lines.append(f"leak check: {len(manifest['moved_by_leak_check'])} query group(s) moved to base")
    nn1 = manifest["nn1_distance"]
    lines.append(f"1-NN distance (query->base): median {nn1['median']}, p1 {nn1['p1']}, exact-zero {nn1['zero_frac']}")
    mix: dict[str, list[int]] = {}
    for im in manifest["images"]:
        m = mix.setdefault(im["key"].split("/")[0], [0, 0, 0, 0])
        q = im["split"] == "query"
        m[1 if q else 0] += 1
        m[3 if q else 2] += im["sampled"]
    lines.append("per source: base images / query images / base vectors / query vectors")
    for src, (bi, qi, bv, qv) in sorted(mix.items(), key=lambda kv: -kv[1][2]):
        lines.append(f"   {src:30s} {bi:4d} {qi:3d} {bv:9,d} {qv:7,d}")
    return lines
