"""Model tournaments: several models x several rollouts of one task card, each rollout an ordinary
agent session (its own run folder, journal and workspace), run as Ray tasks on a cluster, or one
after another on this machine when Ray is not installed.

A session task that dies (its worker or node lost) is retried by Ray, and the retry resumes the
session from its journal, so only the evaluation in flight is lost; a tournament whose driver died
is picked up by `vdbbench agent tournament CONFIG --resume`, which resumes every session that has
not finished and starts those never started. Every session on a node times under that node's
timing lock (VDBBENCH_TIMING_LOCK, a node-local file), so two evaluations never share its cores.
"""

from __future__ import annotations

import json
import math
import os
import re
import shutil
import sys
import tempfile
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Callable

if sys.version_info >= (3, 11):
    import tomllib
else:  # Python 3.10: the same parser from PyPI
    import tomli as tomllib

from vdbbench.agent.core.journal import read_events
from vdbbench.agent.evaluation.timing_lock import ENV as TIMING_LOCK_ENV
from vdbbench.agent.session.budget import Budgets

MANIFEST = "tournament.json"
# A session that ended for one of these reasons is picked up again by --resume.
UNFINISHED_REASONS = frozenset({"interrupted", "model_unavailable"})
_LABEL = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]*$")
_ENV_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
# Rollouts per model: each is an agent session of hours, so more than this is a typo (and its
# session list would fill the driver's memory before anything ran).
MAX_ROLLOUTS = 1000


class TournamentError(ValueError):
    """A tournament config or runs folder that cannot be used; the message says what was expected."""


@dataclass
class ModelEntry:
    """One contestant: a model at an OpenAI-compatible endpoint."""

    label: str  # names its run folders: <label>-r<k>
    name: str  # model name sent to the endpoint
    base_url: str | None = None
    api_key_env: str = "OPENAI_API_KEY"
    prices: dict[str, float] | None = None  # USD per 1M tokens: {prompt, completion}
    tool_protocol: str = "auto"
    timeout_s: float = 300.0
    max_retries: int = 6
    rollouts: int | None = None  # overrides the tournament's


@dataclass
class Tournament:
    name: str
    path: str  # the config file
    task: str  # the task card, absolute
    runs_dir: str  # where the sessions' run folders go, absolute
    rollouts: int
    models: list[ModelEntry]
    budgets: dict[str, Any] = field(default_factory=dict)
    cpus_per_session: float = 1.0
    session_retries: int = 3  # Ray retries of a session task whose worker died
    timing_lock: str | None = None  # node-local lock file (default: <tmp>/vdbbench-timing.lock on each node)
    cargo_seed: str | None = None  # a warm cargo target folder copied into each session's own one

    def sessions(self) -> list[dict[str, Any]]:
        """One spec per rollout, in a stable order (model by model)."""
        out = []
        for m in self.models:
            for k in range(1, (m.rollouts or self.rollouts) + 1):
                run_id = f"{m.label}-r{k}"
                out.append({"run_id": run_id, "run_dir": str(Path(self.runs_dir) / run_id), "rollout": k,
                            "task": self.task, "budgets": self.budgets, "model": asdict(m),
                            "timing_lock": self.timing_lock, "cargo_seed": self.cargo_seed})
        return out


def _count_ok(n: Any) -> bool:
    return isinstance(n, int) and not isinstance(n, bool) and 1 <= n <= MAX_ROLLOUTS


def _url_ok(url: Any) -> bool:
    from urllib.parse import urlsplit

    if not isinstance(url, str) or not url or any(c.isspace() for c in url):
        return False
    try:
        parts = urlsplit(url)
        parts.port  # noqa: B018 - raises ValueError on a port that is not a number
    except ValueError:
        return False
    return parts.scheme in ("http", "https") and bool(parts.hostname)


def _need(cond: bool, where: str, text: str) -> None:
    if not cond:
        raise TournamentError(f"{where}: {text}")


