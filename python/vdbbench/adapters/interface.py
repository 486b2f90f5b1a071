"""The adapter interface every benchmarked index implements: ours, the peers and plugins.

An adapter wraps one index configuration for `vdbbench run`. The runner calls, in order:

1. ``cls.supports(metric)``, then ``cls(dim, n, metric, options)``;
2. ``param_space()`` (also right after construction, to check the user's explicit knob lists:
   raise ValueError there and the run stops before anything is built);
3. ``build(base)`` once (or ``load(path)`` from the cache when ``cacheable``), returning a
   `BuildInfo` with the seconds it took and the bytes the index holds (its memory);
4. ``search(queries, k, params, threads)`` many times, ``params`` one point of the space,
   ``queries`` a C-contiguous float32 (nq, dim) array (nq = 1 for one query per call; calls
   may come from several threads at once in ``--mode concurrent``);
5. ``versions()`` for the result's machine section.

Name and version: ``name`` (class attribute) is the name users type after ``--index`` and
``--compare``; ``versions()`` maps library names to their versions.

A third-party package registers adapters under the entry-point group ``vdbbench.adapters``
(see `vdbbench.adapters.registry`), e.g. in its pyproject.toml::

    [project.entry-points."vdbbench.adapters"]
    my-index = "my_package.adapter:MyIndexAdapter"
"""

from __future__ import annotations

import math
from abc import ABC, abstractmethod
from dataclasses import dataclass, field, replace
from typing import ClassVar

import numpy as np

from vdbbench.common.ivf import check_rerank, train_sample, train_sample_size  # noqa: F401 (re-exported)


@dataclass
class BuildInfo:
    """What building an index cost: seconds to train and to add, bytes it holds."""

    train_s: float
    add_s: float
    bytes: int | None  # None: the runner measures it from the saved index
    cached: bool = False  # True when the index (and these figures) came from the on-disk cache


@dataclass(frozen=True)
class ParamSpace:
    """The search knobs of an index, in order of increasing recall and cost.

    ``primary`` is swept adaptively (doubling from ``start`` until the target recall is passed,
    then bisected) between ``start`` and ``stop`` inclusive, unless ``primary_values`` fixes the
    list. ``secondary`` maps each other knob to the values to sweep in full (one adaptive sweep
    of the primary knob per combination). ``fixed`` knobs are passed unchanged at every point.
    Knobs cost more as they grow, except that a knob named in ``off_at_zero`` turns a stage off
    at 0, which may cost more or less than any other value (our ``reorder``: 0 scans every
    row's u8 codes, faster in a batch, slower for one query per call).
    """

    primary: str
    start: int
    stop: int
    primary_values: tuple[int, ...] | None = None
    secondary: dict[str, tuple[int | float, ...]] = field(default_factory=dict)
    fixed: dict[str, object] = field(default_factory=dict)
    off_at_zero: tuple[str, ...] = ()

    def knob_values(self, knob: str, values: tuple) -> "ParamSpace":
        """This space with ``knob`` (the primary or a secondary one) swept over ``values``
        instead of its own list; ValueError names the knobs when the index has no such one."""
        if knob == self.primary:
            return replace(self, primary_values=tuple(int(v) for v in values))
        if knob in self.secondary:
            return replace(self, secondary={**self.secondary, knob: tuple(values)})
        names = ", ".join([self.primary, *self.secondary])
        raise ValueError(f"no knob {knob!r} to sweep (its knobs: {names})")

    def describe(self, visited: dict[str, list] | None = None) -> dict[str, dict]:
        """What the sweep of each knob covers, for the result (``run.knobs``): ``values``, its list
        (for the primary knob swept adaptively: the values it reached, with ``adaptive``, the
        bounds it may move within); with ``visited`` (knob -> values the sweep measured) a
        secondary knob also says which of its values were ``swept`` (a fast sweep skips steps
        that stopped paying)."""
        visited = visited or {}
        out: dict[str, dict] = {}
        if self.primary_values is not None:
            out[self.primary] = {"values": sorted(set(self.primary_values))}
        else:
            out[self.primary] = {"adaptive": [self.start, self.stop],
                                 "values": sorted(set(visited.get(self.primary, [])))}
        for name, values in self.secondary.items():
            out[name] = {"values": list(values)}
            if name in visited:
                out[name]["swept"] = [v for v in values if v in set(visited[name])]
        return out

    def combos(self) -> list[dict[str, object]]:
        """Every combination of the secondary knobs (plus the fixed ones), in sweep order."""
        out: list[dict[str, object]] = [dict(self.fixed)]
        for name, values in self.secondary.items():
            out = [{**c, name: v} for c in out for v in values]
        return out


def default_rerank_sweep(k: int) -> tuple[int, ...]:
    """The rerank depths swept by default for our u8+f16 index: 0 is the u8 prescore alone
    (exact on integer data). Peers sweep their own knobs over their own ranges."""
    return (0, 4 * k, 8 * k, 16 * k)


def default_reorder_sweep(k: int) -> tuple[int, ...]:
    """The prefilter depths swept by default for our l2 u8+f16 index (the 4-bit prefilter keeps
    this many rows per query for the u8 distance); 0 is the u8 scan alone."""
    return (0, 10 * k, 20 * k)


def default_probe_ratio_sweep() -> tuple[float, ...]:
    """The probe ratios swept by default for our l2 and cosine IVF: 0 probes all nprobe lists;
    1.35 only those whose centroid lies within 1.35 times the query's nearest centroid's
    distance (at least a quarter of nprobe)."""
    return (0.0, 1.35)


