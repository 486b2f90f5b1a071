"""Data set faults a user meets: malformed files, damaged caches, interrupted or failed writes,
read-only or full cache folders. Each is a clear error (or a recovery), never a traceback, a wrong
answer or a damaged file left to load later."""

from __future__ import annotations

import h5py
import numpy as np
import pytest

from vdbbench.cli import main
from vdbbench.datasets import DatasetError, load_dataset


def _hdf5(path, train, test, **extra):
    with h5py.File(path, "w") as f:
        f.attrs["distance"] = "euclidean"
        f.create_dataset("train", data=train)
        f.create_dataset("test", data=test)
        for key, value in extra.items():
            f.create_dataset(key, data=value)
    return path


@pytest.mark.parametrize(
    "damage,message",
    [
        # neighbours without distances: the ids were used to recompute distances before they were
        # checked, so IndexError / a broadcasting ValueError came out as a traceback
        ("ids_out_of_range", r"neighbors hold ids outside 0\.\.39"),
        ("rows_not_queries", r"neighbors has 7 rows for 5 queries"),
        ("text_distances", r"distances has dtype .*expected numbers"),
        ("text_dimension", r"attribute dimension='abc' is not an integer"),
        ("train_is_group", r"train is an HDF5 group"),
    ],
)
def test_malformed_hdf5_is_a_clear_error(tmp_path, data_dir, capsys, damage, message):
    rng = np.random.default_rng(0)
    train, test = rng.random((40, 8)).astype(np.float32), rng.random((5, 8)).astype(np.float32)
    path = tmp_path / f"bad-{damage}.hdf5"
    if damage == "ids_out_of_range":
        _hdf5(path, train, test, neighbors=np.full((5, 10), 500, np.int32))
    elif damage == "rows_not_queries":
        _hdf5(path, train, test, neighbors=np.zeros((7, 10), np.int32))
    elif damage == "text_distances":
        _hdf5(path, train, test, neighbors=np.zeros((5, 10), np.int32), distances=np.full((5, 10), b"a"))
    elif damage == "text_dimension":
        _hdf5(path, train, test)
        with h5py.File(path, "a") as f:
            f.attrs["dimension"] = "abc"
    elif damage == "train_is_group":
        with h5py.File(path, "w") as f:
            f.create_group("train")
            f.create_dataset("test", data=test)
    with pytest.raises(DatasetError, match=message) as err:
        load_dataset(str(path), progress=False)
    assert path.name in str(err.value)
    assert main(["datasets", "info", str(path)]) == 2  # usage error, no traceback
    assert path.name in capsys.readouterr().err


