"""The benchmark runner: adaptive sweep, recall of every point, headline, cache and resume."""

from __future__ import annotations

import json
import os

os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")

import numpy as np
import pytest

from vdbbench.bench import fastsweep, hugepages, results
from vdbbench.bench.frontier import select_for_timing
from vdbbench.adapters import RunOptions
from vdbbench.common import default_nlist
from vdbbench.datasets import compute_groundtruth
from vdbbench.common.recall import knn_recall, knn_recall_per_query, recall_lower_bound
from vdbbench.adapters.registry import adapter_class
from vdbbench.bench.runner import RunConfig, run_index
from vdbbench.bench.sweep import adaptive_values, combo_key, stops_paying
from vdbbench.datasets.base import Dataset
from vdbbench.datasets.synth import synth_sift


@pytest.fixture(scope="module")
def small() -> Dataset:
    base, queries = synth_sift(4000, 200, seed=3)
    nb, dist = compute_groundtruth(base, queries, "l2")
    return Dataset("test-sift-4k", base, queries, "l2", nb, dist, synthetic=True, source="generated")


@pytest.fixture(autouse=True)
def data_dir(tmp_path, monkeypatch):
    monkeypatch.setenv("VDBBENCH_DATA", str(tmp_path / "data"))


def _cfg(**kw) -> RunConfig:
    kw.setdefault("threads", (1,))
    kw.setdefault("modes", ("batch", "single"))
    kw.setdefault("repeats", 1)
    kw.setdefault("single_queries", 20)
    return RunConfig(**kw)


def test_adaptive_sweep_doubles_then_bisects_then_steps_above():
    calls = []

    def recall(v):  # monotone: reaches 0.95 first at v = 37
        return min(1.0, v / 38.9)

    def measured(v):
        calls.append(v)
        return recall(v)

    values = adaptive_values(measured, 1, 1000, 0.95, max_bisect=10)
    assert {1, 2, 4, 8, 16, 32, 64} <= set(values)  # doublings until the target is passed
    assert 36 in values and 37 in values  # bisection ends at adjacent integers around it
    assert min(v for v in values if recall(v) >= 0.95) == 37
    assert {56, 74} <= set(values) and max(values) == 74  # x1.5 and x2 above the smallest reaching value
    assert len(calls) == len(set(calls))  # no value measured twice


def test_adaptive_sweep_that_never_reaches_target_tries_every_doubling():
    values = adaptive_values(lambda v: 0.5, 1, 20, 0.95)
    assert values == [1, 2, 4, 8, 16, 20]


def test_runner_records_true_recall_and_headline(small, tmp_path):
    cfg = _cfg(threads=(1, 2), sweep="full")  # the front near the target timed, under it too
    adapter = adapter_class("faiss-ivf-flat")(small.dim, small.n, small.metric, cfg.options)
    r = run_index(adapter, small, cfg, tmp_path)

    assert r["schema"] == results.SCHEMA
    assert r["index"]["params"]["nlist"] == default_nlist(small.n)
    assert r["dataset"]["n"] == small.n and r["dataset"]["synthetic"] is True
    assert len(r["dataset"]["sha256"]) == 64
    assert r["build"]["bytes"] > small.train.nbytes  # IVF-Flat keeps every vector in f32
    assert r["machine"]["cores"] >= 1 and "faiss" in r["machine"]
    # every point's recall is the shared k-nn recall of what the index returns at those params
    for p in r["points"][:3]:
        ids = adapter.search(small.test, 10, p["params"], 1)
        assert p["recall10"] == pytest.approx(knn_recall(ids, small.train, small.test, small.distances))
    combos = {(p["mode"], p["threads"]) for p in r["points"]}
    assert combos == {("batch", 1), ("batch", 2), ("single", 1), ("single", 2)}
    single = [p for p in r["points"] if p["mode"] == "single"]
    assert all(0 < p["p50_ms"] <= p["p99_ms"] for p in single)
    # adaptive: some point is under the target and some at/above it
    recalls = sorted({p["recall10"] for p in r["points"]})
    assert recalls[0] < 0.95 <= recalls[-1]
    for h in r["headline"]:
        ok = [p for p in r["points"] if (p["mode"], p["threads"]) == (h["mode"], h["threads"]) and p["recall10"] >= 0.95]
        # the cheapest nprobe reaching the target (more lists cost more; faster-looking ones are noise)
        assert h["params"]["nprobe"] == min(p["params"]["nprobe"] for p in ok)
        assert h["qps"] == next(p["qps"] for p in ok if p["params"] == h["params"])
    on_disk = json.loads((tmp_path / "faiss-ivf-flat.json").read_text())
    assert on_disk["headline"] == r["headline"]
    assert not (tmp_path / "faiss-ivf-flat.partial.json").exists()