def load_config(path: str | os.PathLike, runs_dir: str | None = None) -> Tournament:
    """Read and check a tournament config (TOML; see agent/tournaments/example.toml). Relative
    paths in it are relative to the config file."""
    path = Path(path)
    where = str(path)
    try:
        data = tomllib.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise TournamentError(f"tournament config {where} does not exist") from None
    except IsADirectoryError:
        raise TournamentError(f"{where} is a folder; give the tournament config file (TOML), "
                              "e.g. agent/tournaments/example.toml") from None
    except OSError as exc:
        raise TournamentError(f"cannot read the tournament config {where}: {exc.strerror or exc}") from None
    except (tomllib.TOMLDecodeError, UnicodeDecodeError) as exc:
        raise TournamentError(f"{where}: not valid TOML: {exc}") from None
    unknown_tables = set(data) - {"tournament", "budgets", "models"}
    _need(not unknown_tables, where, f"unknown top-level keys {sorted(unknown_tables)}; expected [tournament], "
                                     "[budgets] and [[models]]")
    t = data.get("tournament")
    _need(isinstance(t, dict), where, "needs a [tournament] table (name, task, rollouts)")
    unknown = set(t) - {"name", "task", "rollouts", "runs_dir", "cpus_per_session", "session_retries", "timing_lock", "cargo_seed"}
    _need(not unknown, where, f"unknown [tournament] keys {sorted(unknown)}")
    name = t.get("name")
    _need(isinstance(name, str) and bool(_LABEL.match(name)), where, f"[tournament] name must be a plain name (letters, digits, _ . -), got {name!r}")
    task = t.get("task")
    _need(isinstance(task, str), where, "[tournament] task must be the path of a task card, e.g. \"../tasks/optimize-ivf.toml\"")
    task_path = (path.parent / task).resolve()
    _need(task_path.is_file(), where, f"task card {task_path} does not exist")
    from vdbbench.agent.core.task import TaskError, load_task

    try:
        load_task(task_path)
    except TaskError as exc:
        raise TournamentError(f"{where}: [tournament] task: {exc}") from None
    rollouts = t.get("rollouts", 1)
    _need(_count_ok(rollouts), where, f"[tournament] rollouts must be a whole number from 1 to {MAX_ROLLOUTS}, got {rollouts!r}")
    cpus = t.get("cpus_per_session", 1.0)
    _need(isinstance(cpus, (int, float)) and not isinstance(cpus, bool) and cpus > 0, where,
          f"[tournament] cpus_per_session must be > 0, got {cpus!r}")
    retries = t.get("session_retries", 3)
    _need(isinstance(retries, int) and not isinstance(retries, bool) and retries >= 0, where,
          f"[tournament] session_retries must be a whole number >= 0, got {retries!r}")
    lock = t.get("timing_lock")
    _need(lock is None or isinstance(lock, str), where, "[tournament] timing_lock must be a file path")
    seed = t.get("cargo_seed")
    _need(seed is None or isinstance(seed, str), where, "[tournament] cargo_seed must be a folder (a cargo target folder)")
    seed_path = str((path.parent / seed).resolve()) if seed else None
    budgets = data.get("budgets", {})
    _need(isinstance(budgets, dict), where, f"[budgets] must be a table of a task card's budget keys, got {budgets!r}")
    budgets = dict(budgets)
    try:
        Budgets.merged(None, budgets)
    except ValueError as exc:
        raise TournamentError(f"{where}: [budgets]: {exc}") from None

    raw_models = data.get("models")
    _need(isinstance(raw_models, list) and raw_models, where, "needs at least one [[models]] entry (name, base_url, api_key_env, prices)")
    models: list[ModelEntry] = []
    for i, m in enumerate(raw_models):
        at = f"{where}: [[models]] #{i + 1}"
        _need(isinstance(m, dict), at, "must be a table")
        known = {f for f in ModelEntry.__dataclass_fields__}
        bad = set(m) - known
        if bad:
            raise TournamentError(f"{at}: unknown keys {sorted(bad)}; expected some of {sorted(known)}")
        _need(isinstance(m.get("name"), str) and m["name"], at, "needs the model's name at the endpoint (name = \"...\")")
        label = m.get("label") or re.sub(r"[^A-Za-z0-9_.-]", "_", m["name"]).strip("._-") or f"model{i + 1}"
        _need(isinstance(label, str) and bool(_LABEL.match(label)), at, f"label must be a plain name (letters, digits, _ . -), got {label!r}")
        entry = ModelEntry(**{**m, "label": label})
        _need(entry.tool_protocol in ("auto", "native", "text"), at, f"tool_protocol must be auto, native or text, got {entry.tool_protocol!r}")
        _need(entry.rollouts is None or _count_ok(entry.rollouts), at,
              f"rollouts must be a whole number from 1 to {MAX_ROLLOUTS}, got {entry.rollouts!r}")
        _need(entry.base_url is None or _url_ok(entry.base_url), at,
              f"base_url must be the http(s) URL of an OpenAI-compatible endpoint, e.g. \"http://host:8000/v1\", got {entry.base_url!r}")
        _need(isinstance(entry.api_key_env, str) and bool(_ENV_NAME.match(entry.api_key_env)), at,
              f"api_key_env must be the name of an environment variable, e.g. \"OPENAI_API_KEY\", got {entry.api_key_env!r}")
        _need(isinstance(entry.timeout_s, (int, float)) and not isinstance(entry.timeout_s, bool)
              and math.isfinite(entry.timeout_s) and entry.timeout_s > 0, at,
              f"timeout_s must be seconds > 0 per model request, got {entry.timeout_s!r}")
        _need(isinstance(entry.max_retries, int) and not isinstance(entry.max_retries, bool) and entry.max_retries >= 0, at,
              f"max_retries must be a whole number >= 0, got {entry.max_retries!r}")
        if entry.prices is not None:
            _need(isinstance(entry.prices, dict) and set(entry.prices) == {"prompt", "completion"}
                  and all(isinstance(v, (int, float)) and v >= 0 for v in entry.prices.values()), at,
                  f"prices must be {{prompt = X, completion = Y}} in USD per 1M tokens, got {entry.prices!r}")
        models.append(entry)
    labels = [m.label for m in models]
    dup = sorted({x for x in labels if labels.count(x) > 1})
    _need(not dup, where, f"two models share the label {dup}: give each a distinct `label`")

    out = runs_dir or t.get("runs_dir")
    out_path = Path(out) if runs_dir else (path.parent / out if out else Path("runs") / f"tournament-{name}")
    return Tournament(name=name, path=str(path.resolve()), task=str(task_path), runs_dir=str(out_path.resolve()),
                      rollouts=rollouts, models=models, budgets=budgets, cpus_per_session=float(cpus),
                      session_retries=retries, timing_lock=lock, cargo_seed=seed_path)


