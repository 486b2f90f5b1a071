"""Which photographs go where: scene groups (explicit and perceptual-hash near-identical copies),
the two disjoint pools, and the query/base split with its leak check, always by whole groups."""

from __future__ import annotations

import hashlib
from dataclasses import dataclass, field
from typing import Callable

import numpy as np

from vdbbench.datasets.photo_sift.extract import DIM


class UnionFind:
    def __init__(self, keys):
        self.p = {k: k for k in keys}

    def find(self, k):
        while self.p[k] != k:
            self.p[k] = self.p[self.p[k]]
            k = self.p[k]
        return k

    def union(self, a, b):
        a, b = self.find(a), self.find(b)
        if a != b:
            a, b = sorted((a, b))
            self.p[b] = a


def _sha1(s: str) -> str:
    return hashlib.sha1(s.encode()).hexdigest()


def group_images(keys: list[str], explicit: list[str], hashes: np.ndarray, phash_bits: int
                 ) -> tuple[list[str], list[tuple[str, str, int]]]:
    """Each image's group: images of one explicit group, and images whose perceptual hashes differ
    in fewer than `phash_bits` bits, share one. Returns (group of each image, merged hash pairs)."""
    uf = UnionFind(keys)
    first: dict[str, str] = {}
    for k, g in zip(keys, explicit):
        if g in first:
            uf.union(first[g], k)
        else:
            first[g] = k
    diff = (hashes[:, None, :] != hashes[None, :, :]).sum(-1)
    pairs = []
    for i, j in zip(*np.nonzero(np.triu(diff < phash_bits, 1))):
        pairs.append((keys[i], keys[j], int(diff[i, j])))
        uf.union(keys[i], keys[j])
    return [uf.find(k) for k in keys], pairs


def hash_order(groups) -> list[str]:
    """Groups in the order of the SHA-1 of their key: the order the query side is filled in."""
    return sorted(set(groups), key=_sha1)


def pool_sides(group_of: list[str], counts: np.ndarray) -> tuple[dict[str, str], list[int]]:
    """Two disjoint halves ("a", "b") of the photographs by whole groups: groups in SHA-1 order
    of "pool|" + key, each to the half with fewer descriptors so far. Returns (group -> half,
    descriptors per half)."""
    per_group: dict[str, int] = {}
    for i, g in enumerate(group_of):
        per_group[g] = per_group.get(g, 0) + int(counts[i])
    total, side = [0, 0], {}
    for g in sorted(per_group, key=lambda g: _sha1("pool|" + g)):
        h = 0 if total[0] <= total[1] else 1
        side[g] = "ab"[h]
        total[h] += per_group[g]
    return side, total


def probe_neighbours(imgs, desc, index, owner_all, seed, nprobe=1000, K=64):
    """Exact K nearest neighbours (over ALL images) of up to `nprobe` random descriptors of each
    image in `imgs`, in one batched search. Returns {img: (distances, owner image of each neighbour)}."""
    qs = []
    for i in imgs:
        q = desc[i]
        if len(q) > nprobe:
            q = q[np.random.default_rng(seed + i).choice(len(q), nprobe, replace=False)]
        qs.append(q)
    if not qs:
        return {}
    D, I = index.search(np.ascontiguousarray(np.concatenate(qs), dtype=np.float32), K)
    valid = I >= 0  # fewer than K descriptors in all: faiss pads with -1
    D, own = np.sqrt(np.maximum(D, 0)), np.where(valid, owner_all[np.maximum(I, 0)], -1)
    out, s = {}, 0
    for i, q in zip(imgs, qs):
        out[i] = (D[s:s + len(q)], own[s:s + len(q)])
        s += len(q)
    return out