def test_peer_index_is_cached_and_reused(small, tmp_path):
    cfg = _cfg(modes=("batch",))
    opts = cfg.options
    first = run_index(adapter_class("faiss-ivf-sq8")(small.dim, small.n, "l2", opts), small, cfg, tmp_path / "a")
    second = run_index(adapter_class("faiss-ivf-sq8")(small.dim, small.n, "l2", opts), small, cfg, tmp_path / "b")
    assert first["build"]["cached"] is False and second["build"]["cached"] is True
    assert second["build"]["train_s"] == first["build"]["train_s"]  # recorded figures reused
    # built or loaded, the peer's memory is offered huge pages before anything is timed
    for r in (first, second):
        assert r["build"]["hugepages"]["thp"] == hugepages.thp_mode()
        assert "advised_mb" in r["build"]["hugepages"] or r["build"]["hugepages"]["skipped"]
    assert [p["recall10"] for p in second["swept"]] == [p["recall10"] for p in first["swept"]]
    cached = list((tmp_path / "data" / "indexes").glob("faiss-ivf-sq8-*.index"))
    assert len(cached) == 1
    # another configuration is another entry
    other = RunOptions(nlist=32)
    run_index(adapter_class("faiss-ivf-sq8")(small.dim, small.n, "l2", other), small, _cfg(modes=("batch",), options=other), tmp_path / "c")
    assert len(list((tmp_path / "data" / "indexes").glob("faiss-ivf-sq8-*.index"))) == 2


def test_resume_keeps_completed_points(small, tmp_path):
    opts = RunOptions(nprobe=(1, 2, 4))
    cfg = _cfg(modes=("batch",), options=opts)
    adapter = adapter_class("faiss-ivf-flat")(small.dim, small.n, "l2", opts)
    full = run_index(adapter, small, cfg, tmp_path)
    # simulate an interruption after the first point: a partial file holding one point
    first = full["points"][0]
    partial = {
        "identity": {"dataset_sha256": full["dataset"]["sha256"], "nq": small.nq, "index": "faiss-ivf-flat",
                     "params": adapter.build_params(), "k": 10},
        "recalls": {}, "points": [{**first, "qps": -1.0}],
    }
    (tmp_path / "faiss-ivf-flat.partial.json").write_text(json.dumps(partial))
    (tmp_path / "faiss-ivf-flat.json").unlink()  # interrupted runs have no final file
    resumed = run_index(adapter, small, cfg, tmp_path, resume=True)
    assert resumed["points"][0]["qps"] == -1.0  # kept, not re-measured
    assert [p["params"] for p in resumed["points"]] == [p["params"] for p in full["points"]]


def test_an_interrupted_sweep_keeps_the_recalls_it_measured(small, tmp_path):
    # Ctrl-C in the sweep (minutes on 1M vectors) used to lose every recall measured so far:
    # the partial file was first written after the whole sweep, and --resume swept again
    class Interrupt:
        sweeps = 0

        def phase(self, index, text):
            if text.startswith("sweeping"):
                self.sweeps += 1
                if self.sweeps == 4:
                    raise KeyboardInterrupt

        def advance(self, index):
            pass

    opts = RunOptions(nprobe=(1, 2, 4, 8, 16))
    cfg = _cfg(modes=("batch",), options=opts)
    adapter = adapter_class("faiss-ivf-flat")(small.dim, small.n, "l2", opts)
    with pytest.raises(KeyboardInterrupt):
        run_index(adapter, small, cfg, tmp_path, reporter=Interrupt())
    partial = json.loads((tmp_path / "faiss-ivf-flat.partial.json").read_text())
    assert len(partial["recalls"]) == 3
    calls = []
    search = adapter.search
    adapter.search = lambda q, *a: calls.append(len(q)) or search(q, *a)
    resumed = run_index(adapter, small, cfg, tmp_path, resume=True)
    assert len(resumed["swept"]) == 5
    assert calls.count(small.nq) == 2 + len(resumed["points"]) * (cfg.warmup + cfg.repeats)  # 2 recalls, then timing


