"""Transfer targets: where else a session's result must hold. A card's [transfer] names other data
sets (a real SIFT file, another replica generator or seed) and SIMD levels (VDBBENCH_SIMD); every
new best's recall@10 at the engine's defaults is checked on each of them before it is adopted,
and the final measurement (vdbbench.agent.evaluation.final) times the best against the start on each.

A target is the card's own data at the native SIMD level ("here"), a transfer data set at the
native level, or the card's own data at a capped SIMD level. A data set that is not on this
machine (a registered name not in the cache, a path that does not exist) is reported as skipped,
never downloaded and never replaced by a replica.
"""

from __future__ import annotations

import dataclasses
import shutil
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

import numpy as np

from vdbbench.agent.core.task import TaskCard, TransferDataset
from vdbbench.agent.evaluation.eval_data import EvalData, Split

HERE = "here"


class TransferMissing(Exception):
    """A transfer data set that is not available on this machine; the message says why."""


@dataclass(frozen=True)
class Target:
    key: str  # "here", "data:<title>" or "simd:<level>"
    label: str  # what reports print: "synth-sift-50k", "photo-sift-a", "avx2"
    dataset: TransferDataset | None = None  # None: the card's own data
    simd: str | None = None  # None: the best level the CPU has

    @property
    def env(self) -> dict:
        return {"VDBBENCH_SIMD": self.simd} if self.simd else {}


def targets(card: TaskCard, include_here: bool = True) -> list[Target]:
    """The card's own data first (when asked), then each transfer data set, then each SIMD level."""
    out = [Target(HERE, card.dataset.name)] if include_here else []
    out += [Target(f"data:{d.title}", d.title, dataset=d) for d in card.transfer.datasets]
    out += [Target(f"simd:{s}", f"{card.dataset.name} at {s}", simd=s) for s in card.transfer.simd]
    return out


def expand(name: str) -> str:
    """`{data}` (the data cache, $VDBBENCH_DATA or ~/.cache/vdbbench) and `~` in a path."""
    from vdbbench.datasets.registry import data_dir

    if "{data}" in name:
        name = name.replace("{data}", str(data_dir()))
    return str(Path(name).expanduser()) if name.startswith("~") or "/" in name else name


def availability(card: TaskCard) -> dict[str, str | None]:
    """Without loading anything: for each transfer target's key, None when this machine can run it,
    else why not (a file that is not there, a registered set not in the cache). Generated sets
    and SIMD levels are always there (a level above the CPU's runs at the CPU's own)."""
    from vdbbench.datasets.built import BUILT
    from vdbbench.datasets.loader import parse_synth_name
    from vdbbench.datasets.registry import cached_source, entry

    out: dict[str, str | None] = {}
    for t in targets(card, include_here=False):
        if t.dataset is None:
            out[t.key] = None
            continue
        name = expand(t.dataset.name)
        if parse_synth_name(name) is not None:
            out[t.key] = None
        elif "/" in name:
            out[t.key] = None if Path(name).exists() else f"{name} does not exist on this machine"
        elif name in BUILT:
            spec = BUILT[name]
            out[t.key] = None if spec.path.exists() else f"{name} is not built here ({spec.build_hint})"
        else:
            try:
                out[t.key] = None if cached_source(entry(name)) is not None else f"{name} is not in the data cache"
            except Exception as exc:  # noqa: BLE001 - an unknown name is a missing target, said as such
                out[t.key] = f"{name}: {exc}"
    return out


def describe(card: TaskCard, available: dict[str, str | None] | None = None) -> str:
    """The task text's list of transfer targets: what each is, and the floor a new best must keep
    there; targets this machine does not have are named as skipped."""
    ts = targets(card, include_here=False)
    if not ts:
        return "none: only the card's own data is checked."
    available = availability(card) if available is None else available
    floor = card.objective.recall_floor
    lines = []
    for t in ts:
        if t.simd:
            what = (f"`{t.label}`: the card's data with VDBBENCH_SIMD={t.simd} set (an engine that picks its SIMD "
                    f"kernels at run time must honour it, capping itself at {t.simd})")
        elif t.dataset is not None and parse_dataset(t.dataset.name):
            what = f"`{t.label}`: a generated data set of the same family drawn with another seed ({t.dataset.queries:,} queries)"
        else:
            kind = "real SIFT descriptors" if "sift" in t.dataset.name.lower() else "another data set"
            what = f"`{t.label}`: {kind} ({t.dataset.queries:,} queries)"
        missing = available.get(t.key)
        lines.append(f"  - {what}: " + (f"SKIPPED here ({missing})" if missing else
                                       f"recall@10 >= {floor} at the engine's defaults"))
    rule = ("a new best that misses the floor on any of them is flagged and not kept (where the start version itself "
            "is under the floor on a target, the start's own recall there is the floor)" if not card.transfer.advisory
            else "a miss there is reported, not held against the submission (advisory)")
    return ("checked on every would-be new best, with the harness's own queries you never see; the verdict says pass "
            "or fail per target; " + rule + ":\n" + "\n".join(lines))


