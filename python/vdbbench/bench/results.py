"""Result files (schema vdbbench.result/1): building, headline, machine and source identity, I/O."""

from __future__ import annotations

import datetime as _dt
import hashlib
import json
import math
import os
import platform
import subprocess
from pathlib import Path

SCHEMA = "vdbbench.result/1"
# Additions a /1 reader may ignore (docs/result-schema.md): 1 = index.source, swept (points
# swept for recall, with "timed"), run.time_points, concurrent (client levels); 2 =
# build.hugepages; 3 = headline rivals; 4 = recall10_se, recall10_low, run.recall_confidence;
# 5 = served targets (concurrent.workers "http", served); 6 = run.knobs, run.sweep (fast sweeps:
# sweep_queries, skipped; swept recall_queries, timed_modes, qps_estimate_single). Absent = 0.
SCHEMA_MINOR = 6
_REQUIRED = ("schema", "dataset", "index", "machine", "build", "points", "headline")


def cpu_model() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.lower().startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def machine_info(simd: str | None = None, versions: dict | None = None) -> dict:
    info = {
        "cpu": cpu_model(),
        "cores": os.cpu_count(),
        "simd": simd,
        "platform": platform.platform(),
        "python": platform.python_version(),
    }
    info.update(versions or {})
    return info


def source_root() -> Path | None:
    """The git checkout this package runs from, if it runs from one."""
    here = Path(__file__).resolve()
    for parent in here.parents:
        if (parent / ".git").exists():
            return parent
    return None


def git_info() -> dict | None:
    """Commit of the source tree and whether tracked files differ from it (None outside git)."""
    root = source_root()
    if root is None:
        return None
    try:
        commit = subprocess.run(
            ["git", "-C", str(root), "rev-parse", "HEAD"], capture_output=True, text=True, timeout=10
        )
        if commit.returncode != 0:
            return None
        status = subprocess.run(
            ["git", "-C", str(root), "status", "--porcelain", "--untracked-files=no"],
            capture_output=True, text=True, timeout=30,
        )
        return {"commit": commit.stdout.strip(), "dirty": bool(status.stdout.strip())}
    except (OSError, subprocess.SubprocessError):
        return None


def dataset_sha256(ds) -> str:
    """The dataset's recorded hash, else one computed over its base vectors and queries."""
    if ds.sha256:
        return ds.sha256
    h = hashlib.sha256()
    for arr in (ds.train, ds.test):
        h.update(str(arr.shape).encode())
        h.update(memoryview(arr.astype("float32", copy=False).tobytes(order="C")))
    ds.sha256 = h.hexdigest()
    return ds.sha256


def dataset_record(dataset, sha: str) -> dict:
    """The `dataset` object of a result: what was measured, and what was asked for."""
    return {
        "name": dataset.name,
        "n": dataset.n,
        "dim": dataset.dim,
        "nq": dataset.nq,
        "metric": dataset.metric,
        "sha256": sha,
        "synthetic": bool(dataset.synthetic),
        "source": dataset.source,
        # what the user asked for, and why something else was measured (offline fallback)
        "requested": dataset.extra.get("requested"),
        "fallback_reason": dataset.extra.get("fallback_reason"),
        # --queries N measures the first N queries only; the hash identifies the full set
        "nq_total": int(dataset.extra.get("queries_total", dataset.nq)),
    }


def point_key(params: dict) -> str:
    return json.dumps(params, sort_keys=True)


#: What a headline entry copies from the point it chose.
HEADLINE_KEYS = ("params", "qps", "recall10", "recall10_low", "recall10_ids", "p50_ms", "p99_ms")


def held_recall(point: dict) -> float:
    """The recall@10 a point is held to the target by: the lower bound of its confidence
    interval when the run asked for one (``--recall-confidence``: ``recall10_low``), else its
    mean over the run's queries."""
    low = point.get("recall10_low")
    return point["recall10"] if low is None else low


def reaches(point: dict, target: float) -> bool:
    """Whether a swept or timed point reaches the target recall (see `held_recall`)."""
    return held_recall(point) >= target


