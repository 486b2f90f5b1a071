"""What a model steers a session by (issue 42, items 4-6): transfer targets every card has and the
task text names, pass/fail per target; the trained index reused while no file that shapes it
changed; `check`; failing tests that do not spend an iteration; the machine's load and the
measured noise in every timing; verdict labels that say "under the margin"; and a judge that
waits for more pairs before accepting on a loaded machine."""

from __future__ import annotations

import math
import re
import shutil
import subprocess
from pathlib import Path

import numpy as np
import pytest

from test_agent_loop import BREAK_TESTS, IMPROVE, LIB, cargo_target, edit, user_repo  # noqa: F401
from vdbbench.agent.core.journal import read_events
from vdbbench.agent.core.task import load_task
from vdbbench.agent.evaluation import harness_worker, index_cache, transfer
from vdbbench.agent.evaluation.judge import SequentialTest, robust_spread, short_of_margin
from vdbbench.agent.evaluation.machine_load import LoadMonitor, load_text

REPO = Path(__file__).resolve().parents[1]
CARDS = sorted((REPO / "agent" / "tasks").glob("*.toml"))
ENGINE = REPO / "python" / "vdbbench" / "_rust_vdb.abi3.so"
FIXTURE_CARD = REPO / "tests" / "fixtures" / "agent_task" / "task.toml"


# -- the judge under load ------------------------------------------------------------------------

def test_an_accept_on_a_loaded_machine_waits_for_ten_pairs():
    test = SequentialTest()
    d = [math.log(1.08)] * 4 + [math.log(1.07), math.log(1.09)]  # six clear pairs of +8%
    assert test.decide(d) == "accept"
    assert test.decide(d, loaded=True) is None  # time more pairs instead of deciding
    assert test.decide(d + [math.log(1.08)] * 4, loaded=True) == "accept"
    assert test.decide([math.log(0.98)] * 6, loaded=True) == "reject"  # rejections do not wait


def test_noisy_pairs_count_as_load_and_one_outlying_pair_does_not():
    test = SequentialTest()
    calm = [0.08, 0.075, 0.085, 0.08, 0.078, 0.082]
    assert robust_spread(calm + [0.6]) < 0.05  # a single burst does not make the pairs noisy
    noisy = [0.0, 0.16, 0.02, 0.15, 0.08, 0.14, 0.01]
    assert robust_spread(noisy) >= test.noisy_spread
    assert test.accept_pairs(noisy) == 10 and test.accept_pairs(calm) == 5


def test_the_median_pair_must_clear_the_margin_too():
    # A mean of +4.6% carried by two big pairs while most pairs show +1%: not accepted.
    d = [0.01] * 6 + [0.12, 0.13]
    m = float(np.mean(d))
    assert m >= math.log(1.03) and float(np.median(d)) < math.log(1.03)
    assert SequentialTest().decide(d) != "accept"


def test_simulated_false_accepts_under_load_stay_under_one_in_forty_and_real_gains_pass():
    test = SequentialTest(max_pairs=16)  # the soak's cap
    for sigma, tails in ((0.05, None), (0.10, None), (0.10, 3.0), (0.20, 3.0)):
        rate, _ = test.operating_point(0.0, sigma, trials=3000, loaded=True, tails=tails)
        assert rate <= 1 / 40, (sigma, tails, rate)
    power, _ = SequentialTest().operating_point(math.log(1.07), 0.04, trials=1000, loaded=True)
    assert power >= 0.95


def test_verdict_labels_say_under_the_margin_not_slower():
    test = SequentialTest()
    assert short_of_margin(test, [math.log(1.003)] * 8) == "under the margin (+0.3% < 3%)"
    assert short_of_margin(test, [math.log(0.979)] * 8) == "slower (-2.1%)"
    assert short_of_margin(test, [0.2, -0.12, 0.25, -0.1, 0.2]).startswith("not distinguishable from noise (+")
    assert "loaded machine" in short_of_margin(test, [math.log(1.08)] * 6, loaded=True)