def parse_dataset(name: str) -> bool:
    from vdbbench.datasets.loader import parse_synth_name

    return parse_synth_name(expand(name)) is not None


def load_data(spec: TransferDataset, card: TaskCard) -> EvalData:
    """A transfer data set's base vectors and its first `queries` queries with exact ground truth
    (one split, used as held-out, dev and fresh alike). Raises TransferMissing when absent."""
    from vdbbench.datasets import DatasetError, compute_groundtruth, load_dataset, synth
    from vdbbench.datasets.loader import parse_synth_name

    name = expand(spec.name)
    parsed = parse_synth_name(name)
    k = max(card.objective.k, 10)
    identity = {"name": spec.name, "title": spec.title}
    if parsed is not None:
        kind, n = parsed
        n = spec.n or n
        gen = synth.synth_sift if kind == "sift" else synth.synth_float
        base, queries = gen(n, spec.queries, seed=spec.seed, dim=card.dataset.dim)
        metric = card.dataset.metric
        identity.update(synthetic=True, n=int(n), seed=spec.seed)
        ids, dist = compute_groundtruth(base, queries, metric, k=k)
    else:
        if "/" in name and not Path(name).exists():
            raise TransferMissing(f"{spec.title}: {name} does not exist on this machine")
        try:
            loaded = load_dataset(name, allow_download=False, offline_fallback=False, progress=False, k=k)
        except (DatasetError, OSError, ValueError) as exc:
            raise TransferMissing(f"{spec.title}: not available here ({exc})") from None
        base, metric = loaded.train, loaded.metric
        nq = min(spec.queries, loaded.test.shape[0])
        queries = loaded.test[:nq]
        if loaded.neighbors is not None and loaded.distances is not None and loaded.neighbors.shape[1] >= k:
            ids, dist = loaded.neighbors[:nq, :k], loaded.distances[:nq, :k]
        else:
            ids, dist = compute_groundtruth(base, queries, metric, k=k)
        identity.update(synthetic=bool(loaded.synthetic), n=int(base.shape[0]), sha256=loaded.sha256, path=name)
    split = Split(np.ascontiguousarray(queries, dtype=np.float32), np.ascontiguousarray(ids), np.ascontiguousarray(dist))
    return EvalData(np.ascontiguousarray(base, dtype=np.float32), metric, split, split, split, dataset=identity)


def card_for(card: TaskCard, data: EvalData) -> TaskCard:
    """The card as a transfer target's evaluator uses it: no kept worker, and held-out slices of
    the card's batch shape cut from the target's own queries."""
    nq = data.heldout.queries.shape[0]
    repeats = card.objective.repeats
    return dataclasses.replace(
        card,
        limits=dataclasses.replace(card.limits, keep_best_worker=False),
        dataset=dataclasses.replace(card.dataset, heldout_queries=max(repeats, min(nq, card.batch_queries * repeats)),
                                    dev_queries=nq, fresh_queries=nq),
    )


class Targets:
    """A session's transfer targets with their data loaded once (the data of a target is what its
    evaluator holds). `evaluator(target)` is None for a target whose data set is missing; the
    reason is in `missing`."""

    def __init__(self, card: TaskCard, here: EvalData, run_dir: Path):
        self.card = card
        self.here = here
        self.run_dir = Path(run_dir)
        self.missing: dict[str, str] = {}
        self._evaluators: dict = {}

    def all(self, include_here: bool = True) -> list[Target]:
        return targets(self.card, include_here)

    def evaluator(self, t: Target):
        from vdbbench.agent.evaluation.served import evaluator_for

        if t.key in self._evaluators:
            return self._evaluators[t.key]
        ev = None
        here_real = not (self.here.dataset or {}).get("synthetic", True)
        if t.dataset is not None and expand(t.dataset.name) == self.card.dataset.name and not t.dataset.seed and here_real:
            self.missing[t.key] = f"{t.label} is the card's own data set here (nothing else to check)"
            self._evaluators[t.key] = None
            return None
        try:
            data = self.here if t.dataset is None else load_data(t.dataset, self.card)
            ev = evaluator_for(card_for(self.card, data) if t.dataset is not None else
                           dataclasses.replace(self.card, limits=dataclasses.replace(self.card.limits, keep_best_worker=False)),
                           data, self.run_dir, env=t.env)
        except TransferMissing as exc:
            self.missing[t.key] = str(exc)
        self._evaluators[t.key] = ev
        return ev


