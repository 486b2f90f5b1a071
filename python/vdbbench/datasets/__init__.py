"""Datasets: registry, readers and writers, verified downloads, generated sets, ground truth."""

from vdbbench.datasets.base import Dataset, DatasetError, content_hash
from vdbbench.datasets.download import DownloadError
from vdbbench.datasets.groundtruth import compute_groundtruth, ensure_groundtruth
from vdbbench.datasets.loader import default_nq, load_dataset, register_arrays
from vdbbench.datasets.registry import UnknownDataset, data_dir
from vdbbench.datasets.synth import synth_float, synth_sift

__all__ = [
    "Dataset",
    "DatasetError",
    "DownloadError",
    "UnknownDataset",
    "compute_groundtruth",
    "content_hash",
    "ensure_groundtruth",
    "data_dir",
    "default_nq",
    "load_dataset",
    "register_arrays",
    "synth_float",
    "synth_sift",
]
