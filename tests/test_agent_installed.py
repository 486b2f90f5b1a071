"""The agent command line as a user types it, from a NON-editable install: a wheel built once per
test session (`pip wheel`: maturin's PEP 517 backend, as `pip install .` builds it), installed in
a temporary virtualenv, run from a checkout with the default runs folder, driven by a loopback
OpenAI-compatible endpoint with a scripted model (test_agent_loop.FakeEndpoint)."""

from __future__ import annotations

import json
import os
import re
import shlex
import shutil
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from test_agent_loop import IMPROVE, FakeEndpoint, edit
from vdbbench.agent.core.journal import read_events

ROOT = Path(__file__).resolve().parents[1]
FIXTURE = ROOT / "tests" / "fixtures" / "agent_task"

pytestmark = pytest.mark.skipif(shutil.which("cargo") is None or shutil.which("git") is None,
                                reason="needs a Rust toolchain (cargo) and git")


def readme_agent_command() -> list[str]:
    """The `vdbbench agent run ...` line of the README's agent section, as argv after `vdbbench`."""
    text = (ROOT / "README.md").read_text()
    section = text[text.index("## The agent loop"):]
    block = re.search(r"```bash\n(.*?)```", section, re.S)
    assert block, "the README's agent section has no ```bash block"
    for line in block.group(1).splitlines():
        words = shlex.split(line, comments=True)
        if words[:3] == ["vdbbench", "agent", "run"]:
            return words[1:]
    raise AssertionError("the README's agent section runs no `vdbbench agent run`")


def with_value(argv: list[str], flag: str, value: str) -> list[str]:
    argv = list(argv)
    argv[argv.index(flag) + 1] = value
    return argv


@pytest.fixture(scope="session")
def installed(tmp_path_factory) -> dict:
    """A wheel of this checkout, built once, installed (not editable) in a fresh virtualenv whose
    dependencies come from the test environment's site-packages; returns its paths and the
    build time."""
    root = tmp_path_factory.mktemp("installed")
    wheels = root / "wheels"
    t0 = time.monotonic()
    # This environment's `pip` command, as the README's install line runs it: maturin gives cargo
    # the path of the interpreter it was started from (PYO3_PYTHON), and any other path (a
    # `maturin build` finding .../python on PATH, or `python -m pip`, where the pip script runs
    # .../python3) made cargo rebuild pyo3 and relink the fat-LTO extension instead of reusing
    # the editable install's build.
    pip = _pip_script()
    cmd = [*([str(pip)] if pip else [sys.executable, "-m", "pip"]), "wheel", "--no-deps", "-w", str(wheels), str(ROOT)]
    out = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, timeout=1800)
    assert out.returncode == 0, out.stderr[-3000:]
    build_s = time.monotonic() - t0
    wheel = next(wheels.glob("vdbbench-*.whl"))
    venv = root / "venv"
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
    py = venv / "bin" / "python"
    subprocess.run([str(py), "-m", "pip", "install", "-q", "--no-deps", "--no-index", str(wheel)], check=True)
    site = Path(subprocess.run([str(py), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
                               capture_output=True, text=True, check=True).stdout.strip())
    # numpy, openai, scipy... from this environment, after the venv's own site-packages; plain
    # folders on sys.path, so this environment's editable vdbbench hook is not loaded.
    deps = [p for p in sys.path if p.endswith("site-packages") and Path(p).is_dir()]
    (site / "zz_test_deps.pth").write_text("\n".join(deps) + "\n")
    where = subprocess.run([str(py), "-c", "import vdbbench, vdbbench.agent.session.prompts as p; print(vdbbench.__file__); print(p.packaged())"],
                           capture_output=True, text=True, check=True, env=_clean_env()).stdout.split()
    assert all(w.startswith(str(venv)) for w in where), f"not the installed package: {where}"
    print(f"\nwheel built in {build_s:.0f} s ({' '.join(cmd[:3])})")
    return {"bin": venv / "bin" / "vdbbench", "python": py, "build_s": build_s}


def _pip_script() -> Path | None:
    """The `pip` script beside this interpreter when its #! line runs this same interpreter."""
    pip = Path(sys.executable).with_name("pip")
    try:
        shebang = pip.read_text(errors="replace").splitlines()[0]
        return pip if shebang.startswith("#!") and os.path.samefile(shebang[2:].split()[0], sys.executable) else None
    except (OSError, IndexError, UnicodeDecodeError):
        return None


def _clean_env(**extra) -> dict:
    """The environment of a user's shell: no PYTHONPATH into this checkout's sources."""
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "VIRTUAL_ENV")}
    env.update(OPENAI_API_KEY="test-key", COLUMNS="200", **extra)
    return env


