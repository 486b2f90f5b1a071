"""One candidate build loaded in a process of its own (vdbbench.agent.evaluation.harness_worker), under a
deadline and an address-space cap: the harness side of the worker protocol."""

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
from pathlib import Path

import numpy as np

from vdbbench.agent.core.task import TaskCard
from vdbbench.agent.core.workspace import TAIL_CAP
from vdbbench.agent.evaluation import harness_worker

WORKER = Path(harness_worker.__file__).resolve()


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

    def __init__(self, library: Path, card: TaskCard, log_path: Path, deadline: float, env: dict | None = None):
        self.card = card
        self.deadline = deadline
        self.log_path = log_path
        mem = card.limits.memory_mb * 1024 * 1024
        threads = str(card.objective.threads)
        extra = dict(env or {})  # e.g. VDBBENCH_SIMD for a transfer target's SIMD level
        env = {k: v for k, v in os.environ.items() if not k.startswith(("OPENAI", "VDBBENCH_AGENT"))}
        env.update(extra)
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
        self.search_args = dict(card.entry.search_args)  # what `search` is called with (benchmark may override)
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

    def _stderr_tail(self, limit: int = TAIL_CAP) -> str:
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

    def load(self, base: np.ndarray, cache: Path | None = None) -> dict:
        """Build the index (or read it from `cache`, see harness_worker.build_index)."""
        e = self.card.entry
        header = {"cmd": "load", "path": str(self.library), "module": e.module, "cls": e.cls,
                  "dim": int(base.shape[1]), "build_args": e.build_args}
        if cache is not None:
            header["cache"] = str(cache)
        self._send(header, {"base": base})
        header, _ = self._recv()
        self.loaded = header
        return header

    @property
    def pid(self) -> int:
        """The process that searches (what `perf record -p` samples)."""
        return self.proc.pid

    def alive(self) -> bool:
        return self.proc.poll() is None

    def _check_ids(self, ids: np.ndarray | None, nq: int) -> np.ndarray:
        """The ids a search returned, if they are integers of shape (nq, >= k); else the worker is
        treated as crashed."""
        k = self.card.objective.k
        if ids is None or ids.ndim != 2 or ids.shape[0] != nq or ids.shape[1] < k:
            shape = None if ids is None else ids.shape
            raise WorkerDied("crashed", f"search returned ids of shape {shape}; expected ({nq}, {k})")
        if not np.issubdtype(ids.dtype, np.integer):
            raise WorkerDied("crashed", f"search returned ids of dtype {ids.dtype}; expected integers")
        return ids

    def repeat(self, queries: np.ndarray, seed: int, min_seconds: float, stats: bool = False) -> tuple[np.ndarray, np.ndarray, list, dict | None]:
        """One timed repeat (see harness_worker.timed_repeat): (first ids, last ids, [[cpu, wall]...], stats)."""
        self._send({"cmd": "repeat", "search_args": self.search_args, "stats": stats, "seed": int(seed),
                    "min_seconds": float(min_seconds), "clock": self.card.objective.clock_kind}, {"queries": queries})
        header, arrays = self._recv()
        k = self.card.objective.k
        for name in ("ids", "last_ids"):
            self._check_ids(arrays.get(name), queries.shape[0])
        passes = header.get("passes") or []
        if not passes:
            raise WorkerDied("crashed", "the candidate process timed no pass")
        return arrays["ids"][:, :k], arrays["last_ids"][:, :k], passes, header.get("stats")

    def search(self, queries: np.ndarray, stats: bool = False) -> tuple[np.ndarray, float, dict | None]:
        self._send({"cmd": "search", "search_args": self.search_args, "stats": stats}, {"queries": queries})
        header, arrays = self._recv()
        ids = self._check_ids(arrays.get("ids"), queries.shape[0])
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
