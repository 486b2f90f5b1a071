"""The from-scratch skeleton (agent/skeleton) and its task card: it starts, builds, loads from a
path and returns exact neighbours through the real harness."""

from __future__ import annotations

import dataclasses
import importlib.machinery
import importlib.util
import os
import shutil
from pathlib import Path

import numpy as np
import pytest

from vdbbench.agent.core import workspace as wsp
from vdbbench.agent.core.task import load_task
from vdbbench.agent.evaluation.eval_data import make_eval_data
from vdbbench.agent.evaluation.evaluator import Evaluator
from vdbbench.datasets.synth import synth_sift

REPO = Path(__file__).resolve().parents[1]
CARD = REPO / "agent" / "tasks" / "from-scratch.toml"


def load_extension(path: Path, name: str = "naive_vdb"):
    loader = importlib.machinery.ExtensionFileLoader(name, str(path))
    spec = importlib.util.spec_from_file_location(name, str(path), loader=loader)
    module = importlib.util.module_from_spec(spec)
    loader.exec_module(module)
    return module


def test_card_starts_from_the_skeleton_with_only_its_sources_editable():
    card = load_task(CARD)
    assert card.start.subdir == "agent/skeleton" and card.entry.module == "naive_vdb"
    assert card.entry.cls == "IvfIndex" and card.entry.search_args == {"k": 10}
    assert card.is_editable("src/lib.rs") and not card.is_editable("Cargo.toml")
    assert card.dataset.generator == "synth_sift" and card.dataset.n == 100_000
    assert card.budgets["iterations"] > 0


@pytest.fixture(scope="module")
def skeleton_build(tmp_path_factory):
    """The skeleton taken from the repository as a session would (git archive of the card's
    start), built by the harness's own build step."""
    if shutil.which("cargo") is None:
        pytest.skip("needs a Rust toolchain (cargo)")
    card = load_task(CARD)
    root = tmp_path_factory.mktemp("skeleton")
    wsp.create_workspace(card, root / "ws")
    # Share compiled dependencies with the other agent tests: the same pyo3/numpy built with the
    # fixture engine's profile (a cargo config beside the workspace overrides the skeleton's own
    # release profile for this test build only; the skeleton's code is what is under test).
    fixture_profile = (REPO / "tests" / "fixtures" / "agent_task" / "Cargo.toml").read_text()
    profile = fixture_profile[fixture_profile.index("[profile.release]"):]
    (root / "ws" / ".cargo").mkdir()
    (root / "ws" / ".cargo" / "config.toml").write_text(profile)
    target = Path(os.environ.get("VDBBENCH_AGENT_TARGET_DIR") or REPO / "target" / "agent-fixture")
    res = wsp.build(root / "ws", card, target, root / "build")
    assert res.ok, res.errors
    return card, res.library, root


def test_skeleton_is_exact_brute_force(skeleton_build):
    _, lib, _ = skeleton_build
    naive = load_extension(lib)
    base, queries = synth_sift(3000, 40, seed=3)
    base = np.ascontiguousarray(base, dtype=np.float32)
    queries = np.ascontiguousarray(queries, dtype=np.float32)
    idx = naive.IvfIndex(dim=base.shape[1], nlist=64)  # build args it does not use are accepted
    idx.train(base)
    idx.add(base)
    D, I = idx.search(queries, k=10, nprobe=8)
    assert D.dtype == np.float32 and I.dtype == np.int64 and I.shape == (40, 10)
    exact = ((queries[:, None, :].astype(np.float64) - base[None, :, :]) ** 2).sum(-1)
    ids = np.broadcast_to(np.arange(base.shape[0]), exact.shape)
    ref = np.lexsort((ids, exact), axis=1)[:, :10]  # by distance, ties to the smaller id
    np.testing.assert_array_equal(I, ref)
    np.testing.assert_allclose(D, np.take_along_axis(exact, ref, 1), rtol=1e-6)
    assert idx.ntotal == 3000


def test_skeleton_refuses_bad_input_with_what_was_expected(skeleton_build):
    _, lib, _ = skeleton_build
    naive = load_extension(lib)
    idx = naive.IvfIndex(dim=8)
    with pytest.raises(RuntimeError, match="before train"):
        idx.add(np.zeros((2, 8), dtype=np.float32))
    idx.train(np.zeros((2, 8), dtype=np.float32))
    with pytest.raises(RuntimeError, match="empty index"):
        idx.search(np.zeros((1, 8), dtype=np.float32))
    with pytest.raises(ValueError, match="dimension 4, expected 8"):
        idx.add(np.zeros((2, 4), dtype=np.float32))
    idx.add(np.ones((3, 8), dtype=np.float32))
    with pytest.raises(ValueError, match=r"k must be in 1..=3"):
        idx.search(np.zeros((1, 8), dtype=np.float32), k=4)
    with pytest.raises(ValueError, match="NaN or inf"):
        idx.search(np.full((1, 8), np.nan, dtype=np.float32), k=2)


def test_harness_measures_the_skeleton_at_full_recall(skeleton_build):
    card, lib, root = skeleton_build
    card.dataset = dataclasses.replace(card.dataset, n=2000, dev_queries=30, heldout_queries=100, fresh_queries=20)
    evaluator = Evaluator(card, make_eval_data(card), root / "run")
    report = evaluator.run("heldout", lib, None)
    assert report.failure is None
    assert report.candidate.recall10 == 1.0 and report.candidate.qps > 0
    assert report.candidate.repeats == card.objective.repeats
