"""Sessions sharing a cargo target folder take turns from a build to the copy of its library."""

from __future__ import annotations

import threading
import time

import pytest

from vdbbench.agent.core import workspace

pytest.importorskip("fcntl")


def test_two_sessions_on_one_target_folder_take_turns(tmp_path):
    spans: dict[str, tuple[float, float]] = {}

    def session(name: str) -> None:
        with workspace._target_turn(tmp_path / "target"):
            t0 = time.perf_counter()
            time.sleep(0.3)  # a build and the copy of its library
            spans[name] = (t0, time.perf_counter())

    threads = [threading.Thread(target=session, args=(n,)) for n in ("a", "b")]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    (a0, a1), (b0, b1) = sorted(spans.values())
    assert b0 >= a1, "the second session's turn began before the first one's ended"
    # different folders do not wait for each other
    spans.clear()
    threads = [threading.Thread(target=lambda n=n: _other(tmp_path / n, spans, n)) for n in ("x", "y")]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    (x0, x1), (y0, y1) = sorted(spans.values())
    assert y0 < x1


def _other(target, spans, name):
    with workspace._target_turn(target):
        t0 = time.perf_counter()
        time.sleep(0.3)
        spans[name] = (t0, time.perf_counter())


def test_the_tree_digest_covers_sources_and_not_the_trees_own_git_and_target(tmp_path):
    """What decides whether a build restamps its tree: every source, a folder named target deep
    in the sources included; the tree's own .git and target folders left out."""
    (tmp_path / "src" / "target").mkdir(parents=True)
    (tmp_path / "src" / "target" / "mod.rs").write_text("pub fn a() {}\n")
    (tmp_path / "lib.rs").write_text("mod src;\n")
    for own in (".git", "target"):
        (tmp_path / own).mkdir()
        (tmp_path / own / "x").write_text("0")
    first = workspace._tree_digest(tmp_path)
    for own in (".git", "target"):
        (tmp_path / own / "x").write_text("1")
    assert workspace._tree_digest(tmp_path) == first
    (tmp_path / "src" / "target" / "mod.rs").write_text("pub fn b() {}\n")
    assert workspace._tree_digest(tmp_path) != first


def test_an_interrupted_build_or_test_run_takes_its_process_group_with_it(tmp_path):
    # A build or cargo test runs in a session of its own, so Ctrl-C at the terminal never reached
    # it: when the harness was interrupted mid-build, cargo (and its rustc children) went on for
    # up to the card's timeout, burning the cores the resumed session's judge then timed on.
    import os
    import signal

    pids = tmp_path / "pids"
    script = f"sleep 30 & echo $$ $! > {pids}; wait"
    # Ctrl-C as a terminal delivers it, whatever handler the test worker was left with (a worker
    # of a parallel run may ignore SIGINT, and then the interrupt never came)
    before = signal.signal(signal.SIGINT, signal.default_int_handler)
    try:
        threading.Timer(1.0, os.kill, (os.getpid(), signal.SIGINT)).start()
        with pytest.raises(KeyboardInterrupt):
            workspace._run_limited(["sh", "-c", script], tmp_path, dict(os.environ), 60)
    finally:
        signal.signal(signal.SIGINT, before)
    group, child = (int(x) for x in pids.read_text().split())
    for _ in range(50):  # the kill is sent before the interrupt goes on; allow the reaping
        try:
            os.kill(child, 0)
        except ProcessLookupError:
            break
        time.sleep(0.1)
    else:
        os.killpg(group, signal.SIGKILL)
        pytest.fail("the build's process group outlived the interrupt")
    with pytest.raises(ProcessLookupError):
        os.killpg(group, 0)
