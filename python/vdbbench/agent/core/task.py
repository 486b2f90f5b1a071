"""Task cards: the TOML file that says what an agent session optimizes, and how it is judged."""

from __future__ import annotations

import re
import sys

if sys.version_info >= (3, 11):
    import tomllib
else:  # Python 3.10: the same parser from PyPI
    import tomli as tomllib
from dataclasses import asdict, dataclass, field
from pathlib import Path

from vdbbench.common.recall import RECALL_TARGET

# Never editable by the model, whatever the card's globs say.
FORBIDDEN_NAMES = ("Cargo.toml", "Cargo.lock", "build.rs", "pyproject.toml", ".cargo")


class TaskError(ValueError):
    """A task card that cannot be used: the message says which field and what was expected."""


@dataclass
class Start:
    repo: str  # a git repository (path, relative to the card's own repository or absolute)
    rev: str = "HEAD"
    subdir: str = ""  # take only this folder of the repository (e.g. agent/skeleton)


@dataclass
class Build:
    manifest: str  # Cargo.toml of the crate that builds the extension module (workspace-relative)
    package: str = ""  # -p PACKAGE when the manifest is a workspace
    features: list[str] = field(default_factory=list)
    profile: str = "release"
    timeout_s: float = 600.0
    env: dict[str, str] = field(default_factory=dict)


@dataclass
class Tests:
    enabled: bool = True
    manifest: str = ""  # defaults to the build manifest
    package: str = ""
    timeout_s: float = 600.0


@dataclass
class Entry:
    module: str  # e.g. "vdbbench._rust_vdb" (init symbol PyInit__rust_vdb) or "naive_vdb"
    cls: str = "IvfIndex"
    build_args: dict = field(default_factory=dict)  # constructor keyword args besides dim
    search_args: dict = field(default_factory=lambda: {"k": 10})

    @property
    def leaf(self) -> str:
        return self.module.rsplit(".", 1)[-1]


@dataclass
class DatasetSpec:
    name: str  # a vdbbench.datasets name: generated ("synth-sift-20k") or registered ("sift-1m")
    generator: str = ""  # "synth_sift" | "synth_float"; derived from name when empty
    n: int = 0
    dim: int = 128
    seed: int = 0
    metric: str = "l2"
    dev_queries: int = 500
    heldout_queries: int = 2500  # cut into `repeats` slices of equal size: the timed batch shape
    fresh_queries: int = 500  # re-evaluation of each new best; never used anywhere else


@dataclass
class Objective:
    metric: str = "qps"
    mode: str = "batch"
    threads: int = 1
    k: int = 10
    recall_floor: float = RECALL_TARGET
    margin: float = 0.03
    repeats: int = 5  # the judge's minimum number of candidate/best pairs (one per held-out slice)
    dev_repeats: int = 3
    p_value: float = 0.05  # the judge's overall one-sided false-accept level (see agent/evaluation/judge.py)
    # A timed repeat cycles through its slice (a fresh order each pass) for at least this many
    # seconds on the judged clock; `benchmark` and `profile` use the shorter dev figure.
    repeat_seconds: float = 1.0
    dev_repeat_seconds: float = 0.25
    max_pairs: int = 30  # the cap of the judge's sequential test (pairs of repeats)
    # What a timed repeat is measured on: "wall" clock, or "cpu" (the candidate process's CPU
    # time, all threads): preemption by other work on a shared machine does not count there.
    # "auto" = cpu for one thread (the QPS of one busy core), wall for more.
    clock: str = "auto"

    @property
    def clock_kind(self) -> str:
        if self.clock == "auto":
            return "cpu" if self.threads == 1 else "wall"
        return self.clock


@dataclass
class Limits:
    eval_timeout_s: float = 300.0  # one candidate process, per phase: building its index, each timed repeat
    memory_mb: int = 8192  # address-space cap of the candidate process
    # Keep the best version's process (its built index) alive between submissions, so that a
    # submission builds only the candidate's index: worth it when an index takes long to build.
    keep_best_worker: bool = False


@dataclass
class Session:
    window_tokens: int = 128_000
    review_every: int = 8  # strategic review after this many submissions without a gain
    jump_factor: float = 5.0  # a single step this many times faster than the best is flagged for a human look
    fresh_tolerance: float = 0.5  # fresh QPS may fall this fraction below the accepted QPS
    max_idle_replies: int = 3  # replies without a tool call before the session ends


