"""Adapters for our engine: `ivf` (the index under test) and `flat` (exact, the reference)."""

from __future__ import annotations

import time

from vdbbench.adapters.interface import (
    Adapter,
    BuildInfo,
    ParamSpace,
    default_probe_ratio_sweep,
    default_reorder_sweep,
    default_rerank_sweep,
    ivf_primary,
    train_sample,
)
from vdbbench.common import default_nlist, supports_reorder

STORAGES = ("u8+f16", "f16", "f32")


def _engine():
    import vdbbench

    return vdbbench


class _OurKernels:
    """The SIMD level of our engine, for both of its indexes."""

    def simd_level(self):
        return engine_simd_level()

    @classmethod
    def cap_simd(cls, level):
        return str(_engine().set_simd_level(level))


class IvfAdapter(_OurKernels, Adapter):
    """vdbbench.IvfIndex: nprobe swept adaptively, rerank (and for l2 the 4-bit prefilter's
    reorder) swept for u8+f16 storage, and for l2 and cosine the probe ratio."""

    name = "ivf"

    def __init__(self, dim, n, metric, options):
        super().__init__(dim, n, metric, options)
        if options.storage not in STORAGES:
            raise ValueError(f"unknown storage {options.storage!r}; expected one of {', '.join(STORAGES)}")
        self.nlist = options.nlist or default_nlist(n)
        self.index = None

    def build_params(self):
        return {"nlist": self.nlist, "storage": self.options.storage, "seed": self.options.seed}

    def build(self, base):
        vb = _engine()
        self.index = vb.IvfIndex(
            dim=self.dim, nlist=self.nlist, metric=self.metric,
            storage=self.options.storage, seed=self.options.seed,
        )
        sample = train_sample(base, self.nlist, self.options.seed)
        t0 = time.perf_counter()
        self.index.train(sample)
        t1 = time.perf_counter()
        self.index.add(base)
        t2 = time.perf_counter()
        return BuildInfo(train_s=t1 - t0, add_s=t2 - t1, bytes=int(self.index.bytes))

    def search(self, queries, k, params, threads):
        kwargs = {"k": k, "nprobe": int(params["nprobe"]), "threads": threads}
        if "rerank" in params:
            kwargs["rerank"] = int(params["rerank"])
        if int(params.get("reorder", 0)) > 0:
            kwargs["reorder"] = int(params["reorder"])
        if float(params.get("probe_ratio", 0)) > 0:
            kwargs["probe_ratio"] = float(params["probe_ratio"])
        _, ids = self.index.search(queries, **kwargs)
        return ids

    def param_space(self):
        start, stop, values = ivf_primary(self.options, self.nlist)
        secondary = {}
        if self.options.storage == "u8+f16":
            k = self.options.k
            secondary["rerank"] = self.options.rerank or default_rerank_sweep(k)
            if supports_reorder(self.dim, self.metric, self.options.storage):  # the 4-bit prefilter
                secondary["reorder"] = self.options.reorder or default_reorder_sweep(k)
        if self.metric in ("l2", "cosine"):  # a ratio of distances: "ip" has none
            secondary["probe_ratio"] = self.options.probe_ratio or default_probe_ratio_sweep()
        off = tuple(knob for knob in ("reorder", "probe_ratio") if knob in secondary)
        return ParamSpace("nprobe", start, stop, values, secondary, off_at_zero=off)

    def stage_stats(self):
        stats = self.index.last_search_stats()
        return dict(stats) if stats is not None else None


class FlatAdapter(_OurKernels, Adapter):
    """vdbbench.FlatIndex: exact search, one point per run (it has no knob)."""

    name = "flat"

    def __init__(self, dim, n, metric, options):
        super().__init__(dim, n, metric, options)
        self.index = None

    def build_params(self):
        return {}

    def build(self, base):
        vb = _engine()
        self.index = vb.FlatIndex(dim=self.dim, metric=self.metric)
        t0 = time.perf_counter()
        self.index.add(base)
        t1 = time.perf_counter()
        nbytes = getattr(self.index, "bytes", None)
        return BuildInfo(train_s=0.0, add_s=t1 - t0, bytes=int(nbytes if nbytes is not None else base.nbytes))

    def search(self, queries, k, params, threads):
        _, ids = self.index.search(queries, k=k, threads=threads)
        return ids

    def param_space(self):
        return ParamSpace("exact", 1, 1, (1,))


def engine_simd_level() -> str | None:
    """The SIMD level our engine runs at, or None when the engine cannot be imported."""
    try:
        return str(_engine().simd_level())
    except (ImportError, AttributeError):
        return None


def engine_max_threads() -> int:
    """The most threads a call of our engine accepts (the engine's own limit)."""
    from vdbbench import _rust_vdb

    return int(_rust_vdb.max_threads())


def check_engine() -> None:
    """Raise ImportError with the way out when the compiled engine is missing."""
    try:
        import vdbbench._rust_vdb  # noqa: F401
    except ImportError as exc:
        raise ImportError(
            "the vdbbench engine (vdbbench._rust_vdb) is not built; run "
            "`pip install -e . --no-build-isolation --no-deps` in the source tree"
        ) from exc


