#!/usr/bin/env python
"""Where a served search runs: `vdbbench serve` with searches in the async handler against
searches on tokio's blocking pool, under `wrk` (one query per request, keep-alive connections),
rounds alternating in one process on one saved index; prints each round's QPS and p50/p99 and
the median per-round ratio handler / blocking. Also the in-process one-query-per-call QPS at
one thread for scale.

Usage: python benchmarks/perf/serve_search_on.py [DATASET] [--connections 4] [--seconds 8]
       [--rounds 3] [--queries 1000] [--workers N] [--index FILE]

DATASET: any name or path vdbbench reads (default synth-sift-100k). The index is built by a
first server from vectors inserted over HTTP and saved (--index, default a temporary file);
later servers start from it. Needs `wrk` (Debian: apt-get install wrk). Client and server share
the machine's cores: read the figures as the two placements side by side, not as a ceiling.
"""
from usage import help_or_usage

help_or_usage(__doc__, 0)

import argparse  # noqa: E402
import http.client  # noqa: E402
import json  # noqa: E402
import re  # noqa: E402
import statistics  # noqa: E402
import subprocess  # noqa: E402
import tempfile  # noqa: E402
import time  # noqa: E402
from pathlib import Path  # noqa: E402

from vdbbench import IvfIndex, Server, simd_level  # noqa: E402
from vdbbench.datasets.loader import resolve  # noqa: E402  (dataset, ground-truth folder)

LUA = """
local bodies = {}
for line in io.lines("%s") do bodies[#bodies + 1] = line end
local i = 0
request = function()
  i = i %% #bodies + 1
  return wrk.format("POST", "/search", {["Content-Type"] = "application/json"}, bodies[i])
end
"""

ap = argparse.ArgumentParser()
ap.add_argument("dataset", nargs="?", default="synth-sift-100k")
ap.add_argument("--connections", type=int, default=4)
ap.add_argument("--seconds", type=int, default=8)
ap.add_argument("--rounds", type=int, default=3)
ap.add_argument("--queries", type=int, default=1000)
ap.add_argument("--workers", type=int)
ap.add_argument("--index")
args = ap.parse_args()

ds, _ = resolve(args.dataset)
tmp = Path(tempfile.mkdtemp(prefix="serve-search-on-"))
index_path = Path(args.index) if args.index else tmp / "index.ivf"
if not index_path.exists():
    with Server.start(port=0, index=str(index_path)) as s:
        conn = http.client.HTTPConnection("127.0.0.1", s.port)
        for lo in range(0, len(ds.train), 1000):
            rows = [{"id": lo + j, "vector": v.tolist()} for j, v in enumerate(ds.train[lo:lo + 1000])]
            conn.request("POST", "/bulk_insert", json.dumps({"vectors": rows}), {"Content-Type": "application/json"})
            assert conn.getresponse().read() and True
        conn.request("POST", "/build", "{}")
        stats = json.loads(conn.getresponse().read())
        print(f"built over HTTP: {stats['indexed']} vectors, nlist {stats['nlist']}, "
              f"train {stats['build']['train_s']:.2f} s, add {stats['build']['add_s']:.2f} s")
queries = ds.test[: args.queries]
body_file = tmp / "queries.jsonl"
body_file.write_text("".join(json.dumps({"vector": q.tolist(), "top_k": 10}) + "\n" for q in queries))
lua = tmp / "search.lua"
lua.write_text(LUA % body_file)


def ms(text: str) -> float:
    m = re.fullmatch(r"([\d.]+)(us|ms|s|m)", text)
    if m is None:
        raise SystemExit(f"cannot read wrk's latency {text!r}")
    v, unit = m.groups()
    return float(v) * {"us": 1e-3, "ms": 1.0, "s": 1e3, "m": 6e4}[unit]


def run(search_on: str) -> tuple[float, float, float]:
    with Server.start(port=0, index=str(index_path), search_on=search_on, workers=args.workers) as s:
        out = subprocess.run(
            ["wrk", "-t1", f"-c{args.connections}", f"-d{args.seconds}s", "--latency", "-s", str(lua), s.url],
            capture_output=True, text=True, check=True).stdout
        stats = s.stats()
    assert stats["rejected"] == 0 and stats["queries"] > 0, stats
    qps = float(re.search(r"Requests/sec:\s+([\d.]+)", out).group(1))
    p50 = ms(re.search(r"50%\s+(\S+)", out).group(1))
    p99 = ms(re.search(r"99%\s+(\S+)", out).group(1))
    return qps, p50, p99


index = IvfIndex.load(index_path)
with Server.start(port=0, index=str(index_path)) as s:
    st = s.stats()["search"]
kw = {k: st[k] for k in ("nprobe", "rerank", "reorder", "probe_ratio")}
print(f"SIMD {simd_level()}; search settings {kw}; wrk -t1 -c{args.connections} -d{args.seconds}s")
ratios = []
for r in range(args.rounds):
    res = {}
    for mode in ("handler", "blocking") if r % 2 == 0 else ("blocking", "handler"):
        res[mode] = run(mode)
        q, p50, p99 = res[mode]
        print(f"round {r + 1} {mode:8s}: {q:9,.0f} QPS  p50 {p50:.3f} ms  p99 {p99:.3f} ms")
    ratios.append(res["handler"][0] / res["blocking"][0])
t0 = time.perf_counter()
for q in queries:
    index.search(q[None, :], 10, threads=1, **kw)
inproc = len(queries) / (time.perf_counter() - t0)
print(f"handler / blocking QPS: median {statistics.median(ratios):.3f} [{min(ratios):.3f}-{max(ratios):.3f}] "
      f"over {args.rounds} rounds; in-process one query per call, 1 thread: {inproc:,.0f} QPS")
