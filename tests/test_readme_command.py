"""The README's first command, run as its job on the small generated set `synth-sift-20k`."""

from __future__ import annotations

import json
import os
import re
import shlex
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


def readme_run_command() -> list[str]:
    """The `vdbbench run ...` of the README's first ```bash block, as argv after `vdbbench`."""
    text = (ROOT / "README.md").read_text()
    block = re.search(r"```bash\n(.*?)```", text, re.S)
    assert block, "README.md has no ```bash block"
    for part in re.split(r"&&|\n|;", block.group(1)):
        words = shlex.split(part)
        if words[:2] == ["vdbbench", "run"]:
            return words[1:]
    raise AssertionError("the README's first bash block runs no `vdbbench run`")


def with_option(argv: list[str], flag: str, value: str) -> list[str]:
    if flag in argv:
        argv = list(argv)
        argv[argv.index(flag) + 1] = value
        return argv
    return argv + [flag, value]


def test_readme_first_command_on_synth_sift_20k(tmp_path):
    pytest.importorskip("vdbbench._rust_vdb")
    argv = readme_run_command()
    assert "--index" in argv and argv[argv.index("--index") + 1] == "ivf"
    argv = with_option(argv, "--dataset", "synth-sift-20k")
    argv = with_option(argv, "--compare", "faiss-ivf-flat")
    argv = with_option(argv, "--out", str(tmp_path / "out"))
    argv += ["--repeats", "1", "--single-queries", "100"]  # keep the test quick
    env = {**os.environ, "VDBBENCH_DATA": str(tmp_path / "data"), "COLUMNS": "200",
           "PYTHONPATH": os.pathsep.join(filter(None, [str(ROOT / "python"), os.environ.get("PYTHONPATH")]))}
    proc = subprocess.run([sys.executable, "-m", "vdbbench", *argv], capture_output=True, text=True,
                          env=env, timeout=600)
    assert proc.returncode == 0, proc.stderr[-3000:]
    out = tmp_path / "out"
    ours = json.loads((out / "ivf.json").read_text())
    peer = json.loads((out / "faiss-ivf-flat.json").read_text())
    assert ours["dataset"]["name"] == "synth-sift-20k" and ours["dataset"]["synthetic"] is True
    assert ours["dataset"]["sha256"] == peer["dataset"]["sha256"]
    assert all(h["recall10"] >= 0.95 for h in ours["headline"])
    assert ours["machine"]["simd"]
    assert (out / "pareto.png").read_bytes()[:4] == b"\x89PNG"
    # the table: our headline and the peer's with the ratio ivf / faiss-ivf-flat
    assert "ivf / this" in proc.stdout
    row = next(line for line in proc.stdout.splitlines() if "faiss-ivf-flat" in line and "batch @ 1t" in line)
    mine = next(h for h in ours["headline"] if h["mode"] == "batch" and h["threads"] == 1)
    theirs = next(h for h in peer["headline"] if h["mode"] == "batch" and h["threads"] == 1)
    # the ratio comes from the interleaved re-timing of both headline points
    assert len(mine["qps_paired_samples"]) == len(theirs["qps_paired_samples"]) == 1
    ratio = mine["qps_paired"] / theirs["qps_paired"]
    assert f"{ratio:.2f}x" in row
