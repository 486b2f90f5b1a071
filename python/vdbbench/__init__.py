"""vdbbench: a Rust IVF vector-search engine, a benchmark against its peers, and an agent loop.

The engine classes live in the compiled extension ``vdbbench._rust_vdb``; they are re-exported
here lazily so that ``import vdbbench.datasets`` (and the CLI's start-up) never pays for
loading it.
"""

from __future__ import annotations

from importlib import import_module
from importlib.metadata import PackageNotFoundError, version as _version

try:
    __version__ = _version("vdbbench")
except PackageNotFoundError:  # running from a source tree without an install
    __version__ = "0.0.0+unknown"

_ENGINE_NAMES = (
    "FlatIndex",
    "IvfIndex",
    "Server",
    "VdbError",
    "InvalidInput",
    "NotReady",
    "CorruptFile",
    "simd_level",
    "available_simd_levels",
    "set_simd_level",
    "single_query_sharing",
)

__all__ = list(_ENGINE_NAMES) + ["__version__"]


def __getattr__(name: str):
    if name in _ENGINE_NAMES:
        engine = import_module("vdbbench._rust_vdb")
        value = getattr(engine, name)
        globals()[name] = value
        return value
    raise AttributeError(f"module 'vdbbench' has no attribute {name!r}")


def __dir__():
    return sorted(set(globals()) | set(_ENGINE_NAMES))
