"""`vdbbench datasets list | fetch | info | generate`: output, files written, exit codes."""

from __future__ import annotations

import hashlib
import threading
from functools import partial
from http.server import SimpleHTTPRequestHandler, ThreadingHTTPServer

import numpy as np
import pytest

from vdbbench.cli import main
from vdbbench.datasets.base import Dataset
from vdbbench.datasets.formats import read_ann_hdf5, write_ann_hdf5


@pytest.fixture(autouse=True)
def _wide(monkeypatch):
    monkeypatch.setenv("COLUMNS", "200")  # rich tables unwrapped, so assertions see whole cells


def test_list_shows_registry_and_generated(data_dir, capsys):
    assert main(["datasets", "list"]) == 0
    out = capsys.readouterr().out
    for name in ("sift-1m", "sift-10k", "gist-1m", "glove-100-angular", "deep-image-96-angular",
                 "fashion-mnist-784-euclidean", "synth-sift-<n>", "synth-float-<n>"):
        assert name in out
    assert str(data_dir) in out


def test_generate_with_out_writes_ann_benchmarks_file(data_dir, tmp_path, capsys):
    out_file = tmp_path / "s.hdf5"
    assert main(["datasets", "generate", "synth-sift-3k", "--nq", "50", "--out", str(out_file)]) == 0
    ds = read_ann_hdf5(out_file)
    assert (ds.n, ds.nq, ds.dim, ds.metric, ds.synthetic) == (3000, 50, 128, "l2", True)
    assert ds.neighbors.shape == (50, 100)
    assert "ground truth" in capsys.readouterr().out


def test_info_reports_identity_and_groundtruth_status(data_dir, capsys):
    assert main(["datasets", "info", "synth-float-2k"]) == 0
    out = capsys.readouterr().out
    assert "2,000" in out and "synthetic" in out and "yes" in out and "not computed yet" in out
    assert main(["datasets", "generate", "synth-float-2k"]) == 0
    capsys.readouterr()
    assert main(["datasets", "info", "synth-float-2k"]) == 0
    out = capsys.readouterr().out
    assert "cached:" in out and "gt-" in out


def test_info_on_a_file_path(data_dir, tmp_path, capsys):
    rng = np.random.default_rng(0)
    path = write_ann_hdf5(tmp_path / "mine.hdf5", Dataset("mine", rng.random((100, 5)).astype(np.float32),
                                                           rng.random((4, 5)).astype(np.float32), "ip"))
    assert main(["datasets", "info", str(path)]) == 0
    out = capsys.readouterr().out
    assert "ip" in out and "100" in out and "not computed yet" in out


@pytest.mark.parametrize("argv", [
    ["datasets", "info", "no-such-set"],
    ["datasets", "fetch", "no-such-set"],
    ["datasets", "generate", "sift-1m"],
    ["datasets", "generate", "synth-sift-3k", "--nq", "0"],
])
def test_bad_usage_exits_2_with_the_valid_names(data_dir, capsys, argv):
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert "error:" in err
    if "no-such-set" in argv:
        assert "sift-1m" in err and "glove-100-angular" in err


def test_info_of_a_damaged_file_exits_2_naming_it(data_dir, tmp_path, capsys):
    bad = tmp_path / "broken.hdf5"
    bad.write_bytes(b"not hdf5 at all")
    assert main(["datasets", "info", str(bad)]) == 2
    assert "broken.hdf5: not an HDF5 file" in capsys.readouterr().err


def test_fetch_from_loopback_then_info(data_dir, tmp_path, monkeypatch, capsys):
    rng = np.random.default_rng(1)
    served = tmp_path / "www"
    served.mkdir()
    src = write_ann_hdf5(served / "toy-8-euclidean.hdf5", Dataset("toy", rng.random((200, 8)).astype(np.float32),
                                                                  rng.random((10, 8)).astype(np.float32), "l2"))
    server = ThreadingHTTPServer(("127.0.0.1", 0), partial(_QuietHandler, directory=str(served)))
    threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True).start()
    try:
        reg_file = tmp_path / "reg.toml"
        reg_file.write_text(f"""
[datasets.toy]
metric = "l2"
dim = 8
n = 200
nq = 10
[[datasets.toy.sources]]
url = "http://127.0.0.1:{server.server_address[1]}/toy-8-euclidean.hdf5"
format = "ann-hdf5"
""")
        monkeypatch.setenv("VDBBENCH_REGISTRY", str(reg_file))
        assert main(["datasets", "fetch", "toy"]) == 0
        out = capsys.readouterr().out
        digest = hashlib.sha256(src.read_bytes()).hexdigest()
        assert digest in out and "recorded at first download" in out
        assert (data_dir / "toy" / "toy-8-euclidean.hdf5").read_bytes() == src.read_bytes()
        assert main(["datasets", "info", "toy", "--no-download"]) == 0
        out = capsys.readouterr().out
        assert digest in out and "no" in out and "cached:" in out
    finally:
        server.shutdown()
        server.server_close()


def test_fetch_offline_exits_1_and_says_what_to_do(data_dir, unreachable_dataset, capsys):
    assert main(["datasets", "fetch", unreachable_dataset]) == 1
    out = capsys.readouterr().out
    assert "fetch failed" in out and "127.0.0.1:9/away.hdf5" in out and "offline" in out
    assert not (data_dir / "away" / "away.hdf5").exists()


class _QuietHandler(SimpleHTTPRequestHandler):
    def log_message(self, *args):
        pass


def test_info_no_download_of_an_uncached_registered_set(data_dir, capsys):
    assert main(["datasets", "info", "sift-1m", "--no-download"]) == 0
    out = capsys.readouterr().out
    assert "1,000,000" in out and "cached" in out and "no (would be in" in out and "synth-sift-1m" in out
    assert not (data_dir / "synth").exists()  # nothing generated or downloaded