# ---------------------------------------------------------------------------------------------
# One session (runs in a Ray worker, or in this process)
# ---------------------------------------------------------------------------------------------


def session_state(run_dir: str | os.PathLike) -> str:
    """"new" (nothing journaled), "finished", or "unfinished" (to resume)."""
    events = read_events(Path(run_dir) / "journal.jsonl")
    if not events:
        return "new"
    last = events[-1]
    if last.get("type") == "session_end" and last.get("reason") not in UNFINISHED_REASONS:
        return "finished"
    return "unfinished"


def clear_unstarted(run_dir: Path) -> Path | None:
    """Readies the folder of a session with no readable journal event to start afresh. A folder
    whose journal is absent or empty died before its journal began, and nothing was decided
    there: it is removed. One whose journal holds bytes but no event that can be read (damaged)
    may still hold work: it is moved aside to `<name>.damaged-<UTC time>`, never deleted, and
    that path is returned."""
    if not run_dir.exists():
        return None
    journal = run_dir / "journal.jsonl"
    if not journal.exists() or journal.stat().st_size == 0:
        shutil.rmtree(run_dir)
        return None
    stamp = time.strftime("%Y%m%dT%H%M%SZ", time.gmtime())
    kept = run_dir.with_name(f"{run_dir.name}.damaged-{stamp}")
    n = 1
    while kept.exists():
        n += 1
        kept = run_dir.with_name(f"{run_dir.name}.damaged-{stamp}-{n}")
    run_dir.rename(kept)
    return kept


