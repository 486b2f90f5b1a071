"""`vdbbench serve` over real loopback HTTP: the harness's API, bad input answered with a 4xx JSON
error while the server goes on, results equal to in-process `IvfIndex.search`, and the command
stopped by SIGINT."""

from __future__ import annotations

import http.client
import json
import os
import signal
import subprocess
import sys

import numpy as np
import pytest

from vdbbench import IvfIndex, InvalidInput, Server
from vdbbench.cli import main

DIM = 32


def clustered(n: int, seed: int) -> np.ndarray:
    """SIFT-like integer vectors around 40 centres."""
    rng = np.random.default_rng(seed)
    centres = rng.integers(0, 120, size=(40, DIM))
    rows = centres[rng.integers(0, 40, size=n)] + rng.integers(-12, 13, size=(n, DIM))
    return np.clip(rows, 0, 255).astype(np.float32)


class Client:
    """One keep-alive connection; every answer is parsed as JSON."""

    def __init__(self, port: int):
        self.conn = http.client.HTTPConnection("127.0.0.1", port, timeout=60)

    def call(self, method: str, path: str, body: bytes | str | None = None) -> tuple[int, dict]:
        if isinstance(body, str):
            body = body.encode()
        self.conn.request(method, path, body=body, headers={"Content-Type": "application/json"})
        resp = self.conn.getresponse()
        data = resp.read()
        assert resp.getheader("Content-Type", "").startswith("application/json"), (resp.status, data)
        return resp.status, json.loads(data)

    def post(self, path: str, obj) -> tuple[int, dict]:
        return self.call("POST", path, json.dumps(obj))

    def bulk(self, x: np.ndarray, ids) -> tuple[int, dict]:
        items = [{"id": int(i), "vector": v.tolist()} for i, v in zip(ids, x)]
        return self.post("/bulk_insert", {"vectors": items})

    def search(self, q: np.ndarray, k: int = 10) -> tuple[np.ndarray, np.ndarray]:
        status, body = self.post("/search", {"vector": q.tolist(), "top_k": k})
        assert status == 200, body
        hits = body["results"]
        return np.array([h["distance"] for h in hits], np.float32), np.array([h["id"] for h in hits], np.int64)


def settings_kwargs(stats: dict) -> dict:
    s = stats["search"]
    return {"nprobe": s["nprobe"], "rerank": s["rerank"], "reorder": s["reorder"], "probe_ratio": s["probe_ratio"]}


def assert_served_equals_in_process(client: Client, index: IvfIndex, stats: dict, queries: np.ndarray) -> None:
    D, I = index.search(queries, 10, threads=1, **settings_kwargs(stats))
    for q, d, i in zip(queries, D, I):
        got_d, got_i = client.search(q)
        np.testing.assert_array_equal(got_i, i)
        np.testing.assert_array_equal(got_d, d)


@pytest.fixture(scope="module")
def data():
    x = clustered(4000, 1)
    ids = np.arange(4000, dtype=np.int64) * 7 + 3  # not 0..n: the ids given are the ids kept
    queries = clustered(300, 2) + 0.5  # off the integer grid: no exact codes
    return x, ids, queries


def test_served_results_equal_the_saved_index_searched_in_process(tmp_path, data):
    x, ids, queries = data
    path = tmp_path / "served.ivf"
    with Server.start(port=0, index=str(path)) as server:
        c = Client(server.port)
        assert c.call("GET", "/health") == (200, {"status": "ok", "state": "empty"})
        assert c.post("/insert", {"id": int(ids[0]), "vector": x[0].tolist()}) == (200, {"status": "ok"})
        for lo in range(1, 4000, 1000):
            hi = min(lo + 1000, 4000)
            assert c.bulk(x[lo:hi], ids[lo:hi]) == (200, {"status": "ok", "inserted": hi - lo})
        status, stats = c.post("/build", {})
        assert status == 200, stats
        assert stats["state"] == "ready" and stats["indexed"] == 4000 and stats["builds"] == 1
        assert stats["build"]["saved_to"] == str(path)
        assert stats["search"]["reorder"] == 100 and stats["search"]["probe_ratio"] == pytest.approx(1.4)
        index = IvfIndex.load(path)
        assert index.nlist == stats["nlist"] and len(index) == 4000
        assert_served_equals_in_process(c, index, stats, queries)
        assert server.stats()["queries"] == len(queries)
        # A vector inserted after the build is found, under its own id.
        new = np.full(DIM, 250.0, np.float32)
        assert c.post("/insert", {"id": 1, "vector": new.tolist()}) == (200, {"status": "ok"})
        d, i = c.search(new, 1)
        assert (i.tolist(), d.tolist()) == ([1], [0.0])


