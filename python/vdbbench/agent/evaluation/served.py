"""The evaluator of served cards ([evaluation] kind = "served"): a build is a server binary that
speaks the vector-db-bench HTTP API, measured as the public leaderboard measures one.

Each build runs as a server process of its own (`CandidateServer`): pinned to the card's cores
(the intersection with the cores this process may use), under the card's address-space cap, in
its own process group that dies with the harness, on a free loopback port given as PORT, its
output in the evaluator's log folder. (vdbbench.served.process starts trusted servers; a model's
server gets the cap and the parent-death signal a candidate worker gets.) `ServedProcess` gives it the
interface of the in-process worker (vdbbench.agent.evaluation.candidate.CandidateProcess), so the
evaluator's pairing, the judge's sequential test, the fresh-query check, the kept best and the
final measurement run unchanged:

- load: the base vectors bulk-inserted (ids 0..n-1, batches of `insert_batch`), then `warmup`
  warm-up queries sent by one client without a timeout short of the phase's (the dev queries,
  cycled; any index a server builds on its first search is built there, and its time is
  reported as the build's train_s);
- a timed repeat: passes over the slice, each pass all its queries in a fresh seeded order
  through `clients` concurrent connections, one query per request
  (vdbbench.served.client.query), until the repeat's seconds are reached on the wall clock; the
  server's own CPU time is kept beside it;
- every first pass goes through the leaderboard's anti-cheat check (result sets that look
  hard-coded: mean pairwise Jaccard > 0.8); a failure, or any failed request, ends the
  evaluation of that build with the reason.

Recall is exact-id overlap with the ground truth's top 10 (how the leaderboard scores), the gate
the card's recall floor applies to.
"""

from __future__ import annotations

import os
import resource
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import numpy as np

from vdbbench.agent.core.task import TaskCard, parse_cpus
from vdbbench.agent.core.workspace import TAIL_CAP
from vdbbench.agent.evaluation.candidate import WorkerDied
from vdbbench.agent.evaluation.eval_data import EvalData, Split
from vdbbench.agent.evaluation.evaluator import Evaluator
from vdbbench.common.recall import id_recall
from vdbbench.served.process import free_port

_CLK_TCK = os.sysconf("SC_CLK_TCK") if hasattr(os, "sysconf") else 100
PASS_SECONDS = 0.25  # the length of one client run after a slice's first pass
MAX_COPIES = 64


