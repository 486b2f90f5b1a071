"""Names of every index the benchmark can run, and the adapter class behind each."""

from __future__ import annotations

OURS = ("ivf", "flat")
PEERS = (
    "faiss-ivf-flat",
    "faiss-ivf-sq8",
    "faiss-ivf-sqfp16",
    "faiss-ivf-sq8-refine",
    "faiss-ivfpq-fs",
    "faiss-hnsw",
)
INDEX_NAMES = OURS + PEERS


def adapter_class(name: str):
    """The adapter class for ``name``; faiss is imported only when a peer is asked for."""
    if name == "ivf":
        from vdbbench.bench.ours import IvfAdapter

        return IvfAdapter
    if name == "flat":
        from vdbbench.bench.ours import FlatAdapter

        return FlatAdapter
    if name in PEERS:
        from vdbbench.peers.faiss_peers import PEERS as classes

        return classes[name]
    raise KeyError(f"unknown index {name!r}; valid: {', '.join(INDEX_NAMES)}")
