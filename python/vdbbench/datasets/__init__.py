"""Datasets: registry, readers and writers, verified downloads, generated sets, ground truth."""

from vdbbench.datasets.base import Dataset

__all__ = ["Dataset"]