def test_hnsw_and_refine_peers_reach_target(small, tmp_path):
    cfg = _cfg(modes=("batch",), sweep="full")
    for name in ("faiss-hnsw", "faiss-ivf-sq8-refine"):
        r = run_index(adapter_class(name)(small.dim, small.n, "l2", cfg.options), small, cfg, tmp_path)
        assert results.target_met(r), name
    refine = json.loads((tmp_path / "faiss-ivf-sq8-refine.json").read_text())
    assert {p["params"]["k_factor"] for p in refine["swept"]} == {1, 2, 4, 8, 16}  # its own range
    # the result says what each knob's sweep covered
    knobs = refine["run"]["knobs"]
    assert knobs["k_factor"] == {"values": [1, 2, 4, 8, 16], "swept": [1, 2, 4, 8, 16]}
    assert knobs["nprobe"]["adaptive"] == [1, refine["index"]["params"]["nlist"]]
    assert knobs["nprobe"]["values"] == sorted({p["params"]["nprobe"] for p in refine["swept"]})


def test_unsupported_metric_and_missing_ground_truth_are_refused(small, tmp_path):
    cfg = _cfg()
    weird = Dataset("jaccard-set", small.train, small.test, "jaccard", small.neighbors, small.distances)
    with pytest.raises(ValueError, match="does not support metric 'jaccard'"):
        run_index(adapter_class("faiss-ivf-flat")(small.dim, small.n, "jaccard", cfg.options), weird, cfg, tmp_path)
    bare = Dataset("no-gt", small.train, small.test, "l2")
    with pytest.raises(ValueError, match="no ground truth"):
        run_index(adapter_class("faiss-ivf-flat")(small.dim, small.n, "l2", cfg.options), bare, cfg, tmp_path)


def test_flat_of_our_engine_is_exact(small, tmp_path):
    pytest.importorskip("vdbbench._rust_vdb")
    cfg = _cfg()
    r = run_index(adapter_class("flat")(small.dim, small.n, "l2", cfg.options), small, cfg, tmp_path)
    assert all(p["recall10"] == 1.0 for p in r["points"])
    assert r["machine"]["simd"]


def test_ours_ivf_reports_stage_breakdown(small, tmp_path):
    pytest.importorskip("vdbbench._rust_vdb")
    # every swept point timed, so that each probe-ratio point has its twin without the ratio
    # (the frontier picks by noisy QPS estimates and can time one of a pair only)
    cfg = _cfg(modes=("batch",), time_points="all", sweep="full")
    r = run_index(adapter_class("ivf")(small.dim, small.n, "l2", cfg.options), small, cfg, tmp_path)
    assert results.target_met(r)
    assert {p["params"]["rerank"] for p in r["swept"]} == {0, 40, 80, 160}
    assert {p["params"]["probe_ratio"] for p in r["swept"]} == {0.0, 1.35}
    assert all(isinstance(p.get("stages"), dict) and p["stages"]["nq"] == small.nq for p in r["points"])
    # a probe ratio never probes more lists than the same point without it, and fewer once
    # nprobe leaves it room (at nprobe 1 both probe one list a query)
    probed = {json.dumps(p["params"], sort_keys=True): p["stages"]["lists_probed"] for p in r["points"]}
    pairs = []
    for p in r["points"]:
        if p["params"]["probe_ratio"] > 0:
            off = json.dumps({**p["params"], "probe_ratio": 0.0}, sort_keys=True)
            if off in probed:  # the sweep picks each ratio's nprobe values on its own
                pairs.append((p["params"]["nprobe"], p["stages"]["lists_probed"], probed[off]))
    assert pairs and all(on <= off for _, on, off in pairs), pairs
    assert any(on < off for _, on, off in pairs), pairs
    assert r["build"]["bytes"] > 0 and r["build"]["cached"] is False