def check_probe_ratio(values) -> tuple[float, ...]:
    """``values`` as floats, each 0 (off) or a finite ratio >= 1, else ValueError."""
    out = tuple(float(v) for v in values)
    bad = [v for v in out if v != 0 and not (math.isfinite(v) and v >= 1)]
    if bad:
        raise ValueError(f"probe-ratio={bad[0]}: expected 0 (off) or a finite ratio >= 1")
    return out


@dataclass
class RunOptions:
    """What the user asked of the index under test (ignored by adapters that lack the knob)."""

    k: int = 10
    nlist: int | None = None
    nprobe: tuple[int, ...] | None = None  # explicit list; None = adaptive
    rerank: tuple[int, ...] | None = None  # explicit list; None = the adapter's default sweep
    reorder: tuple[int, ...] | None = None  # the same, for the one-query prefilter
    probe_ratio: tuple[float, ...] | None = None  # the same, for our ivf's probe ratio
    storage: str = "u8+f16"
    ef_search: tuple[int, ...] | None = None
    seed: int = 0
    # per index name, knob -> values to sweep instead of the index's own list (``--knob``)
    knobs: dict[str, dict[str, tuple]] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if self.k < 1:
            raise ValueError(f"k must be >= 1, got {self.k}")
        if self.rerank is not None:
            self.rerank = check_rerank(self.rerank, self.k)
        if self.reorder is not None:
            self.reorder = tuple(int(v) for v in self.reorder)
            bad = [v for v in self.reorder if v != 0 and v < self.k]
            if bad:
                raise ValueError(f"reorder={bad[0]} is below k={self.k}: expected 0 (off) or reorder >= k")
        if self.probe_ratio is not None:
            self.probe_ratio = check_probe_ratio(self.probe_ratio)


class Adapter(ABC):
    """An index under benchmark. Subclasses are a few lines: build, search, knobs."""

    #: The name typed after --index / --compare, and the result file's name (<name>.json).
    name: ClassVar[str] = ""
    #: The metrics this index supports ("l2", "ip", "cosine").
    metrics: ClassVar[tuple[str, ...]] = ("l2", "ip", "cosine")
    #: False for indexes that cannot be saved (rebuilt every run); True for cached peers.
    cacheable: ClassVar[bool] = False

    def __init__(self, dim: int, n: int, metric: str, options: RunOptions) -> None:
        self.dim = dim
        self.n = n
        self.metric = metric
        self.options = options

    @classmethod
    def supports(cls, metric: str) -> bool:
        return metric in cls.metrics

    @abstractmethod
    def build_params(self) -> dict[str, object]:
        """The construction parameters, recorded in the result and part of the cache key."""

    @abstractmethod
    def build(self, base: np.ndarray) -> BuildInfo:
        """Train on a sample of ``base`` and add all of it (ids 0..n-1).

        ``BuildInfo.bytes`` is the memory the index holds; None lets the runner measure the
        saved file (cacheable adapters) or record it as unknown.
        """

    @abstractmethod
    def search(self, queries: np.ndarray, k: int, params: dict, threads: int) -> np.ndarray:
        """Ids (nq, k) int64 of the approximate k nearest neighbours, -1 for none.

        ``threads`` caps the threads this one call may use (1 in concurrent mode, where the
        parallelism comes from the clients).
        """

    @abstractmethod
    def param_space(self) -> ParamSpace:
        """The sweepable knobs for this run (honouring the explicit lists in ``options``)."""

    def stage_stats(self) -> dict | None:
        """Per-stage counts and seconds of the last search, when the index reports them."""
        return None

    def versions(self) -> dict[str, str]:
        """Library versions worth recording in the machine section (e.g. faiss)."""
        return {}

    def simd_level(self) -> str | None:
        """The SIMD level the library's kernels run at now, where it says (None: unknown)."""
        return None

    @classmethod
    def cap_simd(cls, level: str) -> str | None:
        """Caps the library's SIMD level for this process at ``level`` (a ``VDBBENCH_SIMD`` name:
        scalar, avx2, avx512bw, avx512vnni, avx512amx, avx512) and returns the level it then runs
        at; None when the library cannot be capped at run time. ValueError when this CPU cannot
        run that level."""
        return None

    def cache_key(self) -> str:
        """Stable text that identifies this index configuration (dataset hash is added by the cache)."""
        parts = [self.name, self.metric, f"n={self.n}", f"dim={self.dim}"]
        parts += [f"{k}={v}" for k, v in sorted(self.build_params().items())]
        return ";".join(parts)

    # Cacheable adapters implement these two.
    def save(self, path: str) -> None:  # pragma: no cover - only for cacheable adapters
        raise NotImplementedError(f"{self.name} cannot be saved")

    def load(self, path: str) -> None:  # pragma: no cover - only for cacheable adapters
        raise NotImplementedError(f"{self.name} cannot be loaded")


def swept_space(adapter: Adapter) -> ParamSpace:
    """The knobs the run sweeps for ``adapter``: its own `param_space`, with the lists the user
    gave for this index by name (``RunOptions.knobs``) in place of its own."""
    space = adapter.param_space()
    for knob, values in adapter.options.knobs.get(adapter.name, {}).items():
        try:
            space = space.knob_values(knob, values)
        except ValueError as exc:
            raise ValueError(f"{adapter.name}: {exc}") from None
    return space


def ivf_primary(options: RunOptions, nlist: int) -> tuple[int, int, tuple[int, ...] | None]:
    """nprobe sweep bounds for an IVF index: 1..nlist, or the explicit list (checked)."""
    if options.nprobe is not None:
        bad = [p for p in options.nprobe if p < 1 or p > nlist]
        if bad:
            raise ValueError(f"nprobe {bad[0]} is outside 1..nlist={nlist}")
    return 1, nlist, options.nprobe
