"""The floor: definitions several areas share (datasets, bench, peers, agent).

Nothing here imports from the rest of vdbbench but the compiled engine (`vdbbench._rust_vdb`,
which imports no Python of ours), so any area may import it without a cycle:

- `recall`: recall@k as ann-benchmarks defines it, and the target every area defaults to;
- `ivf`: the IVF defaults ours and the faiss peers share (nlist and the rerank rule, asked of the
  engine that owns them; the k-means sample);
- `vectors`: row normalisation (cosine search as inner product);
- `errors`: the usage error every CLI area raises for exit code 2;
- `console`: the warning line every area says on stderr (never a Python warning).
"""

from vdbbench.common.console import say_warning
from vdbbench.common.errors import UsageError
from vdbbench.common.ivf import check_rerank, default_nlist, supports_reorder, train_sample, train_sample_size
from vdbbench.common.recall import RECALL_K, RECALL_TARGET, id_recall, knn_recall, metric_distances
from vdbbench.common.vectors import normalize_rows

__all__ = [
    "RECALL_K",
    "RECALL_TARGET",
    "UsageError",
    "check_rerank",
    "supports_reorder",
    "default_nlist",
    "id_recall",
    "knn_recall",
    "metric_distances",
    "normalize_rows",
    "say_warning",
    "train_sample",
    "train_sample_size",
]
