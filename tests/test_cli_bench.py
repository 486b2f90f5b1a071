"""`vdbbench run / plot / compare` from the command line: files written, exit codes, messages."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")

import pytest

from vdbbench.bench.results import headline_entry
from vdbbench.cli import main

DATASET = "synth-sift-5k"  # small: the README test covers synth-sift-20k


@pytest.fixture(scope="module")
def data_dir(tmp_path_factory):
    return tmp_path_factory.mktemp("vdbbench-data")


@pytest.fixture(autouse=True)
def _env(data_dir, monkeypatch):
    monkeypatch.setenv("VDBBENCH_DATA", str(data_dir))


def run(*argv) -> int:
    return main(["run", "--dataset", DATASET, "--repeats", "1", "--single-queries", "50", *argv])


def test_run_with_a_peer_writes_results_plot_and_ratio_table(tmp_path, capsys):
    out = tmp_path / "out"
    rc = run("--index", "faiss-ivf-sq8-refine", "--compare", "faiss-ivf-flat", "--threads", "1", "--rerank", "40",
             "--out", str(out))
    assert rc == 0
    for name in ("faiss-ivf-sq8-refine", "faiss-ivf-flat"):
        r = json.loads((out / f"{name}.json").read_text())
        assert r["schema"] == "vdbbench.result/1" and r["dataset"]["name"] == DATASET
        assert {(h["mode"], h["threads"]) for h in r["headline"]} == {("batch", 1), ("single", 1)}
        assert all(h["recall10"] >= 0.95 for h in r["headline"])
    assert (out / "pareto.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    table = (out / "table.md").read_text()
    assert "faiss-ivf-sq8-refine / this" in table and "x |" in table
    ref = json.loads((out / "faiss-ivf-sq8-refine.json").read_text())
    assert ref["run"]["paired_with"] == ["faiss-ivf-flat", "faiss-ivf-sq8-refine"]
    assert all(h["qps_paired"] > 0 for h in ref["headline"])
    # beside each paired ratio, the lowest and highest ratio of single rounds of the re-timing
    flat = json.loads((out / "faiss-ivf-flat.json").read_text())
    mine, theirs = headline_entry(ref, "batch", 1), headline_entry(flat, "batch", 1)
    rounds = [a / b for a, b in zip(mine["qps_paired_samples"], theirs["qps_paired_samples"])]
    row = next(line for line in table.splitlines() if line.startswith("| faiss-ivf-flat | batch @ 1t |"))
    assert row.endswith(f"x ({min(rounds):.2f}-{max(rounds):.2f}) |")
    # and the knobs each index swept: the refine peer its own k_factor range, not our --rerank 40
    assert "- faiss-ivf-sq8-refine: nprobe " in table and "; k_factor 1,2,4,8,16" in table
    assert ref["run"]["knobs"]["k_factor"]["values"] == [1, 2, 4, 8, 16]
    printed = capsys.readouterr().out
    assert "faiss-ivf-flat" in printed and "1.00x" in printed


def test_our_index_reports_bytes_per_vector_and_its_share_of_the_measured_bandwidth(tmp_path):
    out = tmp_path / "bw"
    assert run("--index", "ivf", "--threads", "1", "--rerank", "0,40", "--out", str(out)) == 0
    r = json.loads((out / "ivf.json").read_text())
    assert r["machine"]["read_gbps_1t"] > 0.1
    table = (out / "table.md").read_text()
    assert "Memory and bandwidth" in table and f"{r['machine']['read_gbps_1t']:.1f} GB/s" in table
    rows = [line for line in table.splitlines() if line.startswith("| ivf | ") and "of 1 core" in line]
    assert {line.split(" | ")[1] for line in rows} == {"batch @ 1t", "single @ 1t"}


def test_missed_target_still_writes_files_and_exits_1(tmp_path, capsys):
    out = tmp_path / "miss"
    rc = run("--index", "faiss-ivf-flat", "--nprobe", "1", "--mode", "batch", "--threads", "1", "--out", str(out))
    assert rc == 1
    r = json.loads((out / "faiss-ivf-flat.json").read_text())
    assert r["headline"][0]["qps"] is None and r["points"][0]["recall10"] < 0.95
    assert "reached no recall10 >= 0.95" in capsys.readouterr().err


@pytest.mark.parametrize(
    "argv, message",
    [
        (["--index", "faiss-ivf-flat", "--threads", "0"], "--threads expects integers >= 1, got '0'"),
        (["--index", "annoy"], "unknown index 'annoy'; valid: ivf, flat, faiss-ivf-flat"),
        (["--index", "faiss-ivf-flat", "--mode", "fast"], "--mode expects batch, single and/or concurrent"),
        (["--index", "faiss-ivf-flat", "--nprobe", "1,x"], "--nprobe expects comma-separated integers"),
        (["--index", "faiss-ivf-flat", "--nprobe", "100000"], "nprobe 100000 is outside 1..nlist=283"),
        (["--index", "faiss-ivf-sq8-refine", "--rerank", "5"], "--rerank=5 is below k=10; expected 0 (u8 results alone) or rerank >= k"),
        (["--index", "ivf", "--probe-ratio", "0,0.5"], "--probe-ratio=0.5: expected 0 (off) or a finite ratio >= 1"),
        (["--index", "ivf", "--probe-ratio", "1.3,x"], "--probe-ratio expects comma-separated numbers"),
        (["--index", "faiss-ivf-flat", "--target-recall", "1.5"], "--target-recall expects a value in (0, 1]"),
        # the engine refuses threads= above its limit: that was 'ivf failed and was skipped', exit 1
        (["--index", "ivf", "--threads", "1,100000"], "--threads 100000 exceeds the 1024 threads per call"),
        (["--index", "faiss-ivf-flat", "--compare", "flat", "--threads", "2000"], "--threads 2000 exceeds the 1024"),
        (["--index", "faiss-ivf-flat", "--recall-confidence", "1.0"], "--recall-confidence expects 0 (off) or"),
        (["--index", "faiss-ivf-flat", "--recall-confidence", "0.2"], "--recall-confidence expects 0 (off) or"),
        (["--index", "faiss-ivf-flat", "--knob", "k_factor=1,2"], "--knob expects INDEX:KNOB=V1,V2,..."),
        (["--index", "faiss-ivf-flat", "--knob", "faiss-ivfpq-fs:k_factor=1,2"],
         "--knob names 'faiss-ivfpq-fs', which this run does not measure (faiss-ivf-flat)"),
        (["--index", "faiss-ivf-flat", "--knob", "faiss-ivf-flat:k_factor=1,2"],
         "faiss-ivf-flat: no knob 'k_factor' to sweep (its knobs: nprobe)"),
    ],
)
def test_bad_usage_exits_2_with_a_clear_message(argv, message, tmp_path, capsys):
    assert run(*argv, "--out", str(tmp_path / "o")) == 2
    err = capsys.readouterr().err
    assert message in err
    assert "Traceback" not in err


def test_unknown_dataset_lists_valid_ones(tmp_path, capsys):
    assert main(["run", "--index", "faiss-ivf-flat", "--dataset", "sift-2m-typo", "--out", str(tmp_path)]) == 2
    err = capsys.readouterr().err
    assert "sift-2m-typo" in err and "sift-1m" in err and "synth-sift-20k" in err


def test_unwritable_output_directory(tmp_path, capsys):
    blocker = tmp_path / "file"
    blocker.write_text("not a directory")
    assert run("--index", "faiss-ivf-flat", "--out", str(blocker / "sub")) == 2
    assert f"cannot write results to {blocker / 'sub'}" in capsys.readouterr().err


def test_bad_usage_from_the_real_entry_point_has_no_traceback(tmp_path):
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[1] / "python")}
    proc = subprocess.run(
        [sys.executable, "-m", "vdbbench", "run", "--index", "ivf", "--threads", "0", "--out", str(tmp_path)],
        capture_output=True, text=True, env=env, timeout=120,
    )
    assert proc.returncode == 2
    assert proc.stderr.strip().splitlines()[-1] == "vdbbench run: error: --threads expects integers >= 1, got '0'"
    assert "Traceback" not in proc.stderr


def test_plot_and_compare_read_result_files(tmp_path, capsys):
    out = tmp_path / "r"
    assert run("--index", "faiss-ivf-flat", "--compare", "faiss-ivf-sqfp16", "--threads", "1", "--out", str(out)) == 0
    png = tmp_path / "fronts.png"
    assert main(["plot", str(out / "faiss-ivf-flat.json"), str(out / "faiss-ivf-sqfp16.json"), "-o", str(png)]) == 0
    assert png.stat().st_size > 10_000 and png.read_bytes()[:4] == b"\x89PNG"
    capsys.readouterr()
    assert main(["compare", str(out / "faiss-ivf-flat.json"), str(out / "faiss-ivf-sqfp16.json")]) == 0
    rows = {}  # the table's body rows: what -> [A, B, B / A]
    for line in capsys.readouterr().out.splitlines():
        cells = [c.strip() for c in line.strip("│ ").split("│")]
        if len(cells) == 4:
            rows[cells[0]] = cells[1:]
    a, b = (json.loads((out / f"{n}.json").read_text()) for n in ("faiss-ivf-flat", "faiss-ivf-sqfp16"))
    qa, qb = (headline_entry(r, "batch", 1)["qps"] for r in (a, b))
    assert rows["headline QPS batch @ 1t"] == [f"{qa:,.0f}", f"{qb:,.0f}", f"{qb / qa:.2f}x"]
    ba, bb = a["build"]["bytes"], b["build"]["bytes"]
    assert bb < ba and rows["bytes"][2] == f"{bb / ba:.2f}x"  # f16 vectors: about half the bytes
    # a file that is not a result: exit 2 and why
    bogus = tmp_path / "bogus.json"
    bogus.write_text("{}")
    assert main(["compare", str(bogus), str(out / "faiss-ivf-flat.json")]) == 2
    assert "not a vdbbench result" in capsys.readouterr().err


def test_unreachable_dataset_is_a_clear_message_not_a_traceback(unreachable_dataset, tmp_path, capsys):
    """A registered set that cannot be downloaded (and has no offline replica) exits 2 saying why."""
    rc = main(["run", "--index", "ivf", "--dataset", unreachable_dataset, "--out", str(tmp_path / "out")])
    err = capsys.readouterr().err
    assert rc == 2
    assert "cannot load dataset 'away'" in err and "127.0.0.1:9/away.hdf5" in err
    assert "Traceback" not in err


@pytest.mark.parametrize("duration", ["nan", "inf"])
def test_a_duration_that_is_not_a_finite_number_of_seconds_is_bad_usage(duration, tmp_path, capsys):
    # nan and inf passed the `<= 0` check, and --mode concurrent then ran its clients forever
    rc = run("--index", "flat", "--mode", "concurrent", "--clients", "1", "--threads", "1",
             "--duration", duration, "--out", str(tmp_path / "o"))
    assert rc == 2
    assert "--duration expects seconds > 0" in capsys.readouterr().err


def test_k_beyond_the_ground_truth_is_bad_usage_not_a_failed_index(tmp_path, capsys):
    # the ground truth holds 100 neighbours per query: --k 101 used to build the index, then
    # report "ivf failed and was skipped: ValueError: ground-truth distances ..." and exit 1
    rc = run("--index", "flat", "--mode", "batch", "--threads", "1", "--k", "101", "--out", str(tmp_path / "o"))
    assert rc == 2
    err = capsys.readouterr().err
    assert "--k 101 exceeds the 100 ground-truth neighbours per query" in err
    assert "failed" not in err


def test_the_cli_thread_limit_is_the_engines():
    """The CLI asks the engine for its limit: a search at it runs, one above is refused."""
    import numpy as np

    import vdbbench as vb
    from vdbbench.bench.ours import engine_max_threads

    most = engine_max_threads()
    flat = vb.FlatIndex(4)
    flat.add(np.eye(4, dtype=np.float32))
    flat.search(np.eye(4, dtype=np.float32)[:1], k=1, threads=most)
    with pytest.raises(vb.InvalidInput, match=f"threads={most + 1}"):
        flat.search(np.eye(4, dtype=np.float32)[:1], k=1, threads=most + 1)


def test_a_run_into_a_folder_of_another_dataset_s_results_is_refused_before_building(tmp_path, capsys):
    # ivf.json and faiss-ivf-flat.json of synth-sift-20k: a run on another dataset wrote its files
    # beside them without a word, a mixture the readers (report, plot, gate) then refuse
    import shutil

    baseline = Path(__file__).resolve().parents[1] / "benchmarks" / "baselines" / "synth-sift-20k"
    out = tmp_path / "shared"
    out.mkdir()
    for name in ("ivf.json", "faiss-ivf-flat.json"):
        shutil.copy(baseline / name, out / name)
    before = {f.name: f.read_bytes() for f in out.iterdir()}
    assert run("--index", "flat", "--mode", "batch", "--threads", "1", "--out", str(out)) == 2
    err = capsys.readouterr().err
    assert f"{out} already holds results measured on synth-sift-20k" in err
    assert "faiss-ivf-flat.json, ivf.json" in err and "pass another --out" in err
    assert "building" not in err and "Traceback" not in err
    assert {f.name: f.read_bytes() for f in out.iterdir()} == before


def test_a_rerun_and_a_resume_into_the_same_folder_on_the_same_data_still_run(tmp_path, capsys):
    out = tmp_path / "same"
    out.mkdir()
    (out / "notes.json").write_text('{"not": "a result"}')  # foreign JSON is not a result: passed over
    argv = ("--index", "flat", "--mode", "batch", "--threads", "1", "--out", str(out))
    assert run(*argv) == 0
    assert run(*argv) == 0
    assert run(*argv, "--resume") == 0
    # the same data with another query count is other data to the readers (plot, page)
    assert run(*argv, "--queries", "100") == 2
    assert f"already holds results measured on {DATASET} (nq=" in capsys.readouterr().err