def test_single_mode_points_keep_the_counters_of_queries_searched_one_per_call(small, tmp_path):
    # What one query reads differs from a batch's share (split u8 codes read few tails alone,
    # every tail in a batch's tiles): the bandwidth table reads each mode's own counters.
    pytest.importorskip("vdbbench._rust_vdb")
    from vdbbench.bench.report import bandwidth_markdown

    cfg = _cfg(single_queries=12, sweep="full")  # every point timed in both modes: pairs to compare
    r = run_index(adapter_class("ivf")(small.dim, small.n, "l2", cfg.options), small, cfg, tmp_path)
    single = [p for p in r["points"] if p["mode"] == "single"]
    assert single and all(p["stages"]["nq"] == 12 and p["stages"]["threads"] >= 1 for p in single)
    batch = {results.point_key(p["params"]): p for p in r["points"] if p["mode"] == "batch"}
    for p in single:
        b = batch[results.point_key(p["params"])]["stages"]
        assert p["stages"]["codes_scanned"] / 12 == pytest.approx(b["codes_scanned"] / b["nq"], rel=0.5)
    r["machine"]["read_gbps_1t"] = 10.0
    table = bandwidth_markdown([r])
    rows = {line.split("|")[2].strip(): line.split("|")[4].strip() for line in table.splitlines() if line.startswith("| ivf")}
    for h in r["headline"]:
        own = next(p for p in r["points"] if (p["params"], p["mode"], p["threads"]) == (h["params"], h["mode"], h["threads"]))
        assert rows[f"{h['mode']} @ {h['threads']}t"] == f"{own['stages']['bytes_scanned'] / own['stages']['nq']:,.0f}", table


def test_resume_skips_an_index_already_finished(small, tmp_path):
    cfg = _cfg(modes=("batch",), options=RunOptions(nprobe=(1, 2)))
    adapter = adapter_class("faiss-ivf-flat")(small.dim, small.n, "l2", cfg.options)
    first = run_index(adapter, small, cfg, tmp_path)
    again = run_index(adapter, small, cfg, tmp_path, resume=True)
    assert again == first  # nothing re-measured: timings identical
    fresh = adapter_class("faiss-ivf-flat")(small.dim, small.n, "l2", cfg.options)
    assert run_index(fresh, small, cfg, tmp_path, resume=True, keep_index=True) == first
    assert fresh.index is not None and fresh.index.ntotal == small.n  # loaded for the paired re-timing
    other = run_index(adapter, small, _cfg(modes=("batch",), threads=(2,), options=cfg.options), tmp_path, resume=True)
    assert {p["threads"] for p in other["points"]} == {2}  # different settings: measured anew


def test_headline_is_the_fastest_point_no_cheaper_one_undercuts():
    def pt(nprobe, rerank, recall, qps):
        return {"params": {"nprobe": nprobe, "rerank": rerank}, "mode": "batch", "threads": 1,
                "recall10": recall, "qps": qps}

    pts = [
        pt(8, 40, 0.94, 900),
        pt(16, 40, 0.96, 500),
        pt(32, 40, 0.97, 600),  # more lists than (16, 40): faster only by noise
        pt(16, 160, 0.96, 650),  # more rerank than (16, 40): likewise
        pt(12, 80, 0.95, 550),  # fewer lists, more rerank: a genuine alternative
    ]
    plain = results.compute_headline(pts, 0.95, ["batch"], [1])
    assert plain[0]["params"] == {"nprobe": 16, "rerank": 160}  # the plain maximum rewards noise
    h = results.compute_headline(pts, 0.95, ["batch"], [1], cost_ordered=True)
    assert h[0]["params"] == {"nprobe": 12, "rerank": 80} and h[0]["qps"] == 550
    missed = results.compute_headline(pts, 0.99, ["batch", "single"], [1], cost_ordered=True)
    assert [x["qps"] for x in missed] == [None, None]


def test_a_point_is_held_to_its_lower_bound_when_the_run_asks_for_one():
    def pt(nprobe, recall, low, qps):
        return {"params": {"nprobe": nprobe}, "mode": "batch", "threads": 1, "recall10": recall,
                "recall10_low": low, "qps": qps}

    pts = [pt(16, 0.9502, 0.9467, 900), pt(20, 0.9551, 0.9519, 700), pt(24, 0.9600, 0.9571, 600)]
    h = results.compute_headline(pts, 0.95, ["batch"], [1], cost_ordered=True)
    assert h[0]["params"] == {"nprobe": 20} and h[0]["recall10_low"] == 0.9519
    # without bounds (a run without --recall-confidence, or an older file) the mean decides
    plain = [{key: v for key, v in p.items() if key != "recall10_low"} for p in pts]
    assert results.compute_headline(plain, 0.95, ["batch"], [1], cost_ordered=True)[0]["params"] == {"nprobe": 16}
    assert select_for_timing([{**p, "qps_estimate": p["qps"]} for p in pts], 0.95) >= {'{"nprobe": 20}'}