def cheapest_points(points: list[dict], off_at_zero: tuple[str, ...] = ()) -> list[dict]:
    """The points no other point undercuts on every knob (knobs cost more as they grow).

    Every sweepable knob (nprobe, rerank, k_factor, efSearch) costs more as it grows, by
    construction; among points that all reach the target, one with every knob >= another's
    can only look faster through timing noise, so it does not compete for the headline. A knob
    in ``off_at_zero`` (`ParamSpace.off_at_zero`) turns a stage off at 0: which of 0 and a
    value above it costs less depends on the mode (our prefilter speeds up one query per call
    and slows a batch), so only values on the same side of 0 are ordered.
    """
    def no_dearer(knob: str, x, y) -> bool:
        if knob in off_at_zero and (x == 0) != (y == 0):
            return False
        return x <= y

    def undercut(q: dict, p: dict) -> bool:
        a, b = q["params"], p["params"]
        return q is not p and a.keys() == b.keys() and a != b and all(no_dearer(k, a[k], b[k]) for k in a)

    return [p for p in points if not any(undercut(q, p) for q in points)]


def compute_headline(points: list[dict], target: float, modes, threads, cost_ordered: bool = False,
                     off_at_zero: tuple[str, ...] = ()) -> list[dict]:
    """Per mode and thread count, the highest-QPS point that reaches the target (`reaches`), or nulls.

    With ``cost_ordered`` only the points no other undercuts on every knob compete (see
    `cheapest_points`): the same answer as the plain maximum on a quiet machine, without
    rewarding noise on a busy one.
    """
    out = []
    for mode in modes:
        for t in threads:
            ok = [p for p in points if p["mode"] == mode and p["threads"] == t and reaches(p, target)]
            if cost_ordered:
                ok = cheapest_points(ok, off_at_zero)
            best = max(ok, key=lambda p: p["qps"]) if ok else None
            entry = {"mode": mode, "threads": t}
            for key in HEADLINE_KEYS:
                entry[key] = best.get(key) if best else None
            out.append(entry)
    return out


def headline_entry(result: dict, mode: str, threads: int) -> dict | None:
    for entry in result.get("headline") or []:
        if entry["mode"] == mode and entry["threads"] == threads and entry["qps"] is not None:
            return entry
    return None


def measured_on(result: dict) -> tuple:
    """The data a result was measured on: its dataset's content hash and query count. Results
    that differ in it are of other data (ratios, plots and gates between them mean nothing)."""
    return (result["dataset"]["sha256"], result["dataset"]["nq"])


def target_met(result: dict) -> bool:
    """Every headline (mode and thread count) found a point reaching the target, and so did the
    concurrent clients when the run measured them (a `--mode concurrent` run has no headline)."""
    heads = result.get("headline") or []
    conc = result.get("concurrent")
    if not heads and not conc:
        return False
    return all(h["qps"] is not None for h in heads) and (not conc or bool(conc.get("reaches_target")))


def now_iso() -> str:
    return _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds")


def write_json(path: Path, data: dict) -> None:
    """Write atomically: a crash never leaves half a result file."""
    path = Path(path)
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(json.dumps(data, indent=1, sort_keys=False) + "\n")
    os.replace(tmp, path)


def load_result(path) -> dict:
    """Read and check a result file; ValueError says what is wrong with it."""
    path = Path(path)
    try:
        data = json.loads(path.read_text())
    except FileNotFoundError:
        raise ValueError(f"{path}: no such result file") from None
    except (OSError, json.JSONDecodeError) as exc:
        raise ValueError(f"{path}: not a readable JSON result file ({exc})") from None
    if isinstance(data, dict) and str(data.get("schema", "")).startswith("vdbbench.result") and data["schema"] != SCHEMA:
        raise ValueError(f"{path}: a result of schema {data['schema']!r}, which this vdbbench does not read "
                         f"(it reads {SCHEMA!r}); measure it again with this version")
    if not isinstance(data, dict) or data.get("schema") != SCHEMA:
        raise ValueError(f"{path}: not a vdbbench result (expected schema {SCHEMA!r})")
    missing = [k for k in _REQUIRED if k not in data]
    if missing:
        raise ValueError(f"{path}: result lacks {', '.join(missing)}")
    damage = _damage(data)
    if damage:  # a hand-edited or damaged file: say so here, not as a KeyError in the reader
        raise ValueError(f"{path}: not a well-formed vdbbench result ({damage})")
    return data


