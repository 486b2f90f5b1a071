"""Verified downloads against loopback HTTP servers: resume after a dropped connection, checksum
failures, offline sources, registry fetches (HDF5 and TEXMEX tarball) and the loud fallback."""

from __future__ import annotations

import hashlib
import io
import socket
import tarfile
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import numpy as np
import pytest

from vdbbench.datasets import DownloadError, load_dataset
from vdbbench.datasets import registry as reg
from vdbbench.datasets.download import download
from vdbbench.datasets.formats import write_ann_hdf5, write_vecs
from vdbbench.datasets.base import Dataset


class _Handler(BaseHTTPRequestHandler):
    """Serves server.files; honours `Range: bytes=N-` (416 past the end); can drop the first
    responses halfway (server.drops_left), serve other bytes than asked for (server.corrupt),
    answer the next requests with scripted statuses (server.script: [(status, headers)], or
    server.after_drop: the same, from the request after a drop), send no
    Content-Length and stop after server.cut bytes, or send half the body, then wait for
    server.hold (an Event) before the rest. Sends server.etag / server.modified as ETag /
    Last-Modified when set, and honours Range only when an If-Range matches a strong one of them
    (else the whole file, status 200); server.on_drop() runs at each drop, before the client can
    ask again (to change the file, say). server.if_ranges records each request's If-Range."""

    def log_message(self, *args):  # keep pytest output clean
        pass

    def do_GET(self):
        srv = self.server
        srv.requests.append((self.path, self.headers.get("Range")))
        srv.if_ranges.append(self.headers.get("If-Range"))
        if srv.script:
            status, headers = srv.script.pop(0)
            self.send_response(status)
            for key, value in headers.items():
                self.send_header(key, value)
            self.send_header("Content-Length", "5")
            self.end_headers()
            self.wfile.write(b"oops\n")
            return
        data = srv.files.get(self.path)
        if data is None:
            self.send_error(404, "no such file")
            return
        if srv.corrupt:
            data = bytes(b ^ 0x5A for b in data)
        start = 0
        rng, if_range = self.headers.get("Range"), self.headers.get("If-Range")
        strong = [v for v in (srv.etag, srv.modified) if v and not v.startswith("W/")]
        if rng and srv.ranges and (if_range is None or if_range in strong):
            start = int(rng.split("=")[1].split("-")[0])
            if start >= len(data):
                self.send_response(416)
                self.send_header("Content-Range", f"bytes */{len(data)}")
                self.send_header("Content-Length", "0")
                self.end_headers()
                return
            self.send_response(206)
            self.send_header("Content-Range", f"bytes {start}-{len(data) - 1}/{len(data)}")
        else:
            self.send_response(200)
        for key, value in (("ETag", srv.etag), ("Last-Modified", srv.modified)):
            if value:
                self.send_header(key, value)
        body = data[start:]
        if srv.cut is not None:  # no length announced; the connection ends (HTTP/1.0) after `cut` bytes
            self.end_headers()
            self.wfile.write(body[: srv.cut])
            return
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        if srv.hold is not None:
            self.wfile.write(body[: len(body) // 2])
            self.wfile.flush()
            srv.hold.wait(30)
            try:
                self.wfile.write(body[len(body) // 2 :])
            except OSError:  # the client is gone
                pass
            return
        if srv.drops_left > 0:
            srv.drops_left -= 1
            srv.script, srv.after_drop = srv.after_drop + srv.script, []  # before the client can ask again
            if srv.on_drop is not None:
                srv.on_drop()
            self.wfile.write(body[: len(body) // 2])
            self.wfile.flush()
            self.connection.shutdown(socket.SHUT_RDWR)  # the connection dies mid-file
            self.close_connection = True
            return
        self.wfile.write(body)


@pytest.fixture
def http_server():
    server = ThreadingHTTPServer(("127.0.0.1", 0), _Handler)
    server.files, server.requests, server.if_ranges = {}, [], []
    server.etag = server.modified = server.on_drop = None
    server.drops_left, server.corrupt, server.ranges = 0, False, True
    server.script, server.after_drop, server.cut, server.hold = [], [], None, None
    server.url = f"http://127.0.0.1:{server.server_address[1]}"
    thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)
    thread.start()
    yield server
    if server.hold is not None:
        server.hold.set()
    server.shutdown()
    server.server_close()


@pytest.fixture(autouse=True)
def quick_backoff(monkeypatch):
    """Retries here wait 10 ms, not the default second (tests that check the waits pass their own)."""
    monkeypatch.setattr("vdbbench.datasets.download.BACKOFF_S", 0.01)


def _closed_port_url() -> str:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    return f"http://127.0.0.1:{port}/gone.hdf5"  # nothing listens there any more


def test_dropped_connection_resumes_with_range_and_verifies(tmp_path, http_server):
    payload = np.random.default_rng(0).bytes(3_000_000)
    http_server.files["/big.bin"] = payload
    http_server.drops_left = 2
    dest = download(f"{http_server.url}/big.bin", tmp_path / "big.bin",
                    sha256=hashlib.sha256(payload).hexdigest(), progress=False)
    assert dest.read_bytes() == payload
    assert not (tmp_path / "big.bin.part").exists()
    ranges = [r for _, r in http_server.requests]
    assert ranges[0] is None and ranges[1] == "bytes=1500000-"  # resumed, not restarted
    assert len(http_server.requests) == 3


def test_server_without_range_support_restarts_cleanly(tmp_path, http_server):
    payload = np.random.default_rng(1).bytes(200_000)
    http_server.files["/f.bin"] = payload
    http_server.drops_left, http_server.ranges = 1, False
    dest = download(f"{http_server.url}/f.bin", tmp_path / "f.bin",
                    sha256=hashlib.sha256(payload).hexdigest(), progress=False)
    assert dest.read_bytes() == payload


def test_part_file_from_an_earlier_run_is_resumed(tmp_path, http_server):
    payload = np.random.default_rng(2).bytes(100_000)
    http_server.files["/p.bin"] = payload
    (tmp_path / "p.bin.part").write_bytes(payload[:40_000])
    download(f"{http_server.url}/p.bin", tmp_path / "p.bin", size=len(payload), progress=False)
    assert (tmp_path / "p.bin").read_bytes() == payload
    assert http_server.requests == [("/p.bin", "bytes=40000-")]


def test_wrong_checksum_is_refused_and_leaves_no_file(tmp_path, http_server):
    payload = b"the real bytes" * 1000
    http_server.files["/c.bin"] = payload
    http_server.corrupt = True
    with pytest.raises(DownloadError, match=r"c\.bin: sha256 mismatch.*removed") as err:
        download(f"{http_server.url}/c.bin", tmp_path / "c.bin", sha256=hashlib.sha256(payload).hexdigest(), progress=False)
    assert http_server.url in str(err.value)
    assert [p.name for p in tmp_path.iterdir()] == ["c.bin.lock"]  # no data: neither c.bin nor c.bin.part


def test_wrong_size_is_refused(tmp_path, http_server):
    http_server.files["/s.bin"] = b"x" * 1000
    with pytest.raises(DownloadError, match="server reports 1000 bytes, but 999 are expected"):
        download(f"{http_server.url}/s.bin", tmp_path / "s.bin", size=999, progress=False)
    assert not (tmp_path / "s.bin").exists()


def test_http_error_and_offline_say_which_url_and_what_to_do(tmp_path, http_server):
    with pytest.raises(DownloadError, match=r"missing\.bin failed: HTTP 404"):
        download(f"{http_server.url}/missing.bin", tmp_path / "missing.bin", progress=False)
    url = _closed_port_url()
    with pytest.raises(DownloadError, match="gone.hdf5 failed after 1 retries.*copy the file to"):
        download(url, tmp_path / "gone.hdf5", retries=1, progress=False)
    assert not (tmp_path / "gone.hdf5").exists() and not (tmp_path / "missing.bin").exists()


def _tiny_hdf5_bytes(tmp_path: Path) -> bytes:
    rng = np.random.default_rng(3)
    ds = Dataset("tiny", rng.random((300, 16)).astype(np.float32), rng.random((12, 16)).astype(np.float32), "l2")
    return write_ann_hdf5(tmp_path / "src.hdf5", ds).read_bytes()


def _registry(tmp_path: Path, body: str, monkeypatch) -> None:
    path = tmp_path / "extra-registry.toml"
    path.write_text(body)
    monkeypatch.setenv("VDBBENCH_REGISTRY", str(path))


_TINY = """
[datasets.tiny]
metric = "l2"
dim = 16
n = 300
nq = 12
[[datasets.tiny.sources]]
url = "{url}/tiny-16-euclidean.hdf5"
format = "ann-hdf5"
dtype = "float32"
"""


def test_registry_fetch_records_hash_then_verifies_cache(tmp_path, http_server, data_dir, monkeypatch):
    http_server.files["/tiny-16-euclidean.hdf5"] = payload = _tiny_hdf5_bytes(tmp_path)
    http_server.drops_left = 1
    _registry(tmp_path, f"""
[datasets.tiny]
metric = "l2"
dim = 16
n = 300
nq = 12
[[datasets.tiny.sources]]
url = "{http_server.url}/tiny-16-euclidean.hdf5"
format = "ann-hdf5"
""", monkeypatch)
    ds = load_dataset("tiny")
    assert (ds.n, ds.nq, ds.dim, ds.synthetic) == (300, 12, 16, False)
    assert ds.sha256 == hashlib.sha256(payload).hexdigest()  # the verified file's hash
    assert ds.neighbors.shape == (12, 100)
    record = reg.expected_checksum(reg.entry("tiny"), reg.entry("tiny").sources[0])
    assert record == (len(payload), ds.sha256, "recorded at first download")
    # Damage the cached copy: the next load refuses it, naming the file.
    cached = data_dir / "tiny" / "tiny-16-euclidean.hdf5"
    cached.write_bytes(payload[:-1] + bytes([payload[-1] ^ 1]))
    with pytest.raises(ValueError, match="tiny-16-euclidean.hdf5.*sha256 .* differs"):
        load_dataset("tiny")


def test_registry_texmex_tarball_source(tmp_path, http_server, data_dir, monkeypatch):
    rng = np.random.default_rng(4)
    base = (rng.random((500, 8)) * 100).astype(np.float32)
    queries = (rng.random((6, 8)) * 100).astype(np.float32)
    folder = tmp_path / "src" / "mini"
    folder.mkdir(parents=True)
    write_vecs(folder / "mini_base.fvecs", base)
    write_vecs(folder / "mini_query.fvecs", queries)
    d = ((queries[:, None].astype(np.float64) - base[None]) ** 2).sum(-1)
    gt = np.argsort(d, axis=1, kind="stable")[:, :100]
    write_vecs(folder / "mini_groundtruth.ivecs", gt.astype(np.int32))
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w:gz") as tar:
        tar.add(folder, arcname="mini")
    http_server.files["/mini.tar.gz"] = buf.getvalue()
    _registry(tmp_path, f"""
[datasets.mini]
metric = "l2"
dim = 8
n = 500
nq = 6
[[datasets.mini.sources]]
url = "{http_server.url}/missing.hdf5"
format = "ann-hdf5"
[[datasets.mini.sources]]
url = "{http_server.url}/mini.tar.gz"
format = "texmex-tar"
sha256 = "{hashlib.sha256(buf.getvalue()).hexdigest()}"
base = "mini/mini_base.fvecs"
query = "mini/mini_query.fvecs"
groundtruth = "mini/mini_groundtruth.ivecs"
""", monkeypatch)
    ds = load_dataset("mini")  # the first source 404s; the tarball is the alternative
    np.testing.assert_array_equal(ds.train, base)
    np.testing.assert_array_equal(ds.neighbors, gt)
    np.testing.assert_allclose(ds.distances, np.sqrt(np.take_along_axis(d, gt, axis=1)), rtol=1e-6)
    assert ds.source.endswith("mini.tar.gz")


def test_offline_fallback_is_loud_and_recorded(tmp_path, data_dir, monkeypatch, capsys):
    _registry(tmp_path, f"""
[datasets.faraway]
metric = "l2"
dim = 128
n = 2000
nq = 100
fallback = "synth-sift-2k"
[[datasets.faraway.sources]]
url = "{_closed_port_url()}"
format = "ann-hdf5"
""", monkeypatch)
    monkeypatch.setattr("vdbbench.datasets.download.time.sleep", lambda s: None)
    ds = load_dataset("faraway", progress=False)
    err = capsys.readouterr().err
    assert "WARNING" in err and "faraway is not available" in err and "synth-sift-2k" in err
    assert ds.synthetic and ds.name == "synth-sift-2k"
    assert ds.extra["requested"] == "faraway" and "gone.hdf5" in ds.extra["fallback_reason"]
    with pytest.raises(DownloadError, match="gone.hdf5"):
        load_dataset("faraway", offline_fallback=False, progress=False)
    assert not (data_dir / "faraway" / "gone.hdf5").exists()


def test_sift_1m_is_registered_with_its_sources_and_fallback():
    e = reg.registry()["sift-1m"]
    assert (e.metric, e.dim, e.n, e.nq, e.fallback) == ("l2", 128, 1_000_000, 10_000, "synth-sift-1m")
    assert [s.format for s in e.sources] == ["ann-hdf5", "texmex-tar"]
    assert e.sources[0].url == "http://ann-benchmarks.com/sift-128-euclidean.hdf5"
    for name in ("sift-10k", "gist-1m", "glove-100-angular", "deep-image-96-angular", "fashion-mnist-784-euclidean"):
        assert name in reg.registry()


def test_tarball_member_escaping_the_cache_is_refused(tmp_path, http_server, data_dir, monkeypatch):
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w:gz") as tar:
        for name in ("../evil_base.fvecs", "ok/evil_query.fvecs"):
            payload = np.int32(1).tobytes() + np.float32(1).tobytes()
            info = tarfile.TarInfo(name)
            info.size = len(payload)
            tar.addfile(info, io.BytesIO(payload))
    http_server.files["/evil.tar.gz"] = buf.getvalue()
    _registry(tmp_path, f"""
[datasets.evil]
metric = "l2"
dim = 1
n = 1
nq = 1
[[datasets.evil.sources]]
url = "{http_server.url}/evil.tar.gz"
format = "texmex-tar"
base = "../evil_base.fvecs"
query = "ok/evil_query.fvecs"
""", monkeypatch)
    with pytest.raises(ValueError, match=r"evil\.tar\.gz: cannot extract"):
        load_dataset("evil")
    assert not (data_dir / "evil_base.fvecs").exists()


def test_concurrent_downloads_of_one_file_do_not_interleave(tmp_path, http_server):
    payload = np.random.default_rng(5).bytes(2_000_000)
    http_server.files["/both.bin"] = payload
    digest = hashlib.sha256(payload).hexdigest()
    errors = []

    def fetch():
        try:
            download(f"{http_server.url}/both.bin", tmp_path / "both.bin", sha256=digest, progress=False)
        except Exception as exc:  # noqa: BLE001 - reported below
            errors.append(exc)

    threads = [threading.Thread(target=fetch) for _ in range(3)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == []
    assert (tmp_path / "both.bin").read_bytes() == payload
    assert len(http_server.requests) == 1  # the others waited, then found the verified file


# --- retries: 5xx, 408/429 and dropped connections, with bounded, visible backoff ---


@pytest.fixture
def waits(monkeypatch):
    """The waits a download asks for, recorded instead of slept."""
    asked: list[float] = []
    monkeypatch.setattr("vdbbench.datasets.download.time.sleep", asked.append)
    return asked


def test_5xx_is_retried_with_backoff_and_retry_after_and_resumes_with_range(tmp_path, http_server, waits):
    # a 502/503 from an overloaded mirror ended the download at once ("failed: HTTP 503"), and
    # the bytes already received were only kept for a manual rerun
    payload = np.random.default_rng(6).bytes(400_000)
    http_server.files["/r.bin"] = payload
    http_server.drops_left = 1  # the first response dies halfway, then 503 (asking for 2 s) and 502
    http_server.after_drop = [(503, {"Retry-After": "2"}), (502, {})]
    lines: list[str] = []
    dest = download(f"{http_server.url}/r.bin", tmp_path / "r.bin", sha256=hashlib.sha256(payload).hexdigest(),
                    progress=False, backoff=0.5, log=lines.append)
    assert dest.read_bytes() == payload
    ranges = [r for _, r in http_server.requests]  # resumed where the drop left it (200,000 unless a reset ate some)
    assert ranges[0] is None and ranges[1] == ranges[2] == ranges[3] and ranges[1].startswith("bytes=")
    assert waits == [0.5, 2.0, 2.0]  # 0.5 after the drop, the 503's Retry-After (2 s), 0.5 x 2^2 after the 502
    assert len(lines) == 3, lines  # one line per retry, saying what failed and what comes next
    assert "connection closed before the end" in lines[0] and "retry 1/5 in 0.5 s" in lines[0]
    assert "HTTP 503" in lines[1] and "retry 2/5 in 2.0 s" in lines[1] and "asking for the rest from byte" in lines[1]
    assert "HTTP 502" in lines[2] and "retry 3/5" in lines[2]


@pytest.mark.parametrize("status,retried", [(500, True), (503, True), (504, True), (408, True), (429, True),
                                            (403, False), (404, False), (410, False)])
def test_which_http_errors_are_retried(tmp_path, http_server, waits, status, retried):
    http_server.files["/s.bin"] = payload = b"abc" * 1000
    http_server.script = [(status, {})]
    lines: list[str] = []
    target = f"{http_server.url}/s.bin"
    if retried:
        download(target, tmp_path / "s.bin", progress=False, log=lines.append)
        assert (tmp_path / "s.bin").read_bytes() == payload
        assert len(http_server.requests) == 2 and len(lines) == 1 and f"HTTP {status}" in lines[0]
    else:
        with pytest.raises(DownloadError, match=f"s.bin failed: HTTP {status}"):
            download(target, tmp_path / "s.bin", progress=False, log=lines.append)
        assert len(http_server.requests) == 1 and lines == [] and waits == []
        assert not (tmp_path / "s.bin").exists()


def test_retries_and_waits_are_bounded(tmp_path, http_server, waits, capsys):
    http_server.files["/busy.bin"] = b"x" * 1000
    http_server.script = [(503, {})] * 10  # the server never recovers
    with pytest.raises(DownloadError, match=r"busy\.bin failed after 3 retries: HTTP 503"):
        download(f"{http_server.url}/busy.bin", tmp_path / "busy.bin", progress=False, retries=3,
                 backoff=10, max_wait=15)
    lines = capsys.readouterr().err.splitlines()  # by default, one line per retry on stderr
    assert len(http_server.requests) == 4 and len(lines) == 3 and all("HTTP 503" in line for line in lines)
    assert waits == [10, 15, 15]  # doubling, capped: at most retries x max_wait in all
    assert not (tmp_path / "busy.bin").exists() and not (tmp_path / "busy.bin.part").exists()


def test_retry_after_beyond_the_cap_gives_up_at_once_keeping_the_bytes(tmp_path, http_server, waits):
    payload = np.random.default_rng(7).bytes(100_000)
    http_server.files["/later.bin"] = payload
    http_server.drops_left = 1
    http_server.after_drop = [(429, {"Retry-After": "3600"})]
    with pytest.raises(DownloadError, match=r"(?s)HTTP 429.*retry after 3,600 s, longer than the 60 s.*"
                                            r"[\d,]+ bytes are kept"):
        download(f"{http_server.url}/later.bin", tmp_path / "later.bin", progress=False, max_wait=60, log=lambda _: None)
    assert waits == [0.01]  # the drop's backoff; no wait for the server's hour
    kept = (tmp_path / "later.bin.part").read_bytes()
    assert kept and payload.startswith(kept) and not (tmp_path / "later.bin").exists()
    # an HTTP date works as well; one in the past means now
    from email.utils import formatdate

    from vdbbench.datasets.download import retry_after

    assert retry_after({"Retry-After": formatdate(1_000_030, usegmt=True)}, now=1_000_000) == 30
    assert retry_after({"Retry-After": formatdate(999_000, usegmt=True)}, now=1_000_000) == 0
    assert retry_after({"Retry-After": "soon"}) is None and retry_after({}) is None


def test_5xx_after_a_drop_from_a_server_without_range_restarts_cleanly(tmp_path, http_server, waits):
    payload = np.random.default_rng(8).bytes(300_000)
    http_server.files["/n.bin"] = payload
    http_server.drops_left, http_server.ranges = 1, False
    http_server.after_drop = [(500, {})]
    lines: list[str] = []
    download(f"{http_server.url}/n.bin", tmp_path / "n.bin", sha256=hashlib.sha256(payload).hexdigest(),
             progress=False, log=lines.append)
    assert (tmp_path / "n.bin").read_bytes() == payload  # not the first half twice
    assert len(lines) == 3 and "ignored the Range request" in lines[2] and "from the first byte" in lines[2]


def test_a_link_that_keeps_dropping_finishes_while_each_attempt_brings_new_bytes(tmp_path, http_server, waits):
    # six drops with two retries allowed: each drop brings new bytes, so the count and the
    # backoff start again after it
    payload = np.random.default_rng(13).bytes(400_000)
    http_server.files["/slow.bin"] = payload
    http_server.drops_left = 6  # each response dies halfway through what it was asked for
    lines: list[str] = []
    dest = download(f"{http_server.url}/slow.bin", tmp_path / "slow.bin", progress=False, retries=2,
                    backoff=0.5, log=lines.append)
    assert dest.read_bytes() == payload
    assert len(http_server.requests) == 7 and waits == [0.5] * 6
    assert all("retry 1/2" in line for line in lines), lines


def test_retries_without_new_bytes_end_the_download_after_progress(tmp_path, http_server, waits):
    payload = np.random.default_rng(14).bytes(400_000)
    http_server.files["/stuck.bin"] = payload
    http_server.drops_left = 3

    def stop_serving():  # after the last drop the server only answers 503
        if http_server.drops_left == 0:
            http_server.script = [(503, {})] * 10

    http_server.on_drop = stop_serving
    with pytest.raises(DownloadError, match=r"(?s)stuck\.bin failed after 2 retries in a row without new bytes: "
                                            r"HTTP 503.*[\d,]+ bytes are kept"):
        download(f"{http_server.url}/stuck.bin", tmp_path / "stuck.bin", progress=False, retries=2,
                 backoff=0.5, log=lambda _: None)
    assert len(http_server.requests) == 5 and waits == [0.5, 0.5, 0.5, 1.0]
    kept = (tmp_path / "stuck.bin.part").read_bytes()
    assert payload.startswith(kept) and not (tmp_path / "stuck.bin").exists()


def test_restarts_from_the_first_byte_are_not_progress(tmp_path, http_server, waits):
    # a server without Range support that drops every response halfway: each attempt gets the
    # same first half again, which is no new bytes, so the retries stay bounded
    http_server.files["/loop.bin"] = np.random.default_rng(15).bytes(200_000)
    http_server.drops_left, http_server.ranges = 100, False
    with pytest.raises(DownloadError, match=r"failed after 3 retries in a row without new bytes"):
        download(f"{http_server.url}/loop.bin", tmp_path / "loop.bin", progress=False, retries=3,
                 backoff=0.5, log=lambda _: None)
    assert len(http_server.requests) == 4 and waits == [0.5, 1.0, 2.0]


# --- If-Range: the rest of a file is appended only while the file on the server is unchanged ---

_VALIDATORS = {  # kind: (validator headers of the first version, of the changed one, the If-Range expected)
    "etag": ({"etag": '"v1"'}, {"etag": '"v2"'}, '"v1"'),
    "last-modified": ({"modified": "Wed, 01 Jan 2025 00:00:00 GMT"}, {"modified": "Thu, 02 Jan 2025 00:00:00 GMT"},
                      "Wed, 01 Jan 2025 00:00:00 GMT"),
    "weak etag": ({"etag": 'W/"v1"', "modified": "Wed, 01 Jan 2025 00:00:00 GMT"},
                  {"etag": 'W/"v2"', "modified": "Thu, 02 Jan 2025 00:00:00 GMT"}, "Wed, 01 Jan 2025 00:00:00 GMT"),
}


def _serve(server, path: str, data: bytes, headers: dict) -> None:
    server.files[path] = data
    server.etag, server.modified = headers.get("etag"), headers.get("modified")


@pytest.mark.parametrize("kind", sorted(_VALIDATORS))
def test_a_file_changed_between_attempts_is_fetched_again_whole(tmp_path, http_server, kind):
    old, new = np.random.default_rng(16).bytes(300_000), np.random.default_rng(17).bytes(300_000)
    first, changed, sent = _VALIDATORS[kind]
    _serve(http_server, "/v.bin", old, first)
    http_server.drops_left = 1
    http_server.on_drop = lambda: _serve(http_server, "/v.bin", new, changed)
    lines: list[str] = []
    dest = download(f"{http_server.url}/v.bin", tmp_path / "v.bin", size=len(new), progress=False,
                    log=lines.append)
    assert dest.read_bytes() == new  # not the old first half with the new second half
    assert http_server.if_ranges == [None, sent] and http_server.requests[1][1].startswith("bytes=")
    assert "changed on the server" in lines[-1] and "from the first byte" in lines[-1]
    assert sorted(p.name for p in tmp_path.iterdir()) == ["v.bin", "v.bin.lock"]


@pytest.mark.parametrize("kind", sorted(_VALIDATORS) + ["none"])
def test_an_unchanged_file_is_resumed_with_if_range(tmp_path, http_server, kind):
    payload = np.random.default_rng(18).bytes(300_000)
    _serve(http_server, "/u.bin", payload, _VALIDATORS[kind][0] if kind != "none" else {})
    http_server.drops_left = 1
    dest = download(f"{http_server.url}/u.bin", tmp_path / "u.bin", progress=False, log=lambda _: None)
    assert dest.read_bytes() == payload
    assert http_server.if_ranges == [None, _VALIDATORS[kind][2] if kind != "none" else None]
    assert len(http_server.requests) == 2  # the 206 was appended: no third request from the first byte


def test_a_later_run_resumes_with_the_validator_of_the_kept_bytes(tmp_path, http_server):
    old, new = np.random.default_rng(19).bytes(300_000), np.random.default_rng(20).bytes(300_000)
    _serve(http_server, "/n.bin", old, {"etag": '"v1"'})
    http_server.drops_left = 1
    with pytest.raises(DownloadError, match=r"failed after 0 retries.*bytes are kept"):
        download(f"{http_server.url}/n.bin", tmp_path / "n.bin", progress=False, retries=0, log=lambda _: None)
    assert old.startswith((tmp_path / "n.bin.part").read_bytes())
    _serve(http_server, "/n.bin", new, {"etag": '"v2"'})  # changed before the next run
    dest = download(f"{http_server.url}/n.bin", tmp_path / "n.bin", sha256=hashlib.sha256(new).hexdigest(),
                    progress=False, log=lambda _: None)
    assert dest.read_bytes() == new and http_server.if_ranges[-1] == '"v1"'
    assert sorted(p.name for p in tmp_path.iterdir()) == ["n.bin", "n.bin.lock"]


def test_a_damaged_validator_file_resumes_by_range_alone(tmp_path, http_server):
    payload = np.random.default_rng(21).bytes(100_000)
    _serve(http_server, "/d.bin", payload, {"etag": '"v1"'})
    (tmp_path / "d.bin.part").write_bytes(payload[:40_000])
    (tmp_path / "d.bin.part.validator").write_bytes(b'"v1\x00\r\n')  # damaged: not a header value
    dest = download(f"{http_server.url}/d.bin", tmp_path / "d.bin", size=len(payload), progress=False)
    assert dest.read_bytes() == payload and http_server.if_ranges == [None]
    assert http_server.requests == [("/d.bin", "bytes=40000-")]
    assert not (tmp_path / "d.bin.part.validator").exists()


def test_ctrl_c_keeps_nothing_in_place_and_a_complete_part_is_not_fetched_again(tmp_path, http_server, monkeypatch):
    # Ctrl-C while the complete bytes were being checked left the whole file in .part; the next
    # run asked for the bytes after it, got 416 and threw the whole download away to start over
    payload = np.random.default_rng(9).bytes(500_000)
    http_server.files["/k.bin"] = payload
    digest = hashlib.sha256(payload).hexdigest()
    from vdbbench.datasets import download as dl

    real_sha = dl.sha256_file

    def interrupted(path, *a, **kw):
        raise KeyboardInterrupt

    monkeypatch.setattr(dl, "sha256_file", interrupted)
    with pytest.raises(KeyboardInterrupt):
        download(f"{http_server.url}/k.bin", tmp_path / "k.bin", sha256=digest, progress=False)
    assert not (tmp_path / "k.bin").exists() and (tmp_path / "k.bin.part").read_bytes() == payload
    monkeypatch.setattr(dl, "sha256_file", real_sha)
    download(f"{http_server.url}/k.bin", tmp_path / "k.bin", sha256=digest, progress=False)
    assert (tmp_path / "k.bin").read_bytes() == payload and not (tmp_path / "k.bin.part").exists()
    assert [r for _, r in http_server.requests] == [None, "bytes=500000-"]  # 416: already complete


def test_ctrl_c_during_a_cli_fetch_is_a_clean_exit_and_the_next_fetch_resumes(tmp_path, http_server, data_dir, monkeypatch):
    import os
    import signal
    import subprocess
    import sys
    import time

    http_server.files["/tiny-16-euclidean.hdf5"] = payload = _tiny_hdf5_bytes(tmp_path)
    http_server.hold = threading.Event()  # half the file, then the server stalls
    _registry(tmp_path, _TINY.format(url=http_server.url), monkeypatch)
    code = ("import signal, sys\nsignal.signal(signal.SIGINT, signal.default_int_handler)\n"
            "from vdbbench.cli import main\nsys.exit(main(['datasets', 'fetch', 'tiny', '--no-groundtruth']))")
    proc = subprocess.Popen([sys.executable, "-c", code], env=dict(os.environ), stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)
    part = data_dir / "tiny" / "tiny-16-euclidean.hdf5.part"
    deadline = time.monotonic() + 60
    while not (part.exists() and part.stat().st_size >= len(payload) // 2) and proc.poll() is None:
        assert time.monotonic() < deadline, "the fetch never started"
        time.sleep(0.02)
    proc.send_signal(signal.SIGINT)
    out, err = proc.communicate(timeout=60)
    http_server.hold.set()
    assert proc.returncode == 130, (out, err)
    assert "interrupted" in err and "Traceback" not in err
    assert not (data_dir / "tiny" / "tiny-16-euclidean.hdf5").exists()
    assert part.read_bytes() == payload[: part.stat().st_size]  # a clean prefix, resumable
    http_server.hold = None
    entry, source = reg.fetch("tiny", progress=False)
    assert (entry.folder / source.filename).read_bytes() == payload
    assert http_server.requests[-1][1] == f"bytes={len(payload) // 2}-"


# --- acceptance without a published checksum: the structure of the file is checked before it is kept ---


def test_hdf5_cut_short_without_a_length_is_refused_and_nothing_kept(tmp_path, http_server, data_dir, monkeypatch, capsys):
    # with no Content-Length a connection that died early looked like the end of the file: the
    # stump was renamed into place and its size and sha256 recorded as the set's identity
    from vdbbench.cli import main

    http_server.files["/tiny-16-euclidean.hdf5"] = payload = _tiny_hdf5_bytes(tmp_path)
    http_server.cut = len(payload) * 2 // 3
    _registry(tmp_path, _TINY.format(url=http_server.url), monkeypatch)
    with pytest.raises(DownloadError, match=r"(?s)hdf5\.part: cannot read HDF5 file.*nothing was put at"):
        load_dataset("tiny", offline_fallback=False, progress=False)
    folder = data_dir / "tiny"
    assert sorted(p.name for p in folder.iterdir()) == ["tiny-16-euclidean.hdf5.lock"]  # no file, no record
    assert main(["datasets", "fetch", "tiny"]) == 1
    out = " ".join(capsys.readouterr().out.split())  # rich wraps at the terminal's width
    assert "fetch failed" in out and "not usable" in out and "Traceback" not in out
    http_server.cut = None  # the next, whole download is accepted
    assert load_dataset("tiny", offline_fallback=False, progress=False).n == 300


def _hdf5_payload(tmp_path, n=300, nq=12, dim=16, dtype=np.float32, metric="l2", neighbors_rows=None) -> bytes:
    import h5py

    rng = np.random.default_rng(11)
    path = tmp_path / "variant.hdf5"
    with h5py.File(path, "w") as f:
        f.attrs["distance"] = {"l2": "euclidean", "cosine": "angular"}[metric]
        f.create_dataset("train", data=rng.random((n, dim)).astype(dtype))
        f.create_dataset("test", data=rng.random((nq, dim)).astype(dtype))
        if neighbors_rows is not None:
            f.create_dataset("neighbors", data=np.zeros((neighbors_rows, 100), np.int32))
            f.create_dataset("distances", data=np.zeros((neighbors_rows, 100), np.float32))
    return path.read_bytes()


@pytest.mark.parametrize("variant,message", [
    ({"n": 299}, "n 299 where the registry says 300"),
    ({"nq": 10}, "nq 10 where the registry says 12"),
    ({"dim": 8}, "dim 8 where the registry says 16"),
    ({"metric": "cosine"}, "metric cosine where the registry says l2"),
    ({"dtype": np.float64}, "train is float64 where the registry says float32"),
    ({"neighbors_rows": 11}, "neighbors has 11 rows for 12 queries"),
    ("page", "not an HDF5 file"),
])
def test_hdf5_that_is_not_the_registered_set_is_refused(tmp_path, http_server, data_dir, monkeypatch, variant, message):
    body = b"<html>503 Service Unavailable</html>" if variant == "page" else _hdf5_payload(tmp_path, **variant)
    http_server.files["/tiny-16-euclidean.hdf5"] = body
    _registry(tmp_path, _TINY.format(url=http_server.url), monkeypatch)
    with pytest.raises(DownloadError, match=message):
        reg.fetch("tiny", progress=False)
    assert sorted(p.name for p in (data_dir / "tiny").iterdir()) == ["tiny-16-euclidean.hdf5.lock"]


def test_hand_placed_hdf5_of_other_sizes_is_refused_at_load(tmp_path, data_dir, monkeypatch):
    # the load compared only metric and dim with the registry: a file of 299 base vectors
    # placed in the cache loaded as the registered 300
    _registry(tmp_path, _TINY.format(url="http://127.0.0.1:9"), monkeypatch)
    (data_dir / "tiny").mkdir()
    (data_dir / "tiny" / "tiny-16-euclidean.hdf5").write_bytes(_hdf5_payload(tmp_path, n=299))
    with pytest.raises(ValueError, match="not the registered tiny: n 299 where the registry says 300"):
        load_dataset("tiny", offline_fallback=False, progress=False)


def test_registry_dtype_must_be_a_type_name(tmp_path, monkeypatch):
    _registry(tmp_path, _TINY.format(url="http://127.0.0.1:9").replace('"float32"', '"floaty"'), monkeypatch)
    with pytest.raises(ValueError, match="dtype 'floaty' is not a numpy type name"):
        reg.registry()


def _mini_tarball(tmp_path, *, n=500, nq=6, dim=8, gt_rows=6, gt_k=100, skip=(), query_dim=None) -> bytes:
    rng = np.random.default_rng(12)
    folder = tmp_path / "tar-src" / "mini"
    folder.mkdir(parents=True, exist_ok=True)
    write_vecs(folder / "mini_base.fvecs", rng.random((n, dim)).astype(np.float32))
    write_vecs(folder / "mini_query.fvecs", rng.random((nq, query_dim or dim)).astype(np.float32))
    write_vecs(folder / "mini_groundtruth.ivecs", np.zeros((gt_rows, gt_k), np.int32))
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w:gz") as tar:
        for name in ("mini_base.fvecs", "mini_query.fvecs", "mini_groundtruth.ivecs"):
            if name not in skip:
                tar.add(folder / name, arcname=f"mini/{name}")
    return buf.getvalue()


_MINI = """
[datasets.mini]
metric = "l2"
dim = 8
n = 500
nq = 6
[[datasets.mini.sources]]
url = "{url}/mini.tar.gz"
format = "texmex-tar"
base = "mini/mini_base.fvecs"
query = "mini/mini_query.fvecs"
groundtruth = "mini/mini_groundtruth.ivecs"
"""


@pytest.mark.parametrize("variant,message", [
    ("cut", r"not a complete tar archive"),
    ({"n": 499}, r"mini_base\.fvecs holds 499 vectors where the registry says n 500"),
    ({"nq": 5, "gt_rows": 5}, r"mini_query\.fvecs holds 5 vectors where the registry says nq 6"),
    ({"query_dim": 4}, r"mini_query\.fvecs has dimension 4 where the registry says dim 8"),
    ({"gt_rows": 7}, r"mini_groundtruth\.ivecs holds 7 rows where the registry says nq 6"),
    ({"gt_k": 5}, r"holds 5 neighbours per query"),
    ({"skip": ("mini_query.fvecs",)}, r"the tarball lacks mini/mini_query\.fvecs"),
])
def test_texmex_tarball_that_is_not_the_registered_set_is_refused(tmp_path, http_server, data_dir, monkeypatch,
                                                                   variant, message):
    # a tarball cut short without a length (or of other counts) was accepted into the cache; the
    # cut one failed only at extraction, after its checksum had been recorded as the set's
    good = _mini_tarball(tmp_path)
    if variant == "cut":
        http_server.files["/mini.tar.gz"] = good
        http_server.cut = len(good) - 200
    else:
        http_server.files["/mini.tar.gz"] = _mini_tarball(tmp_path, **variant)
    _registry(tmp_path, _MINI.format(url=http_server.url), monkeypatch)
    with pytest.raises(DownloadError, match=message):
        reg.fetch("mini", progress=False)
    assert sorted(p.name for p in (data_dir / "mini").iterdir()) == ["mini.tar.gz.lock"]
    http_server.files["/mini.tar.gz"], http_server.cut = good, None
    assert load_dataset("mini", offline_fallback=False, progress=False).nq == 6


def test_packaged_hdf5_sources_name_their_dtype():
    for name, e in reg.registry().items():
        for s in e.sources:
            assert s.format != "ann-hdf5" or s.dtype == "float32", (name, s.url)
