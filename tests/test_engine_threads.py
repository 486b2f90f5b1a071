"""Engine concurrency: the interpreter is released, concurrent searches agree with serial
ones, thread counts do not change the index, Ctrl-C interrupts a long call."""

from __future__ import annotations

import subprocess
import sys
import textwrap
import threading
import time

import numpy as np
import pytest

pytest.importorskip("vdbbench._rust_vdb")

import vdbbench as vb  # noqa: E402
from vdbbench.datasets.synth import synth_float, synth_sift  # noqa: E402


@pytest.fixture(scope="module")
def index_and_queries():
    base, queries = synth_sift(20_000, 2_000, seed=7)
    idx = vb.IvfIndex(128, storage="u8+f16", seed=1)
    idx.train(base)
    idx.add(base)
    return idx, queries


def test_another_python_thread_progresses_during_a_long_search(index_and_queries):
    idx, queries = index_and_queries
    big = np.tile(queries, (3, 1))
    counter = [0]
    stop = threading.Event()

    def spin():
        while not stop.is_set():
            counter[0] += 1

    t = threading.Thread(target=spin)
    t.start()
    try:
        # The spinner's pace while this thread sleeps (interpreter free), then during the call.
        start, t0 = counter[0], time.perf_counter()
        time.sleep(0.2)
        free_rate = (counter[0] - start) / (time.perf_counter() - t0)
        start, t0 = counter[0], time.perf_counter()
        idx.search(big, k=10, nprobe=idx.nlist, threads=1)
        elapsed = time.perf_counter() - t0
        during_rate = (counter[0] - start) / elapsed
    finally:
        stop.set()
        t.join()
    if elapsed < 0.2:
        pytest.skip(f"the search took {elapsed:.3f} s on this machine: too short to tell")
    # With the interpreter held for the whole call the spinner would stand still; released, it
    # keeps a share of its free pace (less only where the cores are busy).
    assert during_rate > 0.05 * free_rate, (during_rate, free_rate, elapsed)


