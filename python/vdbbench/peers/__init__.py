"""Peer indexes (faiss) run through the same benchmark runner as ours; see `faiss_peers`."""
