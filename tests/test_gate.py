"""`vdbbench gate`: recall gated at the baseline headline's parameters, QPS as a ratio to a peer."""

from __future__ import annotations

import json
import os
import shutil

os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")

import pytest

from vdbbench.cli import main

COMMON = ["--dataset", "synth-sift-5k", "--threads", "1", "--mode", "batch", "--repeats", "1"]


@pytest.fixture(scope="module")
def data_dir(tmp_path_factory):
    return tmp_path_factory.mktemp("vdbbench-data")


@pytest.fixture(autouse=True)
def _env(data_dir, monkeypatch):
    monkeypatch.setenv("VDBBENCH_DATA", str(data_dir))


@pytest.fixture(scope="module")
def baseline(tmp_path_factory, data_dir):
    out = tmp_path_factory.mktemp("baseline")
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("VDBBENCH_DATA", str(data_dir))
        assert main(["run", "--index", "faiss-ivf-flat", "--compare", "faiss-ivf-sq8", *COMMON, "--out", str(out)]) == 0
    return out


def _headline_nprobes(base_dir) -> str:
    r = json.loads((base_dir / "faiss-ivf-flat.json").read_text())
    return ",".join(str(h["params"]["nprobe"]) for h in r["headline"])


def gate(result, baseline, *extra) -> int:
    return main(["gate", str(result), "--baseline", str(baseline), *extra])


def test_unchanged_result_passes(baseline, tmp_path, capsys):
    res = tmp_path / "res"
    assert main(["run", "--index", "faiss-ivf-flat", *COMMON, "--nprobe", _headline_nprobes(baseline), "--out", str(res)]) == 0
    assert gate(res / "faiss-ivf-flat.json", baseline / "faiss-ivf-flat.json") == 0
    out = capsys.readouterr().out
    assert "ok: recall10" in out and out.strip().endswith("gate: passed")


def test_a_result_chosen_by_another_recall_rule_is_refused(baseline, tmp_path, capsys):
    # headlines picked at the lower bound of recall are other points than the baseline's
    # picked at the mean: their QPS ratios do not compare
    res = json.loads((baseline / "faiss-ivf-flat.json").read_text())
    res["run"]["recall_confidence"] = 0.95
    (tmp_path / "faiss-ivf-flat.json").write_text(json.dumps(res))
    assert gate(tmp_path / "faiss-ivf-flat.json", baseline / "faiss-ivf-flat.json") == 1
    out = capsys.readouterr().out
    assert ("FAIL: result chose its headlines at recall@10 >= 0.95 (its 0.95 lower bound), baseline at "
            "recall@10 >= 0.95 (the mean)") in out


def test_recall_under_the_floor_fails(baseline, tmp_path, capsys):
    # a regression: four times the lists, so the baseline's nprobe now scans a quarter of the
    # data and finds fewer true neighbours; the floor is the recall the baseline had there
    res = tmp_path / "worse"
    base = json.loads((baseline / "faiss-ivf-flat.json").read_text())
    floor = min(h["recall10"] for h in base["headline"] if h["params"])
    nlist = 4 * base["index"]["params"]["nlist"]
    main(["run", "--index", "faiss-ivf-flat", *COMMON, "--nlist", str(nlist),
          "--nprobe", _headline_nprobes(baseline), "--out", str(res)])
    capsys.readouterr()
    assert gate(res / "faiss-ivf-flat.json", baseline / "faiss-ivf-flat.json", "--min-recall", str(floor)) == 1
    lines = capsys.readouterr().out.splitlines()
    fails = [line for line in lines if line.startswith("FAIL:")]
    assert fails and all("recall: recall10 0." in line and f"< {floor:g} at nprobe=" in line for line in fails)
    # and the unchanged baseline itself passes at that floor
    assert gate(baseline / "faiss-ivf-flat.json", baseline / "faiss-ivf-flat.json", "--min-recall", str(floor)) == 0


def test_missing_baseline_point_fails(baseline, tmp_path, capsys):
    res = tmp_path / "other"
    nprobes = {int(v) for v in _headline_nprobes(baseline).split(",")}
    others = ",".join(str(v) for v in (max(nprobes) + 1, max(nprobes) + 2))
    main(["run", "--index", "faiss-ivf-flat", *COMMON, "--nprobe", others, "--out", str(res)])
    capsys.readouterr()
    assert gate(res / "faiss-ivf-flat.json", baseline / "faiss-ivf-flat.json") == 1
    assert "FAIL: recall: result has no point at nprobe=" in capsys.readouterr().out
    # `run --baseline` measures the baseline's headline parameters besides its own sweep
    fixed = tmp_path / "fixed"
    main(["run", "--index", "faiss-ivf-flat", *COMMON, "--nprobe", others,
          "--baseline", str(baseline / "faiss-ivf-flat.json"), "--out", str(fixed)])
    capsys.readouterr()
    assert gate(fixed / "faiss-ivf-flat.json", baseline / "faiss-ivf-flat.json") == 0