def test_the_load_monitor_reads_load_and_stolen_time(tmp_path):
    stat = tmp_path / "stat"
    stat.write_text("cpu  100 0 100 700 0 0 0 100 0 0\ncpu0 1 2 3\n")
    mon = LoadMonitor(stat=stat, n_cores=2)
    stat.write_text("cpu  200 0 200 1300 0 0 0 300 0 0\n")  # 200 of the 1,000 jiffies since: stolen
    mon.sample()
    assert mon.steal == pytest.approx(0.2)
    assert mon.loaded  # 20% stolen is a busy machine whatever the load average says
    summary = mon.summary()
    assert summary["cores"] == 2 and summary["loaded"] and summary["steal"] == pytest.approx(0.2)
    text = load_text(summary)
    assert text.startswith("machine load ") and "on 2 cores" in text and "20.0% of CPU time stolen" in text
    assert load_text(None) == "machine load not available"


# -- transfer targets ------------------------------------------------------------------------------

@pytest.mark.parametrize("card_path", CARDS, ids=[c.stem for c in CARDS])
def test_every_card_has_transfer_targets_a_fresh_machine_can_produce(card_path):
    card = load_task(card_path)
    replicas = [d for d in card.transfer.datasets if transfer.parse_dataset(d.name) and d.seed != card.dataset.seed]
    assert replicas, f"{card.name}: no generated replica of another seed"
    available = transfer.availability(card)
    assert all(available[f"data:{d.title}"] is None for d in replicas)
    if card.evaluation.served:
        # A served engine's SIMD is its own affair (VDBBENCH_SIMD is no part of the HTTP API): the
        # card refuses a SIMD target, so its transfer is other data.
        assert not card.transfer.simd
        return
    assert "avx2" in card.transfer.simd and not card.transfer.advisory
    assert available["simd:avx2"] is None
    assert any("photo-sift-a" in d.name for d in card.transfer.datasets)  # real SIFT where the cache holds it
    text = transfer.describe(card, available)
    for t in transfer.targets(card, include_here=False):
        assert f"`{t.label}`" in text
    assert f"recall@10 >= {card.objective.recall_floor} at the engine's defaults" in text


def test_the_task_text_names_each_target_and_says_which_are_skipped(tmp_path, monkeypatch):
    monkeypatch.setenv("VDBBENCH_DATA", str(tmp_path))  # an empty cache: no real SIFT here
    card = load_task(REPO / "agent" / "tasks" / "optimize-ivf.toml")
    text = transfer.describe(card)
    assert "`synth-sift-50k (seed 1)`: a generated data set of the same family drawn with another seed" in text
    assert re.search(r"`real SIFT \(photo-sift-a\)`: real SIFT descriptors \(1,000 queries\): SKIPPED here \(.*(does not exist|is not built)", text)
    assert "`synth-sift-50k at avx2`: the card's data with VDBBENCH_SIMD=avx2 set" in text
    assert "flagged and not kept" in text


def test_a_transfer_verdict_says_pass_or_fail_per_target_without_figures():
    rows = [{"label": "other draw", "recall10": 0.7312, "holds": False, "threshold": 0.95},
            {"label": "data at avx2", "recall10": 0.9991, "holds": True},
            {"label": "photo-sift-a", "skipped": "not here"},
            {"label": "broken", "failure": "crashed", "holds": False}]
    text = transfer.verdict_text(rows)
    assert text.startswith("other draw: FAIL (recall@10 under the floor at the engine defaults); data at avx2: pass; "
                           "photo-sift-a: skipped (not on this machine); broken: FAIL (the engine failed there: crashed)")
    assert "0.73" not in text and "0.99" not in text


# -- the index reused between benchmarks ------------------------------------------------------------

def _git(repo, *args):
    subprocess.run(["git", "-c", "user.name=t", "-c", "user.email=t@t", *args], cwd=repo, check=True, capture_output=True)


