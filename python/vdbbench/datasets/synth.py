"""Generated data sets, deterministic by seed: a SIFT replica as hard as real SIFT, and real-valued data.

Both come from one hierarchical process, a "world" fixed by the seed and independent of n:
G groups, each with its own mean and its own r-dimensional basis; K components per group, each a
mean (the group's plus a gamma-distributed offset) and its own anisotropic latent scales
(decaying with the latent index, log-normal per component) and noise level (log-normal). A point
picks a component, draws heavy-tailed (Student-t) latent coordinates and noise: many overlapping,
low-intrinsic-dimension, anisotropic structures rather than a few tight clusters.

For the SIFT replica a row is one keypoint descriptor of a photograph, and the noise is what makes
two descriptors of the same pattern differ: a shift of the patch, a nearby scale, a slight
rotation, another exposure. Those are few degrees of freedom, so the noise lives in a subspace of
`noise_rank` dimensions per group (isotropic noise of the same energy would give every
neighbourhood all 128 dimensions, which real descriptors do not have: such a replica was as hard as
real SIFT for IVF but about ten times too hard for a graph index). The world then holds many
near-duplicate neighbourhoods, variations of one pattern along a few directions, which a graph
walks cheaply, while the neighbours of a query still spread over several IVF lists.

Some patterns recur across photographs (a logo, a window corner, a printed letter): the world holds
`patterns` fixed draws of the process, and a share `pattern_fraction` of all rows, base and
queries alike, repeats one of them, its latent and noise coordinates perturbed by `pattern_noise`
times a fresh draw. At 1M each pattern recurs about five times in the base, so the few queries that
repeat one find a near-duplicate (real SIFT: nearest-neighbour distance p1 64 against a median of
237), and graph walks through those neighbourhoods are cheap; IVF's difficulty does not move.

Two knobs set the difficulty at 1M, and they move IVF and a graph differently. Each group's points
share one subspace (latent and noise directions): with few groups, k-means lists cut through broad
slabs and a query's neighbours spread over more of them (IVF harder), but a graph needs a wider beam
too, faster than IVF. How far a component's mean sits from its group's (`component_spread`) moves
IVF alone: further-flung components overlap less within a list, and a query's neighbours fall in
more lists, while the walk between components stays as cheap. Generator v5 (6 groups, spread 0.3)
matched IVF's low end (exact-scan IVF needed 1.25% of the lists for recall@10 0.95 at 1M, real SIFT
1.3-1.7%) but needed faiss HNSW32's efSearch 67 against real SIFT's 48, and every graph QPS ratio at
1M read 1.6-1.7x too slow; v6 (12 groups, spread 0.6) needs 1.50% of the lists (nprobe 60 of 4000,
real SIFT's IVF4000,Flat: 64) and efSearch 45 (screening at 1M, 500 queries:
benchmarks/results/synth_calibration.md, with the timed ratios). Component weights, heavier latent
tails, per-component bases, continuous pattern families, more components and more noise left IVF's
share nearly where it was. What v6 does not match as well: 17.7% zero components (real 13-15%) and
nearest neighbours a little closer than real SIFT's (median 206 against 237).

`synth_sift` turns each point into a gradient histogram and does what SIFT does to one: keep the
non-negative part, sharpen it (a power > 1: a few dominant orientations), weight the 4x4 spatial
cells by a Gaussian window, normalise to unit length, clip at 0.2, renormalise, scale by 512,
round to integers 0..255. Its parameters were calibrated with benchmarks/calibrate_synth.py
against the real-SIFT figures of docs/real-sift.md (sections 1-2): exact-scan IVF's nprobe for recall@10
0.95 at nlist = 4*sqrt(n), and the QPS ratios of graph indexes (faiss HNSW32, hnswlib) and IVF-PQ
fast-scan to IVF-Flat (benchmarks/results/synth_calibration.md).

Rows are generated in fixed chunks with one random stream per chunk, so memory stays bounded,
the output does not depend on how it is chunked in memory, and the base of a smaller n is a
prefix of a larger one; queries come from their own streams (keypoints of other photographs:
fresh draws of the same process, disjoint from the base). (Integer rounding after a BLAS product
could in principle differ in rare components between BLAS builds; the cache keys and
Dataset.sha256 identify exactly what was measured.)
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

# Bump a kind's version when its output for a given (n, nq, seed, dim) changes: cached generated sets
# are keyed by it (file name and Dataset.extra), so a file of an older generator is never reused.
GENERATOR_VERSIONS = {"sift": 6, "float": 2}
CHUNK = 1 << 13  # rows per random stream; always drawn whole, so prefixes agree
_BASE_STREAM, _QUERY_STREAM = 2, 3


@dataclass(frozen=True)
class WorldParams:
    groups: int = 32
    components: int = 128  # per group
    rank: int = 16  # latent dimension of each component
    mean_shape: float = 1.0  # gamma shape of the group means (smaller: sparser)
    component_spread: float = 0.3  # scale of a component's offset from its group mean
    latent_scale: float = 2.0
    latent_decay: float = 0.7  # latent j has scale j**-decay
    noise: float = 0.8  # median noise of a component (root mean square per coordinate)
    noise_spread: float = 0.4  # log-normal sigma of the per-component noise level
    latent_df: float = 4.0  # Student-t degrees of freedom of the latent coordinates
    noise_rank: int = 24  # noise confined to a per-group subspace of this dimension (0: isotropic)
    iso_share: float = 0.0  # share of the noise energy that is isotropic (in all dimensions), with noise_rank
    patterns: int = 0  # recurring patterns of the world (fixed draws of the process)
    pattern_fraction: float = 0.0  # share of rows (base and queries) that repeat one of them
    pattern_noise: float = 0.3  # a repeat's latent and noise perturbation, relative to a fresh draw's


@dataclass(frozen=True)
class SiftParams:
    shift: float = 0.55  # added before keeping the non-negative part (sets the zero fraction)
    power: float = 1.7  # histogram peakiness
    window_exp: float = 4.0  # strength of the spatial Gaussian window across the 16 cells


SIFT_WORLD = WorldParams(groups=12, components=683, component_spread=0.6, patterns=20_000, pattern_fraction=0.1,
                         pattern_noise=0.3)
SIFT_PARAMS = SiftParams()
FLOAT_WORLD = WorldParams(groups=32, components=64, rank=12, mean_shape=2.0, component_spread=0.8,
                          latent_scale=2.5, noise=0.6, noise_spread=0.6, noise_rank=0)


class _World:
    def __init__(self, seed: int, dim: int, p: WorldParams):
        rng = np.random.default_rng([seed, 1, dim])
        self.p, self.dim = p, dim
        G, K, r = p.groups, p.components, min(p.rank, dim)
        self.rank = r
        group_mean = rng.gamma(p.mean_shape, 1.0, size=(G, dim))
        basis = rng.standard_normal((G, dim, r))
        self.basis = np.linalg.qr(basis)[0].transpose(0, 2, 1).copy()  # (G, r, dim), orthonormal rows
        offsets = rng.gamma(p.mean_shape, 1.0, size=(G, K, dim)) - p.mean_shape
        self.mean = (group_mean[:, None, :] + p.component_spread * offsets).reshape(G * K, dim)
        decay = np.arange(1, r + 1, dtype=np.float64) ** -p.latent_decay
        self.scale = (p.latent_scale * decay * rng.lognormal(0.0, 0.3, size=(G, K, r))).reshape(G * K, r)
        self.noise = p.noise * rng.lognormal(0.0, p.noise_spread, size=G * K)
        if p.noise_rank:
            q = min(p.noise_rank, dim)
            nb = np.linalg.qr(np.random.default_rng([seed, 5, dim]).standard_normal((G, dim, q)))[0]
            self.noise_basis = nb.transpose(0, 2, 1) * np.sqrt(dim / q)  # (G, q, dim): the same total energy
        self.noise_dim = min(p.noise_rank, dim) if p.noise_rank else dim
        if p.patterns and p.pattern_fraction > 0:
            prng = np.random.default_rng([seed, 6, dim])
            self.pattern_comp = prng.integers(0, G * K, size=p.patterns)
            self.pattern_latent = prng.standard_t(p.latent_df, size=(p.patterns, r))
            self.pattern_z = prng.standard_normal((p.patterns, self.noise_dim))
            self.pattern_iso = prng.standard_normal((p.patterns, dim)) if p.noise_rank and p.iso_share > 0 else None

    def draw(self, rng: np.random.Generator, m: int) -> np.ndarray:
        """m raw points (float64) of the process."""
        p = self.p
        comp = rng.integers(0, p.groups * p.components, size=m)
        t = rng.standard_t(p.latent_df, size=(m, self.rank))
        z = rng.standard_normal((m, self.noise_dim))
        iso = rng.standard_normal((m, self.dim)) if p.noise_rank and p.iso_share > 0 else None
        if p.patterns and p.pattern_fraction > 0:  # a repeat: a pattern's draw, slightly perturbed
            rep = np.flatnonzero(rng.random(m) < p.pattern_fraction)
            which = rng.integers(0, p.patterns, size=rep.size)
            comp[rep] = self.pattern_comp[which]
            t[rep] = self.pattern_latent[which] + p.pattern_noise * t[rep]
            z[rep] = self.pattern_z[which] + p.pattern_noise * z[rep]
            if iso is not None:
                iso[rep] = self.pattern_iso[which] + p.pattern_noise * iso[rep]
        group = comp // p.components
        latent = t * self.scale[comp]
        x = self.mean[comp]
        order = np.argsort(group, kind="stable")
        bounds = np.searchsorted(group[order], np.arange(p.groups + 1))
        for g in range(p.groups):
            rows = order[bounds[g] : bounds[g + 1]]
            if rows.size:
                x[rows] += latent[rows] @ self.basis[g]
        z *= self.noise[comp][:, None]
        if p.noise_rank:
            if iso is not None:
                z *= np.sqrt(1.0 - p.iso_share)
                x += iso * (np.sqrt(p.iso_share) * self.noise[comp][:, None])
            for g in range(p.groups):
                rows = order[bounds[g] : bounds[g + 1]]
                if rows.size:
                    x[rows] += z[rows] @ self.noise_basis[g]
        else:
            x += z
        return x


def _fill(out: np.ndarray, seed: int, stream: int, make) -> np.ndarray:
    for c, start in enumerate(range(0, out.shape[0], CHUNK)):
        rng = np.random.default_rng([seed, stream, c])
        stop = min(start + CHUNK, out.shape[0])
        out[start:stop] = make(rng, CHUNK)[: stop - start]
    return out


def _check(n: int, nq: int, dim: int, seed: int) -> None:
    for label, value in (("n", n), ("nq", nq), ("dim", dim)):
        if not isinstance(value, (int, np.integer)) or value <= 0:
            raise ValueError(f"{label} must be a positive integer, got {value!r}")
    if not isinstance(seed, (int, np.integer)) or seed < 0:
        raise ValueError(f"seed must be a non-negative integer, got {seed!r}")


def _spatial_window(dim: int, exponent: float) -> np.ndarray:
    """SIFT's Gaussian weighting of its 4x4 cells (sigma = half the window), one weight per component."""
    centres = (np.arange(4) - 1.5) / 4.0
    cy, cx = np.meshgrid(centres, centres, indexing="ij")
    cells = np.exp(-(cx**2 + cy**2) / (2 * 0.5**2)).reshape(16) ** exponent
    return np.resize(np.repeat(cells, max(1, dim // 16)), dim)


def sift_normalise(x: np.ndarray) -> np.ndarray:
    """SIFT's descriptor normalisation of non-negative rows: unit length, clip 0.2, renormalise, x512, round."""
    x = x / np.maximum(np.linalg.norm(x, axis=1, keepdims=True), 1e-12)
    np.minimum(x, 0.2, out=x)
    x /= np.maximum(np.linalg.norm(x, axis=1, keepdims=True), 1e-12)
    return np.clip(np.rint(x * 512.0), 0, 255)


def synth_sift(n: int, nq: int, seed: int = 0, dim: int = 128) -> tuple[np.ndarray, np.ndarray]:
    """(base, queries): float32 C-contiguous, integer values 0..255, norms ~512, SIFT-like difficulty."""
    return sift_like(n, nq, seed=seed, dim=dim)


def sift_like(n: int, nq: int, seed: int = 0, dim: int = 128, world_params: WorldParams = SIFT_WORLD,
              sift_params: SiftParams = SIFT_PARAMS) -> tuple[np.ndarray, np.ndarray]:
    """`synth_sift` with explicit parameters (benchmarks/calibrate_synth.py sweeps them)."""
    _check(n, nq, dim, seed)
    world = _World(seed, dim, world_params)
    sp = sift_params
    window = _spatial_window(dim, sp.window_exp)

    def make(rng, m):
        x = np.maximum(world.draw(rng, m) + sp.shift, 0.0)
        x **= sp.power
        x *= window
        return sift_normalise(x)

    base = _fill(np.empty((n, dim), np.float32), seed, _BASE_STREAM, make)
    queries = _fill(np.empty((nq, dim), np.float32), seed, _QUERY_STREAM, make)
    return base, queries


def synth_float(n: int, nq: int, dim: int = 64, seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    """(base, queries): float32 C-contiguous, real-valued, per-dimension scales spanning ~100x.

    The wide range of scales is what makes 8-bit quantization lose information here: a u8 code
    with one global range leaves the small-scale dimensions only a few levels.
    """
    return float_like(n, nq, dim=dim, seed=seed)


def float_like(n: int, nq: int, dim: int = 64, seed: int = 0, world_params: WorldParams = FLOAT_WORLD,
               ) -> tuple[np.ndarray, np.ndarray]:
    """`synth_float` with explicit parameters."""
    _check(n, nq, dim, seed)
    world = _World(seed, dim, world_params)
    dim_scale = np.exp(np.random.default_rng([seed, 4, dim]).uniform(np.log(0.1), np.log(10.0), size=dim))

    def make(rng, m):
        return world.draw(rng, m) * dim_scale

    base = _fill(np.empty((n, dim), np.float32), seed, _BASE_STREAM, make)
    queries = _fill(np.empty((nq, dim), np.float32), seed, _QUERY_STREAM, make)
    return base, queries