@pytest.fixture
def agent_env(tmp_path) -> dict:
    """A private data cache, and the agent tests' shared cargo target folder."""
    return _clean_env(VDBBENCH_DATA=str(tmp_path / "data"),
                      VDBBENCH_AGENT_TARGET_DIR=os.environ.get("VDBBENCH_AGENT_TARGET_DIR") or str(ROOT / "target" / "agent-fixture"))


def test_readme_agent_command_as_typed_from_a_checkout(installed, agent_env, tmp_path):
    """From a clone of this repository, the README's command with only the model and endpoint
    filled in: default runs folder (relative), relative task card, packaged prompts; then the
    report of that run, named by its folder under runs/."""
    checkout = tmp_path / "checkout"
    subprocess.run(["git", "clone", "-q", str(ROOT), str(checkout)], check=True)
    argv = readme_agent_command()
    assert argv[argv.index("--task") + 1] == "agent/tasks/optimize-ivf.toml" and "--runs-dir" not in argv
    server = FakeEndpoint([{"content": "Looking around first.",
                            "tool_calls": [("read_file", {"path": "rust_vdb/core/src/lib.rs", "start_line": 1, "end_line": 5}),
                                           ("submit", {"message": "nothing changed yet"})]}])
    try:
        argv = with_value(with_value(argv, "--model", "scripted-model"), "--base-url", server.base_url)
        proc = subprocess.run([str(installed["bin"]), *argv], cwd=checkout, env=agent_env, capture_output=True,
                              text=True, timeout=1500)
    finally:
        server.close()
    assert proc.returncode == 0, proc.stderr[-3000:]
    runs = list((checkout / "runs").iterdir())
    assert len(runs) == 1 and runs[0].name.endswith("optimize-ivf")
    events = read_events(runs[0] / "journal.jsonl")
    assert [d["outcome"] for d in events if d["type"] == "decision"] == ["no_change"]
    baseline = next(e for e in events if e["type"] == "evaluation" and e["best"] is None)
    ref = next(e for e in events if e["type"] == "reference")
    assert ref["source"] == "start" and ref["qps"] == baseline["candidate"]["qps"] and ref["cpu"] and len(ref["commit"]) == 40
    system = server.requests[0]["messages"][0]["content"]
    assert "## The machine" in system and "- CPU: " in system and "- SIMD: " in system
    assert "Timing: each timed repeat" in system
    # The user's checkout is untouched apart from the (ignored) runs folder.
    status = subprocess.run(["git", "status", "--porcelain"], cwd=checkout, capture_output=True, text=True).stdout
    assert status.strip() == ""
    rep = subprocess.run([str(installed["bin"]), "agent", "report", runs[0].name], cwd=checkout, env=agent_env,
                         capture_output=True, text=True, timeout=300)
    assert rep.returncode == 0, rep.stderr[-3000:]
    assert "reference" in rep.stdout and (runs[0] / "staircase.png").exists()