def test_the_index_key_follows_the_files_that_shape_it_and_nothing_else(tmp_path):
    text = FIXTURE_CARD.read_text() + '\n[index_cache]\npaths = ["core/src/shape/**"]\n'
    (tmp_path / "task.toml").write_text(text)
    card = load_task(tmp_path / "task.toml")
    ws = tmp_path / "ws"
    (ws / "core" / "src" / "shape").mkdir(parents=True)
    (ws / "core" / "src" / "lib.rs").write_text("fn search() {}\n")
    (ws / "core" / "src" / "shape" / "kmeans.rs").write_text("const ITERS: usize = 10;\n")
    _git(ws, "init", "-q")
    _git(ws, "add", "-A")
    _git(ws, "commit", "-q", "-m", "start")
    head = subprocess.run(["git", "rev-parse", "HEAD"], cwd=ws, capture_output=True, text=True).stdout.strip()
    ds = {"name": "synth-float-3000", "n": 3000}
    first = index_cache.working_key(ws, card, ds)
    assert first.files == ("core/src/shape/kmeans.rs",)
    assert index_cache.commit_key(ws, card, ds, head) == first
    (ws / "core" / "src" / "lib.rs").write_text("fn search() { /* a faster kernel */ }\n")
    assert index_cache.working_key(ws, card, ds) == first  # a search edit keeps the index
    assert index_cache.working_key(ws, card, {**ds, "seed": 3}) != first  # other data, other index
    (ws / "core" / "src" / "shape" / "kmeans.rs").write_text("const ITERS: usize = 20;\n")
    changed = index_cache.working_key(ws, card, ds)
    assert changed.key != first.key
    said = index_cache.cache_text(changed, "hit", card, {"load_s": 0.5})
    assert said.startswith("index: REUSED the trained index") and "core/src/shape/kmeans.rs" in said and "rebuild=true" in said
    assert index_cache.working_key(ws, load_task(FIXTURE_CARD), ds) is None  # no [index_cache]: no key


class _NoSave:
    def __init__(self, dim):
        self.dim = dim

    def train(self, x):
        pass

    def add(self, x):
        self.n = len(x)


def test_an_engine_without_save_builds_every_time_and_says_so(tmp_path):
    index, reply = harness_worker.build_index(_NoSave, {"dim": 4, "cache": str(tmp_path / "i.idx")},
                                              {"base": np.zeros((3, 4), np.float32)})
    assert index.n == 3 and reply["cache"] == "unsupported" and not (tmp_path / "i.idx").exists()


@pytest.mark.skipif(not ENGINE.exists(), reason="needs the project's engine built into python/vdbbench")
def test_a_saved_index_is_read_back_instead_of_trained(tmp_path):
    from vdbbench.agent.evaluation.candidate import CandidateProcess
    from vdbbench.datasets import synth

    text = FIXTURE_CARD.read_text().replace('module = "fixture_vdb"', 'module = "vdbbench._rust_vdb"')
    (tmp_path / "task.toml").write_text(text)
    card = load_task(tmp_path / "task.toml")
    base, queries = synth.synth_float(3000, 50, dim=32, seed=7)
    cache = tmp_path / "index.idx"
    got = []
    for n in range(2):
        proc = CandidateProcess(ENGINE, card, tmp_path / f"w{n}.log", deadline=1e18)
        try:
            loaded = proc.load(base, cache=cache)
            ids, _, _ = proc.search(np.ascontiguousarray(queries))
        finally:
            proc.close()
        got.append((loaded, ids))
    (first, ids0), (second, ids1) = got
    assert first["cache"] == "stored" and first["train_s"] > 0 and cache.exists()
    assert second["cache"] == "hit" and second["train_s"] == 0.0 and second["add_s"] == 0.0
    np.testing.assert_array_equal(ids0, ids1)  # the same index answers the same


# -- a session steered by these ---------------------------------------------------------------------

NO_EFFECT = ("fn l2(a: &[f32], b: &[f32]) -> f32 {", "fn l2(a: &[f32], b: &[f32]) -> f32 {\n    // no effect")


