"""faiss peers behind the benchmark's adapter interface: each is a factory string and its knobs."""

from __future__ import annotations

import os
import time

# faiss' OpenMP threads spin after each call by default and steal a core from rayon when both
# share the process; passive waiting must be chosen before the OpenMP runtime is loaded.
os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")

import faiss  # noqa: E402
import numpy as np  # noqa: E402

from vdbbench.adapters.interface import (  # noqa: E402
    Adapter,
    BuildInfo,
    ParamSpace,
    ivf_primary,
    train_sample,
)
from vdbbench.common import default_nlist, normalize_rows  # noqa: E402

_FAISS_METRIC = {"l2": faiss.METRIC_L2, "ip": faiss.METRIC_INNER_PRODUCT, "cosine": faiss.METRIC_INNER_PRODUCT}


# Our SIMD levels as faiss's dispatch levels, best first (faiss has no VNNI-only level: its
# AVX512 kernels serve every AVX-512 machine, AVX512_SPR the Sapphire Rapids ones).
_FAISS_SIMD = {
    "scalar": ("NONE",),
    "avx2": ("AVX2", "NONE"),
    "avx512bw": ("AVX512", "AVX2", "NONE"),
    "avx512vnni": ("AVX512", "AVX2", "NONE"),
    "avx512amx": ("AVX512_SPR", "AVX512", "AVX2", "NONE"),
    "avx512": ("AVX512_SPR", "AVX512", "AVX2", "NONE"),
}


class FaissAdapter(Adapter):
    """A faiss index built from an index_factory string; cosine = normalised vectors + IP."""

    cacheable = True
    needs_training = True

    def __init__(self, dim, n, metric, options):
        super().__init__(dim, n, metric, options)
        self.index = None

    def factory(self) -> str:
        raise NotImplementedError

    def build_params(self):
        return {"factory": self.factory()}

    def _prep(self, x: np.ndarray) -> np.ndarray:
        x = np.ascontiguousarray(x, dtype=np.float32)
        return normalize_rows(x) if self.metric == "cosine" else x

    def build(self, base):
        base = self._prep(base)
        self.index = faiss.index_factory(self.dim, self.factory(), _FAISS_METRIC[self.metric])
        t0 = time.perf_counter()
        if self.needs_training:
            self.index.train(train_sample(base, getattr(self, "nlist", 1), self.options.seed))
        t1 = time.perf_counter()
        self.index.add(base)
        t2 = time.perf_counter()
        return BuildInfo(train_s=t1 - t0, add_s=t2 - t1, bytes=None)

    def set_params(self, params: dict) -> None:
        raise NotImplementedError

    def search(self, queries, k, params, threads):
        faiss.omp_set_num_threads(int(threads))
        self.set_params(params)
        _, ids = self.index.search(self._prep(queries), k)
        return ids

    def versions(self):
        return {"faiss": faiss.__version__, "faiss_compile": faiss.get_compile_options().strip()}

    def simd_level(self):
        config = getattr(faiss, "SIMDConfig", None)  # faiss >= 1.12: run-time dispatch
        return str(config.get_level_name()) if config is not None else None

    @classmethod
    def cap_simd(cls, level):
        config = getattr(faiss, "SIMDConfig", None)
        if config is None:
            return None
        want = _FAISS_SIMD.get(level.strip().lower())
        if want is None:
            raise ValueError(f"unknown SIMD level {level!r}; expected one of {', '.join(_FAISS_SIMD)}")
        # the best of faiss's levels at or under the cap that this CPU and this build can run
        for name in want:
            lvl = faiss.to_simd_level(name)
            if config.is_simd_level_available(lvl):
                config.set_level(lvl)
                return str(config.get_level_name())
        raise ValueError(f"faiss cannot run at {level} on this CPU")

    def save(self, path):
        faiss.write_index(self.index, path)

    def load(self, path):
        self.index = faiss.read_index(path)


class FaissIvf(FaissAdapter):
    """IVF with the same nlist as ours (4*sqrt(n) unless --nlist); nprobe swept."""

    codec = "Flat"

    def __init__(self, dim, n, metric, options):
        super().__init__(dim, n, metric, options)
        self.nlist = options.nlist or default_nlist(n)

    def factory(self):
        return f"IVF{self.nlist},{self.codec}"

    def build_params(self):
        return {"factory": self.factory(), "nlist": self.nlist}

    def set_params(self, params):
        faiss.extract_index_ivf(self.index).nprobe = int(params["nprobe"])

    def param_space(self):
        start, stop, values = ivf_primary(self.options, self.nlist)
        return ParamSpace("nprobe", start, stop, values)


class FaissIvfFlat(FaissIvf):
    name = "faiss-ivf-flat"


class FaissIvfSq8(FaissIvf):
    name = "faiss-ivf-sq8"
    codec = "SQ8"


class FaissIvfSqfp16(FaissIvf):
    name = "faiss-ivf-sqfp16"
    codec = "SQfp16"


#: The refine depths faiss's refine indexes sweep (k_factor * k candidates rescored): from none
#: beyond k to 16x, the range in which 4-bit PQ and SQ8 codes reach recall 0.95-0.99 at the
#: fewest probes; their own range, whatever depths our index sweeps.
K_FACTORS = (1, 2, 4, 8, 16)


class FaissIvfRefine(FaissIvf):
    """IVF with a refine stage: k_factor*k candidates rescored, k_factor swept over `K_FACTORS`."""

    def set_params(self, params):
        super().set_params(params)
        self.index.k_factor = float(params["k_factor"])

    def param_space(self):
        space = super().param_space()
        return ParamSpace(space.primary, space.start, space.stop, space.primary_values, {"k_factor": K_FACTORS})


class FaissIvfSq8Refine(FaissIvfRefine):
    """SQ8 codes scanned, the best k_factor*k rescored from SQfp16: the twin of our u8+f16."""

    name = "faiss-ivf-sq8-refine"
    codec = "SQ8,Refine(SQfp16)"


class FaissIvfPqFastScan(FaissIvfRefine):
    """IVF + PQ(dim/2)x4 fast-scan codes, refined with the exact vectors."""

    name = "faiss-ivfpq-fs"

    @property
    def codec(self):
        # dim/2 sub-quantizers of 4 bits (2 dimensions each); for odd dim the largest divisor below
        m = next(m for m in range(max(1, self.dim // 2), 0, -1) if self.dim % m == 0)
        return f"PQ{m}x4fs,RFlat"


class FaissHnsw(FaissAdapter):
    """HNSW32 over the full vectors; efSearch swept from k upwards."""

    name = "faiss-hnsw"
    needs_training = False
    M = 32

    def factory(self):
        return f"HNSW{self.M}"

    def build_params(self):
        return {"factory": self.factory(), "M": self.M, "efConstruction": 40}

    def set_params(self, params):
        faiss.downcast_index(self.index).hnsw.efSearch = int(params["efSearch"])

    def param_space(self):
        k = self.options.k
        values = self.options.ef_search
        if values is not None:
            bad = [e for e in values if e < 1]
            if bad:
                raise ValueError(f"efSearch {bad[0]} must be >= 1")
        return ParamSpace("efSearch", max(16, k), 4096, values)


PEERS = {
    cls.name: cls
    for cls in (FaissIvfFlat, FaissIvfSq8, FaissIvfSqfp16, FaissIvfSq8Refine, FaissIvfPqFastScan, FaissHnsw)
}