def test_a_server_started_from_an_index_built_in_process(tmp_path, data):
    x, ids, queries = data
    index = IvfIndex(DIM, nlist=50, seed=3)
    index.train(x)
    index.add(x, ids)
    path = tmp_path / "in-process.ivf"
    index.save(path)
    # (searches in the async handler here; on the blocking pool, the default, above)
    kw = dict(nprobe=9, reorder=40, probe_ratio=1.3, rerank=20, search_on="handler")
    with Server.start(port=0, index=str(path), **kw) as server:
        c = Client(server.port)
        stats = server.stats()
        assert stats["state"] == "ready" and stats["build"]["loaded_from"] == str(path)
        assert stats["search_on"] == "handler"
        assert stats["search"] == {"nprobe": 9, "rerank": 20, "reorder": 40, "probe_ratio": pytest.approx(1.3), "threads": 1}
        assert_served_equals_in_process(c, index, stats, queries)
        # Its ids are taken; new ones are added.
        status, body = c.post("/insert", {"id": int(ids[5]), "vector": x[5].tolist()})
        assert status == 409 and "inserted before" in body["error"]
        assert c.post("/insert", {"id": 5, "vector": x[5].tolist()})[0] == 200
        assert server.stats()["indexed"] == 4001
    # Stopping saved the vector accepted after the load back into the file.
    again = IvfIndex.load(path)
    assert again.ntotal == 4001
    _, got = again.search(x[5:6], 1, nprobe=50)
    assert got[0, 0] in (5, ids[5])  # the same vector under both ids
    # --recall-target on a saved index: measured at the start on the vectors the file holds.
    with Server.start(port=0, index=str(path), recall_target=0.9) as server:
        stats = server.stats()
        assert stats["state"] == "ready" and stats["build"]["tune"]["queries"] == 500
        assert stats["build"]["tune"]["sample_recall"] >= 0.905
        assert_served_equals_in_process(Client(server.port), again, stats, queries[:50])


def test_bad_input_is_a_4xx_json_error_and_the_server_goes_on(data):
    x, ids, _ = data
    with Server.start(port=0, max_body_mb=0.05) as server:
        c = Client(server.port)
        q = x[0].tolist()
        status, body = c.post("/search", {"vector": q, "top_k": 3})
        assert status == 409 and "no vectors inserted" in body["error"]
        for lo in range(0, 300, 50):  # ~10 kB a request, under the 52 kB limit
            assert c.bulk(x[lo:lo + 50], ids[lo:lo + 50])[0] == 200
        bad = [
            (c.call("POST", "/search", '{"vector": [1, 2'), 400, "invalid JSON"),
            (c.call("POST", "/search", '{"vector": [NaN], "top_k": 1}'), 400, "invalid JSON"),
            (c.post("/search", {"vector": "x", "top_k": 1}), 422, "invalid type"),
            (c.post("/search", {"vector": q}), 422, "top_k"),
            (c.post("/insert", {"id": 10**6, "vector": [1.0, 2.0]}), 400, f"dim {DIM}"),
            (c.post("/search", {"vector": [1.0, 2.0], "top_k": 1}), 400, f"dim {DIM}"),
            (c.call("POST", "/insert", '{"id": 999999, "vector": [1e39' + ", 0" * (DIM - 1) + "]}"), 400, "finite"),
            (c.post("/search", {"vector": q, "top_k": 0}), 400, "top_k=0"),
            (c.post("/search", {"vector": q, "top_k": 301}), 400, "top_k=301"),
            (c.post("/insert", {"id": int(ids[4]), "vector": q}), 409, "inserted before"),
            (c.post("/bulk_insert", {"vectors": [{"id": 77, "vector": q}, {"id": 77, "vector": q}]}), 400, "given twice"),
            (c.post("/insert", {"id": 2**63, "vector": q}), 400, "above the largest id"),
            (c.post("/insert", {"id": -1, "vector": q}), 422, "invalid value"),
            (c.bulk(x[:300], range(10**6, 10**6 + 300)), 413, "limit of 52428 bytes"),
            (c.call("GET", "/nowhere"), 404, "no route"),
        ]
        for (status, body), want, needle in bad:
            assert status == want and needle in body["error"], (status, body, want, needle)
            assert c.call("GET", "/health")[0] == 200
        stats = server.stats()
        assert stats["vectors"] == 300 and stats["rejected"] == len(bad) + 1
        d, i = c.search(x[7], 3)
        assert i[0] == ids[7] and d[0] == 0.0


def test_start_refuses_bad_settings_and_a_port_in_use():
    with pytest.raises(InvalidInput, match="recall_target"):
        Server.start(port=0, recall_target=1.5)
    with pytest.raises(InvalidInput, match="port"):
        Server.start(port=70000)
    with Server.start(port=0) as server:
        with pytest.raises(OSError, match="cannot listen"):
            Server.start(port=server.port)
    assert server.stopped and server.wait(0)


def test_bad_flags_exit_2_with_one_line(capsys):
    assert main(["serve", "--port", "0", "--recall-target", "2"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "--recall-target 2.0" in err[0]
    assert main(["serve", "--port", "0", "--reorder", "100", "--dim", "6"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "multiple of 4" in err[0]


def test_vdbbench_serve_stops_on_sigint_and_exits_0(tmp_path, data):
    x, ids, _ = data
    env = {**os.environ, "PORT": "0"}
    proc = subprocess.Popen(
        [sys.executable, "-m", "vdbbench", "serve", "--nlist", "20", "--recall-target", "0.9"],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env,
    )
    try:
        first = proc.stdout.readline()
        assert "listening on http://127.0.0.1:" in first, first + proc.stderr.read()
        port = int(first.split("http://127.0.0.1:")[1].split()[0])
        c = Client(port)
        assert c.bulk(x[:500], ids[:500])[0] == 200
        assert c.search(x[3], 5)[1][0] == ids[3]
        c.conn.close()
        proc.send_signal(signal.SIGINT)
        out, err = proc.communicate(timeout=60)
    finally:
        proc.kill()
    assert proc.returncode == 0, err
    assert "SIGINT received; stopped cleanly after 1 queries (500 vectors held)" in out
    assert "building: 500 vectors of dim 32, nlist 20" in out
    assert "recall target: nprobe " in out and "on 500 sampled inserted vectors (reaches the target 0.9" in out