def threshold(floor: float, start_recall: float | None) -> float:
    """What a new best's recall must reach on a target: the floor, or, where the start itself was
    under the floor there, the start's own recall (less 0.0005 for ties), so that a target the
    engine never met does not block every change, while a loss there still does."""
    if start_recall is None or start_recall >= floor:
        return floor
    return start_recall - 0.0005


def start_library(card: TaskCard, run_dir: Path, ws: Path, target_dir: Path | None,
                  emit: Callable[..., dict] | None = None) -> Path | None:
    """The start version's library (or server binary), builds/start/<card.artifact>: kept from the first best when the judge
    saw it, else built once from the workspace's start commit (needs the cargo target folder)."""
    from vdbbench.agent.core import workspace as wsp

    leaf = card.artifact
    lib = Path(run_dir) / "builds" / "start" / leaf
    if lib.exists():
        return lib
    start = wsp.start_commit(ws)
    best = Path(run_dir) / "builds" / "best"
    marker = best / "COMMIT"
    if (best / leaf).exists() and marker.exists() and marker.read_text().strip() == start:
        keep_start(run_dir, leaf)
        return lib
    if target_dir is None:
        return None
    src = Path(run_dir) / "start-src"
    if src.exists():
        shutil.rmtree(src)
    wsp.export_tree(ws, start, src)
    res = wsp.build(src, card, target_dir, lib.parent)
    if emit is not None:
        emit("build", ok=res.ok, seconds=round(res.seconds, 3), stderr_tail=wsp.tail(res.stderr_tail), what="start (final)")
    return lib if res.ok and lib.exists() else None


def keep_start(run_dir: Path, artifact: str) -> None:
    """Copy builds/best/<artifact> to builds/start/ (while the best is still the start version);
    `artifact` is the card's build product's file name (TaskCard.artifact)."""
    src = Path(run_dir) / "builds" / "best" / artifact
    dst = Path(run_dir) / "builds" / "start" / artifact
    if src.exists() and not dst.exists():
        dst.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(src, dst)


def check(targets_: Targets, lib: Path, start_lib: Path | None, start_recalls: dict | None) -> tuple[list[dict], dict]:
    """Recall@10 of `lib` at the engine's defaults on every transfer target (the card's own data at
    the native level is the judge's held-out check, not repeated here). Returns (rows, the start's
    recall per target key, measured now where `start_recalls` lacks it)."""
    card = targets_.card
    floor = card.objective.recall_floor
    start_recalls = dict(start_recalls or {})
    rows = []
    for t in targets_.all(include_here=False):
        ev = targets_.evaluator(t)
        row = {"key": t.key, "label": t.label, "simd": t.simd, "floor": floor}
        if ev is None:
            rows.append({**row, "skipped": targets_.missing.get(t.key, "not available")})
            continue
        row["dataset"] = ev.data.dataset
        if t.key not in start_recalls and start_lib is not None:
            got = ev.recall_of(start_lib, "start")
            start_recalls[t.key] = got.get("recall10")
        got = ev.recall_of(lib, "candidate")
        if got.get("failure"):
            rows.append({**row, "recall10": None, "failure": got["failure"], "holds": False,
                         "start_recall10": start_recalls.get(t.key)})
            continue
        need = threshold(floor, start_recalls.get(t.key))
        rows.append({**row, "recall10": got["recall10"], "start_recall10": start_recalls.get(t.key),
                     "threshold": need, "holds": got["recall10"] >= need})
    return rows, start_recalls


def failing(rows: list[dict]) -> list[dict]:
    return [r for r in rows if not r.get("skipped") and not r.get("holds")]


def verdict_text(rows: list[dict]) -> str:
    """The model's view of a transfer check: pass or fail per target, never the recall figures
    (the targets' queries are fixed; their exact recall would be something to tune against)."""
    parts = []
    for r in rows:
        if r.get("skipped"):
            parts.append(f"{r['label']}: skipped (not on this machine)")
        elif r.get("failure"):
            parts.append(f"{r['label']}: FAIL (the engine failed there: {r['failure'][:200]})")
        else:
            parts.append(f"{r['label']}: {'pass' if r.get('holds') else 'FAIL (recall@10 under the floor at the engine defaults)'}")
    return "; ".join(parts)


def finding_text(r: dict) -> str:
    """One audit-style finding for a target where the recall does not hold."""
    if r.get("failure"):
        return f"[transfer-recall] on {r['label']} the candidate failed: {r['failure'][:300]}"
    start = r.get("start_recall10")
    return (f"[transfer-recall] recall@10 {r['recall10']:.4f} on {r['label']} at the engine's defaults is under "
            f"{r['threshold']:.4f} (the {r['floor']} floor" + (f"; the start reads {start:.4f} there" if start is not None else "")
            + ")")