def default_timing_lock() -> str:
    """One lock file per node: every session on this machine times under it."""
    return str(Path(tempfile.gettempdir()) / "vdbbench-timing.lock")


def _model(spec: dict[str, Any]):
    from vdbbench.agent.session.model import OpenAIModel

    m = spec["model"]
    key = os.environ.get(m["api_key_env"])
    if not key and not m.get("base_url"):
        raise TournamentError(f"model {m['label']}: set {m['api_key_env']} (or give a base_url of an endpoint that needs no key)")
    model = OpenAIModel(m["name"], base_url=m.get("base_url"), api_key=key, timeout_s=m["timeout_s"], max_retries=m["max_retries"])
    if m["tool_protocol"] == "native":
        return model
    from vdbbench.agent.session.text_protocol import TextProtocolModel

    return TextProtocolModel(model, mode=m["tool_protocol"])


def _prices(spec: dict[str, Any], card):
    from vdbbench.agent.session.budget import price_table

    m = spec["model"]
    table = price_table({"prices": card.prices})
    if m.get("prices"):
        table = table.with_overrides({m["name"]: m["prices"]}, f"tournament model {m['label']}")
    return table


def _printer(run_id: str) -> Callable[[dict], None]:
    def show(e: dict) -> None:
        if e.get("type") == "decision":
            qps = e.get("qps")
            print(f"[{run_id}] iteration {e.get('iteration')}: {e.get('outcome')}"
                  + (f" ({qps:,.0f} QPS)" if isinstance(qps, (int, float)) else ""), flush=True)
        elif e.get("type") == "session_end":
            print(f"[{run_id}] ended: {e.get('reason')}", flush=True)
    return show


def run_session(spec: dict[str, Any]) -> dict[str, Any]:
    """Start the rollout's session, or resume it from its journal; run it to its end.

    This is the body of a Ray task: when its worker dies, Ray calls it again and it resumes."""
    from vdbbench.agent.core.task import load_task
    from vdbbench.agent.session.loop import Session
    from vdbbench.agent.session.node import node_info

    run_dir = Path(spec["run_dir"])
    if not (run_dir.parent / MANIFEST).exists():
        raise TournamentError(f"the runs folder {run_dir.parent} is not visible on node {node_info()['hostname']}: "
                              "on a cluster it must be a path shared by every node (NFS or the like)")
    os.environ[TIMING_LOCK_ENV] = spec.get("timing_lock") or default_timing_lock()
    target = _session_target(spec)
    state = session_state(run_dir)
    if state == "finished":
        events = read_events(run_dir / "journal.jsonl")
        return {"run_id": spec["run_id"], "reason": events[-1].get("reason"), "best": events[-1].get("best"),
                "node": node_info(), "resumed": False, "already_finished": True}
    show = _printer(spec["run_id"])
    overrides = {k: v for k, v in (spec.get("budgets") or {}).items()}
    model = _model(spec)
    if state == "new":
        kept = clear_unstarted(run_dir)
        if kept is not None:
            print(f"[{spec['run_id']}] its journal holds no readable event: the folder is kept as {kept.name} "
                  "and the session starts again", flush=True)
        card = load_task(spec["task"])
        session = Session.create(card, model, run_dir.parent, run_dir.name, overrides, _prices(spec, card), on_event=show)
    else:
        card = load_task(run_dir / "task.toml")
        print(f"[{spec['run_id']}] resuming from its journal", flush=True)
        session = Session.resume(run_dir, model, overrides, _prices(spec, card), on_event=show)
    end = session.run()
    if target is not None and session_state(run_dir) == "finished":
        shutil.rmtree(target, ignore_errors=True)
    return {"run_id": spec["run_id"], "reason": end["reason"], "best": end["best"], "node": node_info(),
            "resumed": state == "unfinished"}


