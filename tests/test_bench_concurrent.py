"""Concurrent clients (`--mode concurrent`) and timing only the points near the front."""

from __future__ import annotations

import json
import os
import threading

os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")

import numpy as np
import pytest

from vdbbench.bench import results
from vdbbench.bench.concurrent import run_clients
from vdbbench.bench.frontier import select_for_timing
from vdbbench.cli import main


def test_every_client_issues_one_query_per_call_from_its_own_offset():
    queries = np.arange(40, dtype=np.float32).reshape(40, 1)
    seen, lock = [], threading.Lock()

    def search_one(q):
        assert q.shape == (1, 1)
        with lock:
            seen.append((threading.get_ident(), int(q[0, 0])))

    level = run_clients(search_one, queries, clients=4, duration_s=0.2)
    assert level["clients"] == 4 and level["calls"] > 0 and level["qps"] > 0
    assert level["p50_ms"] <= level["p99_ms"] <= level["p999_ms"]
    timed = seen[10:]  # the first ten calls are the warm-up, from this thread
    assert len(timed) == level["calls"] and len({t for t, _ in timed}) == 4
    # each client's first query is its own: 0, 10, 20, 30
    firsts = {}
    for t, q in timed:
        firsts.setdefault(t, q)
    assert sorted(firsts.values()) == [0, 10, 20, 30]


def test_a_failing_search_stops_the_clients_and_raises_here():
    calls = []

    def search_one(q):
        calls.append(1)
        if len(calls) > 15:
            raise RuntimeError("engine fell over")

    with pytest.raises(RuntimeError, match="engine fell over"):
        run_clients(search_one, np.zeros((5, 2), np.float32), clients=3, duration_s=5.0)
    with pytest.raises(ValueError, match="clients must be >= 1"):
        run_clients(search_one, np.zeros((5, 2), np.float32), clients=0)


def _swept(points):
    return [{"params": p, "recall10": r, "qps_estimate": q} for p, r, q in points]


def test_only_points_near_the_front_around_the_target_are_timed():
    swept = _swept([
        ({"nprobe": 1, "rerank": 0}, 0.30, 90_000.0),   # hopeless
        ({"nprobe": 8, "rerank": 0}, 0.90, 30_000.0),
        ({"nprobe": 16, "rerank": 0}, 0.94, 20_000.0),  # just under: shows the crossing
        ({"nprobe": 24, "rerank": 0}, 0.955, 15_000.0),  # cheapest reaching it
        ({"nprobe": 48, "rerank": 0}, 0.98, 8_000.0),   # reaches it, at half the speed
        ({"nprobe": 16, "rerank": 160}, 0.951, 5_000.0),  # cheapest of its rerank: kept (headline rule)
        ({"nprobe": 32, "rerank": 160}, 0.97, 3_000.0),  # undercut and slow
    ])
    keys = select_for_timing(swept, 0.95)
    timed = [p["params"] for p in swept if results.point_key(p["params"]) in keys]
    assert timed == [{"nprobe": 8, "rerank": 0}, {"nprobe": 16, "rerank": 0}, {"nprobe": 24, "rerank": 0},
                     {"nprobe": 16, "rerank": 160}]
    # nothing reaches the target: the closest misses
    keys = select_for_timing(swept[:3], 0.95)
    assert keys == {results.point_key(p["params"]) for p in swept[:3]}
    # a point recorded before estimates existed is always timed
    assert results.point_key({"nprobe": 1, "rerank": 0}) in select_for_timing(
        [{**swept[0], "qps_estimate": None}] + swept[1:], 0.95)


@pytest.fixture
def data(tmp_path_factory, monkeypatch):
    monkeypatch.setenv("VDBBENCH_DATA", str(tmp_path_factory.getbasetemp() / "data"))


def test_concurrent_run_of_ours_and_a_peer_writes_levels_table_and_plot(data, tmp_path, capsys):
    out = tmp_path / "out"
    rc = main(["run", "--index", "ivf", "--compare", "faiss-ivf-flat", "--dataset", "synth-sift-5k",
               "--threads", "1", "--mode", "single,concurrent", "--clients", "1,2,4", "--duration", "0.2",
               "--single-queries", "50", "--repeats", "1", "--rerank", "0", "--out", str(out)])
    assert rc == 0, capsys.readouterr().err
    printed = capsys.readouterr().out
    for name in ("ivf", "faiss-ivf-flat"):
        r = json.loads((out / f"{name}.json").read_text())
        assert r["schema"] == "vdbbench.result/1" and r["schema_minor"] == results.SCHEMA_MINOR
        c = r["concurrent"]
        assert [lv["clients"] for lv in c["levels"]] == [1, 2, 4]
        assert all(lv["qps"] > 0 and lv["p50_ms"] <= lv["p99_ms"] <= lv["p999_ms"] for lv in c["levels"])
        single = results.headline_entry(r, "single", 1)
        assert c["params"] == single["params"] and c["recall10"] >= 0.95 and c["reaches_target"]
        # the sweep: every point's recall; which were timed; the timed ones are the points
        assert {results.point_key(p["params"]) for p in r["points"]} == {
            results.point_key(s["params"]) for s in r["swept"] if s["timed"]}
        assert any(not s["timed"] for s in r["swept"]) and r["run"]["time_points"] == "frontier"
        assert {p["mode"] for p in r["points"]} == {"single"}
    assert (out / "concurrent.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert "Concurrent clients" in (out / "table.md").read_text()
    assert "concurrent clients, one query per call" in printed


def test_a_concurrent_only_run_says_what_it_measured(data, tmp_path, capsys, monkeypatch):
    # it ended on 'done: 0 points; target missed' and wrote table.md with an empty headline table
    # (a concurrent run has no headline), though its levels were measured
    monkeypatch.setenv("COLUMNS", "240")  # the progress line is not cut at 80 columns
    out = tmp_path / "conc"
    rc = main(["run", "--index", "flat", "--dataset", "synth-sift-5k", "--threads", "1", "--mode", "concurrent",
               "--clients", "1,2", "--duration", "0.1", "--out", str(out)])
    err = capsys.readouterr().err
    assert rc == 0, err
    c = json.loads((out / "flat.json").read_text())["concurrent"]
    assert "0 points" not in err and "target missed" not in err
    qps = [f"{lv['qps']:,.0f} QPS @ {lv['clients']} client" for lv in c["levels"]]
    assert f"done: concurrent at exact=1 (recall10 1.0000): {qps[0]}, {qps[1]}s" in err
    table = (out / "table.md").read_text()
    assert "QPS @ recall" not in table and "paired QPS" not in table  # no empty headline table
    assert table.startswith("Concurrent clients (threads, one query per call, 0.1 s per level")
    for lv in c["levels"]:
        assert f"| flat | {lv['clients']} | {lv['qps']:,.0f} | {lv['p50_ms']:.3f} |" in table


def test_bad_concurrent_options_are_usage_errors(data, tmp_path, capsys):
    base = ["run", "--dataset", "synth-sift-5k", "--mode", "concurrent", "--out", str(tmp_path)]
    assert main(base + ["--clients", "0,4"]) == 2
    assert "--clients expects integers >= 1" in capsys.readouterr().err
    assert main(base + ["--duration", "0"]) == 2
    assert "--duration expects seconds > 0" in capsys.readouterr().err
    assert main(["run", "--dataset", "synth-sift-5k", "--mode", "parallel", "--out", str(tmp_path)]) == 2
    assert "batch, single and/or concurrent" in capsys.readouterr().err