def test_card_outside_the_repository_killed_and_resumed(installed, agent_env, tmp_path):
    """A user's own card in a folder of its own (relative start repository, its own system
    prompt), run with relative paths from a working folder; SIGKILL after an accepted change,
    the card's prompts folder removed, then `vdbbench agent resume NAME` carries on."""
    engine = tmp_path / "engine"
    shutil.copytree(FIXTURE, engine, ignore=shutil.ignore_patterns("target", "task.toml"))
    for cmd in (["init", "-q", "-b", "main"], ["add", "-A"], ["-c", "user.name=u", "-c", "user.email=u@x", "commit", "-q", "-m", "engine"]):
        subprocess.run(["git", *cmd], cwd=engine, check=True)
    cards = tmp_path / "cards"
    (cards / "my-prompts").mkdir(parents=True)
    (cards / "my-prompts" / "system.md").write_text("You are the MY-OWN-PROMPT engineer. Use the tools.\n")
    card = (FIXTURE / "task.toml").read_text().replace('repo = "."', 'repo = "../engine"')
    card = card.replace('[task]\nname = "fixture"', '[task]\nname = "my-card"\nprompts = "my-prompts"')
    (cards / "my-card.toml").write_text(card)
    work = tmp_path / "work"
    work.mkdir()

    release, holding = threading.Event(), threading.Event()
    journal = work / "runs" / "mine" / "journal.jsonl"
    tries = []

    def then():
        """Resubmit while a loaded machine hides the 4x gain (at most 3 times), then hold the
        model call open until the process is killed."""
        outcomes = [d["outcome"] for d in read_events(journal) if d["type"] == "decision"]
        if outcomes and outcomes[-1] != "accepted" and len(tries) < 3:
            tries.append(outcomes[-1])
            return {"tool_calls": [("submit", {"message": "one pass"})]}
        holding.set()
        release.wait(120)
        return {"content": "..."}

    server = FakeEndpoint([{"tool_calls": [edit(IMPROVE), ("submit", {"message": "one pass"})]}, then, then, then, then])
    proc = subprocess.Popen([str(installed["bin"]), "agent", "run", "--task", "../cards/my-card.toml", "--model", "m",
                             "--base-url", server.base_url, "--run-id", "mine"],
                            cwd=work, env=agent_env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, start_new_session=True)
    try:
        deadline = time.monotonic() + 900
        while time.monotonic() < deadline and not holding.is_set():
            assert proc.poll() is None, proc.stdout.read().decode()[-3000:]
            time.sleep(0.2)
        decided = [d for d in read_events(journal) if d["type"] == "decision"]
        accepted = [d for d in decided if d["outcome"] == "accepted"]
        assert len(accepted) == 1, [(d["outcome"], d["reason"]) for d in decided]
        os.killpg(proc.pid, signal.SIGKILL)  # mid-session: a model call is in flight
        proc.wait(30)
    finally:
        release.set()
        server.close()
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
    assert "MY-OWN-PROMPT" in server.requests[0]["messages"][0]["content"]
    shutil.rmtree(cards / "my-prompts")  # the run folder keeps its own copy

    server = FakeEndpoint([{"tool_calls": [("submit", {"message": "unchanged"})]}])
    try:
        out = subprocess.run([str(installed["bin"]), "agent", "resume", "mine", "--base-url", server.base_url, "--quiet"],
                             cwd=work, env=agent_env, capture_output=True, text=True, timeout=600)
    finally:
        server.close()
    assert out.returncode == 0, out.stderr[-3000:]
    events = read_events(journal)
    assert [d["outcome"] for d in events if d["type"] == "decision"] == tries + ["accepted", "no_change"]
    assert [e["resumed"] for e in events if e["type"] == "session_start"] == [False, True]
    first = server.requests[0]["messages"]
    # the card's own system prompt, unchanged all session; the best goes in the resume message
    assert "MY-OWN-PROMPT" in first[0]["content"] and f"{accepted[0]['qps']:,.0f} QPS" in first[1]["content"]
    assert "one pass" in first[1]["content"] and "has resumed" in first[1]["content"]  # packaged resume.md
    assert json.loads((work / "runs" / "mine" / "session.json").read_text())["card_path"] == str(cards / "my-card.toml")
