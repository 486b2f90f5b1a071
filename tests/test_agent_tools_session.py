"""The tools a model steers by, in a real session on the fixture engine (real cargo builds, real
candidate processes): search, a build failure under run_tests, benchmark's sequential pairs on one
clock and its nprobe override, profile's engine timers and perf samples, a system prompt that does
not move, the task text's data facts, and the journal's facts folded as they are written (and
across a resume). The fixture's binding here takes `nprobe` (1 finds nothing: recall falls) and
keeps last_search_stats() with a nested dict of named timers."""

from __future__ import annotations

import math
import re
import shutil
import subprocess

import pytest

from test_agent_loop import BREAK_BUILD, FIXTURE, IMPROVE, LIB, cargo_target, edit, user_repo  # noqa: F401
from vdbbench.agent.core.facts import Facts
from vdbbench.agent.core.journal import read_events
from vdbbench.agent.core.task import load_task
from vdbbench.agent.session.loop import Session
from vdbbench.agent.session.model import ScriptedModel

pytestmark = pytest.mark.skipif(shutil.which("cargo") is None, reason="needs a Rust toolchain (cargo)")

SEARCH_SIG = '''    #[pyo3(signature = (queries, k=10, threads=None))]
    fn search<'py>(
        &self,
        py: Python<'py>,
        queries: PyReadonlyArray2<'py, f32>,
        k: usize,
        threads: Option<usize>,
    ) -> PyResult<(Bound<'py, PyArray2<f32>>, Bound<'py, PyArray2<i64>>)> {
        let _ = threads;'''
SEARCH_SIG_NEW = '''    #[pyo3(signature = (queries, k=10, threads=None, nprobe=None))]
    fn search<'py>(
        &mut self,
        py: Python<'py>,
        queries: PyReadonlyArray2<'py, f32>,
        k: usize,
        threads: Option<usize>,
        nprobe: Option<usize>,
    ) -> PyResult<(Bound<'py, PyArray2<f32>>, Bound<'py, PyArray2<i64>>)> {
        let _ = threads;
        let t0 = std::time::Instant::now();'''
SEARCH_END = '''        let (d, i) = py.detach(|| self.inner.search(&q, k));'''
SEARCH_END_NEW = '''        let inner = &self.inner;
        let (d, mut i) = py.detach(|| inner.search(&q, k));
        if nprobe == Some(1) {
            i.iter_mut().for_each(|x| *x = -1); // the test's knob: one probe finds nothing
        }
        self.last = Some((nq, t0.elapsed().as_secs_f64()));'''
STATS_FN = '''
    fn last_search_stats<'py>(&self, py: Python<'py>) -> PyResult<Option<Bound<'py, pyo3::types::PyDict>>> {
        let Some((nq, wall)) = self.last else { return Ok(None) };
        let d = pyo3::types::PyDict::new(py);
        d.set_item("nq", nq)?;
        d.set_item("threads", 1)?;
        d.set_item("wall_s", wall)?;
        d.set_item("scan_s", wall * 0.9)?;
        let timers = pyo3::types::PyDict::new(py);
        timers.set_item("distances", wall * 0.8)?;
        timers.set_item("select_top_k", wall * 0.05)?;
        d.set_item("timers", timers)?;
        Ok(Some(d))
    }
}

#[pymodule]'''


def _binding_with_knobs(repo):
    """The user's fixture with a binding that takes nprobe and keeps stats, committed."""
    py = repo / "py" / "src" / "lib.rs"
    text = py.read_text()
    for old, new in ((SEARCH_SIG, SEARCH_SIG_NEW), (SEARCH_END, SEARCH_END_NEW), ("}\n\n#[pymodule]", STATS_FN),
                     ("    inner: fixture_core::IvfIndex,\n", "    inner: fixture_core::IvfIndex,\n    last: Option<(usize, f64)>,\n"),
                     ("PyIvfIndex { inner: fixture_core::IvfIndex::new(dim) }", "PyIvfIndex { inner: fixture_core::IvfIndex::new(dim), last: None }")):
        assert text.count(old) == 1, old
        text = text.replace(old, new)
    py.write_text(text)
    subprocess.run(["git", "-c", "user.name=u", "-c", "user.email=u@x", "commit", "-q", "-am", "binding: nprobe, stats"],
                   cwd=repo, check=True)


def _qps(text: str, label: str) -> float:
    m = re.search(re.escape(label) + r"[^:]*: ([\d,]+) QPS", text)
    assert m, (label, text)
    return float(m.group(1).replace(",", ""))