def test_qps_is_gated_as_a_ratio_to_the_peer(baseline, tmp_path, capsys):
    same = tmp_path / "same"
    shutil.copytree(baseline, same)
    assert gate(same / "faiss-ivf-flat.json", baseline / "faiss-ivf-flat.json", "--peer", "faiss-ivf-sq8") == 0
    assert "ok: QPS ratio faiss-ivf-flat/faiss-ivf-sq8 at batch @ 1 thread" in capsys.readouterr().out

    # the peer got twice as fast relative to us in this run: our ratio halved
    peer = json.loads((same / "faiss-ivf-sq8.json").read_text())
    for p in peer["points"]:
        p["qps"] *= 2
    for h in peer["headline"]:
        h["qps"] *= 2
        h["qps_paired"] *= 2  # the interleaved re-timing the ratio is taken from
    (same / "faiss-ivf-sq8.json").write_text(json.dumps(peer))
    assert gate(same / "faiss-ivf-flat.json", baseline / "faiss-ivf-flat.json", "--peer", "faiss-ivf-sq8") == 1
    out = capsys.readouterr().out
    assert "FAIL: qps: QPS ratio faiss-ivf-flat/faiss-ivf-sq8 at batch @ 1 thread" in out
    assert "(down 50%, allowed 10%)" in out


def test_gate_usage_errors(baseline, tmp_path, capsys):
    assert gate(baseline / "faiss-ivf-flat.json", baseline / "faiss-ivf-flat.json", "--peer", "faiss-hnsw") == 2
    assert "no result for peer 'faiss-hnsw'" in capsys.readouterr().err
    assert gate(tmp_path / "nope.json", baseline / "faiss-ivf-flat.json") == 2
    assert "no such result file" in capsys.readouterr().err


def test_a_damaged_baseline_is_a_clear_error_not_a_traceback(baseline, tmp_path, capsys):
    # valid JSON with the schema but a broken structure (hand-edited, merged badly) used to
    # end in a KeyError/TypeError traceback and exit 1, which reads as "gate failed"
    good = json.loads((baseline / "faiss-ivf-flat.json").read_text())
    for name, damage in [("headline", "oops"), ("headline", [{"mode": "batch"}]), ("dataset", {}), ("run", [])]:
        bad = tmp_path / "bad.json"
        bad.write_text(json.dumps({**good, name: damage}))
        assert gate(baseline / "faiss-ivf-flat.json", bad) == 2
        assert gate(bad, baseline / "faiss-ivf-flat.json") == 2
        err = capsys.readouterr().err
        assert f"not a well-formed vdbbench result ({name} must be" in err


def test_a_peer_result_from_another_dataset_is_refused(baseline, tmp_path, capsys):
    # two runs into one --out: ours measured again on other data, the peer's file left from the
    # first run; the ratio of the two is of nothing, and the gate used to pass on it
    same = tmp_path / "same"
    shutil.copytree(baseline, same)
    peer = json.loads((same / "faiss-ivf-sq8.json").read_text())
    peer["dataset"].update(name="synth-sift-6k", sha256="0" * 64)
    (same / "faiss-ivf-sq8.json").write_text(json.dumps(peer))
    assert gate(same / "faiss-ivf-flat.json", baseline / "faiss-ivf-flat.json", "--peer", "faiss-ivf-sq8") == 2
    err = capsys.readouterr().err
    assert "was measured on synth-sift-6k" in err and "not the same run" in err


def test_a_baseline_from_before_a_knob_names_its_point_at_zero():
    # benchmarks/baselines/synth-sift-20k predates `reorder`: its headline {nprobe, rerank} is
    # the result's point with reorder 0 (off), not a missing one; any other value is not it.
    from vdbbench.bench.gate import _same_point

    assert _same_point({"nprobe": 18, "rerank": 0, "reorder": 0}, {"nprobe": 18, "rerank": 0})
    assert not _same_point({"nprobe": 18, "rerank": 0, "reorder": 100}, {"nprobe": 18, "rerank": 0})
    assert not _same_point({"nprobe": 18, "reorder": 0}, {"nprobe": 18, "rerank": 0})
    assert not _same_point({"nprobe": 19, "rerank": 0, "reorder": 0}, {"nprobe": 18, "rerank": 0})