def _target_path(spec: dict[str, Any]) -> Path:
    import hashlib

    key = hashlib.sha256(spec["run_dir"].encode()).hexdigest()[:16]
    return Path(tempfile.gettempdir()) / "vdbbench-cargo" / f"{spec['run_id']}-{key}"


def _session_target(spec: dict[str, Any]) -> Path | None:
    """Each session builds in a cargo target folder of its own: two sessions building the same crate
    in one folder overwrite each other's library while cargo calls both builds fresh. Without a seed
    that is the session's own `target/` (Session's default); with `cargo_seed`, a node-local folder
    first filled with a copy of the seed, so the first build is incremental. Returns that folder."""
    os.environ.pop("VDBBENCH_AGENT_TARGET_DIR", None)
    seed = spec.get("cargo_seed")
    if not seed:
        return None
    target = _target_path(spec)
    if not target.exists() and Path(seed).is_dir():
        tmp = target.with_name(target.name + ".tmp")
        shutil.rmtree(tmp, ignore_errors=True)
        shutil.copytree(seed, tmp, symlinks=True)
        tmp.replace(target)
    os.environ["VDBBENCH_AGENT_TARGET_DIR"] = str(target)
    return target


# ---------------------------------------------------------------------------------------------
# The driver
# ---------------------------------------------------------------------------------------------


def _write_manifest(t: Tournament, status: dict[str, dict]) -> None:
    doc = {"schema": "vdbbench.agent-tournament/1", "name": t.name, "config": t.path, "task": t.task,
           "sessions": [{"run_id": s["run_id"], "model": s["model"]["name"], "label": s["model"]["label"],
                         "rollout": s["rollout"], **status.get(s["run_id"], {})} for s in t.sessions()]}
    tmp = Path(t.runs_dir) / (MANIFEST + ".tmp")
    tmp.write_text(json.dumps(doc, indent=2, default=str) + "\n")
    tmp.replace(Path(t.runs_dir) / MANIFEST)


def _import_ray():
    try:
        import ray
    except ImportError:
        return None
    return ray


def _ray_env(spec: dict[str, Any]) -> dict[str, str]:
    """What a worker needs from the driver's environment: the model's key, when the driver has it."""
    name = spec["model"]["api_key_env"]
    return {name: os.environ[name]} if os.environ.get(name) else {}


