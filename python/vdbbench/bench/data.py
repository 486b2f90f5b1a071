"""Dataset resolution for the benchmark: the datasets area's loader, with CLI-friendly names."""

from __future__ import annotations

from vdbbench.datasets import Dataset, load_dataset

GENERATED_EXAMPLES = ("synth-sift-20k", "synth-sift-100k", "synth-sift-1m", "synth-float-100k")


def known_names() -> list[str]:
    """Names to suggest when a dataset is unknown: the registry, the built sets, then generated examples."""
    from vdbbench.datasets.built import BUILT
    from vdbbench.datasets.registry import registry

    names = list(registry()) + list(BUILT)
    return names + [g for g in GENERATED_EXAMPLES if g not in names]


def resolve(name: str) -> Dataset:
    """Load ``name`` (a registered or generated name, or a path) with exact ground truth.

    Raises vdbbench.datasets.UnknownDataset (a KeyError) for a name that is none of these,
    DownloadError (an OSError) when a registered set cannot be fetched and has no fallback.
    """
    return load_dataset(name)
