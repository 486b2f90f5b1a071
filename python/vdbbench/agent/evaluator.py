"""The measuring half of the judge: runs candidate builds in processes it owns and times them
against the best on held-out queries, in closely paired repeats of a set duration (the deciding
half, the sequential test, is vdbbench.agent.judge)."""

from __future__ import annotations

import hashlib
import io
import json
import math
import os
import resource
import select
import signal
import struct
import subprocess
import sys
import time
import weakref
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Callable

import numpy as np

from vdbbench.agent import harness_worker
from vdbbench.agent.task import TaskCard
from vdbbench.agent.timing_lock import timing_lock
from vdbbench.common.recall import id_recall, knn_recall

WORKER = Path(harness_worker.__file__).resolve()


# -- data ------------------------------------------------------------------------------------

@dataclass
class Split:
    queries: np.ndarray
    gt_ids: np.ndarray
    gt_dist: np.ndarray  # natural units (Euclidean for l2), as vdbbench.common.recall expects


@dataclass
class EvalData:
    """Base vectors and the three disjoint query splits; only the harness process holds these."""

    base: np.ndarray
    metric: str
    dev: Split
    heldout: Split
    fresh: Split
    dataset: dict | None = None  # what was loaded: name, synthetic (a replica stands in), note


def make_eval_data(card: TaskCard) -> EvalData:
    """The card's data set with disjoint dev, held-out and fresh query splits and exact ground truth.

    Generated sets draw all three splits from the generator's query process in one call (so they
    are disjoint draws of the same distribution); registered sets (e.g. sift-1m) split their own
    query file, which must hold enough queries.
    """
    from vdbbench.datasets import compute_groundtruth, load_dataset, synth

    ds = card.dataset
    nq = ds.dev_queries + ds.heldout_queries + ds.fresh_queries
    metric = ds.metric
    k = max(card.objective.k, 10)
    known = None  # ground truth that came with the data set, reused when deep enough
    identity = {"name": ds.name, "synthetic": True, "n": ds.n}
    if ds.generator == "synth_sift":
        base, queries = synth.synth_sift(ds.n, nq, seed=ds.seed, dim=ds.dim)
    elif ds.generator == "synth_float":
        base, queries = synth.synth_float(ds.n, nq, dim=ds.dim, seed=ds.seed)
    else:
        loaded = load_dataset(ds.name, seed=ds.seed, progress=False)
        base, queries, metric = loaded.train, loaded.test, loaded.metric
        if queries.shape[0] < nq:
            raise ValueError(f"data set {ds.name} has {queries.shape[0]} queries; the task's splits need {nq}")
        queries = queries[:nq]
        identity = {"name": ds.name, "loaded": loaded.name, "synthetic": bool(loaded.synthetic),
                    "n": int(base.shape[0]), "sha256": loaded.sha256}
        if loaded.synthetic:
            identity["note"] = f"{ds.name} is not available here (offline): its generated replica {loaded.name} was used"
        if loaded.neighbors is not None and loaded.distances is not None and loaded.neighbors.shape[1] >= k:
            known = (loaded.neighbors[:nq, :k], loaded.distances[:nq, :k])
    cuts = np.cumsum([ds.dev_queries, ds.heldout_queries])
    splits = []
    for rows in np.split(np.arange(nq), cuts):
        q = np.ascontiguousarray(np.asarray(queries, dtype=np.float32)[rows])
        if known is not None:
            ids, dist = np.ascontiguousarray(known[0][rows]), np.ascontiguousarray(known[1][rows])
        else:
            ids, dist = compute_groundtruth(base, q, metric, k=k)
        splits.append(Split(q, ids, dist))
    return EvalData(np.ascontiguousarray(base, dtype=np.float32), metric, *splits, dataset=identity)


# -- results ---------------------------------------------------------------------------------