def pinned_cores(requested: str) -> tuple[list[int], str]:
    """(cores, note): the card's core list cut to the cores this process may run on, and what was
    done about it. An empty request, or one that shares no core with this machine, pins nothing."""
    want = parse_cpus(requested)
    have = sorted(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else []
    if not want:
        return [], "not pinned"
    used = [c for c in want if c in have] if have else want
    if not used:
        return [], f"not pinned: none of the cores {requested} is available here (cores {_ranges(have)})"
    if used != want:
        return used, f"pinned to cores {_ranges(used)} (of {requested} asked; this machine offers {_ranges(have)})"
    return used, f"pinned to cores {_ranges(used)}"


def _ranges(cores: list[int]) -> str:
    out, i = [], 0
    while i < len(cores):
        j = i
        while j + 1 < len(cores) and cores[j + 1] == cores[j] + 1:
            j += 1
        out.append(f"{cores[i]}" if i == j else f"{cores[i]}-{cores[j]}")
        i = j + 1
    return ",".join(out)


class CandidateServer:
    """A built server binary running on a loopback port, pinned and capped; `url` once it listens."""

    def __init__(self, binary: Path, card: TaskCard, log_path: Path, deadline: float, cores: list[int],
                 env: dict | None = None):
        self.card = card
        self.log_path = log_path
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        mem = card.limits.memory_mb * 1024 * 1024
        run_env = {k: v for k, v in os.environ.items() if not k.startswith(("OPENAI", "VDBBENCH_AGENT"))}
        run_env.update(env or {})
        run_env.update(PORT=str(self.port), RUST_BACKTRACE="0")

        def limit():  # runs in the child before exec
            resource.setrlimit(resource.RLIMIT_AS, (mem, mem))
            resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
            if cores:
                os.sched_setaffinity(0, cores)  # what `taskset -c` does
            if sys.platform.startswith("linux"):
                import ctypes

                ctypes.CDLL(None).prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG: never outlive the harness

        self.log = log_path.open("ab")
        try:
            self.proc = subprocess.Popen([str(Path(binary).resolve())], stdin=subprocess.DEVNULL, stdout=self.log,
                                         stderr=self.log, env=run_env, cwd=str(log_path.parent), start_new_session=True,
                                         preexec_fn=limit)
        except OSError as exc:
            self.log.close()
            raise WorkerDied("crashed", f"the server {binary} could not be started: {exc}") from None
        self._wait_listening(deadline)

    def _wait_listening(self, deadline: float) -> None:
        while True:
            if self.proc.poll() is not None:
                exc = self.death("while starting")
                self.log.close()
                raise exc
            try:
                socket.create_connection(("127.0.0.1", self.port), timeout=0.5).close()
                return
            except OSError:
                pass
            if time.monotonic() > deadline:
                self.stop()
                raise WorkerDied("timed_out", f"the server did not listen on PORT={self.port} within the "
                                              f"{self.card.limits.eval_timeout_s:.0f} s limit; it was stopped")
            time.sleep(0.05)

    def stderr_tail(self, limit: int = TAIL_CAP) -> str:
        self.log.flush()
        try:
            return self.log_path.read_bytes()[-limit:].decode(errors="replace").strip()
        except OSError:
            return ""

    def death(self, when: str) -> WorkerDied:
        rc = self.proc.wait(timeout=10)
        how = f"killed by {signal.Signals(-rc).name}" if rc < 0 else f"exited with status {rc}"
        tail = self.stderr_tail()
        return WorkerDied("crashed", f"the server {how} {when}" + (f"; its output ends with:\n{tail}" if tail else ""))

    def cpu_seconds(self) -> float:
        """User + system CPU time of the server process so far (all its threads)."""
        try:
            fields = Path(f"/proc/{self.proc.pid}/stat").read_text().rsplit(")", 1)[1].split()
            return (int(fields[11]) + int(fields[12])) / _CLK_TCK
        except (OSError, IndexError, ValueError):
            return 0.0

    def alive(self) -> bool:
        return self.proc.poll() is None

    def stop(self) -> None:
        if self.proc.poll() is None:
            try:
                os.killpg(self.proc.pid, signal.SIGTERM)
                self.proc.wait(timeout=5)
            except (ProcessLookupError, subprocess.TimeoutExpired):
                pass
        if self.proc.poll() is None:
            try:
                os.killpg(self.proc.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
            self.proc.wait(timeout=10)
        self.log.close()


class ServedProcess:
    """One server build behind the worker interface the evaluator drives (load, repeat, close)."""

    def __init__(self, binary: Path, card: TaskCard, log_path: Path, deadline: float, cores: list[int],
                 warmup_queries: np.ndarray, env: dict | None = None, spawned: list | None = None):
        self.card = card
        self.deadline = deadline
        self.library = binary
        self.search_args = dict(card.entry.search_args)  # kept for the evaluator; a server takes only top_k
        self.loaded: dict = {}
        self.wall_seconds = 0.0
        self._warmup_queries = warmup_queries
        self._start = (binary, card, log_path, cores, env)
        self._spawned = spawned if spawned is not None else []
        self.server: CandidateServer | None = None  # started by load(), where a failure is the build's
        self._qps = 0.0  # of the last run: how many copies of a slice make a run of PASS_SECONDS

    def _start_server(self) -> None:
        binary, card, log_path, cores, env = self._start
        self.server = CandidateServer(binary, card, log_path, self.deadline, cores, env)
        self._spawned.append(self.server.proc.pid)

    def _failed(self, what: str, text: str) -> WorkerDied:
        if not self.server.alive():
            return self.server.death(what)
        return WorkerDied("crashed", f"{what}: {text}")

    def load(self, base: np.ndarray, cache=None) -> dict:
        """Starts the server and inserts ``base``; ``cache`` (the in-process index cache) does not
        apply: a server builds its own index from what it is sent."""
        from vdbbench.served.client import ServedError, insert

        ev = self.card.evaluation
        self._start_server()
        t0 = time.perf_counter()
        try:
            n = insert(self.server.url, base, batch=ev.insert_batch, timeout_s=self.card.limits.eval_timeout_s)
        except ServedError as exc:
            raise self._failed("while inserting the base vectors", str(exc)) from None
        add_s = time.perf_counter() - t0
        if n != base.shape[0]:
            raise WorkerDied("crashed", f"the server said it inserted {n:,} vectors of {base.shape[0]:,}")
        warm_s = 0.0
        if ev.warmup:
            rows = np.resize(np.arange(self._warmup_queries.shape[0]), ev.warmup)
            t0 = time.perf_counter()
            # Sent by one client, as the leaderboard's client sends it, and a request may wait as long
            # as the phase may last: a server that builds its index on the first search answers it
            # only then (that client sets no timeout), and no other search arrives meanwhile.
            limit = self.card.limits.eval_timeout_s
            run = self._query(np.ascontiguousarray(self._warmup_queries[rows]), seed=0,
                              what=f"during the warm-up (each request may take up to the {limit:.0f} s limit of the phase, "
                                   "an index built on the first search included)",
                              timeout_s=limit, clients=1)
            warm_s = time.perf_counter() - t0
            if run.errors:
                raise self._failed("during the warm-up", f"{run.errors} of {ev.warmup} requests failed; the first: {run.first_error}")
        self.loaded = {"ok": True, "train_s": warm_s, "add_s": add_s, "inserted": n}
        return self.loaded

    def _query(self, queries: np.ndarray, seed: int, what: str, timeout_s: float | None = None, clients: int | None = None):
        from vdbbench.served.client import ServedError, query

        ev = self.card.evaluation
        try:
            return query(self.server.url, queries, top_k=self.card.objective.k, clients=clients or ev.clients, warmup=0,
                         seed=seed, shuffle=True, timeout_s=timeout_s or ev.timeout_s)
        except ServedError as exc:
            raise self._failed(what, str(exc)) from None

    def repeat(self, queries: np.ndarray, seed: int, min_seconds: float, stats: bool = False):
        """Passes over `queries` until `min_seconds` of wall time: (first ids, last ids, [[server cpu,
        wall] per pass], None). The first pass is one run of the slice alone; later runs send the
        slice several times over (each copy in its own shuffled place), so that one run lasts about
        PASS_SECONDS and the clients' start and their connections are a small part of it; such a
        run counts as that many passes of equal time."""
        from vdbbench.served.measure import anti_cheat

        nq = queries.shape[0]
        passes: list[list[float]] = []
        first = last = None
        spent = 0.0
        if min_seconds > 0:  # the evaluator's turns are made for in-process calls; over HTTP a turn lasts longer
            min_seconds = max(min_seconds, PASS_SECONDS)
        while first is None or spent < min_seconds:
            if time.monotonic() > self.deadline:
                raise WorkerDied("timed_out", f"the server did not finish within the {self.card.limits.eval_timeout_s:.0f} s limit")
            copies = 1 if first is None or not self._qps else max(1, min(MAX_COPIES, round(PASS_SECONDS * self._qps / nq)))
            sent = np.tile(queries, (copies, 1)) if copies > 1 else queries
            cpu0 = self.server.cpu_seconds()
            run = self._query(sent, seed * 1000 + len(passes), "during search")
            cpu = self.server.cpu_seconds() - cpu0
            if run.errors:
                raise self._failed("during search", f"{run.errors} of {sent.shape[0]} requests failed; the first: {run.first_error}")
            if first is None:
                first = run.ids
                cheat = anti_cheat(run.ids[:, :self.card.objective.k])
                if not cheat["passed"]:
                    raise WorkerDied("flagged", f"the leaderboard's anti-cheat check fails on {nq} queries: {cheat['message']}")
            last = run.ids[-nq:]
            wall = float(run.wall_s)
            self._qps = sent.shape[0] / max(wall, 1e-9)
            passes += [[max(cpu, 0.0) / copies, wall / copies]] * copies
            spent += wall
        self.wall_seconds = spent
        return first, last, passes, None

    def search(self, queries: np.ndarray, stats: bool = False):
        first, _, passes, _ = self.repeat(queries, 0, 0.0)
        return first, passes[0][1], None

    @property
    def pid(self) -> int:
        """The server process (what `perf record -p` samples); started by load()."""
        return self.server.proc.pid

    def alive(self) -> bool:
        return self.server is not None and self.server.alive()

    def kill(self) -> None:
        if self.server is not None:
            self.server.stop()

    def close(self) -> None:
        self.kill()


class ServedEvaluator(Evaluator):
    """The evaluator with server builds in place of in-process workers, and exact-id recall."""

    def __init__(self, card: TaskCard, data: EvalData, run_dir: Path, env: dict | None = None):
        super().__init__(card, data, run_dir, env)
        self.cores, self.pinning = pinned_cores(card.evaluation.cpus)

    def _spawn(self, library: Path, tag: str, deadline: float) -> ServedProcess:
        self._n += 1
        log = self.logs / f"{self._n:05d}-{tag}.log"
        log.write_text(f"{tag}: {library}, {self.pinning}\n")
        return ServedProcess(library, self.card, log, deadline, self.cores, self.data.dev.queries, env=self.env,
                             spawned=self.spawned)

    def _recall(self, ids: np.ndarray, covered: np.ndarray, data: Split) -> float:
        if not covered.any():
            return 0.0
        return id_recall(ids[covered], data.gt_ids[covered], k=self.card.objective.k)

    def run(self, split, candidate, best, **kw):
        report = super().run(split, candidate, best, **kw)
        report.dataset = {**(report.dataset or {}), "server": self.describe()}
        return report

    def describe(self) -> dict:
        """How the servers were run: what the evaluation events record beside the data set."""
        ev = self.card.evaluation
        return {"cores": self.cores, "pinning": self.pinning, "clients": ev.clients, "warmup": ev.warmup,
                "insert_batch": ev.insert_batch, "recall": "exact-id overlap (as the leaderboard scores)"}


def evaluator_for(card: TaskCard, data: EvalData, run_dir: Path, env: dict | None = None) -> Evaluator:
    """The evaluator a card's kind needs: in-process workers, or servers over HTTP."""
    if card.evaluation.served:
        return ServedEvaluator(card, data, run_dir, env)
    return Evaluator(card, data, run_dir, env)