def test_recall_lower_bound_is_the_mean_less_z_standard_errors():
    assert recall_lower_bound(0.96, 0.002, 0.0) == 0.96
    assert recall_lower_bound(0.96, 0.002, 0.95) == pytest.approx(0.96 - 1.6449 * 0.002, abs=1e-6)
    assert recall_lower_bound(0.96, 0.002, 0.5) == pytest.approx(0.96)
    for bad in (0.3, 1.0, 1.2, -0.1):
        with pytest.raises(ValueError, match="recall confidence"):
            recall_lower_bound(0.96, 0.002, bad)


def test_runner_with_recall_confidence_picks_the_cheapest_point_whose_bound_reaches(small, tmp_path):
    # target 0.96: on this set nprobe 11 reads 0.9615 with a bound of 0.953, and 12 reads 0.977
    cfg = _cfg(modes=("batch",), recall_confidence=0.95, target=0.96)
    adapter = adapter_class("faiss-ivf-flat")(small.dim, small.n, small.metric, cfg.options)
    r = run_index(adapter, small, cfg, tmp_path)
    assert r["run"]["recall_confidence"] == 0.95
    for p in r["swept"]:
        ids = adapter.search(small.test, 10, p["params"], 1)
        per_query = knn_recall_per_query(ids, small.train, small.test, small.distances)
        assert p["recall10_se"] == pytest.approx(per_query.std(ddof=1) / np.sqrt(small.nq))
        assert p["recall10_low"] == pytest.approx(p["recall10"] - 1.6449 * p["recall10_se"], abs=1e-5)
    # the sweep bisects on the bound: the smallest nprobe whose bound reaches the target is among
    # the swept points, and it (not a cheaper one whose mean alone reaches) is the headline
    swept = sorted(r["swept"], key=lambda p: p["params"]["nprobe"])
    first = next(p for p in swept if p["recall10_low"] >= 0.96)
    assert first["params"]["nprobe"] - 1 in {p["params"]["nprobe"] for p in swept}
    (h,) = r["headline"]
    assert h["params"] == first["params"] and h["recall10_low"] >= 0.96
    # with 200 queries the bound sits ~0.01 under the mean, so a mean-only run stops earlier
    plain = run_index(adapter_class("faiss-ivf-flat")(small.dim, small.n, small.metric, cfg.options), small,
                      _cfg(modes=("batch",), target=0.96), tmp_path / "plain")
    assert plain["headline"][0]["params"]["nprobe"] < h["params"]["nprobe"]
    assert all("recall10_low" not in p for p in plain["points"])


def test_resume_with_a_recall_confidence_holds_kept_points_to_it(small, tmp_path):
    # an interrupted mean-only run resumed with --recall-confidence: its kept points are judged
    # by their bounds, so the headline is the confidence run's, not the mean's cheaper point
    plain_cfg = _cfg(modes=("batch",), target=0.96)
    adapter = adapter_class("faiss-ivf-flat")(small.dim, small.n, small.metric, plain_cfg.options)
    plain = run_index(adapter, small, plain_cfg, tmp_path)
    partial = {
        "identity": {"dataset_sha256": plain["dataset"]["sha256"], "nq": small.nq, "index": "faiss-ivf-flat",
                     "params": adapter.build_params(), "k": 10},
        "recalls": {}, "points": plain["points"],
    }
    (tmp_path / "faiss-ivf-flat.partial.json").write_text(json.dumps(partial))
    (tmp_path / "faiss-ivf-flat.json").unlink()
    resumed = run_index(adapter, small, _cfg(modes=("batch",), target=0.96, recall_confidence=0.95), tmp_path,
                        resume=True)
    assert all("recall10_low" in p for p in resumed["points"])
    (h,) = resumed["headline"]
    assert h["recall10_low"] >= 0.96
    assert h["params"]["nprobe"] > plain["headline"][0]["params"]["nprobe"]