@dataclass
class Metrics:
    qps: float  # geometric mean over the timed repeats of (queries timed / seconds on `clock`)
    recall10: float  # on the first pass over each slice searched
    recall10_ids: float
    p50_ms: float  # median per-query milliseconds over the timed repeats (on `clock`)
    repeats: int
    qps_samples: list[float]
    clock: str = "wall"  # what qps is measured on: "wall" or "cpu" (process CPU time)
    wall_qps: float = 0.0  # the wall-clock QPS beside it, whatever the clock
    train_s: float = 0.0
    add_s: float = 0.0
    stats: dict | None = None
    queries_timed: int = 0  # every query of every pass of every repeat
    batch: int = 0  # queries per search call
    first_pass_qps: float = 0.0  # geometric mean over repeats of the first pass alone
    later_pass_qps: float | None = None  # ... of the later passes (None when no repeat had two)
    later_recall10: float | None = None  # recall of each slice's last pass (equal to recall10 unless answers drift)
    seconds: float = 0.0  # total timed seconds on `clock`
    own_qps: float | None = None  # beside a best: this process's own geometric-mean QPS (qps is then
    # the best's QPS times the paired gain, so that headline figures and gain agree)
    seen_qps: float | None = None  # fresh-query metrics only: the same process on held-out queries it
    # had answered before, timed in turns with the fresh ones (what the audit compares them with)


@dataclass
class Failure:
    outcome: str  # "crashed" | "timed_out"
    text: str


@dataclass
class EvalReport:
    split: str
    candidate: Metrics | None
    best: Metrics | None
    gain: float | None  # exp(mean of the per-pair log-ratios) - 1 = candidate.qps / best.qps - 1
    p_value: float | None = None  # kept for old journals; the sequential test states its own levels
    failure: Failure | None = None
    best_failure: Failure | None = None
    pairs: int = 0  # candidate/best pairs timed (0 without a best)
    log_ratios: list[float] | None = None  # ln(candidate QPS / best QPS) of each pair, in order
    spread: float | None = None  # standard deviation of the per-pair log-ratios (~ relative spread)
    cache_ratio: float | None = None  # median (later/first pass speed-up), candidate over best
    stopped: str = ""  # why the pairs stopped: "decided", "cap", "recall", "fixed"
    fresh: Metrics | None = None  # the candidate on fresh queries, in the same process
    repeat_seconds: float = 0.0
    lock_wait_s: float = 0.0
    dataset: dict | None = None

    def journal_payload(self) -> dict:
        return {
            "split": self.split,
            "candidate": asdict(self.candidate) if self.candidate else None,
            "best": asdict(self.best) if self.best else None,
            "gain": self.gain,
            "p_value": self.p_value,
            "failure": asdict(self.failure) if self.failure else None,
            "pairs": self.pairs,
            "log_ratios": [round(x, 5) for x in self.log_ratios] if self.log_ratios else None,
            "spread": self.spread,
            "cache_ratio": self.cache_ratio,
            "stopped": self.stopped,
            "fresh": asdict(self.fresh) if self.fresh else None,
            "repeat_seconds": self.repeat_seconds,
            "batch": self.candidate.batch if self.candidate else None,
            "lock_wait_s": round(self.lock_wait_s, 3),
            "dataset": self.dataset,
        }


# -- the candidate process -------------------------------------------------------------------

class WorkerDied(Exception):
    def __init__(self, outcome: str, text: str):
        super().__init__(text)
        self.outcome = outcome
        self.text = text


def _encode(header: dict, arrays: dict) -> bytes:
    buf = io.BytesIO()
    harness_worker.write_frame(buf, header, arrays)
    return buf.getvalue()


