"""The expert line: the project's own engine measured by the harness on the session's card, once,
at the start, so a report can say how far a model got against what the project reaches.

Journal event: {"type": "reference", "qps", "recall10", "commit", "cpu", "source", ...}
(docs/agent-journal.md). The tournament's leaderboard reads it too: keep its shape."""

from __future__ import annotations

import dataclasses
import subprocess
import time
from pathlib import Path
from typing import Callable

from vdbbench.agent.core import workspace as wsp
from vdbbench.agent.core.task import Build, Entry, TaskCard
from vdbbench.agent.evaluation.eval_data import EvalData
from vdbbench.agent.evaluation.evaluator import Evaluator
from vdbbench.bench.results import cpu_model


def is_start(card: TaskCard) -> bool:
    """True when the reference is the start version itself (the card optimizes the project's engine)."""
    ref = card.reference
    if ref.source == "start":
        return True
    return (ref.source == "engine" and Path(ref.repo).resolve() == Path(card.start.repo).resolve()
            and ref.rev == card.start.rev and not card.start.subdir.strip("/")
            and ref.manifest == card.build.manifest and ref.module == card.entry.module)


def _sha(repo: str, rev: str) -> str | None:
    out = subprocess.run(["git", "rev-parse", "--verify", f"{rev}^{{commit}}"], cwd=repo, capture_output=True, text=True)
    return out.stdout.strip() if out.returncode == 0 else None


def _payload(metrics, source: str, commit: str | None, **extra) -> dict:
    return {"qps": metrics.qps, "recall10": metrics.recall10, "commit": commit, "cpu": cpu_model(), "source": source,
            "qps_samples": list(metrics.qps_samples), "clock": metrics.clock, **extra}


def from_baseline(card: TaskCard, baseline) -> dict:
    """The reference event of a card whose start is the project's engine: its own baseline."""
    return _payload(baseline, "start", _sha(card.start.repo, card.start.rev), repo=card.start.repo)


def measure(card: TaskCard, data: EvalData, run_dir: Path, target: Path,
            emit: Callable[..., dict]) -> dict | None:
    """Build the card's reference engine from its repository and measure it on the held-out split
    alone; journals a `build` and returns the `reference` payload, or None (with an `error`
    event saying why) when it cannot be built or run: the session goes on without it."""
    ref = card.reference
    commit = _sha(ref.repo, ref.rev)
    if commit is None:
        emit("error", where="reference", text=f"revision {ref.rev!r} not found in {ref.repo}: no reference line")
        return None
    src = run_dir / "reference-src"
    try:
        wsp.export_tree(Path(ref.repo), commit, src)
    except (subprocess.CalledProcessError, OSError, wsp.WorkspaceError) as exc:
        emit("error", where="reference", text=f"cannot export {ref.repo}@{commit[:12]}: {exc}")
        return None
    if not (src / ref.manifest).is_file():
        emit("error", where="reference", text=f"{ref.repo}@{commit[:12]} has no {ref.manifest}: no reference line")
        return None
    ref_card = dataclasses.replace(
        card,
        build=Build(manifest=ref.manifest, package=ref.package, profile="release", timeout_s=card.build.timeout_s),
        entry=Entry(module=ref.module, cls=ref.cls, build_args=dict(ref.build_args), search_args=dict(card.entry.search_args)),
    )
    t0 = time.perf_counter()
    res = wsp.build(src, ref_card, target, run_dir / "builds" / "reference")
    emit("build", ok=res.ok, seconds=round(res.seconds, 3), stderr_tail=wsp.tail(res.stderr_tail), errors=res.errors,
         what="reference")
    if not res.ok:
        emit("error", where="reference", text=f"the reference does not build: {res.errors[:wsp.TAIL_CAP]}")
        return None
    report = Evaluator(ref_card, data, run_dir).run("heldout", res.library, None)
    if report.failure or report.candidate is None:
        emit("error", where="reference", text=f"the reference fails under the harness: {report.failure and report.failure.text}")
        return None
    return _payload(report.candidate, "engine", commit, repo=ref.repo, module=ref.module,
                    seconds=round(time.perf_counter() - t0, 3))