def test_concurrent_searches_agree_with_serial(index_and_queries):
    idx, queries = index_and_queries
    qs = [queries[i * 250:(i + 1) * 250] for i in range(4)]
    serial = [idx.search(q, k=10, nprobe=16) for q in qs]
    results = [None] * 4

    def work(i):
        for _ in range(3):
            results[i] = idx.search(qs[i], k=10, nprobe=16, threads=1 + i % 2)

    threads = [threading.Thread(target=work, args=(i,)) for i in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    for (d0, i0), (d1, i1) in zip(serial, results):
        np.testing.assert_array_equal(i0, i1)
        np.testing.assert_array_equal(d0, d1)


@pytest.fixture
def always_share():
    """Single queries share whenever a helper is free: on a machine busy with other work (the
    other test workers) the default policy would rightly keep every query on one thread."""
    assert vb.single_query_sharing() == "auto"
    vb.single_query_sharing("always")
    yield
    vb.single_query_sharing("auto")


def assert_shared_queries_equal_one_thread(idx, queries, nprobes, min_rows):
    """Each query one per call at one thread and at two, for every nprobe: the same ids and
    distances. A helper joins only if it wakes before the caller is done (tens of µs on a
    small, cached index), so queries go on past `min_rows`, cycling, until five were shared or
    5 s went by."""
    shared, t0 = 0, time.perf_counter()
    for i in range(10**6):
        r = i % queries.shape[0]
        for nprobe in nprobes:
            d1, i1 = idx.search(queries[r:r + 1], k=10, nprobe=nprobe, threads=1)
            assert idx.last_search_stats()["threads"] == 1
            d2, i2 = idx.search(queries[r:r + 1], k=10, nprobe=nprobe, threads=2)
            shared += idx.last_search_stats()["threads"] == 2
            np.testing.assert_array_equal(i1, i2)
            np.testing.assert_array_equal(d1, d2)
        if i >= min_rows and (shared >= 5 or time.perf_counter() - t0 > 5):
            break
    assert shared > 0, "a helper thread never joined a single-query scan"


def test_a_single_query_shared_between_threads_equals_one_thread(index_and_queries, always_share):
    idx, queries = index_and_queries
    # nprobe 64 / 400 of ~566 lists: ~2,300 / ~14,000 vectors, over the sharing threshold.
    assert_shared_queries_equal_one_thread(idx, queries, (64, 400), min_rows=60)


@pytest.mark.parametrize("storage, metric", [("u8+f16", "cosine"), ("f16", "l2"), ("f32", "ip")])
def test_a_shared_single_query_equals_one_thread_for_every_storage_and_metric(storage, metric, always_share):
    # The runs of a shared query claim lists from both ends; only u8 l2 shares thresholds,
    # the others keep a heap each: either way the union's k best are one thread's.
    base, queries = synth_float(12_000, 200, dim=32, seed=5)
    idx = vb.IvfIndex(32, storage=storage, metric=metric, seed=2)
    idx.train(base)
    idx.add(base)
    assert_shared_queries_equal_one_thread(idx, queries, (idx.nlist // 2,), min_rows=30)


def test_single_query_calls_equal_batch_rows(index_and_queries):
    idx, queries = index_and_queries
    d, i = idx.search(queries[:50], k=10, nprobe=8)
    for r in range(50):
        d1, i1 = idx.search(queries[r:r + 1], k=10, nprobe=8)
        np.testing.assert_array_equal(i1[0], i[r])
        np.testing.assert_array_equal(d1[0], d[r])
    assert idx.last_search_stats()["threads"] == 1


@pytest.mark.parametrize("metric", ["l2", "cosine"])
def test_training_is_identical_at_one_and_two_threads(metric):
    base, queries = synth_float(6_000, 50, dim=32, seed=2)
    out = []
    for t in (1, 2):
        idx = vb.IvfIndex(32, metric=metric, storage="u8+f16", seed=5)
        idx.train(base, threads=t)
        idx.add(base, threads=t)
        out.append((idx.list_sizes(), idx.search(queries, k=10, nprobe=4, threads=t)))
    assert out[0][0] == out[1][0]
    np.testing.assert_array_equal(out[0][1][0], out[1][1][0])
    np.testing.assert_array_equal(out[0][1][1], out[1][1][1])


def test_ctrl_c_interrupts_a_long_search_and_the_process_lives_on():
    script = textwrap.dedent(
        """
        import os, signal, threading, time
        signal.signal(signal.SIGINT, signal.default_int_handler)  # whatever the parent left it at
        import numpy as np
        import vdbbench as vb
        rng = np.random.default_rng(0)
        base = rng.standard_normal((20000, 64), dtype=np.float32)
        idx = vb.FlatIndex(64)
        idx.add(base)
        queries = rng.standard_normal((200000, 64), dtype=np.float32)
        threading.Timer(0.5, lambda: os.kill(os.getpid(), signal.SIGINT)).start()
        t0 = time.perf_counter()
        try:
            idx.search(queries, k=10, threads=1)
            print("finished")
        except KeyboardInterrupt:
            print("interrupted after %.2f s" % (time.perf_counter() - t0))
        d, i = idx.search(base[:3], k=1)
        print("alive", i.ravel().tolist())
        """
    )
    r = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    lines = r.stdout.splitlines()
    if lines[0] == "finished":
        pytest.skip("the search ended before the Ctrl-C on this machine: nothing to interrupt")
    assert lines[0].startswith("interrupted after"), r.stdout
    assert lines[1] == "alive [0, 1, 2]"


def test_reading_properties_while_another_thread_adds_does_not_deadlock():
    # add() holds the write lock and briefly re-takes the interpreter between chunks to look
    # for Ctrl-C; a thread reading properties must not hold the interpreter while it waits.
    script = textwrap.dedent(
        """
        import threading
        import numpy as np
        import vdbbench as vb
        rng = np.random.default_rng(0)
        x = rng.standard_normal((120000, 16), dtype=np.float32)
        idx = vb.IvfIndex(16, nlist=64, storage="f16")
        idx.train(x[:5000])
        done = threading.Event()
        def adder():
            for _ in range(3):
                idx.add(x)
            done.set()
        t = threading.Thread(target=adder)
        t.start()
        reads = 0
        while not done.is_set():
            reads += idx.ntotal >= 0
            len(idx); idx.bytes; repr(idx)
        t.join()
        print(idx.ntotal, reads > 0)
        """
    )
    r = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    assert r.stdout.split() == ["360000", "True"]


def test_ctrl_c_interrupts_training_and_leaves_the_index_untrained():
    script = textwrap.dedent(
        """
        import os, signal, threading, time
        signal.signal(signal.SIGINT, signal.default_int_handler)  # whatever the parent left it at
        import numpy as np
        import vdbbench as vb
        rng = np.random.default_rng(0)
        x = rng.standard_normal((200000, 64), dtype=np.float32)
        idx = vb.IvfIndex(64, nlist=3000)
        threading.Timer(0.5, lambda: os.kill(os.getpid(), signal.SIGINT)).start()
        t0 = time.perf_counter()
        try:
            idx.train(x, threads=1)
            print("finished")
        except KeyboardInterrupt:
            print("interrupted after %.2f s" % (time.perf_counter() - t0))
        print(idx.is_trained, idx.nlist)
        """
    )
    r = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr
    lines = r.stdout.splitlines()
    if lines[0] == "finished":
        pytest.skip("training ended before the Ctrl-C on this machine: nothing to interrupt")
    assert lines[0].startswith("interrupted after"), r.stdout
    assert lines[1] == "False 3000"


def test_adding_in_several_calls_equals_one_call():
    # add fills list by list; a second call grows every list (a reallocation) and appends.
    base, queries = synth_sift(8_000, 100, seed=4)
    one = vb.IvfIndex(128, nlist=64, storage="u8+f16", seed=3)
    one.train(base)
    one.add(base)
    parts = vb.IvfIndex(128, nlist=64, storage="u8+f16", seed=3)
    parts.train(base)
    for lo in range(0, 8_000, 3_000):
        parts.add(base[lo:lo + 3_000], threads=1 if lo else None)
    assert one.list_sizes() == parts.list_sizes()
    for a, b in zip(one.search(queries, k=10, nprobe=8), parts.search(queries, k=10, nprobe=8)):
        np.testing.assert_array_equal(a, b)


def test_huge_page_advice_never_changes_results():
    # VDBBENCH_HUGEPAGES=0 skips the madvise after add and load; answers must not move.
    script = textwrap.dedent("""
        import hashlib, os, tempfile, numpy as np, vdbbench as vb
        from vdbbench.datasets.synth import synth_sift
        base, queries = synth_sift(40_000, 200, seed=9)
        idx = vb.IvfIndex(128, nlist=100, storage="u8+f16", seed=2)
        idx.train(base[:10_000]); idx.add(base)
        path = os.path.join(tempfile.mkdtemp(), "i.vdb"); idx.save(path)
        h = hashlib.sha256()
        for ix in (idx, vb.IvfIndex.load(path)):
            d, i = ix.search(queries, k=10, nprobe=12)
            h.update(d.tobytes()); h.update(i.tobytes())
        print(h.hexdigest())
    """)
    out = []
    for flag in ("1", "0"):
        env = dict(__import__("os").environ, VDBBENCH_HUGEPAGES=flag)
        r = subprocess.run([sys.executable, "-c", script], env=env, capture_output=True, text=True, timeout=120)
        assert r.returncode == 0, r.stderr
        out.append(r.stdout.strip())
    assert out[0] == out[1] and len(out[0]) == 64


def test_single_query_sharing_is_a_process_policy(index_and_queries):
    idx, queries = index_and_queries
    assert vb.single_query_sharing() == "auto"
    with pytest.raises(vb.InvalidInput, match="unknown sharing policy"):
        vb.single_query_sharing("sometimes")
    assert vb.single_query_sharing() == "auto", "a refused policy changes nothing"
    try:
        assert vb.single_query_sharing("never") == "never"
        d1, i1 = idx.search(queries[:1], k=10, nprobe=400, threads=1)
        for _ in range(20):
            d2, i2 = idx.search(queries[:1], k=10, nprobe=400, threads=2)
            assert idx.last_search_stats()["threads"] == 1
        np.testing.assert_array_equal(i1, i2)
        np.testing.assert_array_equal(d1, d2)
    finally:
        vb.single_query_sharing("auto")


def test_two_threads_saving_to_one_path_leave_a_whole_file(tmp_path):
    # Both saves used one temporary name (per process): their bytes mixed, one renamed the
    # other's half-written file into place (a checksum-failing file) and the other failed.
    rng = np.random.default_rng(4)
    a = vb.IvfIndex(16, nlist=8, storage="f32")
    a.train(rng.standard_normal((400, 16)).astype(np.float32))
    a.add(rng.standard_normal((20_000, 16)).astype(np.float32))
    b = vb.IvfIndex(16, nlist=4, storage="f32")
    b.train(rng.standard_normal((400, 16)).astype(np.float32))
    b.add(rng.standard_normal((100, 16)).astype(np.float32))
    path = tmp_path / "x.vdb"
    for _ in range(8):
        errors = []

        def save(ix):
            try:
                ix.save(path)
            except Exception as e:  # noqa: BLE001 - collected and asserted below
                errors.append(e)

        ts = [threading.Thread(target=save, args=(ix,)) for ix in (a, b)]
        for t in ts:
            t.start()
        for t in ts:
            t.join()
        assert errors == []
        assert vb.IvfIndex.load(path).ntotal in (a.ntotal, b.ntotal)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["x.vdb"]  # no temporary left