def test_a_knob_off_at_zero_is_not_ordered_against_its_other_values():
    # Our `reorder`: 0 turns the prefilter off and scans every row's u8 codes (faster in a batch,
    # slower one query per call), so a point with reorder 100 and a few more lists is a genuine
    # alternative to reorder 0, and reorder 0 one to reorder 200 at the same nprobe.
    def pt(nprobe, reorder, recall, qps):
        return {"params": {"nprobe": nprobe, "reorder": reorder}, "mode": "single", "threads": 1,
                "recall10": recall, "qps": qps, "recall10_ids": recall, "p50_ms": 1.0, "p99_ms": 2.0}

    pts = [pt(46, 0, 0.953, 700), pt(48, 100, 0.951, 1300), pt(48, 200, 0.955, 1350), pt(46, 200, 0.952, 1100)]
    unaware = results.compute_headline(pts, 0.95, ["single"], [1], cost_ordered=True)
    assert unaware[0]["params"] == {"nprobe": 46, "reorder": 0}
    h = results.compute_headline(pts, 0.95, ["single"], [1], cost_ordered=True, off_at_zero=("reorder",))
    # (48, 200) is undercut by (48, 100) and by (46, 200): only noise could make it look faster
    assert h[0]["params"] == {"nprobe": 48, "reorder": 100} and h[0]["qps"] == 1300
    keys = [json.loads(k) for k in select_for_timing([{**p, "qps_estimate": 1000.0} for p in pts], 0.95,
                                                      off_at_zero=("reorder",))]
    assert {"nprobe": 48, "reorder": 100} in keys and {"nprobe": 46, "reorder": 0} in keys
    batch = [{**p, "mode": "batch", "qps": q} for p, q in zip(pts, (900, 600, 620, 500))]
    h = results.compute_headline(batch, 0.95, ["batch"], [1], cost_ordered=True, off_at_zero=("reorder",))
    assert h[0]["params"] == {"nprobe": 46, "reorder": 0}


def test_rivals_are_timed_again_in_turns_and_the_best_median_is_the_headline():
    # Two points reaching the target, neither undercutting the other: A was timed in a slow
    # minute (500 QPS) and B after it (600); timed again in turns, A runs at ~1000 and B at ~600.
    from vdbbench.bench import rivals

    def pt(nprobe, reorder, qps, mode="batch", threads=1):
        return {"params": {"nprobe": nprobe, "reorder": reorder}, "mode": mode, "threads": threads,
                "recall10": 0.952, "recall10_ids": 0.952, "qps": qps, "p50_ms": None, "p99_ms": None}

    points = [pt(46, 0, 500), pt(48, 100, 600), pt(46, 0, 300, "single"), pt(60, 0, 900, threads=2)]
    head = results.compute_headline(points, 0.95, ["batch", "single"], [1, 2], cost_ordered=True,
                                    off_at_zero=("reorder",))
    assert head[0]["params"] == {"nprobe": 48, "reorder": 100}  # what the one-off timings say
    calls = []

    def time_point(params, mode, threads):
        calls.append((params["reorder"], mode, threads))
        return {0: 1000.0, 100: 600.0}[params["reorder"]] + len(calls)  # a little drift

    settled = rivals.settle(points, head, 0.95, ("reorder",), time_point, rounds=3)
    batch1 = next(h for h in settled if h["mode"] == "batch" and h["threads"] == 1)
    assert batch1["params"] == {"nprobe": 46, "reorder": 0} and batch1["qps"] == 500
    assert [len(r["qps_rounds"]) for r in batch1["rivals"]] == [3, 3]
    # in turns: the order alternates round by round
    assert [c[0] for c in calls] == [0, 100, 100, 0, 0, 100]
    # a mode with a single point reaching the target, and one with none, are left as they were
    assert {(c[1], c[2]) for c in calls} == {("batch", 1)}
    assert next(h for h in settled if h["mode"] == "single" and h["threads"] == 1) == head[2]
    assert next(h for h in settled if h["mode"] == "single" and h["threads"] == 2)["qps"] is None
    # with a margin (a fast sweep), a rival timed well under the fastest is no near equal: not re-timed
    calls.clear()
    kept = rivals.settle(points, head, 0.95, ("reorder",), time_point, rounds=3, margin=0.9)
    assert calls == [] and kept == head
    rivals.settle(points, head, 0.95, ("reorder",), time_point, rounds=3, margin=0.8)
    assert len(calls) == 6  # 500 is within 0.8 of 600


