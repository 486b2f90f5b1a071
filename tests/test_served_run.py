"""`vdbbench run --target`: the benchmark as an HTTP client of servers that speak the seed
harness's API. A small Cargo server (tests/fixtures/served_bruteforce: exact search, or wrong on
purpose) is built and started by the run, or started here and named by URL."""

from __future__ import annotations

import json
import os
import socket
from pathlib import Path

import numpy as np
import pytest

from vdbbench.cli import main
from vdbbench.served import client as http
from vdbbench.served.client import ServedError
from vdbbench.served.measure import anti_cheat, score
from vdbbench.served.process import CargoServer, parse_cpus

FIXTURE = Path(__file__).resolve().parent / "fixtures" / "served_bruteforce"
SMALL = ["--dataset", "synth-sift-5k", "--queries", "200", "--warmup", "10", "--rounds", "2"]


def _listening(port: int) -> bool:
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=0.5):
            return True
    except OSError:
        return False


@pytest.fixture(scope="module", autouse=True)
def data_dir(tmp_path_factory):
    """One VDBBENCH_DATA for this file: the small set is generated once, not per test."""
    folder = tmp_path_factory.mktemp("vdbbench-data")
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("VDBBENCH_DATA", str(folder))
        mp.delenv("VDBBENCH_REGISTRY", raising=False)
        yield folder


@pytest.fixture(scope="module")
def built() -> Path:
    """The fixture server built once for this file (cargo reuses its target folder after that)."""
    CargoServer(FIXTURE).build()
    return FIXTURE


def test_a_cargo_folder_is_built_started_measured_and_stopped(built, data_dir, tmp_path, capsys):
    out = tmp_path / "out"
    assert main(["run", "--target", str(built), "--clients", "1,3", *SMALL, "--out", str(out)]) == 0
    r = json.loads((out / "served_bruteforce.json").read_text())
    assert r["schema_minor"] >= 5 and r["index"]["source"] == "served"
    c = r["concurrent"]
    assert c["workers"] == "http" and c["reaches_target"] and c["recall_gate"] == "ids"
    assert [lv["clients"] for lv in c["levels"]] == [1, 3]
    for lv in c["levels"]:
        assert lv["recall10_ids"] == 1.0 and lv["recall10"] == 1.0  # exact search, both ways
        assert lv["errors"] == 0 and lv["calls"] == 200 and len(lv["qps_rounds"]) == 2
        assert lv["anti_cheat"]["passed"] and lv["client_ceiling_qps"] > 0
        assert lv["p50_ms"] <= lv["p95_ms"] <= lv["p99_ms"]
    assert r["served"]["inserted"] == 5_000
    table = (out / "table.md").read_text()
    assert "served_bruteforce" in table and "recall10 ids" in table
    assert (out / "concurrent.png").stat().st_size > 0
    port = int(r["served"]["url"].rsplit(":", 1)[1])
    assert not _listening(port), "the run left the server it started running"
    # the page of that folder shows the served levels beside any in-process ones
    assert main(["report", str(out), "-o", str(tmp_path / "page.html")]) == 0
    assert "served_bruteforce" in (tmp_path / "page.html").read_text()


@pytest.mark.parametrize("mode, why", [("shifted", "recall"), ("fixed", "anti-cheat")])
def test_a_wrong_server_is_measured_and_fails_the_gate(built, data_dir, tmp_path, mode, why, capsys):
    with CargoServer(built, env={"SERVER_MODE": mode}) as srv:
        url = srv.start()
        out = tmp_path / "out"
        rc = main(["run", "--target", url, "--clients", "2", *SMALL, "--out", str(out)])
    assert rc == 1
    r = json.loads(next(out.glob("http-*.json")).read_text())
    lv = r["concurrent"]["levels"][0]
    assert not r["concurrent"]["reaches_target"]
    if why == "recall":
        assert lv["recall10_ids"] < 0.2 and lv["anti_cheat"]["passed"]
    else:
        assert not lv["anti_cheat"]["passed"] and lv["anti_cheat"]["avg_jaccard"] > 0.8
        assert "FAIL" in (out / "table.md").read_text()
    assert "below recall@10" in capsys.readouterr().err


@pytest.mark.skipif(len(os.sched_getaffinity(0)) < 2, reason="pinning apart needs two CPUs")
def test_server_and_clients_pinned_apart(built, data_dir, tmp_path):
    """--client-cpus pins this process's client threads first; the server still starts on the
    other CPU, and the caller's own CPUs are given back after the run."""
    cpus = sorted(os.sched_getaffinity(0))
    before = os.sched_getaffinity(0)
    out = tmp_path / "out"
    assert main(["run", "--target", str(built), "--clients", "2", *SMALL, "--server-cpus", str(cpus[1]),
                 "--client-cpus", str(cpus[0]), "--out", str(out)]) == 0
    r = json.loads((out / "served_bruteforce.json").read_text())
    assert r["served"]["server_cpus"] == str(cpus[1]) and r["concurrent"]["reaches_target"]
    assert os.sched_getaffinity(0) == before


def test_two_targets_are_timed_in_interleaved_rounds_with_ratios(built, data_dir, tmp_path):
    with CargoServer(built) as other:
        url = other.start()
        out = tmp_path / "out"
        assert main(["run", "--target", f"{built},{url}", "--clients", "2", *SMALL, "--out", str(out)]) == 0
    second = json.loads(next(out.glob("http-*.json")).read_text())
    ratio = second["served"]["ratios"]
    assert ratio["over"] == "served_bruteforce"
    one = ratio["by_clients"]["2"]
    assert one["rounds"] == 2 and one["low"] <= one["median"] <= one["high"]
    assert "of served_bruteforce" in (out / "table.md").read_text()