def test_the_tools_a_model_steers_by(cargo_target, user_repo, tmp_path):
    _binding_with_knobs(user_repo)
    steps = [
        {"tool_calls": [("search", {"pattern": "const PASSES"}), edit(BREAK_BUILD), ("run_tests", {})]},
        {"tool_calls": [("revert_to_best", {}), edit(IMPROVE), ("benchmark", {"max_seconds": 10}),
                        ("benchmark", {"nprobe": 1, "max_seconds": 3}), ("profile", {})]},
        {"tool_calls": [("submit", {"message": "one pass"})]},
        {"tool_calls": [("note", {"text": "seen"})]},
    ]
    model = ScriptedModel(steps)
    session = Session.create(load_task(user_repo / "task.toml"), model, tmp_path / "runs", "tools")
    end = session.run()
    assert end["reason"] == "model_finished"
    events = read_events(tmp_path / "runs" / "tools" / "journal.jsonl")
    results = [(e["name"], e["text"]) for e in events if e["type"] == "tool_result"]
    by = {}
    for name, text in results:
        by.setdefault(name, []).append(text)

    # search: file:line: text over the editable sources.
    assert re.fullmatch(r"core/src/lib\.rs:\d+: const PASSES: usize = 4;", by["search"][0])

    # A build failure under run_tests is called one, with the compiler's file:line.
    tests_text = by["run_tests"][0]
    assert tests_text.startswith("build FAILED") and "no test ran" in tests_text, tests_text
    assert "core/src/lib.rs:" in tests_text and "no test summary" not in tests_text

    # benchmark: pairs until the interval is clear of zero; one clock; headline, gain and per-pair
    # gains agree with each other.
    bench = by["benchmark"][0]
    assert "every figure on the cpu clock" in bench and "wall" not in bench, bench
    assert "stopped: its interval is clear of zero" in bench, bench
    mine, best = _qps(bench, "your working copy"), _qps(bench, "current best")
    gain = float(re.search(r"gain ([+-][\d.]+)% over (\d+) interleaved pairs", bench).group(1)) / 100
    pairs = [float(x) / 100 for x in re.search(r"per-pair gains: (.*)", bench).group(1).replace("%", "").split(", ")]
    assert int(re.search(r"over (\d+) interleaved pairs", bench).group(1)) == len(pairs) >= 3
    assert mine / best - 1 == pytest.approx(gain, abs=0.01)
    assert math.exp(sum(math.log1p(p) for p in pairs) / len(pairs)) - 1 == pytest.approx(gain, abs=0.01)
    assert gain > 1.0  # the planted pass is worth ~4x
    lo, hi = (float(x) / 100 for x in re.search(r"interval ([+-][\d.]+)% \.\. ([+-][\d.]+)%", bench).groups())
    assert 0 < lo <= gain <= hi

    # benchmark's override reaches the working copy only: its recall falls, the best's does not.
    swept = by["benchmark"][1]
    assert "your working copy with nprobe=1 (the best keeps the card's search arguments)" in swept
    assert "recall@10 0.0000 (MISSES the floor 0.95)" in swept
    assert re.search(r"current best, timed in turns with it: [\d,]+ QPS, recall@10 1\.0000", swept), swept

    # profile: counts that agree (150 queries per call, the stats' nq), every stats field, the
    # nested timers by name, and perf samples where the machine has perf.
    prof = by["profile"][0]
    assert "search calls of 150 queries each" in prof and "one search of 150 queries" in prof, prof
    # The old profile said "333 dev queries" beside nq=1000; a timing like 0.01333 s is no such count.
    assert "nq=150" in prof and not re.search(r"\b333 (dev )?quer", prof), prof
    assert "scan: " in prof and "timers (named timers" in prof and "distances: " in prof and "select_top_k: " in prof
    if shutil.which("perf"):
        assert "perf samples of" in prof or "perf could not record" in prof, prof
        if "perf samples of" in prof:
            assert "fixture" in prof  # the engine's own library among the hottest
    else:
        assert "perf sampling: not available" in prof

    decisions = [e for e in events if e["type"] == "decision"]
    assert [d["outcome"] for d in decisions] == ["accepted"]
    assert "Current best: " in by["submit"][0] and f"commit {decisions[0]['commit'][:12]}" in by["submit"][0]

    # The system prompt never moved (prompt caching), states the data as loaded, and leaves the
    # best to the conversation.
    systems = {m[0]["content"] for m in model.seen}
    assert len(model.seen) == 4 and len(systems) == 1
    system = systems.pop()
    assert "`synth-float-3000` (3,000 base vectors of dimension 32, metric l2)" in system
    assert "QPS at recall@10" not in system
    assert model.seen[0][1]["content"].startswith("Current best (the start version, measured on held-out queries): ")

    # The facts the session kept event by event are the fold of its journal, before and after a resume.
    assert session.facts() == Facts.fold(events)
    again = Session.resume(tmp_path / "runs" / "tools", ScriptedModel([]))
    assert again.facts() == Facts.fold(read_events(tmp_path / "runs" / "tools" / "journal.jsonl"))
    again.run()
    final = read_events(tmp_path / "runs" / "tools" / "journal.jsonl")
    assert again.facts() == Facts.fold(final) and again.facts().usage.submissions == 1
    assert again.facts().resumes == 1 and again.best.commit == decisions[0]["commit"]
