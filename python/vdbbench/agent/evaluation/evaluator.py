"""The measuring half of the judge: runs candidate builds in processes it owns and times them
against the best on held-out queries, in closely paired repeats of a set duration (the deciding
half, the sequential test, is vdbbench.agent.evaluation.judge). The data it measures on is
vdbbench.agent.evaluation.eval_data, the process it drives vdbbench.agent.evaluation.candidate, what it returns
vdbbench.agent.evaluation.eval_report."""

from __future__ import annotations

import hashlib
import math
import time
import weakref
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

import numpy as np

from vdbbench.agent.core.task import TaskCard
from vdbbench.agent.evaluation.candidate import CandidateProcess, WorkerDied
from vdbbench.agent.evaluation.eval_data import EvalData, Split
from vdbbench.agent.evaluation.eval_report import EvalReport, Failure, Metrics
from vdbbench.agent.evaluation.machine_load import LoadMonitor
from vdbbench.agent.evaluation.timing_lock import timing_lock
from vdbbench.common.recall import id_recall, knn_recall


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

    def __init__(self, card: TaskCard, data: EvalData, run_dir: Path, env: dict | None = None):
        self.card = card
        self.data = data
        self.env = dict(env or {})  # extra environment of every process it runs (a transfer target's VDBBENCH_SIMD)
        self.logs = run_dir / "eval-logs"
        self.logs.mkdir(parents=True, exist_ok=True)
        self._n = 0
        self.spawned: list[int] = []  # pids of every candidate process, so tests can check none survived
        self._kept: tuple[tuple, CandidateProcess] | None = None  # the best's process, with its library's identity
        self.transfer = None  # the card's transfer targets with their data (vdbbench.agent.evaluation.transfer.Targets), once needed
        self.transfer_start: dict = {}  # the start version's recall on each transfer target, once measured
        # The machine's load during the timing under way (sampled after each pair): a stop rule
        # reads `self.load.loaded` to ask for more pairs on a busy machine.
        self.load = LoadMonitor()
        self.loaded: dict[str, dict] = {}  # each process's load reply in the last run (train_s, add_s, cache)

    def spawn(self, library: Path, tag: str, deadline: float):
        """A process of `library` as this evaluator runs one (in-process worker or server), not yet
        loaded; its pid is recorded with the others the evaluator started."""
        return self._spawn(library, tag, deadline)

    def _spawn(self, library: Path, tag: str, deadline: float) -> CandidateProcess:
        self._n += 1
        proc = CandidateProcess(library, self.card, self.logs / f"{self._n:05d}-{tag}.log", deadline, env=self.env)
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
            stop: StopRule | None = None, fresh: bool = False, search_args: dict | None = None,
            caches: dict[str, Path] | None = None) -> EvalReport:
        """Candidate against best (or alone) on `split`. With a best and a `stop` rule, the
        held-out and dev pairs go on until the rule says stop (dev: at least `dev_repeats`);
        `search_args` overrides the candidate's search arguments (the best keeps the card's);
        `caches` names an index file per process ("candidate", "best") to read the index from or
        save it to (vdbbench.agent.evaluation.index_cache); what each load did is `self.loaded`."""
        obj = self.card.objective
        data: Split = getattr(self.data, split)
        slices = self.slices(split)
        if split == "heldout":
            min_pairs, max_pairs, seconds = obj.repeats, (obj.max_pairs if (best is not None and stop) else obj.repeats), obj.repeat_seconds
        elif split == "dev":
            min_pairs = obj.dev_repeats
            max_pairs = obj.max_pairs if (best is not None and stop) else obj.dev_repeats
            seconds = obj.dev_repeat_seconds
        else:  # fresh: one short pass per slice
            min_pairs = max_pairs = len(slices)
            seconds = 0.0
        timeout = self.card.limits.eval_timeout_s
        procs = {"candidate": self._spawn(candidate, "candidate", time.monotonic() + timeout)}
        if search_args:
            procs["candidate"].search_args.update(search_args)
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
                    p.load(self.data.base, cache=(caches or {}).get(name))
                except WorkerDied as exc:
                    failures[name] = Failure(exc.outcome, f"while building the index: {exc.text}")
            with timing_lock() as wait:
                self.load = LoadMonitor()
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
                    self.load.sample()
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
            self.loaded = {name: dict(p.loaded) for name, p in procs.items()}
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
                          dataset=self.data.dataset, load=self.load.summary())

    def recall_of(self, library: Path, tag: str = "candidate") -> dict:
        """recall@10 of one build at the engine's defaults on the held-out split: one untimed pass
        per slice, in a process of its own. {"recall10"} or {"failure": text}."""
        data: Split = self.data.heldout
        k = self.card.objective.k
        ids = np.full((data.queries.shape[0], k), -1, dtype=np.int64)
        covered = np.zeros(data.queries.shape[0], dtype=bool)
        proc = self._spawn(library, tag, time.monotonic() + self.card.limits.eval_timeout_s)
        try:
            proc.load(self.data.base)
            for r, sl in enumerate(self.slices("heldout")):
                proc.deadline = time.monotonic() + self.card.limits.eval_timeout_s
                first, _, _, _ = proc.repeat(np.ascontiguousarray(data.queries[sl]), _seed("heldout", r), 0.0)
                ids[sl] = first
                covered[sl] = True
        except WorkerDied as exc:
            return {"failure": exc.text}
        finally:
            proc.close()
        return {"recall10": self._recall(ids, covered, data)}

    def interleaved(self, libs: dict[str, Path], split: str, seconds: float,
                    more: Callable[[int, dict], bool], max_rounds: int = 1000) -> dict:
        """Any number of builds loaded side by side, timed in rounds on `split`: in each round
        every build gets one repeat of at least `seconds` on the judged clock, all of them taking
        turns in chunks (ABC, CBA, ...), and the round's ratio of two builds is the median over
        their chunk pairs (paired_log_ratio). Rounds go on (past one per slice) while `more(rounds
        done, ratios)` says so. Returns {"logs": {name: [ln QPS per round]}, "ratios":
        {(a, b): [ln(a/b) per round]}, "recall": {name: recall@10 of the first pass over each
        slice}, "rounds", "failures": {name: text}}. Used by the final measurement; nothing here
        is kept alive afterwards."""
        data: Split = getattr(self.data, split)
        slices = self.slices(split)
        names = list(libs)
        procs: dict = {}
        failures: dict[str, Failure] = {}
        k = self.card.objective.k
        ids = {n: np.full((data.queries.shape[0], k), -1, dtype=np.int64) for n in names}
        covered = np.zeros(data.queries.shape[0], dtype=bool)
        logs: dict[str, list[float]] = {n: [] for n in names}
        ratios: dict[tuple, list[float]] = {(a, b): [] for i, a in enumerate(names) for b in names[i + 1:]}
        rounds = 0
        try:
            for n in names:
                procs[n] = self._spawn(libs[n], n, time.monotonic() + self.card.limits.eval_timeout_s)
                try:
                    procs[n].load(self.data.base)
                except WorkerDied as exc:
                    failures[n] = Failure(exc.outcome, f"while building the index: {exc.text}")
            with timing_lock():
                while not failures and rounds < max_rounds and (rounds < len(slices) or more(rounds, ratios)):
                    sl = slices[rounds % len(slices)]
                    order = names if rounds % 2 == 0 else list(reversed(names))
                    got = self._repeat_pair(procs, order, np.ascontiguousarray(data.queries[sl]), split, 500 + rounds,
                                            seconds, False, failures)
                    if failures:
                        break
                    if rounds < len(slices):
                        for n in names:
                            ids[n][sl] = got[n][0]
                        covered[sl] = True
                    for n in names:
                        q = sum(c[0] for c in self._chunks[n])
                        t = sum(c[1] for c in self._chunks[n])
                        logs[n].append(math.log(q / t))
                    for (a, b), lst in ratios.items():
                        lst.append(paired_log_ratio(self._chunks[a], self._chunks[b]))
                    rounds += 1
        finally:
            for p in procs.values():
                p.close()
        recall = {n: (self._recall(ids[n], covered, data) if n not in failures and covered.any() else None) for n in names}
        return {"logs": logs, "ratios": ratios, "recall": recall, "rounds": rounds,
                "failures": {n: f.text for n, f in failures.items()}}

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
                if j > 0 and judged[name] >= seconds:
                    continue  # done: when one pass outlasts the repeat (a far slower side), no more of them
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