def test_a_server_that_is_not_there_is_said_plainly(data_dir, tmp_path, capsys):
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    rc = main(["run", "--target", f"http://127.0.0.1:{port}", *SMALL, "--out", str(tmp_path / "out")])
    assert rc == 1
    err = capsys.readouterr().err
    assert "bulk insert" in err and "failed" in err


def test_a_folder_that_does_not_build_gives_the_compiler_error(data_dir, tmp_path, capsys):
    bad = tmp_path / "broken"
    (bad / "src").mkdir(parents=True)
    (bad / "Cargo.toml").write_text('[package]\nname = "broken"\nversion = "0.1.0"\nedition = "2021"\n[workspace]\n')
    (bad / "src" / "main.rs").write_text("fn main() { let x: u32 = \"no\"; }\n")
    assert main(["run", "--target", str(bad), *SMALL, "--out", str(tmp_path / "out")]) == 1
    err = capsys.readouterr().err
    assert "cargo build" in err and "mismatched types" in err


@pytest.mark.parametrize("argv, says", [
    (["--target", "ftp://x"], "expected a URL"),
    (["--target", "no/such/folder"], "expected a URL"),
    (["--target", "http://127.0.0.1:1", "--index", "ivf"], "in their own command"),
    (["--target", "http://127.0.0.1:1", "--client", "other=/bin/true"], "kcores=PATH"),
    (["--target", "http://127.0.0.1:1", "--client", "kcores=/no/such/binary"], "not an executable"),
    (["--target", "http://127.0.0.1:1", "--server-cpus", "0-999"], "--server-cpus"),
    (["--target", "http://127.0.0.1:1", "--rounds", "0"], "--rounds"),
    (["--target", "http://127.0.0.1:1", "--clients", "0"], "--clients"),
])
def test_bad_usage_is_one_line_and_exit_2(data_dir, tmp_path, capsys, argv, says):
    assert main(["run", *argv, "--dataset", "synth-sift-5k", "--out", str(tmp_path / "o")]) == 2
    assert says in capsys.readouterr().err


def test_anti_cheat_and_recall_as_the_leaderboard_reads_them():
    rng = np.random.default_rng(0)
    honest = rng.integers(0, 1_000_000, (300, 10))
    assert anti_cheat(honest)["passed"]
    fixed = np.tile(np.arange(10), (300, 1))
    verdict = anti_cheat(fixed)
    assert not verdict["passed"] and verdict["unique_ids"] == 10 and verdict["pairs"] == 500
    gt = np.arange(20).reshape(2, 10)
    got = np.array([[*range(9), 99], [-1] * 10])  # 9 of 10, then a failed request
    assert score(got, gt)["recall_ids"] == pytest.approx(9 / 20)


def test_client_arguments_are_checked_before_any_request():
    with pytest.raises(ValueError, match="NaN or inf"):
        http.query("http://127.0.0.1:1", np.array([[np.nan, 1.0]]))
    with pytest.raises(ValueError, match="2-D"):
        http.insert("http://127.0.0.1:1", np.zeros(4))
    with pytest.raises(ValueError, match="non-negative"):
        http.insert("http://127.0.0.1:1", np.zeros((2, 4)), ids=np.array([0, -1]))
    with pytest.raises(ServedError, match="every request failed"):
        http.query("http://127.0.0.1:1", np.zeros((3, 4)), warmup=0, timeout_s=2)
    with pytest.raises(ValueError):
        parse_cpus("0-x")


def test_the_client_ceiling_is_far_above_what_it_reports_of_a_real_server():
    qps = http.client_ceiling(np.random.default_rng(1).random((50, 128)), clients=2, seconds=0.3)
    assert qps > 1000  # a do-nothing server on loopback: thousands of requests a second at the least


KCORES_LIKE = Path(__file__).resolve().parent / "fixtures" / "kcores_like_client.py"


def test_the_seed_harness_client_runs_on_the_same_data_against_a_fresh_instance(built, tmp_path):
    """--client kcores=PATH: its JSON files are what that client reads (a stand-in with its flags
    inserts them, queries and scores), it runs against a fresh instance the run started, and
    what it printed lands in the result and table.md."""
    out = tmp_path / "out"
    assert main(["run", "--target", str(built), "--clients", "2", *SMALL, "--client", f"kcores={KCORES_LIKE}",
                 "--out", str(out)]) == 0
    r = json.loads((out / "served_bruteforce.json").read_text())
    k = r["served"]["kcores_client"]
    assert k["benchmark"]["recall"] == 1.0 and k["benchmark"]["total_queries"] == 200
    assert "--concurrency" in k["argv"] and "4" in k["argv"]
    assert "the seed harness's own client (concurrency 4)" in (out / "table.md").read_text()


def test_a_failing_other_client_loses_nothing_measured(built, tmp_path, monkeypatch):
    monkeypatch.setenv("KCORES_LIKE_FAIL", "1")
    out = tmp_path / "out"
    assert main(["run", "--target", str(built), "--clients", "2", *SMALL, "--client", f"kcores={KCORES_LIKE}",
                 "--out", str(out)]) == 0
    r = json.loads((out / "served_bruteforce.json").read_text())
    assert r["concurrent"]["levels"][0]["recall10_ids"] == 1.0
    assert "connection refused" in r["served"]["kcores_client"]["error"]
    assert "the seed harness's client failed" in (out / "table.md").read_text()