class CandidateProcess:
    """One loaded build in its own process group, under a deadline and an address-space cap."""

    def __init__(self, library: Path, card: TaskCard, log_path: Path, deadline: float):
        self.card = card
        self.deadline = deadline
        self.log_path = log_path
        mem = card.limits.memory_mb * 1024 * 1024
        threads = str(card.objective.threads)
        env = {k: v for k, v in os.environ.items() if not k.startswith(("OPENAI", "VDBBENCH_AGENT"))}
        env.update(RAYON_NUM_THREADS=threads, OMP_NUM_THREADS=threads, OPENBLAS_NUM_THREADS="1",
                   MKL_NUM_THREADS="1", RUST_BACKTRACE="0")

        cpu = int(card.limits.eval_timeout_s * max(1, card.objective.threads) * 2) + 10

        def limit():  # runs in the child before exec
            resource.setrlimit(resource.RLIMIT_AS, (mem, mem))
            resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
            # Safety net for a harness that dies without cleaning up (SIGKILL): on Linux the kernel
            # ends the worker as soon as the harness is gone; elsewhere its CPU limit ends a
            # spinning one. Not both: a finite RLIMIT_CPU arms the process CPU timer, and with it
            # armed Linux reads the process CPU clock (the judged clock) from a total that lags
            # the running thread by up to a scheduler tick, so a worker with the limit read ~2-4%
            # faster than one without (A/A at 1M, 7 of 7 evaluations, while only the kept best
            # had none). Every worker is treated alike on each platform.
            if not sys.platform.startswith("linux"):
                resource.setrlimit(resource.RLIMIT_CPU, (cpu, cpu + 5))
            else:
                import ctypes

                ctypes.CDLL(None).prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG

        self.log = log_path.open("ab")
        self.proc = subprocess.Popen(
            [sys.executable, "-I", str(WORKER)], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
            stderr=self.log, env=env, cwd=str(log_path.parent), start_new_session=True,
            preexec_fn=limit,
        )
        self.library = library
        self.wall_seconds = 0.0  # wall-clock seconds of the last search, beside the judged clock
        self.loaded: dict = {}  # the load reply (train_s, add_s)

    # I/O under the deadline
    def _send(self, header: dict, arrays: dict | None = None) -> None:
        try:
            self.proc.stdin.write(_encode(header, arrays or {}))
            self.proc.stdin.flush()
        except (BrokenPipeError, OSError):
            raise self._death() from None

    def _read_exact(self, n: int) -> bytes:
        fd = self.proc.stdout.fileno()
        chunks, got = [], 0
        while got < n:
            left = self.deadline - time.monotonic()
            if left <= 0:
                raise self._timeout()
            ready, _, _ = select.select([fd], [], [], min(left, 1.0))
            if not ready:
                continue
            chunk = os.read(fd, min(n - got, 1 << 20))
            if not chunk:
                raise self._death()
            chunks.append(chunk)
            got += len(chunk)
        return b"".join(chunks)

    def _recv(self) -> tuple[dict, dict]:
        (n,) = struct.unpack(">I", self._read_exact(4))
        if n > 1 << 20:
            raise WorkerDied("crashed", "the candidate process corrupted the harness protocol")
        header = json.loads(self._read_exact(n))
        arrays = {}
        for name in header.get("arrays", []):
            (m,) = struct.unpack(">Q", self._read_exact(8))
            arrays[name] = np.load(io.BytesIO(self._read_exact(m)), allow_pickle=False)
        if not header.get("ok"):
            raise WorkerDied("crashed", header.get("error", "unknown error") + "\n" + header.get("traceback", ""))
        return header, arrays

    def _stderr_tail(self, limit: int = 1500) -> str:
        self.log.flush()
        try:
            data = self.log_path.read_bytes()[-limit:]
        except OSError:
            return ""
        return data.decode(errors="replace").strip()

    def _death(self) -> WorkerDied:
        rc = self.proc.wait(timeout=10)
        how = f"killed by {signal.Signals(-rc).name}" if rc < 0 else f"exited with status {rc}"
        tail = self._stderr_tail()
        return WorkerDied("crashed", f"the candidate process {how}" + (f"; its stderr ends with:\n{tail}" if tail else ""))

    def _timeout(self) -> WorkerDied:
        self.kill()
        return WorkerDied("timed_out", f"the candidate did not finish within the {self.card.limits.eval_timeout_s:.0f} s limit; its process group was killed")

    def load(self, base: np.ndarray) -> dict:
        e = self.card.entry
        self._send({"cmd": "load", "path": str(self.library), "module": e.module, "cls": e.cls,
                    "dim": int(base.shape[1]), "build_args": e.build_args}, {"base": base})
        header, _ = self._recv()
        self.loaded = header
        return header

    def alive(self) -> bool:
        return self.proc.poll() is None

    def repeat(self, queries: np.ndarray, seed: int, min_seconds: float, stats: bool = False) -> tuple[np.ndarray, np.ndarray, list, dict | None]:
        """One timed repeat (see harness_worker.timed_repeat): (first ids, last ids, [[cpu, wall]...], stats)."""
        self._send({"cmd": "repeat", "search_args": self.card.entry.search_args, "stats": stats, "seed": int(seed),
                    "min_seconds": float(min_seconds), "clock": self.card.objective.clock_kind}, {"queries": queries})
        header, arrays = self._recv()
        k = self.card.objective.k
        for name in ("ids", "last_ids"):
            ids = arrays.get(name)
            if ids is None or ids.ndim != 2 or ids.shape[0] != queries.shape[0] or ids.shape[1] < k:
                shape = None if ids is None else ids.shape
                raise WorkerDied("crashed", f"search returned ids of shape {shape}; expected ({queries.shape[0]}, {k})")
            if not np.issubdtype(ids.dtype, np.integer):
                raise WorkerDied("crashed", f"search returned ids of dtype {ids.dtype}; expected integers")
        passes = header.get("passes") or []
        if not passes:
            raise WorkerDied("crashed", "the candidate process timed no pass")
        return arrays["ids"][:, :k], arrays["last_ids"][:, :k], passes, header.get("stats")

    def search(self, queries: np.ndarray, stats: bool = False) -> tuple[np.ndarray, float, dict | None]:
        self._send({"cmd": "search", "search_args": self.card.entry.search_args, "stats": stats}, {"queries": queries})
        header, arrays = self._recv()
        ids = arrays.get("ids")
        k = self.card.objective.k
        if ids is None or ids.ndim != 2 or ids.shape[0] != queries.shape[0] or ids.shape[1] < k:
            shape = None if ids is None else ids.shape
            raise WorkerDied("crashed", f"search returned ids of shape {shape}; expected ({queries.shape[0]}, {k})")
        if not np.issubdtype(ids.dtype, np.integer):
            raise WorkerDied("crashed", f"search returned ids of dtype {ids.dtype}; expected integers")
        seconds = float(header["cpu_seconds"] if self.card.objective.clock_kind == "cpu" else header["seconds"])
        self.wall_seconds = float(header["seconds"])
        return ids, seconds, header.get("stats")

    def kill(self) -> None:
        if self.proc.poll() is None:
            try:
                os.killpg(self.proc.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        try:
            self.proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            pass

    def close(self) -> None:
        if self.proc.poll() is None:
            try:
                self._send({"cmd": "exit"})
                self.proc.wait(timeout=5)
            except (WorkerDied, subprocess.TimeoutExpired):
                pass
        self.kill()
        for f in (self.proc.stdin, self.proc.stdout):
            try:
                f.close()
            except OSError:
                pass
        self.log.close()


# -- evaluation ------------------------------------------------------------------------------

def _geomean(xs) -> float:
    xs = np.asarray(list(xs), dtype=float)
    return float(np.exp(np.mean(np.log(xs)))) if xs.size else 0.0


@dataclass
class _Repeat:
    """One timed repeat of one process: the slice it searched and its passes."""

    slice_no: int
    n: int  # queries per pass
    passes: list  # [[cpu, wall], ...]
    clock: str

    def seconds(self, which: str | None = None) -> list[float]:
        i = 0 if (which or self.clock) == "cpu" else 1
        return [max(p[i], 1e-9) for p in self.passes]

    @property
    def qps(self) -> float:
        return self.n * len(self.passes) / sum(self.seconds())

    @property
    def wall_qps(self) -> float:
        return self.n * len(self.passes) / sum(self.seconds("wall"))

    @property
    def first_qps(self) -> float:
        return self.n / self.seconds()[0]

    @property
    def later_qps(self) -> float | None:
        later = self.seconds()[1:]
        return self.n * len(later) / sum(later) if later else None


def _seed(split: str, r: int) -> int:
    return {"dev": 1, "heldout": 2, "fresh": 3}.get(split, 9) * 1_000_003 + r


CHUNK_SECONDS = 0.05  # candidate and best take turns this often within a repeat

def paired_log_ratio(cand_chunks: list, best_chunks: list) -> float:
    """One pair's ln(candidate QPS / best QPS): the median over the repeat's chunk pairs (each
    candidate chunk beside the best's chunk of the same round), so a burst of load that hits a
    few chunks does not move it. Measured with two copies of one build under a busy core, its
    spread across pairs was 4.7% against 6.5% for the ratio of the repeats' total times."""
    ratios = [math.log((nc / sc) / (nb / sb)) for (nc, sc), (nb, sb) in zip(cand_chunks, best_chunks)]
    return float(np.median(ratios))


StopRule = Callable[[list[float]], bool]  # per-pair log-ratios so far -> stop now?


class Evaluator:
    """Owns the data and the ground truth; measures candidate against best on a split.

    Timing: the split is cut into slices of `card.batch_queries` queries (the batch shape of
    every timed search call, dev and held-out alike). Pair r times slice r mod (number of
    slices) on candidate and best back to back, in the order ABBA across consecutive pairs, each
    for at least the split's repeat time on the judged clock. On held-out queries with a best and
    a stop rule the pairs go on until the rule says stop (at least `repeats`, at most
    `max_pairs`); elsewhere their number is fixed. The timing holds the node's timing lock.
    """

    def __init__(self, card: TaskCard, data: EvalData, run_dir: Path):
        self.card = card
        self.data = data
        self.logs = run_dir / "eval-logs"
        self.logs.mkdir(parents=True, exist_ok=True)
        self._n = 0
        self.spawned: list[int] = []  # pids of every candidate process, so tests can check none survived
        self._kept: tuple[tuple, CandidateProcess] | None = None  # the best's process, with its library's identity

    def _spawn(self, library: Path, tag: str, deadline: float) -> CandidateProcess:
        self._n += 1
        proc = CandidateProcess(library, self.card, self.logs / f"{self._n:05d}-{tag}.log", deadline)
        self.spawned.append(proc.proc.pid)
        return proc

    @staticmethod
    def _identity(library: Path) -> tuple:
        data = Path(library).read_bytes()
        return (str(library), hashlib.sha256(data).hexdigest())

    def _best_process(self, library: Path, deadline: float) -> tuple[CandidateProcess, bool]:
        """(process, kept): the kept best process when the card keeps it and the library is the same."""
        if not self.card.limits.keep_best_worker:
            return self._spawn(library, "best", deadline), False
        key = self._identity(library)
        if self._kept is not None:
            old_key, proc = self._kept
            if old_key == key and proc.alive():
                proc.deadline = deadline
                return proc, True
            proc.close()
            self._kept = None
        proc = self._spawn(library, "best", deadline)
        self._kept = (key, proc)
        weakref.finalize(self, proc.close)  # at the latest when the evaluator goes, or at exit
        return proc, True

    def close(self) -> None:
        """End the kept best process, if any."""
        if self._kept is not None:
            self._kept[1].close()
            self._kept = None

    def slices(self, split: str) -> list[np.ndarray]:
        """Row indices of each slice of the split. Dev batches have the held-out batch shape even
        when the dev split is smaller (its queries then repeat within the one batch)."""
        n = getattr(self.data, split).queries.shape[0]
        batch = self.card.batch_queries
        if split == "dev" and n < batch:
            return [np.resize(np.arange(n), batch)]
        return np.array_split(np.arange(n), max(1, n // batch))

    def run(self, split: str, candidate: Path, best: Path | None, *, stats: bool = False,
            stop: StopRule | None = None, fresh: bool = False) -> EvalReport:
        obj = self.card.objective
        data: Split = getattr(self.data, split)
        slices = self.slices(split)
        if split == "heldout":
            min_pairs, max_pairs, seconds = obj.repeats, (obj.max_pairs if (best is not None and stop) else obj.repeats), obj.repeat_seconds
        elif split == "dev":
            min_pairs = max_pairs = obj.dev_repeats
            seconds = obj.dev_repeat_seconds
        else:  # fresh: one short pass per slice
            min_pairs = max_pairs = len(slices)
            seconds = 0.0
        timeout = self.card.limits.eval_timeout_s
        procs = {"candidate": self._spawn(candidate, "candidate", time.monotonic() + timeout)}
        kept = False
        if best is not None:
            procs["best"], kept = self._best_process(best, time.monotonic() + timeout)
        k = obj.k
        ids = {name: np.full((data.queries.shape[0], k), -1, dtype=np.int64) for name in procs}
        last_ids = {name: np.full((data.queries.shape[0], k), -1, dtype=np.int64) for name in procs}
        covered = np.zeros(data.queries.shape[0], dtype=bool)
        reps: dict[str, list[_Repeat]] = {name: [] for name in procs}
        last_stats = None
        failures: dict[str, Failure] = {}
        log_ratios: list[float] = []
        stopped = "fixed"
        fresh_metrics = None
        wait = 0.0
        try:
            for name, p in procs.items():
                if name == "best" and kept and p.loaded:
                    continue
                try:
                    p.load(self.data.base)
                except WorkerDied as exc:
                    failures[name] = Failure(exc.outcome, f"while building the index: {exc.text}")
            with timing_lock() as wait:
                for r in range(0 if failures else max_pairs):
                    sl = slices[r % len(slices)]
                    queries = np.ascontiguousarray(data.queries[sl])
                    order = [n for n in (list(procs) if r % 2 == 0 else list(reversed(procs))) if n not in failures]
                    got = self._repeat_pair(procs, order, queries, split, r, seconds, stats, failures)
                    for name, (first, last, passes, st) in got.items():
                        if r < len(slices):
                            ids[name][sl] = first
                        last_ids[name][sl] = last
                        reps[name].append(_Repeat(r % len(slices), len(sl), passes, obj.clock_kind))
                        if name == "candidate" and st is not None:
                            last_stats = st
                    if r < len(slices):
                        covered[sl] = True
                    if failures:
                        break
                    if best is not None:
                        log_ratios.append(paired_log_ratio(self._chunks["candidate"], self._chunks["best"]))
                    if r + 1 >= min_pairs and r + 1 < max_pairs:
                        if r + 1 >= len(slices) and self._recall(ids["candidate"], covered, data) < obj.recall_floor:
                            stopped = "recall"
                            break
                        if stop is not None and stop(log_ratios):
                            stopped = "decided"
                            break
                else:
                    if best is not None and stop is not None:
                        stopped = "cap"
                if fresh and "candidate" not in failures and self._recall(ids["candidate"], covered, data) >= obj.recall_floor:
                    fresh_metrics = self._fresh(procs["candidate"], failures)
        finally:
            for name, p in procs.items():
                if not (name == "best" and kept):
                    p.close()
            if kept and "best" in failures:
                self.close()

        def metrics(name: str) -> Metrics | None:
            if name not in procs or name in failures or not reps[name]:
                return None
            return self._metrics(reps[name], ids[name], last_ids[name], covered, data, procs[name].loaded,
                                 last_stats if name == "candidate" else None)

        cand, bst = metrics("candidate"), metrics("best")
        gain = spread = cache = None
        if cand and bst and log_ratios:
            gain = math.exp(float(np.mean(log_ratios))) - 1.0
            cand.own_qps = cand.qps
            cand.qps = bst.qps * (1.0 + gain)  # the headline: the best's QPS times the paired gain
            spread = float(np.std(log_ratios, ddof=1)) if len(log_ratios) > 1 else None
            ratios = [(c.later_qps / c.first_qps) / (b.later_qps / b.first_qps)
                      for c, b in zip(reps["candidate"], reps["best"]) if c.later_qps and b.later_qps]
            cache = float(np.median(ratios)) if ratios else None
        elif cand:
            ratios = [c.later_qps / c.first_qps for c in reps["candidate"] if c.later_qps]
            cache = float(np.median(ratios)) if ratios else None
        return EvalReport(split, cand, bst, gain, None, failures.get("candidate"), failures.get("best"),
                          pairs=len(log_ratios), log_ratios=log_ratios or None, spread=spread, cache_ratio=cache,
                          stopped=stopped, fresh=fresh_metrics, repeat_seconds=seconds, lock_wait_s=wait,
                          dataset=self.data.dataset)

    def _repeat_pair(self, procs: dict, order: list[str], queries: np.ndarray, split: str, r: int,
                     seconds: float, stats: bool, failures: dict) -> dict:
        """One timed repeat of each process in `order`, in chunks of CHUNK_SECONDS taken in turn
        (ABBA across chunks) until each has `seconds` on the judged clock: load that comes and
        goes slower than a chunk meets both. Both run the same chunks with the same seeds."""
        passes = {n: [] for n in order}
        chunks: dict = {n: [] for n in order}  # (queries, seconds on the judged clock) per chunk
        first: dict = {}
        last: dict = {}
        st_out: dict = {}
        judged = dict.fromkeys(order, 0.0)
        cpu = self.card.objective.clock_kind == "cpu"
        j = 0
        while order and (j == 0 or any(judged[n] < seconds for n in order)):
            for name in (order if j % 2 == 0 else list(reversed(order))):
                p = procs[name]
                p.deadline = time.monotonic() + self.card.limits.eval_timeout_s
                try:
                    f, lst, ps, st = p.repeat(queries, _seed(split, r) * 10_000 + j, min(CHUNK_SECONDS, seconds),
                                              stats=stats and name == "candidate")
                except WorkerDied as exc:
                    failures[name] = Failure(exc.outcome, f"during search: {exc.text}")
                    return {}
                first.setdefault(name, f)
                last[name] = lst
                passes[name].extend(ps)
                spent = sum(x[0] if cpu else x[1] for x in ps)
                chunks[name].append((queries.shape[0] * len(ps), max(spent, 1e-9)))
                judged[name] += spent
                if st is not None:
                    st_out[name] = st
            j += 1
        self._chunks = chunks
        return {n: (first[n], last[n], passes[n], st_out.get(n)) for n in order}

    def _recall(self, ids: np.ndarray, covered: np.ndarray, data: Split) -> float:
        if not covered.any():
            return 0.0
        return knn_recall(ids[covered], self.data.base, data.queries[covered], data.gt_dist[covered],
                          k=self.card.objective.k, metric=self.data.metric)

    def _metrics(self, reps: list[_Repeat], ids, last_ids, covered, data: Split, loaded: dict, stats) -> Metrics:
        k = self.card.objective.k
        later = [r.later_qps for r in reps if r.later_qps]
        per_query_ms = [1000 * sum(r.seconds()) / (r.n * len(r.passes)) for r in reps]
        return Metrics(
            qps=_geomean(r.qps for r in reps),
            recall10=self._recall(ids, covered, data),
            recall10_ids=id_recall(ids[covered], data.gt_ids[covered], k=k) if covered.any() else 0.0,
            p50_ms=float(np.median(per_query_ms)),
            repeats=len(reps),
            qps_samples=[round(r.qps, 3) for r in reps],
            clock=self.card.objective.clock_kind,
            wall_qps=_geomean(r.wall_qps for r in reps),
            train_s=float(loaded.get("train_s", 0.0)),
            add_s=float(loaded.get("add_s", 0.0)),
            stats=stats,
            queries_timed=sum(r.n * len(r.passes) for r in reps),
            batch=reps[0].n,
            first_pass_qps=_geomean(r.first_qps for r in reps),
            later_pass_qps=_geomean(later) if later else None,
            later_recall10=self._recall(last_ids, covered, data),
            seconds=float(sum(sum(r.seconds()) for r in reps)),
        )

    def _fresh(self, proc: CandidateProcess, failures: dict) -> Metrics | None:
        """Each slice of the fresh queries (never seen before by any process) timed against a
        held-out slice the candidate has already answered, in the order fresh, seen, seen, fresh,
        each turn at least `dev_repeat_seconds` (cycling its slice). Answers cached for seen
        queries show as the seen turns running faster than the fresh ones, while a burst of load
        hits both alike: `seen_qps` is what the audit holds the fresh QPS against."""
        data, seen = self.data.fresh, self.data.heldout
        seen_slices = self.slices("heldout")
        seconds = self.card.objective.dev_repeat_seconds
        ids = np.full((data.queries.shape[0], self.card.objective.k), -1, dtype=np.int64)
        covered = np.zeros(data.queries.shape[0], dtype=bool)
        reps, seen_reps = [], []
        for r, sl in enumerate(self.slices("fresh")):
            seen_sl = seen_slices[r % len(seen_slices)]
            for turn, split in enumerate(("fresh", "heldout", "heldout", "fresh")):
                queries = data.queries[sl] if split == "fresh" else seen.queries[seen_sl]
                proc.deadline = time.monotonic() + self.card.limits.eval_timeout_s
                try:
                    first, _, passes, _ = proc.repeat(np.ascontiguousarray(queries), _seed(split, 7919 * r + turn), seconds)
                except WorkerDied as exc:
                    failures["candidate"] = Failure(exc.outcome, f"during the fresh-query search: {exc.text}")
                    return None
                if split == "heldout":
                    seen_reps.append(_Repeat(r, len(seen_sl), passes, self.card.objective.clock_kind))
                    continue
                if turn == 0:
                    ids[sl] = first
                    covered[sl] = True
                reps.append(_Repeat(r, len(sl), passes, self.card.objective.clock_kind))
        metrics = self._metrics(reps, ids, ids, covered, data, proc.loaded, None)
        metrics.seen_qps = _geomean(rep.qps for rep in seen_reps)
        return metrics
