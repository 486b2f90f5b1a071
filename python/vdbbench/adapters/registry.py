"""The one registry of index names: the built-in adapters and those installed packages declare.

Built-in adapters are named here by "module:Class" text and imported only when asked for, so
neither the benchmark nor the peers import each other through this table. Installed packages
add theirs under the entry-point group ``vdbbench.adapters`` (entry-point name = index name,
value = an `Adapter` subclass). An adapter that cannot be loaded (its package or library is
missing, it raises on import, it is not an Adapter) raises `AdapterUnavailable` naming it, so
the caller can report it and carry on with the others.
"""

from __future__ import annotations

from dataclasses import dataclass
from importlib import import_module, metadata

from vdbbench.adapters.interface import Adapter

ENTRY_POINT_GROUP = "vdbbench.adapters"

OURS = ("ivf", "flat")
FAISS_PEERS = (
    "faiss-ivf-flat",
    "faiss-ivf-sq8",
    "faiss-ivf-sqfp16",
    "faiss-ivf-sq8-refine",
    "faiss-ivfpq-fs",
    "faiss-hnsw",
)
#: Peers from other libraries, installed with the optional extra `pip install 'vdbbench[peers]'`.
EXTRA_PEERS = ("hnswlib", "scann", "usearch")
PEERS = FAISS_PEERS + EXTRA_PEERS

_FAISS_CLASSES = {
    "faiss-ivf-flat": "FaissIvfFlat",
    "faiss-ivf-sq8": "FaissIvfSq8",
    "faiss-ivf-sqfp16": "FaissIvfSqfp16",
    "faiss-ivf-sq8-refine": "FaissIvfSq8Refine",
    "faiss-ivfpq-fs": "FaissIvfPqFastScan",
    "faiss-hnsw": "FaissHnsw",
}
BUILTIN: dict[str, str] = {
    "ivf": "vdbbench.bench.ours:IvfAdapter",
    "flat": "vdbbench.bench.ours:FlatAdapter",
    **{name: f"vdbbench.peers.faiss_peers:{cls}" for name, cls in _FAISS_CLASSES.items()},
    "hnswlib": "vdbbench.peers.hnswlib_peer:HnswlibAdapter",
    "scann": "vdbbench.peers.scann_peer:ScannAdapter",
    "usearch": "vdbbench.peers.usearch_peer:UsearchAdapter",
}
# What to install when a built-in peer's library is missing.
_INSTALL_HINT = {name: "pip install 'vdbbench[peers]'" for name in EXTRA_PEERS}


class AdapterUnavailable(Exception):
    """An index name is known but its adapter cannot be loaded; the message says why."""

    def __init__(self, name: str, reason: str):
        super().__init__(f"{name}: {reason}")
        self.name = name
        self.reason = reason


@dataclass(frozen=True)
class AdapterEntry:
    """Where an index name comes from: ``target`` is "module:Class", ``source`` built-in or a package."""

    name: str
    target: str
    source: str


def plugin_entries() -> dict[str, AdapterEntry]:
    """Adapters that installed packages declare under the ``vdbbench.adapters`` entry points."""
    out: dict[str, AdapterEntry] = {}
    for ep in metadata.entry_points(group=ENTRY_POINT_GROUP):
        dist = getattr(ep, "dist", None)
        source = f"plugin {dist.name} {dist.version}" if dist is not None else "plugin"
        if ep.name in BUILTIN or ep.name in out:
            continue  # a built-in name (or a repeat) cannot be taken over by a plugin
        out[ep.name] = AdapterEntry(ep.name, ep.value, source)
    return out


def entries() -> dict[str, AdapterEntry]:
    """Every index name: built-ins first, then plugins in the order installed packages list them."""
    out = {name: AdapterEntry(name, target, "built-in") for name, target in BUILTIN.items()}
    out.update(plugin_entries())
    return out


def index_names() -> list[str]:
    return list(entries())


def adapter_class(name: str) -> type[Adapter]:
    """The adapter class registered as ``name``.

    KeyError for a name nobody registered; AdapterUnavailable when it cannot be loaded.
    """
    known = entries()
    if name not in known:
        raise KeyError(f"unknown index {name!r}; valid: {', '.join(known)}")
    entry = known[name]
    module_name, _, attr = entry.target.partition(":")
    try:
        obj = import_module(module_name)
        for part in attr.split(".") if attr else ():
            obj = getattr(obj, part)
    except ImportError as exc:
        hint = _INSTALL_HINT.get(name)
        why = f"cannot import {entry.target} ({entry.source}): {exc}"
        raise AdapterUnavailable(name, f"{why}; install it with `{hint}`" if hint else why) from exc
    except Exception as exc:  # a plugin's module may raise anything while it loads
        raise AdapterUnavailable(
            name, f"loading {entry.target} ({entry.source}) failed: {type(exc).__name__}: {exc}"
        ) from exc
    if not (isinstance(obj, type) and issubclass(obj, Adapter)):
        raise AdapterUnavailable(name, f"{entry.target} ({entry.source}) is not a vdbbench.adapters.Adapter subclass")
    if obj.name != name:
        raise AdapterUnavailable(name, f"{entry.target} ({entry.source}) names itself {obj.name!r}, not {name!r}")
    return obj