def run_tournament(t: Tournament, *, ray_address: str | None = None, resume: bool = False,
                   local: bool = False, num_cpus: int | None = None, say: Callable[[str], None] | None = None) -> list[dict]:
    """Run every session of the tournament that has not finished; returns one result per session."""
    say = say or (lambda text: print(text, file=sys.stderr, flush=True))
    ray = None if local else _import_ray()
    if ray_address and ray is None:
        raise TournamentError("--ray-address needs Ray: pip install 'vdbbench[ray]' (or '.[ray]' in a checkout)")
    runs = Path(t.runs_dir)
    if ray_address is not None:
        problem = _unreachable(ray_address)
        if problem:
            raise TournamentError(f"--ray-address {ray_address}: {problem}")
    manifest = runs / MANIFEST
    if manifest.exists() and not resume:
        raise TournamentError(f"{runs} already holds a tournament ({MANIFEST}); pass --resume to carry it on, "
                              "or choose another runs folder")
    if resume and not manifest.exists():
        raise TournamentError(f"nothing to resume: {runs} holds no {MANIFEST} (start the tournament without --resume)")
    if ray is not None and not ray_address:
        cpus = num_cpus or os.cpu_count() or 1
        if t.cpus_per_session > cpus:  # Ray would wait for a node that never comes
            raise TournamentError(f"cpus_per_session = {t.cpus_per_session:g} in {t.path} is more than the {cpus} CPUs of "
                                  "the local Ray (--num-cpus): no session could ever start")
    specs = t.sessions()
    status: dict[str, dict] = {s["run_id"]: {"state": session_state(s["run_dir"])} for s in specs}
    todo = [s for s in specs if status[s["run_id"]]["state"] != "finished"]
    if ray is not None and todo:
        # Connect first: a wrong address is said before anything is written (a manifest left by a
        # start that never ran would make the corrected command ask for --resume).
        _ray_init(ray, ray_address, num_cpus, say)
    try:
        return _drive(t, ray, ray_address, resume, local, status, specs, todo, say)
    finally:
        if ray is not None and todo and ray_address is None:
            ray.shutdown()
            _drop_targets(specs)


def _drive(t: Tournament, ray, ray_address, resume: bool, local: bool, status: dict, specs: list[dict],
           todo: list[dict], say) -> list[dict]:
    runs = Path(t.runs_dir)
    try:
        runs.mkdir(parents=True, exist_ok=True)
        if not resume:
            shutil.copy2(t.path, runs / "tournament.toml")  # the config as it was, beside the sessions
        _write_manifest(t, status)
    except OSError as exc:
        raise TournamentError(f"cannot write into the runs folder {runs}: {exc.strerror or exc}") from None
    if not todo:
        say(f"tournament {t.name}: all {len(specs)} sessions have finished already")
        return [{"run_id": s["run_id"], "state": "finished"} for s in specs]
    for m in t.models:
        if not os.environ.get(m.api_key_env):
            say(f"note: {m.api_key_env} is not set here: model {m.label} gets no API key unless its workers have one")
    kinds = {k: sum(status[s["run_id"]]["state"] == k for s in todo) for k in ("new", "unfinished")}
    say(f"tournament {t.name}: {len(todo)} of {len(specs)} sessions to run ({kinds['new']} new, "
        f"{kinds['unfinished']} to resume) in {runs}")

    try:
        return _run_sessions(t, ray, local, status, specs, todo, say)
    except KeyboardInterrupt:
        # The manifest said "running" (or "new") of sessions that no longer run: say what each
        # journal holds now, so the folder tells the truth and --resume picks them up.
        for s in todo:
            status[s["run_id"]]["state"] = session_state(s["run_dir"])
        try:
            _write_manifest(t, status)
        except OSError:
            pass
        left = sum(status[s["run_id"]]["state"] != "finished" for s in specs)
        say(f"tournament {t.name} interrupted: {left} of {len(specs)} sessions have not finished; what they "
            "journaled is kept and --resume carries them on")
        raise


def _run_sessions(t: Tournament, ray, local: bool, status: dict, specs: list[dict], todo: list[dict], say) -> list[dict]:
    results: list[dict] = []
    if ray is None:
        say("Ray is not " + ("used (--local)" if local else "installed (pip install '.[ray]')")
            + f": running the {len(todo)} sessions one after another on this machine")
        for spec in todo:
            results.append(_record(status, spec, _call_local(spec), say))
            _write_manifest(t, status)
        _drop_targets(specs)
        return results

    task = ray.remote(run_session)
    pending = {task.options(num_cpus=t.cpus_per_session, max_retries=t.session_retries, retry_exceptions=False,
                            runtime_env={"env_vars": _ray_env(s)}).remote(s): s for s in todo}
    for s in todo:
        status[s["run_id"]]["state"] = "running"
    _write_manifest(t, status)
    while pending:
        done, _ = ray.wait(list(pending), num_returns=1)
        for ref in done:
            spec = pending.pop(ref)
            try:
                res = ray.get(ref)
            except Exception as exc:  # noqa: BLE001 - a session's failure is reported, the others go on
                res = {"run_id": spec["run_id"], "error": f"{type(exc).__name__}: {str(exc).strip()[-2000:]}"}
            results.append(_record(status, spec, res, say))
            _write_manifest(t, status)
    return results