@dataclass
class Reference:
    """The expert line a session is compared with: this project's own engine on the same card.

    source "engine" builds `manifest` (package `package`) from `repo` at `rev` and loads `module`;
    "start" says the start version is the project's engine, so its baseline is the reference;
    "none" measures no reference. `repo` defaults to the start repository."""

    source: str = "engine"
    repo: str = ""
    rev: str = "HEAD"
    manifest: str = "rust_vdb/py/Cargo.toml"
    package: str = "vdb-py"
    module: str = "vdbbench._rust_vdb"
    cls: str = "IvfIndex"
    build_args: dict = field(default_factory=dict)


@dataclass
class TransferDataset:
    """One data set a new best must also hold its recall on, and the final measurement times.

    `name` is a vdbbench.datasets name or a file path (`~` and `{data}`, the data cache, are
    expanded). A registered name is read from the cache only: never downloaded, never replaced
    by its generated replica, so a transfer target is real data or it is skipped (and reported).
    Generated names take `seed` (another draw of the generator) and `n`."""

    name: str
    seed: int = 0
    n: int = 0  # generated sets: the size (default: from the name)
    queries: int = 1000  # queries of the check and of the final timing (the first `queries` of the file)
    label: str = ""  # what reports call it (default: the name, a path's file name)

    @property
    def title(self) -> str:
        if self.label:
            return self.label
        if "/" in self.name:
            return self.name.rstrip("/").rsplit("/", 1)[-1].rsplit(".", 1)[0]
        return self.name + (f" (seed {self.seed})" if self.seed else "")


@dataclass
class Transfer:
    """[transfer]: where else the session's result must hold (see vdbbench.agent.evaluation.transfer).

    datasets: other data (a real SIFT file, another replica generator or seed); simd: SIMD levels
    the engine is run at through VDBBENCH_SIMD, on the card's own data. Every new best must keep
    recall@10 at the engine's defaults >= the floor on each data set (or not below the start's,
    where the start itself was under it), unless `advisory`, when a failure is reported only."""

    datasets: list[TransferDataset] = field(default_factory=list)
    simd: list[str] = field(default_factory=list)
    advisory: bool = False


@dataclass
class Final:
    """[final]: the measurement at the end of a session (vdbbench.agent.evaluation.final): the best against
    the start and the reference, paired and interleaved, on the card's data and every transfer
    target, until each ratio's 95% interval is within +-`interval` or `max_seconds` per target."""

    enabled: bool = True
    interval: float = 0.02
    max_seconds: float = 300.0
    min_pairs: int = 5
    repeat_seconds: float = 0.0  # each process's share of a pair; 0: the card's objective.repeat_seconds


@dataclass
class Evaluation:
    """[evaluation]: how a build is run. "inprocess" loads the extension module in a worker process
    and times batches of `search`; "served" runs the crate's server binary (the bin target named by
    [entry] module) and times it over HTTP as the public vector-db-bench leaderboard does: the base
    vectors bulk-inserted in batches of `insert_batch`, `warmup` queries, then `clients` concurrent
    clients, one query per request, recall@10 as exact-id overlap, the anti-cheat check
    (vdbbench.agent.evaluation.served)."""

    kind: str = "inprocess"
    cpus: str = ""  # the server's cores as a taskset list ("0-3"); "" = not pinned
    clients: int = 4
    warmup: int = 1000
    insert_batch: int = 1000
    timeout_s: float = 30.0  # one timed HTTP request (the inserts and the warm-up may take limits.eval_timeout_s)

    @property
    def served(self) -> bool:
        return self.kind == "served"


@dataclass
class IndexCacheSpec:
    """[index_cache]: the editable files that shape the trained index (k-means, build, quantizer,
    layout, persistence). `benchmark` reuses an index saved by an earlier build while none of them
    changed (vdbbench.agent.evaluation.index_cache); empty: every benchmark builds its index."""

    paths: list[str] = field(default_factory=list)


SIMD_LEVELS = ("scalar", "avx2", "avx512", "neon")


