"""What the `profile` tool measures and shows: one candidate process times the dev queries, keeps
every field of the engine's `last_search_stats()` (stage seconds as shares of the search, nested
named timers, counters), and is sampled by `perf` where the machine has it (one index build)."""

from __future__ import annotations

import os
import re
import shutil
import signal
import subprocess
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Mapping

import numpy as np

from vdbbench.agent.session.review import stats_stages

PERF_SECONDS = 2.0  # searching while perf samples
PERF_TOP = 15  # hottest symbols shown


def _number(v: Any) -> bool:
    return isinstance(v, (int, float)) and not isinstance(v, bool)


def _value(v: Any) -> str:
    return f"{v:.4g}" if isinstance(v, float) else str(v)


def _flat(d: Mapping, prefix: str = "") -> list[tuple[str, Any]]:
    out = []
    for k, v in d.items():
        if isinstance(v, Mapping):
            out += _flat(v, f"{prefix}{k}.")
        else:
            out.append((f"{prefix}{k}", v))
    return out


def stats_text(stats: Mapping[str, Any] | None) -> str:
    """Every field of a last_search_stats() dict, as the model reads it.

    Top-level `<stage>_s` seconds are stages, shown with their share of the search's thread-time
    (wall_s x threads when given); a nested mapping of numbers (say `timers`) holds named timers
    in seconds, shown with the same basis; anything else is listed as it is, nested keys dotted."""
    if not stats:
        return ("this engine's last_search_stats() returned nothing (or it has none): add per-stage "
                "seconds (`<stage>_s`) and a nested `timers` dict of named seconds to see a breakdown")
    top = {k: v for k, v in stats.items() if not isinstance(v, Mapping)}
    shares, other = stats_stages(top)
    wall, threads = top.get("wall_s"), top.get("threads")
    whole = wall * max(1, threads if isinstance(threads, int) else 1) if _number(wall) else None
    basis = (f"wall_s {wall:.4g} s x {threads or 1} thread(s)" if _number(wall) else "the stages' sum")
    lines = []
    if shares:
        lines.append(f"stages (seconds, share of the search's thread-time, {basis}):")
        lines += [f"  {name}: {sec:.4g} s ({100 * share:.1f}%)" for name, sec, share in shares]
    else:
        lines.append("no per-stage `<stage>_s` seconds at the top level of last_search_stats()")
    for key, value in stats.items():
        if not isinstance(value, Mapping):
            continue
        flat = _flat(value)
        if flat and all(_number(v) for _, v in flat):
            timers = dict(flat)
            basis_s = whole or sum(timers.values())
            lines.append(f"{key} (named timers, seconds; share of the search's thread-time):")
            for name, sec in sorted(timers.items(), key=lambda kv: -kv[1]):
                share = f" ({100 * sec / basis_s:.1f}%)" if basis_s else ""
                lines.append(f"  {name}: {_value(sec)} s{share}")
        else:
            lines.append(f"{key}: " + ", ".join(f"{k}={_value(v)}" for k, v in flat))
    if other:
        lines.append("counters and whole-search figures: " + ", ".join(f"{k}={_value(v)}" for k, v in other.items()))
    return "\n".join(lines)


@dataclass
class Profile:
    """One loaded working copy measured for `profile`: QPS on the judged clock, the last call's
    stats, and the perf text (None when not asked for)."""

    qps: float
    ms_per_query: float
    batch: int  # queries per search call
    repeats: int
    queries_timed: int
    clock: str
    stats: dict | None
    perf: str | None
    spread: float | None = None  # standard deviation of ln(QPS) over the repeats: the timing's noise
    load: dict | None = None  # the machine's load while it was timed (machine_load.LoadMonitor.summary)
    loaded: dict | None = None  # the load reply: train_s, add_s, and `cache` when an index file was named
    cpu_ms_per_query: float | None = None  # a server's own CPU time per query (served cards)


def perf_missing(perf: str = "perf") -> str | None:
    """Why there will be no perf samples (no such program here), or None."""
    if shutil.which(perf) is None:
        return f"perf sampling: not available (no `{perf}` on this machine); the engine's timers above are all there is"
    return None


