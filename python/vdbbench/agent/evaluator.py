"""The judge: runs candidate builds in processes it owns and decides, on held-out queries,
whether a change is a real gain (interleaved repeats, margin, one-sided signed-rank test)."""

from __future__ import annotations

import io
import json
import os
import resource
import select
import signal
import struct
import subprocess
import sys
import time
from dataclasses import asdict, dataclass
from pathlib import Path

import numpy as np

from vdbbench.agent import harness_worker
from vdbbench.agent.task import TaskCard
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
    k = max(card.objective.k, 10)
    cuts = np.cumsum([ds.dev_queries, ds.heldout_queries])
    splits = []
    for q in np.split(np.asarray(queries, dtype=np.float32), cuts):
        q = np.ascontiguousarray(q)
        ids, dist = compute_groundtruth(base, q, metric, k=k)
        splits.append(Split(q, ids, dist))
    return EvalData(np.ascontiguousarray(base, dtype=np.float32), metric, *splits)


# -- results ---------------------------------------------------------------------------------

@dataclass
class Metrics:
    qps: float
    recall10: float
    recall10_ids: float
    p50_ms: float  # median per-query milliseconds over the timed batches (on `clock`)
    repeats: int
    qps_samples: list[float]
    clock: str = "wall"  # what qps is measured on: "wall" or "cpu" (process CPU time)
    wall_qps: float = 0.0  # the wall-clock QPS beside it, whatever the clock
    train_s: float = 0.0
    add_s: float = 0.0
    stats: dict | None = None


@dataclass
class Failure:
    outcome: str  # "crashed" | "timed_out"
    text: str


@dataclass
class EvalReport:
    split: str
    candidate: Metrics | None
    best: Metrics | None
    gain: float | None  # median of per-repeat candidate/best QPS ratios, minus 1
    p_value: float | None
    failure: Failure | None = None
    best_failure: Failure | None = None

    def journal_payload(self) -> dict:
        return {
            "split": self.split,
            "candidate": asdict(self.candidate) if self.candidate else None,
            "best": asdict(self.best) if self.best else None,
            "gain": self.gain,
            "p_value": self.p_value,
            "failure": asdict(self.failure) if self.failure else None,
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
            # Safety nets for a harness that dies without cleaning up (SIGKILL): the kernel ends a
            # spinning candidate on its CPU limit, and on Linux as soon as the harness is gone.
            resource.setrlimit(resource.RLIMIT_CPU, (cpu, cpu + 5))
            if sys.platform.startswith("linux"):
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
        return header

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

def signed_rank_p(candidate: list[float], best: list[float]) -> float:
    """One-sided Wilcoxon signed-rank p-value that candidate QPS beats best QPS (paired repeats)."""
    from scipy.stats import wilcoxon

    diffs = np.log(np.asarray(candidate)) - np.log(np.asarray(best))
    if np.allclose(diffs, 0):
        return 1.0
    return float(wilcoxon(diffs, alternative="greater").pvalue)


class Evaluator:
    """Owns the data and the ground truth; measures candidate against best on a split."""

    def __init__(self, card: TaskCard, data: EvalData, run_dir: Path):
        self.card = card
        self.data = data
        self.logs = run_dir / "eval-logs"
        self.logs.mkdir(parents=True, exist_ok=True)
        self._n = 0
        self.spawned: list[int] = []  # pids of every candidate process, so tests can check none survived

    def _spawn(self, library: Path, tag: str, deadline: float) -> CandidateProcess:
        self._n += 1
        proc = CandidateProcess(library, self.card, self.logs / f"{self._n:05d}-{tag}.log", deadline)
        self.spawned.append(proc.proc.pid)
        return proc

    def run(self, split: str, candidate: Path, best: Path | None, *, stats: bool = False) -> EvalReport:
        """Interleaved repeats: repeat r sends slice r of the split to each process (so no
        process ever sees a query twice); the order alternates to cancel drift."""
        data: Split = getattr(self.data, split)
        repeats = {"heldout": self.card.objective.repeats, "dev": self.card.objective.dev_repeats}.get(split, 1)
        slices = np.array_split(np.arange(data.queries.shape[0]), repeats)
        deadline = time.monotonic() + self.card.limits.eval_timeout_s
        procs = {"candidate": self._spawn(candidate, "candidate", deadline)}
        if best is not None:
            procs["best"] = self._spawn(best, "best", deadline)
        ids = {name: np.full((data.queries.shape[0], self.card.objective.k), -1, dtype=np.int64) for name in procs}
        times = {name: [] for name in procs}
        walls = {name: [] for name in procs}
        loads: dict[str, dict] = {}
        last_stats = None
        failures: dict[str, Failure] = {}
        from vdbbench.agent.timing_lock import timing_lock

        try:
            with timing_lock():  # no other timing on this node meanwhile (VDBBENCH_TIMING_LOCK)
                for name, p in procs.items():
                    try:
                        loads[name] = p.load(self.data.base)
                    except WorkerDied as exc:
                        failures[name] = Failure(exc.outcome, f"while building the index: {exc.text}")
                for r, sl in enumerate(slices):
                    order = list(procs) if r % 2 == 0 else list(reversed(procs))
                    for name in order:
                        if name in failures:
                            continue
                        try:
                            got, sec, st = procs[name].search(data.queries[sl], stats=stats and name == "candidate")
                        except WorkerDied as exc:
                            failures[name] = Failure(exc.outcome, f"during search: {exc.text}")
                            continue
                        ids[name][sl] = got[:, : self.card.objective.k]
                        times[name].append((len(sl), max(sec, 1e-9)))
                        walls[name].append((len(sl), max(procs[name].wall_seconds, 1e-9)))
                        if name == "candidate" and st is not None:
                            last_stats = st
        finally:
            for p in procs.values():
                p.close()

        def metrics(name: str) -> Metrics | None:
            if name not in procs or name in failures:
                return None
            qps = [n / s for n, s in times[name]]
            per_query_ms = [1000 * s / n for n, s in times[name]]
            return Metrics(
                qps=float(np.median(qps)),
                recall10=knn_recall(ids[name], self.data.base, data.queries, data.gt_dist, k=self.card.objective.k, metric=self.data.metric),
                recall10_ids=id_recall(ids[name], data.gt_ids, k=self.card.objective.k),
                p50_ms=float(np.median(per_query_ms)),
                repeats=len(qps),
                qps_samples=[round(q, 3) for q in qps],
                clock=self.card.objective.clock_kind,
                wall_qps=float(np.median([n / s for n, s in walls[name]])),
                train_s=float(loads[name].get("train_s", 0.0)),
                add_s=float(loads[name].get("add_s", 0.0)),
                stats=last_stats if name == "candidate" else None,
            )

        cand, bst = metrics("candidate"), metrics("best")
        gain = p = None
        if cand and bst:
            ratios = np.asarray(cand.qps_samples) / np.asarray(bst.qps_samples)
            gain = float(np.median(ratios) - 1.0)
            p = signed_rank_p(cand.qps_samples, bst.qps_samples) if len(ratios) >= 2 else None
        return EvalReport(split, cand, bst, gain, p, failures.get("candidate"), failures.get("best"))