def leak_stats(d, own, img, split, close=0.5):
    """Near-duplicate test of query image `img` against the current base side.

    Each probe's nearest BASE neighbour is its first neighbour owned by a base image. A probe is
    'close' when that distance is below `close` times the median over the image's probes.
    Returns (share of close probes, number and share of close probes that land in the single
    most hit base image, that image, median distance). Unrelated photos spread their few close
    probes over many images (top share < ~1.5%); two photos of one scene concentrate them
    (leuvenA/B 5.7%, graf1/3 3.1%, box/box_in_scene 2.4%, stereo motorcycle 15.6%)."""
    if len(d) == 0:
        return 0.0, 0, 0.0, -1, 0.0
    ok = (own >= 0) & (own != img) & (split[np.maximum(own, 0)] == 0)
    has = ok.any(1)
    first = ok.argmax(1)
    rows = np.arange(len(d))
    d1 = np.where(has, d[rows, first], np.inf)
    o1 = own[rows, first]
    med = float(np.median(d1[has])) if has.any() else 0.0
    hit = has & (d1 < close * med)
    if not hit.any():
        return 0.0, 0, 0.0, -1, med
    vals, cnt = np.unique(o1[hit], return_counts=True)
    j = int(np.argmax(cnt))
    return float(hit.mean()), int(cnt[j]), float(cnt[j] / len(d)), int(vals[j]), med


@dataclass
class Split:
    """The query/base split: split[i] is 1 for a query image, 0 for a base image."""

    split: np.ndarray
    query_groups: list[str]
    moved: list[str] = field(default_factory=list)  # groups the leak check moved to base
    moved_report: dict = field(default_factory=dict)
    leak_report: dict = field(default_factory=dict)


def split_query_base(keys, group_of, groups, desc, counts, *, seed, nquery, query_frac, min_query_pool,
                     leak_hits, leak_frac, log: Callable[[str], None]) -> Split:
    """Groups in hash order go to the query side until it has >= `query_frac` of the images and
    `min_query_pool` x `nquery` descriptors. A query image whose close matches concentrate in one
    base image (at least `leak_hits` probes and `leak_frac` of them: the same scene photographed
    again, or a copy under another name) sends its group to base, and the next group is taken."""
    import faiss

    n_img = len(keys)
    img_ids_of_group: dict[str, list[int]] = {}
    for i, g in enumerate(group_of):
        img_ids_of_group.setdefault(g, []).append(i)
    need_imgs = int(np.ceil(query_frac * n_img))
    moved: list[str] = []
    moved_report: dict = {}
    split = np.zeros(n_img, np.int8)
    # one exact index over all descriptors; probes of query candidates are searched once
    owner_all = np.repeat(np.arange(n_img), counts)
    index = faiss.IndexFlatL2(DIM)
    index.add(np.concatenate(desc).astype(np.float32))
    probes: dict = {}
    for _round in range(20):
        query_groups: list[str] = []
        for g in groups:  # hash order; groups moved by the leak check are skipped
            nq_img = sum(len(img_ids_of_group[x]) for x in query_groups)
            pool_n = sum(counts[i] for x in query_groups for i in img_ids_of_group[x])
            if nq_img >= need_imgs and pool_n >= min_query_pool * nquery:
                break
            if g not in moved:
                query_groups.append(g)
        split[:] = 0
        for g in query_groups:
            split[img_ids_of_group[g]] = 1
        bad = set()
        leak_report = {}
        probes.update(probe_neighbours([i for g in query_groups for i in img_ids_of_group[g] if i not in probes],
                                       desc, index, owner_all, seed))
        for g in query_groups:
            for i in img_ids_of_group[g]:
                fr, nhit, top, who, med = leak_stats(*probes[i], i, split)
                rep = {"close_frac": round(fr, 4), "top_base_hits": nhit, "top_base_share": round(top, 4),
                       "top_base_image": keys[who] if who >= 0 else None, "median_nn_dist": round(med, 1)}
                leak_report[keys[i]] = rep
                if nhit >= leak_hits and top >= leak_frac:
                    bad.add(g)
                    moved_report[keys[i]] = rep
                    log(f"leak check: {keys[i]}: {nhit} close probes ({top:.3f}) in {rep['top_base_image']}")
        if not bad:
            break
        for g in sorted(bad):
            moved.append(g)
            log(f"leak check: group {g} looks like a scene also in base -> moved to base")
    else:
        raise RuntimeError("leak check did not settle in 20 rounds")
    if split.all() or not split.any():
        raise ValueError(f"{n_img} images in {len(groups)} groups: the split left no "
                         f"{'base' if split.all() else 'query'} image; more photographs are needed")
    return Split(split, query_groups, moved, moved_report, leak_report)
