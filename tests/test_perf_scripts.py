"""The measurement scripts under benchmarks/perf answer -h/--help from the repository root with
their usage, and refuse a call with too few arguments before they load data."""

import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
SCRIPTS = sorted(p for p in (REPO / "benchmarks" / "perf").glob("*.py") if p.name != "usage.py")


def run(script: Path, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, str(script.relative_to(REPO)), *args], cwd=REPO,
                          capture_output=True, text=True, timeout=120)


def test_scripts_found():
    assert {"ab_batch.py", "ab_single.py", "call_overhead.py", "layout_probe.py"} <= {p.name for p in SCRIPTS}


@pytest.mark.parametrize("script", SCRIPTS, ids=lambda p: p.name)
def test_help_prints_usage_with_its_own_path(script):
    r = run(script, "--help")
    assert r.returncode == 0, r.stderr
    assert "usage" in r.stdout.lower()
    if script.name != "bandwidth.py":  # argparse writes its own usage line
        assert f"benchmarks/perf/{script.name}" in r.stdout


def test_missing_arguments_print_usage_not_a_traceback():
    r = run(REPO / "benchmarks" / "perf" / "ab_batch.py", "synth-sift-20k")
    assert r.returncode == 2
    assert "Usage: python benchmarks/perf/ab_batch.py" in r.stderr and "Traceback" not in r.stderr
