"""What a measurement returns: one process's figures (Metrics), a failure, and the paired report of
candidate against best on one split (EvalReport) with its journal form."""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any


def fmt_qps(v: Any, *, compact: bool = False, missing: str = "?") -> str:
    """A QPS figure as every agent text shows it: 12,345 (or 12.3k when compact, for tables and
    plots, from 10,000 up); `missing` for None."""
    if v is None:
        return missing
    v = float(v)
    return f"{v / 1000:.1f}k" if compact and v >= 10_000 else f"{v:,.0f}"


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
    load: dict | None = None  # the machine's load during the timing (machine_load.LoadMonitor.summary)

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
            "load": self.load,
        }