@pytest.mark.skipif(shutil.which("cargo") is None, reason="needs a Rust toolchain (cargo)")
def test_check_free_failing_tests_load_and_labels_in_a_session(cargo_target, user_repo, tmp_path):
    from vdbbench.agent.session.loop import Session
    from vdbbench.agent.session.model import ScriptedModel

    card_text = (user_repo / "task.toml").read_text()
    old = "[budgets]\niterations = 20\n"
    assert card_text.count(old) == 1
    # 1 s repeats: the no-effect verdict below rests on a few percent.
    card_text = card_text.replace(old, "[budgets]\niterations = 2\n").replace("repeat_seconds = 0.3\n", "repeat_seconds = 1.0\n")
    card_text += '\n[index_cache]\npaths = ["core/src/lib.rs"]\n'
    (user_repo / "task.toml").write_text(card_text)
    steps = [
        {"tool_calls": [edit(BREAK_TESTS), ("check", {})]},
        {"tool_calls": [("submit", {"message": "pad with id 0"})]},
        {"tool_calls": [("revert_to_best", {}), edit(IMPROVE), ("check", {}), ("submit", {"message": "one pass"})]},
        {"tool_calls": [edit(NO_EFFECT), ("benchmark", {"max_seconds": 3}), ("submit", {"message": "a comment"})]},
        {"tool_calls": [("submit", {"message": "once more"})]},
    ]
    model = ScriptedModel(steps)
    session = Session.create(load_task(user_repo / "task.toml"), model, tmp_path / "runs", "steer")
    end = session.run()
    events = read_events(tmp_path / "runs" / "steer" / "journal.jsonl")
    results = [(e["name"], e["text"]) for e in events if e["type"] == "tool_result"]
    by: dict = {}
    for name, text in results:
        by.setdefault(name, []).append(text)

    # check: failing tests are found before a submission, and said not to cost one.
    assert "tests FAIL" in by["check"][0] and "does not spend an iteration" in by["check"][0], by["check"][0]
    # The submission with failing tests is refused without spending an iteration of the 2.
    assert "did not spend an iteration of the budget (2 left)" in by["submit"][0], by["submit"][0]
    # check on the real gain: build, tests, and a short paired benchmark with load and noise.
    good = by["check"][1]
    assert "tests passed" in good and "short benchmark" in good and "timing conditions: machine load" in good, good
    assert "measured noise: per-pair spread" in good
    assert "cannot be kept between benchmarks" in good  # the fixture engine has no save/load
    assert by["submit"][1].startswith("ACCEPTED (iteration 2)") and "machine load" in by["submit"][1]
    decisions = [e for e in events if e["type"] == "decision"]
    assert [d["outcome"] for d in decisions] == ["tests_failed", "accepted", "slower"]
    # The no-effect change: its verdict says how far under the margin it came, never just "slower".
    no_effect = decisions[-1]
    assert re.match(r"(under the margin \([+-]\d+\.\d% < 3%\)|slower \(-\d+\.\d%\)|not distinguishable from noise)",
                    no_effect["verdict"]), no_effect["verdict"]
    assert by["submit"][2].startswith(f"REJECTED (iteration 3, {no_effect['verdict']}): "), by["submit"][2]
    assert no_effect["load"]["cores"] >= 1 and "loaded" in no_effect["load"]
    # Two iterations spent (the tests_failed one was free): the budget stopped the session there.
    assert end["reason"] == "budget: iterations"
    stop = next(e for e in events if e["type"] == "budget_stop")
    assert stop["which"] == "iterations" and stop["used"] == 2
    assert len(by["submit"]) == 3  # the fifth step never ran
    starts = [e for e in events if e["type"] == "transfer_targets"]
    assert starts == []  # the fixture card has no [transfer]: nothing to announce


# The fixture's binding with save(path) and load(path): the dimension, then the added vectors.
SAVE_LOAD = '''
    fn save(&self, path: std::path::PathBuf) -> PyResult<()> {
        let mut bytes = (self.inner.dim() as u64).to_le_bytes().to_vec();
        bytes.extend(self.added.iter().flat_map(|x| x.to_le_bytes()));
        std::fs::write(&path, bytes).map_err(|e| PyValueError::new_err(e.to_string()))
    }

    #[classmethod]
    fn load(_cls: &Bound<'_, pyo3::types::PyType>, path: std::path::PathBuf) -> PyResult<Self> {
        let bytes = std::fs::read(&path).map_err(|e| PyValueError::new_err(e.to_string()))?;
        let dim = u64::from_le_bytes(bytes[..8].try_into().expect("8 bytes")) as usize;
        let added: Vec<f32> = bytes[8..].chunks_exact(4).map(|c| f32::from_le_bytes(c.try_into().expect("4 bytes"))).collect();
        let mut inner = fixture_core::IvfIndex::new(dim);
        inner.add(&added);
        Ok(PyIvfIndex { inner, added })
    }
}

#[pymodule]'''