@pytest.mark.parametrize("damage", ["truncated", "flipped_byte"])
def test_damaged_groundtruth_cache_is_recomputed(tmp_path, data_dir, damage):
    # a cut or bit-flipped .npz raised zipfile.BadZipFile (not an OSError/ValueError), so the
    # load ended in a traceback instead of recomputing the entry as intended
    rng = np.random.default_rng(1)
    path = _hdf5(tmp_path / "plain.hdf5", rng.random((300, 8)).astype(np.float32), rng.random((6, 8)).astype(np.float32))
    first = load_dataset(str(path), progress=False)
    (cache,) = (data_dir / "groundtruth").glob("gt-*.npz")
    data = cache.read_bytes()
    cache.write_bytes(data[: len(data) // 2] if damage == "truncated" else data[:200] + bytes([data[200] ^ 1]) + data[201:])
    again = load_dataset(str(path), progress=False)
    assert again.extra["groundtruth"].startswith("computed")
    np.testing.assert_array_equal(again.neighbors, first.neighbors)
    assert load_dataset(str(path), progress=False).extra["groundtruth"].startswith("cached")  # rewritten whole


def _in_subprocess_with_file_size_limit(code: str, env: dict, limit: int = 200_000):
    """Run ``code`` in a fresh Python whose files cannot grow beyond ``limit`` bytes (a full disk)."""
    import subprocess
    import sys

    prelude = f"import resource, sys\nresource.setrlimit(resource.RLIMIT_FSIZE, ({limit}, {limit}))\n"
    return subprocess.run([sys.executable, "-c", prelude + code], env=env, capture_output=True, text=True, timeout=120)


def test_generate_into_a_full_cache_is_a_clear_error_and_leaves_no_file(data_dir):
    # h5py's write failed (OSError), then its close raised RuntimeError: a traceback, and the
    # half-written .tmp stayed in the cache, a new one per attempt, filling the disk further
    import os

    env = {**os.environ, "VDBBENCH_DATA": str(data_dir)}
    run = _in_subprocess_with_file_size_limit(
        "from vdbbench.cli import main\nsys.exit(main(['datasets', 'generate', 'synth-sift-2k', '--nq', '20']))", env)
    assert run.returncode == 2, run.stderr
    assert "Traceback" not in run.stderr and "cannot write synth-sift-2k to the cache" in run.stderr
    assert [p.name for p in (data_dir / "synth").iterdir()] == []


def test_unwritable_cache_is_a_clear_error(tmp_path, monkeypatch, capsys, unreachable_dataset):
    # a cache folder that cannot be created (read-only, or a file in the way) raised a bare
    # OSError out of `datasets generate` / `fetch` / `info` (traceback), and skipped the offline fallback
    blocker = tmp_path / "not-a-folder"
    blocker.write_text("")
    monkeypatch.setenv("VDBBENCH_DATA", str(blocker / "cache"))
    assert main(["datasets", "generate", "synth-sift-2k", "--nq", "20"]) == 2
    assert "cannot write synth-sift-2k to the cache" in capsys.readouterr().err
    assert main(["datasets", "fetch", unreachable_dataset]) == 1
    out = capsys.readouterr().out
    assert "fetch failed" in out and "cannot be written" in out
    assert main(["datasets", "info", unreachable_dataset]) == 1
    assert "not available" in capsys.readouterr().out
    assert blocker.read_text() == ""


def test_damaged_cached_download_makes_fetch_fail_cleanly(tmp_path, data_dir, monkeypatch, capsys):
    # `datasets fetch` of a cached file that no longer matches its recorded sha256 raised the
    # DatasetError as a traceback; it says what is wrong and what to do, exit 1
    (tmp_path / "r.toml").write_text(
        '[datasets.kept]\nmetric = "l2"\ndim = 8\nn = 40\nnq = 5\n'
        '[[datasets.kept.sources]]\nurl = "http://127.0.0.1:9/kept.hdf5"\nformat = "ann-hdf5"\n'
        'size = 3\nsha256 = "' + "0" * 64 + '"\n')
    monkeypatch.setenv("VDBBENCH_REGISTRY", str(tmp_path / "r.toml"))
    (data_dir / "kept").mkdir()
    (data_dir / "kept" / "kept.hdf5").write_bytes(b"abc")
    assert main(["datasets", "fetch", "kept"]) == 1
    out = capsys.readouterr().out
    assert "fetch failed" in out and "delete it and fetch again" in out


def _texmex_tarball(folder, base, queries) -> bytes:
    import io
    import tarfile

    from vdbbench.datasets.formats import write_vecs

    src = folder / "src-mini"
    src.mkdir(parents=True, exist_ok=True)
    write_vecs(src / "mini_base.fvecs", base)
    write_vecs(src / "mini_query.fvecs", queries)
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w:gz") as tar:
        tar.add(src / "mini_base.fvecs", arcname="mini/mini_base.fvecs")
        tar.add(src / "mini_query.fvecs", arcname="mini/mini_query.fvecs")
    return buf.getvalue()


def _register_tarball(tmp_path, data_dir, monkeypatch, payload: bytes) -> None:
    import hashlib

    (tmp_path / "r.toml").write_text(
        '[datasets.mini]\nmetric = "l2"\ndim = 8\nn = 300\nnq = 6\n'
        '[[datasets.mini.sources]]\nurl = "http://127.0.0.1:9/mini.tar.gz"\nformat = "texmex-tar"\n'
        f'size = {len(payload)}\nsha256 = "{hashlib.sha256(payload).hexdigest()}"\n'
        'base = "mini/mini_base.fvecs"\nquery = "mini/mini_query.fvecs"\n')
    monkeypatch.setenv("VDBBENCH_REGISTRY", str(tmp_path / "r.toml"))
    (data_dir / "mini").mkdir(exist_ok=True)
    (data_dir / "mini" / "mini.tar.gz").write_bytes(payload)


def test_texmex_member_cut_short_by_an_interrupted_extraction_is_extracted_again(tmp_path, data_dir, monkeypatch):
    # members were extracted in place and reused whenever they existed: a kill during the
    # extraction of the last one left it cut short, and when the cut fell on a record boundary the
    # set loaded as if good, with fewer queries than the registry's (here 3 of 6)
    rng = np.random.default_rng(7)
    base, queries = rng.random((300, 8)).astype(np.float32), rng.random((6, 8)).astype(np.float32)
    _register_tarball(tmp_path, data_dir, monkeypatch, _texmex_tarball(tmp_path, base, queries))
    member = data_dir / "mini" / "mini" / "mini_query.fvecs"
    member.parent.mkdir(parents=True)
    (data_dir / "mini" / "mini" / "mini_base.fvecs").write_bytes((tmp_path / "src-mini" / "mini_base.fvecs").read_bytes())
    member.write_bytes((tmp_path / "src-mini" / "mini_query.fvecs").read_bytes()[: 3 * (4 + 8 * 4)])
    ds = load_dataset("mini", progress=False)
    assert ds.nq == 6
    np.testing.assert_array_equal(ds.test, queries)


def test_texmex_members_of_another_tarball_are_not_reused(tmp_path, data_dir, monkeypatch):
    # a new tarball under the same name (a corrected release with its new sha256 in the registry)
    # was verified, but the members extracted from the old one were loaded under the new identity
    rng = np.random.default_rng(8)
    base, queries = rng.random((300, 8)).astype(np.float32), rng.random((6, 8)).astype(np.float32)
    _register_tarball(tmp_path, data_dir, monkeypatch, _texmex_tarball(tmp_path, base, queries))
    np.testing.assert_array_equal(load_dataset("mini", progress=False).train, base)
    base2 = base + 1
    _register_tarball(tmp_path, data_dir, monkeypatch, _texmex_tarball(tmp_path, base2, queries))
    ds = load_dataset("mini", progress=False)
    np.testing.assert_array_equal(ds.train, base2)
    assert [p.name for p in (data_dir / "mini").iterdir() if p.name.startswith(".extract-")] == []


@pytest.mark.parametrize("where,value,message", [("train", np.nan, r"train row 3, column 2 is nan"),
                                                  ("test", np.inf, r"test row 1, column 0 is inf"),
                                                  ("train", 1e300, r"train row 3, column 2 is inf")])
def test_non_finite_vectors_are_refused_naming_the_place(tmp_path, data_dir, capsys, where, value, message):
    # NaN or inf (or a float64 beyond float32's range) loaded silently: 'datasets info' showed the
    # file as fine, and ground truth then failed inside the engine ('vectors contains NaN at row 3')
    # without naming the file or whether base or queries, or with numpy/faiss came out arbitrary
    rng = np.random.default_rng(9)
    train, test = rng.random((40, 8)), rng.random((5, 8))
    (train if where == "train" else test)[(3, 2) if where == "train" else (1, 0)] = value
    path = _hdf5(tmp_path / "nonfinite.hdf5", train, test)  # float64 on disk, as some writers store it
    with pytest.raises(DatasetError, match=message):
        load_dataset(str(path), progress=False)
    assert main(["datasets", "info", str(path)]) == 2
    assert "nonfinite.hdf5" in capsys.readouterr().err


def test_malformed_length_headers_are_a_download_error(tmp_path):
    # int() of a malformed Content-Length or Content-Range total raised ValueError out of the
    # download: not a DownloadError, so no other source was tried and the CLI showed a traceback
    import threading
    from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

    from vdbbench.datasets import DownloadError
    from vdbbench.datasets.download import download

    class Handler(BaseHTTPRequestHandler):
        def log_message(self, *args):
            pass

        def do_GET(self):
            if self.path == "/length.bin":
                self.send_response(200)
                self.send_header("Content-Length", "abc")
            else:
                self.send_response(206)
                self.send_header("Content-Range", "bytes 0-9/xyz")
            self.send_header("Connection", "close")
            self.end_headers()
            self.wfile.write(b"0123456789")

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True).start()
    url = f"http://127.0.0.1:{server.server_address[1]}"
    try:
        with pytest.raises(DownloadError, match=r"length\.bin: server sent a malformed Content-Length 'abc'"):
            download(f"{url}/length.bin", tmp_path / "length.bin", progress=False)
        with pytest.raises(DownloadError, match=r"range\.bin: server sent a malformed Content-Range"):
            download(f"{url}/range.bin", tmp_path / "range.bin", progress=False)
    finally:
        server.shutdown()
        server.server_close()
    assert not (tmp_path / "length.bin").exists() and not (tmp_path / "range.bin").exists()


def test_generated_name_too_large_for_memory_is_a_clear_error(data_dir, capsys):
    # a typo such as synth-sift-99999999999m ended in numpy's ValueError / MemoryError traceback
    assert main(["datasets", "generate", "synth-sift-99999999999m"]) == 2
    err = capsys.readouterr().err
    assert "synth-sift-99999999999m: cannot generate" in err and "GiB in memory" in err and "Traceback" not in err
    with pytest.raises(DatasetError, match="choose a smaller n"):
        load_dataset("synth-float-99999999999m", progress=False)


def test_checksum_recorded_from_an_error_page_does_not_refuse_the_real_file(tmp_path, data_dir, monkeypatch, capsys):
    # with no published hash, the first download's size and sha256 are recorded; when that
    # "download" was an error page served with status 200, the record was of the page, so once
    # the user deleted the unusable file every real download was refused ("server reports 17952
    # bytes, but 44 are expected") until CHECKSUMS.json was found and deleted by hand
    import threading
    from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

    from vdbbench.datasets.base import Dataset
    from vdbbench.datasets.formats import write_ann_hdf5

    rng = np.random.default_rng(10)
    real = write_ann_hdf5(tmp_path / "real.hdf5", Dataset("t", rng.random((300, 8)).astype(np.float32),
                                                          rng.random((5, 8)).astype(np.float32), "l2")).read_bytes()
    served = {"body": b"<html>Service temporarily unavailable</html>"}

    class Handler(BaseHTTPRequestHandler):
        def log_message(self, *args):
            pass

        def do_GET(self):
            self.send_response(200)
            self.send_header("Content-Length", str(len(served["body"])))
            self.end_headers()
            self.wfile.write(served["body"])

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True).start()
    (tmp_path / "r.toml").write_text(
        '[datasets.page]\nmetric = "l2"\ndim = 8\nn = 300\nnq = 5\n[[datasets.page.sources]]\n'
        f'url = "http://127.0.0.1:{server.server_address[1]}/page.hdf5"\nformat = "ann-hdf5"\n')
    monkeypatch.setenv("VDBBENCH_REGISTRY", str(tmp_path / "r.toml"))
    from vdbbench.datasets import DownloadError

    try:
        # The page is refused before it is moved into place (registry.check_download): nothing is
        # kept and nothing recorded, so the real file downloads next time without any deleting.
        with pytest.raises(DownloadError, match="(?s)page.hdf5.part: not an HDF5 file.*nothing was put at"):
            load_dataset("page", offline_fallback=False, progress=False)
        assert sorted(p.name for p in (data_dir / "page").iterdir()) == ["page.hdf5.lock"]
        served["body"] = real
        ds = load_dataset("page", offline_fallback=False, progress=False)
        # A page placed in the cache by hand (or by an older version) is still refused at load,
        # and the checksum recorded from it dropped.
        (data_dir / "page" / "page.hdf5").write_bytes(b"<html>Service temporarily unavailable</html>")
        (data_dir / "page" / "CHECKSUMS.json").unlink()
        with pytest.raises(DatasetError, match="(?s)not an HDF5 file.*delete .*page.hdf5 and fetch again"):
            load_dataset("page", offline_fallback=False, progress=False)
        (data_dir / "page" / "page.hdf5").unlink()  # as the message says
        ds = load_dataset("page", offline_fallback=False, progress=False)
    finally:
        server.shutdown()
        server.server_close()
    assert ds.n == 300 and (data_dir / "page" / "page.hdf5").read_bytes() == real