@dataclass
class TaskCard:
    name: str
    description: str
    path: str  # where the card was read from
    start: Start
    editable: list[str]
    build: Build
    tests: Tests
    entry: Entry
    dataset: DatasetSpec
    objective: Objective = field(default_factory=Objective)
    limits: Limits = field(default_factory=Limits)
    session: Session = field(default_factory=Session)
    budgets: dict = field(default_factory=dict)
    prices: dict = field(default_factory=dict)  # [prices] overrides of the built-in price table
    hints: str = ""
    prompts: str = ""  # the card's own prompt templates folder (absolute); empty: the packaged ones
    reference: Reference = field(default_factory=Reference)
    transfer: Transfer = field(default_factory=Transfer)
    final: Final = field(default_factory=Final)
    evaluation: Evaluation = field(default_factory=Evaluation)
    index_cache: IndexCacheSpec = field(default_factory=IndexCacheSpec)

    def to_dict(self) -> dict:
        return asdict(self)

    @property
    def artifact(self) -> str:
        """The file name of a build's product in builds/*: the extension module, or the server binary."""
        return self.entry.leaf if self.evaluation.served else f"{self.entry.leaf}.so"

    @property
    def batch_queries(self) -> int:
        """Queries per timed search call, held-out and dev alike: one held-out slice."""
        return max(1, self.dataset.heldout_queries // self.objective.repeats)

    # -- editable paths -------------------------------------------------------------------
    def is_editable(self, rel_path: str) -> bool:
        parts = rel_path.split("/")
        if any(p in FORBIDDEN_NAMES for p in parts):
            return False
        return any(_glob_match(pattern, rel_path) for pattern in self.editable)


def _glob_match(pattern: str, path: str) -> bool:
    """Glob with `**` spanning folders and `*`/`?` staying inside one path component."""
    regex = ""
    i = 0
    while i < len(pattern):
        if pattern.startswith("**/", i):
            regex += "(?:.*/)?"
            i += 3
        elif pattern.startswith("**", i):
            regex += ".*"
            i += 2
        elif pattern[i] == "*":
            regex += "[^/]*"
            i += 1
        elif pattern[i] == "?":
            regex += "[^/]"
            i += 1
        else:
            regex += re.escape(pattern[i])
            i += 1
    return re.fullmatch(regex, path) is not None


def _section(data: dict, name: str, cls, required: bool, where: str):
    raw = data.get(name)
    if raw is None:
        if required:
            raise TaskError(f"{where}: missing [{name}] section")
        return cls()
    if not isinstance(raw, dict):
        raise TaskError(f"{where}: [{name}] must be a table")
    known = set(cls.__dataclass_fields__)
    if cls in (Entry, Reference) and "class" in raw:
        raw = {**raw, "cls": raw["class"]}
        raw.pop("class")
    unknown = set(raw) - known
    if unknown:
        raise TaskError(f"{where}: unknown key(s) in [{name}]: {', '.join(sorted(unknown))}; expected some of {', '.join(sorted(known))}")
    try:
        return cls(**raw)
    except TypeError as exc:
        raise TaskError(f"{where}: [{name}]: {exc}") from None


def _transfer(data: dict, where: str) -> Transfer:
    """[transfer]: datasets as names/paths or tables ({name, seed, n, queries, label})."""
    raw = data.get("transfer")
    if raw is None:
        return Transfer()
    if not isinstance(raw, dict):
        raise TaskError(f"{where}: [transfer] must be a table")
    unknown = set(raw) - {"datasets", "simd", "advisory"}
    if unknown:
        raise TaskError(f"{where}: unknown key(s) in [transfer]: {', '.join(sorted(unknown))}; expected some of advisory, datasets, simd")
    sets = []
    for item in raw.get("datasets", []):
        if isinstance(item, str):
            item = {"name": item}
        if not isinstance(item, dict) or not isinstance(item.get("name"), str):
            raise TaskError(f"{where}: [transfer] datasets: each entry is a name, a path or a table with a name, got {item!r}")
        known = set(TransferDataset.__dataclass_fields__)
        if set(item) - known:
            raise TaskError(f"{where}: [transfer] dataset {item['name']!r}: unknown key(s) {', '.join(sorted(set(item) - known))}; "
                            f"expected some of {', '.join(sorted(known))}")
        sets.append(TransferDataset(**item))
    simd = list(raw.get("simd", []))
    bad = [s for s in simd if s not in SIMD_LEVELS]
    if bad:
        raise TaskError(f"{where}: [transfer] simd {bad}: expected some of {', '.join(SIMD_LEVELS)} (VDBBENCH_SIMD levels)")
    return Transfer(datasets=sets, simd=simd, advisory=bool(raw.get("advisory", False)))


def parse_cpus(text: str, where: str = "cpus") -> list[int]:
    """A taskset-style core list ("0-3", "0,2,4-5") as sorted core numbers; "" -> []."""
    cores: set[int] = set()
    for part in (p.strip() for p in str(text).split(",") if p.strip()):
        m = re.fullmatch(r"(\d+)(?:-(\d+))?", part)
        if not m or (m.group(2) and int(m.group(2)) < int(m.group(1))):
            raise TaskError(f"{where}: core list {text!r}: expected numbers and ranges such as \"0-3\" or \"0,2\"")
        cores.update(range(int(m.group(1)), int(m.group(2) or m.group(1)) + 1))
    return sorted(cores)


def parse_dataset_name(name: str) -> tuple[str, int] | None:
    """`synth-sift-20000` / `synth-float-100k` -> ("synth_sift", 20000); None for other names."""
    from vdbbench.datasets.loader import parse_synth_name

    parsed = parse_synth_name(name)
    if parsed is None:
        return None
    return f"synth_{parsed[0]}", parsed[1]


def load_task(path: str | Path, origin: str | Path | None = None) -> TaskCard:
    """Read and check a task card. Its relative paths (start and reference repositories, prompts
    folder) are resolved here, once, against the card's own place, so nothing later depends on the
    working directory. A session's copy of its card (runs/<id>/task.toml) passes the original's
    path as `origin`: its repositories resolve as the original's did, and its prompts are the run
    folder's copy (`prompts` is left empty)."""
    path = Path(path).resolve()
    where = str(path)
    try:
        data = tomllib.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise TaskError(f"task card {where} does not exist") from None
    except tomllib.TOMLDecodeError as exc:
        raise TaskError(f"{where}: not valid TOML: {exc}") from None
    task = data.get("task", {})
    if "name" not in task:
        raise TaskError(f"{where}: [task] needs a name")
    editable = data.get("edit", {}).get("paths")
    if not editable or not all(isinstance(p, str) for p in editable):
        raise TaskError(f"{where}: [edit] paths must be a non-empty list of globs (e.g. [\"rust_vdb/core/src/**\"])")
    card = TaskCard(
        name=task["name"],
        description=task.get("description", ""),
        hints=task.get("hints", ""),
        path=str(path.resolve()),
        start=_section(data, "start", Start, True, where),
        editable=list(editable),
        build=_section(data, "build", Build, True, where),
        tests=_section(data, "tests", Tests, False, where),
        entry=_section(data, "entry", Entry, True, where),
        dataset=_section(data, "dataset", DatasetSpec, True, where),
        objective=_section(data, "objective", Objective, False, where),
        limits=_section(data, "limits", Limits, False, where),
        session=_section(data, "session", Session, False, where),
        budgets=dict(data.get("budgets", {})),
        prices=dict(data.get("prices", {})),
        prompts=str(task.get("prompts", "")),
        reference=_section(data, "reference", Reference, False, where),
        transfer=_transfer(data, where),
        final=_section(data, "final", Final, False, where),
        evaluation=_section(data, "evaluation", Evaluation, False, where),
        index_cache=_section(data, "index_cache", IndexCacheSpec, False, where),
    )
    _validate(card, where)
    if origin:
        card.prompts = ""
    _resolve_paths(card, Path(origin).resolve() if origin else path, where)
    return card


def _resolve_paths(card: TaskCard, origin: Path, where: str) -> None:
    """Repositories relative to the git top level holding the card (else its folder); the prompts
    folder relative to the card's folder."""
    import subprocess

    card_dir = origin.parent
    top = None
    for repo in (card.start.repo, card.reference.repo):
        if repo and not Path(repo).is_absolute() and top is None:
            try:
                out = subprocess.run(["git", "rev-parse", "--show-toplevel"], cwd=card_dir, capture_output=True, text=True)
                top = Path(out.stdout.strip()) if out.returncode == 0 and out.stdout.strip() else card_dir
            except OSError:  # no git: the card's folder
                top = card_dir
    card.start.repo = str((top / card.start.repo).resolve()) if not Path(card.start.repo).is_absolute() else card.start.repo
    if card.reference.repo and not Path(card.reference.repo).is_absolute():
        card.reference.repo = str((top / card.reference.repo).resolve())
    card.reference.repo = card.reference.repo or card.start.repo
    if card.prompts:
        prompts = Path(card.prompts) if Path(card.prompts).is_absolute() else (card_dir / card.prompts).resolve()
        if not (prompts / "system.md").is_file():
            raise TaskError(f"{where}: [task] prompts {card.prompts!r}: {prompts} holds no system.md")
        card.prompts = str(prompts)


def _validate(card: TaskCard, where: str) -> None:
    ds = card.dataset
    if not ds.generator:
        from vdbbench.datasets import DatasetError
        from vdbbench.datasets.registry import entry

        try:
            parsed = parse_dataset_name(ds.name)
            if parsed is None:
                entry(ds.name)  # a registered name (sift-1m...), loaded when the session starts
        except DatasetError as exc:
            raise TaskError(f"{where}: [dataset] name {ds.name!r}: {exc}") from None
        if parsed is not None:
            ds.generator, n = parsed
            ds.n = ds.n or n
    if ds.generator and ds.generator not in ("synth_sift", "synth_float"):
        raise TaskError(f"{where}: [dataset] generator {ds.generator!r}: expected synth_sift or synth_float")
    if ds.generator and ds.n <= 0:
        raise TaskError(f"{where}: [dataset] n must be positive")
    if ds.metric not in ("l2", "ip", "cosine"):
        raise TaskError(f"{where}: [dataset] metric {ds.metric!r}: expected l2, ip or cosine")
    obj = card.objective
    if obj.repeats < 5:
        raise TaskError(f"{where}: [objective] repeats must be >= 5 (a gain must beat noise), got {obj.repeats}")
    if obj.max_pairs < obj.repeats:
        raise TaskError(f"{where}: [objective] max_pairs must be >= repeats ({obj.repeats}), got {obj.max_pairs}")
    if obj.repeat_seconds <= 0 or obj.dev_repeat_seconds <= 0:
        raise TaskError(f"{where}: [objective] repeat_seconds and dev_repeat_seconds must be positive")
    if not 0 < obj.p_value < 0.5:
        raise TaskError(f"{where}: [objective] p_value must be in (0, 0.5), got {obj.p_value}")
    if not 0 < obj.recall_floor <= 1:
        raise TaskError(f"{where}: [objective] recall_floor must be in (0, 1], got {obj.recall_floor}")
    if obj.margin < 0:
        raise TaskError(f"{where}: [objective] margin must be >= 0, got {obj.margin}")
    if obj.clock not in ("auto", "wall", "cpu"):
        raise TaskError(f"{where}: [objective] clock {obj.clock!r}: expected auto, wall or cpu")
    if obj.mode != "batch":
        raise TaskError(f"{where}: [objective] mode {obj.mode!r}: only 'batch' is supported")
    if ds.heldout_queries < obj.repeats or ds.dev_queries < obj.dev_repeats:
        raise TaskError(f"{where}: [dataset] needs at least one held-out query per repeat")
    if card.entry.search_args.get("k", obj.k) != obj.k:
        raise TaskError(f"{where}: [entry] search_args k must equal [objective] k ({obj.k})")
    card.entry.search_args.setdefault("k", obj.k)
    ev = card.evaluation
    if ev.kind not in ("inprocess", "served"):
        raise TaskError(f"{where}: [evaluation] kind {ev.kind!r}: expected inprocess or served")
    if ev.served:
        if obj.clock != "wall":
            raise TaskError(f"{where}: a served card is timed on the wall clock: set [objective] clock = \"wall\"")
        if ev.clients < 1 or ev.warmup < 0 or ev.insert_batch < 1 or ev.timeout_s <= 0:
            raise TaskError(f"{where}: [evaluation] needs clients >= 1, warmup >= 0, insert_batch >= 1, timeout_s > 0")
        if card.transfer.simd:
            raise TaskError(f"{where}: [transfer] simd is for in-process engines (VDBBENCH_SIMD); a served card cannot use it")
        if card.reference.source == "engine":
            raise TaskError(f"{where}: a served card's [reference] source must be \"none\" or \"start\"")
        parse_cpus(ev.cpus, where)
    fin = card.final
    if not 0 < fin.interval < 0.5 or fin.max_seconds <= 0 or fin.min_pairs < 3 or fin.repeat_seconds < 0:
        raise TaskError(f"{where}: [final] needs 0 < interval < 0.5, max_seconds > 0, min_pairs >= 3, repeat_seconds >= 0")
    for t in card.transfer.datasets:
        if t.queries < 10:
            raise TaskError(f"{where}: [transfer] dataset {t.name!r}: queries must be >= 10")
    if card.reference.source not in ("engine", "start", "none"):
        raise TaskError(f"{where}: [reference] source {card.reference.source!r}: expected engine, start or none")
    for pattern in card.editable:
        if pattern.startswith("/") or ".." in pattern.split("/"):
            raise TaskError(f"{where}: editable glob {pattern!r} must be relative and stay in the workspace")