def _binding_with_save_load(repo):
    py = repo / "py" / "src" / "lib.rs"
    text = py.read_text()
    for old, new in (("    inner: fixture_core::IvfIndex,\n}", "    inner: fixture_core::IvfIndex,\n    added: Vec<f32>,\n}"),
                     ("PyIvfIndex { inner: fixture_core::IvfIndex::new(dim) }",
                      "PyIvfIndex { inner: fixture_core::IvfIndex::new(dim), added: Vec::new() }"),
                     ("        self.inner.add(vectors.as_slice()?);\n",
                      "        self.inner.add(vectors.as_slice()?);\n        self.added.extend_from_slice(vectors.as_slice()?);\n"),
                     ("}\n\n#[pymodule]", SAVE_LOAD)):
        assert text.count(old) == 1, old
        text = text.replace(old, new)
    py.write_text(text)
    (repo / "core" / "src" / "shape.rs").write_text("// what the index is built from\n")
    card = (repo / "task.toml").read_text() + '\n[index_cache]\npaths = ["core/src/shape.rs"]\n'
    (repo / "task.toml").write_text(card)
    for cmd in (["add", "-A"], ["commit", "-q", "-m", "save and load"]):
        _git(repo, *cmd)


@pytest.mark.skipif(shutil.which("cargo") is None, reason="needs a Rust toolchain (cargo)")
def test_benchmark_reuses_the_trained_index_until_a_file_that_shapes_it_changes(cargo_target, user_repo, tmp_path):
    from vdbbench.agent.session.loop import Session
    from vdbbench.agent.session.model import ScriptedModel

    _binding_with_save_load(user_repo)
    bench = ("benchmark", {"max_seconds": 2})
    steps = [
        {"tool_calls": [edit(IMPROVE), bench]},
        {"tool_calls": [edit(NO_EFFECT), bench]},  # a search-side edit: the same index
        {"tool_calls": [("write_file", {"path": "core/src/shape.rs", "content": "// built otherwise\n"}), bench]},
        {"tool_calls": [("benchmark", {"max_seconds": 2, "rebuild": True})]},
    ]
    session = Session.create(load_task(user_repo / "task.toml"), ScriptedModel(steps), tmp_path / "runs", "cache")
    session.run()
    events = read_events(tmp_path / "runs" / "cache" / "journal.jsonl")
    texts = [e["text"] for e in events if e["type"] == "tool_result" and e["name"] == "benchmark"]
    evals = [e for e in events if e["type"] == "evaluation" and e.get("tool") == "benchmark"]
    assert [e["index_cache"] for e in evals] == ["stored", "hit", "stored", "stored"], texts
    assert evals[0]["index_key"] == evals[1]["index_key"] != evals[2]["index_key"] == evals[3]["index_key"]
    assert "reused by the next benchmark while the files that shape the index (core/src/shape.rs" in texts[0]
    reused = texts[1]
    assert reused.count("index: REUSED the trained index") == 1 and "core/src/shape.rs" in reused, reused
    assert "recall@10 1.0000 (meets the floor 0.95)" in reused  # the index read back answers right
    assert evals[1]["candidate"]["train_s"] == 0.0 and evals[1]["candidate"]["add_s"] == 0.0
    assert "index: REUSED" not in texts[2] and "index: REUSED" not in texts[3]
    assert len(list((tmp_path / "runs" / "cache" / "index-cache").glob("*.idx"))) <= 3


def test_the_live_line_reads_the_verdict_label():
    from vdbbench.agent.reports.live import SessionState, decision_line

    state = SessionState()
    ev = {"type": "decision", "iteration": 4, "outcome": "slower", "verdict": "under the margin (+0.3% < 3%)",
          "qps": 1000.0, "recall10": 0.97, "message": "tweak", "reason": "not a real gain"}
    state.apply(ev)
    line = decision_line(state, ev)
    assert line.startswith("[it 4] under the margin (+0.3% < 3%) | ") and state.last_outcome == "slower"