def _drop_targets(specs: list[dict]) -> None:
    """Remove this node's cargo folders of finished sessions (a session killed between its end and
    its own clean-up leaves one behind)."""
    for spec in specs:
        if spec.get("cargo_seed") and session_state(spec["run_dir"]) == "finished":
            shutil.rmtree(_target_path(spec), ignore_errors=True)


def _call_local(spec: dict) -> dict:
    try:
        return run_session(spec)
    except KeyboardInterrupt:
        raise
    except Exception as exc:  # noqa: BLE001 - one session's failure does not stop the others
        return {"run_id": spec["run_id"], "error": f"{type(exc).__name__}: {exc}"}


def _record(status: dict, spec: dict, res: dict, say) -> dict:
    state = session_state(spec["run_dir"])
    status[spec["run_id"]] = {"state": state, **({"error": res["error"]} if res.get("error") else {}),
                              **({"node": res["node"]} if res.get("node") else {})}
    if res.get("error"):
        say(f"session {spec['run_id']} failed: {res['error']}")
    else:
        say(f"session {spec['run_id']} ended ({res.get('reason')}) on {(res.get('node') or {}).get('hostname', '?')}")
    return {**res, "state": state}


def _unreachable(address: str, timeout_s: float = 5.0) -> str | None:
    """Why the Ray cluster at `address` cannot be reached, or None: a connection is tried for a few
    seconds, so a wrong host or port is said at once (ray.init waits minutes for a GCS that is not there)."""
    import socket
    from urllib.parse import urlsplit

    if address in ("auto", "local"):
        return None
    client = address.startswith("ray://")
    rest = address[len("ray://"):] if client else address
    try:
        parts = urlsplit("//" + rest)
        host, port = parts.hostname, parts.port
    except ValueError:
        host = port = None
    if not host or any(c.isspace() for c in address):
        return "not a Ray address; expected HOST:PORT of the head (e.g. head:6379) or ray://HOST:PORT (e.g. ray://head:10001)"
    port = port or (10001 if client else 6379)
    try:
        socket.create_connection((host, port), timeout=timeout_s).close()
    except OSError as exc:
        return f"cannot reach {host}:{port} ({exc.strerror or exc}); is the Ray head running there (`ray start --head`)?"
    return None


def _ray_init(ray, address: str | None, num_cpus: int | None, say) -> None:
    try:
        if address:
            ray.init(address=address, log_to_driver=True)
            say(f"Ray cluster {address}: {ray.cluster_resources().get('CPU', 0):g} CPUs")
        else:
            cpus = num_cpus or os.cpu_count() or 1
            # "local": a Ray of its own, as documented, even where `ray start` left a cluster on this
            # machine or RAY_ADDRESS names one (ray.init() would join it and refuse num_cpus).
            ray.init(address="local", num_cpus=cpus, include_dashboard=False, log_to_driver=True)
            say(f"started a local Ray with {cpus} CPUs (give --ray-address to use a cluster)")
    except (ValueError, ConnectionError, TimeoutError, RuntimeError) as exc:
        text = str(exc).strip().splitlines()[-1] if str(exc).strip() else type(exc).__name__
        if "ray[client]" in text:
            text = "ray:// addresses need Ray Client: pip install 'ray[client]' (or '.[ray]' in a checkout)"
        where = f"--ray-address {address}" if address else "the local Ray"
        raise TournamentError(f"{where}: Ray could not start or connect: {text}") from None
