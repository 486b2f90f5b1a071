"""The seed harness's own client (KCORES/vector-db-bench's `vector-db-benchmark` binary, built
by the user) run on vdbbench's data, so a served figure can be quoted as the leaderboard reads it.

That client reads JSON files: base and query vectors as `[{"id": i, "vector": [...]}]` and the
ground truth as `[{"query_id": i, "neighbors": [...]}]`; it bulk-inserts the base itself, sends
its warm-up, then every query with N concurrent requests, and prints one JSON object."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import numpy as np

from vdbbench.served.client import ServedError


def _rows(x: np.ndarray) -> str:
    return "[" + ",".join(
        '{"id":%d,"vector":[%s]}' % (i, ",".join(repr(float(v)) for v in row)) for i, row in enumerate(x.tolist())
    ) + "]"


def data_files(ds, sha: str) -> dict[str, Path]:
    """The three files of ``ds`` in that client's format, written once per dataset (by content
    hash and query count) under VDBBENCH_DATA/kcores/."""
    root = Path(os.environ.get("VDBBENCH_DATA") or Path.home() / ".cache" / "vdbbench")
    folder = root / "kcores" / f"{ds.name}-{sha[:12]}-{ds.nq}"
    files = {"base": folder / "base_vectors.json", "query": folder / "query_vectors.json",
             "gt": folder / "ground_truth.json"}
    if all(f.is_file() for f in files.values()):
        return files
    folder.mkdir(parents=True, exist_ok=True)
    gt = "[" + ",".join('{"query_id":%d,"neighbors":[%s]}' % (i, ",".join(map(str, row)))
                        for i, row in enumerate(np.asarray(ds.neighbors).tolist())) + "]"
    for key, text in (("base", _rows(ds.train)), ("query", _rows(ds.test)), ("gt", gt)):
        tmp = files[key].with_suffix(".tmp")
        tmp.write_text(text)
        os.replace(tmp, files[key])
    return files


def run(binary: str, url: str, files: dict[str, Path], concurrency: int, warmup: int,
        timeout_s: float = 7200.0) -> dict:
    """Runs the client against ``url`` (a server that holds nothing yet) and returns its JSON:
    `benchmark` (qps, recall, latencies, ...) and `anti_cheat`."""
    argv = [binary, "--server-url", url, "--concurrency", str(concurrency), "--warmup", str(warmup),
            "--base-vectors", str(files["base"]), "--query-vectors", str(files["query"]),
            "--ground-truth", str(files["gt"])]
    try:
        done = subprocess.run(argv, capture_output=True, text=True, timeout=timeout_s, stdin=subprocess.DEVNULL)
    except subprocess.TimeoutExpired:
        raise ServedError(f"{binary} took over {timeout_s:g} s") from None
    except OSError as exc:
        raise ServedError(f"cannot run {binary}: {exc}") from None
    if done.returncode != 0:
        tail = "\n".join(done.stderr.splitlines()[-15:])
        raise ServedError(f"{binary} exited with status {done.returncode}:\n{tail}")
    try:
        out = json.loads(done.stdout)
        out["benchmark"]["qps"]
    except (json.JSONDecodeError, KeyError, TypeError):
        raise ServedError(f"{binary} printed no result JSON: {done.stdout[-500:]!r}") from None
    return {**out, "argv": argv}