def run_profile(library: Path, card, base: np.ndarray, queries: np.ndarray, log_dir: Path,
                search_args: dict | None = None, perf: str | None = "perf", seconds: float = PERF_SECONDS,
                cache: Path | None = None, proc=None) -> Profile:
    """Build the index once in a candidate process, time `dev_repeats` repeats of searching
    `queries` (one call per pass; the stats of the last call kept), then, when `perf` is given,
    sample the same process with `perf record` while it searches for `seconds` more. Timing and
    sampling hold the node's timing lock. `cache`: an index file to read the index from or save it
    to (vdbbench.agent.evaluation.index_cache). `proc`: the process to use instead of a new in-process
    worker (a served card's server, from its evaluator's `spawn`). WorkerDied when the candidate fails."""
    from vdbbench.agent.evaluation.candidate import CandidateProcess
    from vdbbench.agent.evaluation.machine_load import LoadMonitor
    from vdbbench.agent.evaluation.timing_lock import timing_lock

    obj = card.objective
    if proc is None:
        proc = CandidateProcess(library, card, log_dir / "profile-candidate.log", time.monotonic() + card.limits.eval_timeout_s)
    if search_args:
        proc.search_args.update(search_args)
    queries = np.ascontiguousarray(queries)
    try:
        proc.load(base, cache=cache)
        passes, stats, per_repeat = [], None, []
        with timing_lock():
            monitor = LoadMonitor()
            for r in range(obj.dev_repeats):
                proc.deadline = time.monotonic() + card.limits.eval_timeout_s
                _, _, ps, st = proc.repeat(queries, 7_000 + r, obj.dev_repeat_seconds, stats=r == obj.dev_repeats - 1)
                passes += ps
                stats = st if st is not None else stats
                spent = sum(p[0] if obj.clock_kind == "cpu" else p[1] for p in ps)
                per_repeat.append(queries.shape[0] * len(ps) / max(spent, 1e-9))
                monitor.sample()
            sampled = None
            if perf is not None:
                sampled = perf_missing(perf) or _perf_sample(proc, queries, card, shutil.which(perf), seconds)
    finally:
        proc.close()
    judged = sum(p[0] if obj.clock_kind == "cpu" else p[1] for p in passes)
    n = queries.shape[0] * len(passes)
    qps = n / max(judged, 1e-9)
    spread = float(np.std(np.log(per_repeat), ddof=1)) if len(per_repeat) > 1 else None
    cpu = 1000.0 * sum(p[0] for p in passes) / max(n, 1)
    return Profile(qps, 1000.0 / qps, queries.shape[0], obj.dev_repeats, n, obj.clock_kind, stats, sampled,
                   spread=spread, load=monitor.summary(), loaded=dict(proc.loaded), cpu_ms_per_query=cpu)


def _perf_sample(proc, queries: np.ndarray, card, exe: str, seconds: float) -> str:
    """perf record of the loaded candidate `proc` while it searches; the hottest symbols."""
    with tempfile.TemporaryDirectory(prefix="vdbbench-perf-") as tmp:
        data = Path(tmp) / "perf.data"
        rec = subprocess.Popen([exe, "record", "-F", "999", "-p", str(proc.pid), "-o", str(data)],
                               stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, start_new_session=True)
        try:
            time.sleep(0.3)  # attached before the search starts
            if rec.poll() is not None:
                why = (rec.stderr.read().decode(errors="replace").strip().splitlines() or ["no reason given"])[0]
                return f"perf sampling: perf could not record here ({why})"
            proc.deadline = time.monotonic() + card.limits.eval_timeout_s
            proc.repeat(queries, 4242, seconds)
            os.killpg(rec.pid, signal.SIGINT)
            rec.wait(timeout=30)
        finally:
            if rec.poll() is None:  # the candidate failed, or perf hangs: it goes too
                os.killpg(rec.pid, signal.SIGKILL)
                rec.wait()
            rec.stderr.close()
        rep = subprocess.run([exe, "report", "-i", str(data), "--stdio", "--no-children", "--sort", "dso,symbol",
                              "--percent-limit", "0.5"], capture_output=True, text=True, timeout=120)
    rows = [line.rstrip() for line in rep.stdout.splitlines() if line.strip() and not line.lstrip().startswith("#")]
    if not rows:
        why = (rep.stderr.strip().splitlines() or ["no samples"])[0]
        return f"perf sampling: no samples ({why})"
    shown = "\n".join("  " + re.sub(r"( -)+$", "", " ".join(r.split())) for r in rows[:PERF_TOP])
    return (f"perf samples of {seconds:g} s of search (the hottest symbols, share of the samples; "
            f"[.] user code, [k] kernel):\n{shown}")


__all__ = ["Profile", "perf_missing", "run_profile", "stats_text"]