def _number(v, none: bool = False) -> bool:
    """A finite real number (not a bool, not NaN or infinity), or None when ``none``."""
    if v is None:
        return none
    return isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v)


def _count(v) -> bool:
    return isinstance(v, int) and not isinstance(v, bool) and v > 0


def _damage(data: dict) -> str | None:
    """What is wrong with the shape of a result that has every required key, or None.

    Every field a reader (report, plot, page, compare, gate) takes a figure from is checked
    for its type too: a hand-edited QPS of "77417", NaN or a missing recall10 is refused here
    with its place named, not drawn, tabulated or crashed on later."""
    for key, fields in (("dataset", ("name", "n", "sha256", "nq")), ("index", ("name",))):
        if not isinstance(data[key], dict) or any(f not in data[key] for f in fields):
            return f"{key} must be an object with {', '.join(fields)}"
    if not (_count(data["dataset"]["n"]) and _count(data["dataset"]["nq"])):
        return "dataset.n and dataset.nq must be positive integers"
    if not isinstance(data["index"]["name"], str) or not data["index"]["name"]:
        return "index.name must be a non-empty string"
    if not isinstance(data.get("run", {}), dict):
        return "run must be an object"
    if not isinstance(data["machine"], dict):
        return "machine must be an object"
    b = data["build"]
    if not (isinstance(b, dict) and _number(b.get("train_s")) and _number(b.get("add_s"))
            and _number(b.get("bytes"), none=True) and (b.get("bytes") or 0) >= 0):
        return "build must be an object with train_s and add_s (seconds) and bytes (a number or null)"
    conc = data.get("concurrent")
    if conc is not None:
        levels = conc.get("levels") if isinstance(conc, dict) else None
        if not (isinstance(levels, list) and _number(conc.get("recall10")) and all(
                isinstance(lv, dict) and _count(lv.get("clients")) and _number(lv.get("qps")) and lv["qps"] > 0
                and all(_number(lv.get(f), none=True) for f in ("p50_ms", "p99_ms", "p999_ms")) for lv in levels)):
            return ("concurrent must be an object with recall10 and levels, each with clients (an integer), "
                    "qps and latencies (finite numbers)")
    for key, fields in (("points", ("params", "mode", "threads", "recall10")),
                        ("headline", ("params", "mode", "threads", "qps", "recall10", "p50_ms", "p99_ms"))):
        rows = data[key]
        if not isinstance(rows, list) or not all(isinstance(r, dict) and all(f in r for f in fields) for r in rows):
            return f"{key} must be a list of objects with {', '.join(fields)}"
        if not all(isinstance(r["params"], dict) or (key == "headline" and r["params"] is None) for r in rows):
            return f"every {key} entry's params must be an object"
        for i, r in enumerate(rows):
            if not (isinstance(r["mode"], str) and _count(r["threads"])):
                return f"{key}[{i}]: mode must be a string and threads a positive integer"
            # a headline that missed the target holds nulls; a point only swept has no qps
            if not (_number(r["recall10"], none=key == "headline") and _number(r.get("qps"), none=True)
                    and (r.get("qps") is None or r["qps"] > 0) and all(_number(r.get(f), none=True) for f in
                                                                  ("qps_paired", "recall10_low", "p50_ms", "p99_ms"))):
                return (f"{key}[{i}] ({r['mode']} @ {r['threads']}t): qps, recall10 and latencies must be "
                        "finite numbers (qps above 0)")
            if r["recall10"] is not None and not 0.0 <= r["recall10"] <= 1.0:
                return f"{key}[{i}] ({r['mode']} @ {r['threads']}t): recall10 {r['recall10']} is not in [0, 1]"
    return None


def label(result: dict) -> str:
    return result["index"]["name"]