def test_adaptive_sweep_from_a_guess_brackets_the_crossing_there():
    def recall(v):  # reaches 0.95 first at v = 37
        return min(1.0, v / 38.9)

    for guess in (40, 30, 37, 1000, 1):
        calls = []
        values = adaptive_values(lambda v: calls.append(v) or recall(v), 1, 1000, 0.95, max_bisect=10, guess=guess)
        assert calls[0] == guess and len(calls) == len(set(calls))
        assert min(v for v in values if recall(v) >= 0.95) == 37 and 36 in values
    # near a good guess the crossing takes fewer searches than doubling from the low end
    near = adaptive_values(recall, 1, 1000, 0.95, guess=40)
    assert len(near) < len(adaptive_values(recall, 1, 1000, 0.95))


def test_a_knob_step_that_did_not_lower_the_crossing_stops_the_steps_beyond_it():
    order = {"rerank": (0, 40, 80, 160), "reorder": (0, 100, 200)}
    off = ("reorder",)
    key = lambda **kw: combo_key(kw)  # noqa: E731
    crossing = {key(rerank=0, reorder=0): 52, key(rerank=40, reorder=0): 52,
                key(rerank=0, reorder=100): 60, key(rerank=0, reorder=200): 56}
    # rerank 0 -> 40 did not lower nprobe at the crossing: 80 (and then 160) cannot pay
    assert "did not lower" in stops_paying({"rerank": 80, "reorder": 0}, order, crossing, off)
    assert "skipped already" in stops_paying({"rerank": 160, "reorder": 0}, order, crossing, off,
                                             pruned={key(rerank=80, reorder=0)})
    # the first step of a knob is always measured; reorder 0 is "off", not the bottom of its ladder
    assert stops_paying({"rerank": 40, "reorder": 100}, order, crossing, off) is None
    assert stops_paying({"rerank": 0, "reorder": 200}, order, crossing, off) is None
    # nor did a step that lowered it by less than 5% (within the sample's noise)
    assert "by 5%" in stops_paying({"rerank": 80, "reorder": 0}, order, {**crossing, key(rerank=40, reorder=0): 50}, off)
    # a step that lowered it keeps the next one; one that never reached the target decides nothing
    assert stops_paying({"rerank": 80, "reorder": 0}, order, {**crossing, key(rerank=40, reorder=0): 48}, off) is None
    assert stops_paying({"rerank": 80, "reorder": 0}, order, {**crossing, key(rerank=40, reorder=0): None}, off) is None


def test_a_fast_sweep_explores_on_a_sample_and_times_candidates_measured_on_all_queries(small, tmp_path, monkeypatch):
    pytest.importorskip("vdbbench._rust_vdb")
    monkeypatch.setattr(fastsweep, "SWEEP_QUERIES", 60)
    cfg = _cfg(threads=(1,), modes=("batch", "single"))
    adapter = adapter_class("ivf")(small.dim, small.n, "l2", cfg.options)
    r = run_index(adapter, small, cfg, tmp_path)
    assert r["run"]["sweep"] == "fast" and r["run"]["sweep_queries"] == 60
    assert results.target_met(r)
    timed = {results.point_key(p["params"]) for p in r["points"]}
    for p in r["swept"]:  # explored on the sample; every timed point measured on all queries
        assert p["recall_queries"] in (60, small.nq)
        assert p["timed"] == (results.point_key(p["params"]) in timed)
        assert p["recall_queries"] == small.nq or not p["timed"]
    assert any(p["recall_queries"] == 60 for p in r["swept"])
    for h in r["headline"]:  # the headline's recall is the true recall on all queries
        ids = adapter.search(small.test, 10, h["params"], 1)
        assert h["recall10"] == pytest.approx(knn_recall(ids, small.train, small.test, small.distances))
        assert h["recall10"] >= 0.95
    # a point is timed only in the modes it may win, and the result says which
    for p in r["swept"]:
        modes = {q["mode"] for q in r["points"] if q["params"] == p["params"]}
        assert modes == set(p["timed_modes"])
    # the steps that stopped paying were skipped, and the result names them and why
    for s in r["run"]["skipped"]:
        assert "did not lower" in s["why"] or "skipped already" in s["why"]
        assert not any(all(p["params"][k] == v for k, v in s["params"].items()) for p in r["swept"])
    # the same run swept in full explores every combination on all queries
    full = run_index(adapter_class("ivf")(small.dim, small.n, "l2", cfg.options), small,
                     _cfg(threads=(1,), modes=("batch",), sweep="full"), tmp_path / "full")
    assert full["run"]["skipped"] == [] and all(p["recall_queries"] == small.nq for p in full["swept"])
    assert {p["params"]["rerank"] for p in full["swept"]} == {0, 40, 80, 160}
