"""How busy the machine was while a measurement ran: the 1-minute load average against the cores
and the share of CPU time the hypervisor stole, sampled during the timing. The judge asks for
more pairs before accepting on a loaded machine, and every timing result states the load."""

from __future__ import annotations

import os
import time
from dataclasses import dataclass, field
from pathlib import Path

PROC_STAT = Path("/proc/stat")
# The timing itself keeps about one process runnable (candidate and best take turns), so a
# machine is called loaded when the load average reaches one more than that per core.
LOADED_PER_CORE = 1.0
LOADED_STEAL = 0.10  # or when the hypervisor took this share of the CPU time


def _cpu_times(stat: Path = PROC_STAT) -> tuple[int, int] | None:
    """(total jiffies, steal jiffies) of all CPUs from /proc/stat; None where it cannot be read."""
    try:
        with open(stat, encoding="ascii") as fh:
            fields = fh.readline().split()
    except OSError:
        return None
    if not fields or fields[0] != "cpu":
        return None
    values = [int(x) for x in fields[1:9]]
    values += [0] * (8 - len(values))
    return sum(values), values[7]


def cores() -> int:
    try:
        return len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        return os.cpu_count() or 1


@dataclass
class LoadMonitor:
    """Samples taken while a measurement runs: `sample()` after each timed pair, `summary()` at
    the end. `loaded` says whether the machine is busy now (the latest sample)."""

    stat: Path = PROC_STAT
    n_cores: int = field(default_factory=cores)
    loads: list[float] = field(default_factory=list)
    _t0: tuple[int, int] | None = None
    _last: tuple[int, int] | None = None
    started: float = field(default_factory=time.monotonic)

    def __post_init__(self):
        self._t0 = self._last = _cpu_times(self.stat)
        self.sample()

    def sample(self) -> None:
        try:
            self.loads.append(os.getloadavg()[0])
        except OSError:
            pass
        now = _cpu_times(self.stat)
        if now is not None:
            self._last = now

    @property
    def steal(self) -> float | None:
        """The stolen share of all CPU time between the first sample and the last."""
        if self._t0 is None or self._last is None:
            return None
        total = self._last[0] - self._t0[0]
        return (self._last[1] - self._t0[1]) / total if total > 0 else 0.0

    @property
    def per_core(self) -> float | None:
        return self.loads[-1] / self.n_cores if self.loads else None

    @property
    def loaded(self) -> bool:
        per_core = self.per_core
        steal = self.steal
        return bool((per_core is not None and per_core >= LOADED_PER_CORE)
                    or (steal is not None and steal >= LOADED_STEAL))

    def summary(self) -> dict:
        """{load1 (max over the samples), load1_min, cores, per_core, steal, loaded}: the journal form."""
        if not self.loads:
            return {"cores": self.n_cores, "load1": None, "loaded": self.loaded, "steal": self.steal}
        peak = max(self.loads)
        steal = self.steal
        return {"load1": round(peak, 2), "load1_min": round(min(self.loads), 2), "cores": self.n_cores,
                "per_core": round(peak / self.n_cores, 2), "steal": None if steal is None else round(steal, 4),
                "loaded": bool(peak / self.n_cores >= LOADED_PER_CORE or (steal or 0.0) >= LOADED_STEAL)}


def load_text(load: dict | None) -> str:
    """One clause for a timing result: "machine load 5.2 on 2 cores (LOADED: more pairs), 0.3% of CPU time stolen"."""
    if not load or load.get("load1") is None:
        return "machine load not available"
    text = f"machine load {load['load1']:.1f} on {load['cores']} cores" + (" (LOADED: more pairs)" if load.get("loaded") else "")
    if load.get("steal"):
        text += f", {load['steal']:.1%} of CPU time stolen"
    return text
