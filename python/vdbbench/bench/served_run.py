"""`vdbbench run --target`: the benchmark as the seed harness's client, for any server that
speaks its API (a URL, our `vdbbench serve`, a Cargo folder such as a leaderboard entry).

Each target is loaded once (bulk insert, then a warm-up that also triggers a lazy build), then
timed at every client count in interleaved rounds: round r measures every target at every
level before round r+1 starts, so targets' ratios come from the same minutes of the machine.
A target's result is an ordinary result file whose `concurrent` levels carry the served
figures (workers "http"), beside in-process concurrent runs in every table, plot and page."""

from __future__ import annotations

import re
import time
from dataclasses import dataclass, field
from pathlib import Path
from urllib.parse import urlparse

import numpy as np

from vdbbench.bench import kcores_client, results
from vdbbench.served import client as http
from vdbbench.served.client import ServedError
from vdbbench.served.measure import score
from vdbbench.served.process import CargoServer, ServerProcess, our_server

OUR_SERVER = "serve"  # the --target that starts this installation's `vdbbench serve`


@dataclass
class ServedConfig:
    clients: tuple[int, ...] = (http.DEFAULT_CLIENTS,)
    warmup: int = http.DEFAULT_WARMUP
    seed: int = http.DEFAULT_SEED
    k: int = 10
    target: float = 0.95
    rounds: int = 3
    server_cpus: str | None = None
    serve_args: list[str] = field(default_factory=list)
    batch: int = http.INSERT_BATCH
    insert: bool = True
    timeout_s: float = 30.0


@dataclass
class Target:
    spec: str
    label: str
    kind: str  # "url" | "serve" | "cargo"
    proc: ServerProcess | None = None
    url: str = ""
    facts: dict = field(default_factory=dict)
    rounds: list[dict] = field(default_factory=list)  # one per (round, clients)

    def start(self, say) -> None:
        if self.proc is None:
            self.url = self.spec.rstrip("/")
            return
        if isinstance(self.proc, CargoServer):
            say(f"{self.label}: cargo build --release of {self.proc.folder}")
            self.proc.build()
            self.facts["cargo_build_s"] = self.proc.build_s
        self.url = self.proc.start()
        self.facts["pid_cpus"] = self.proc.cpus_text

    def stop(self) -> None:
        if self.proc is not None:
            self.proc.stop()


def _label(spec: str) -> str:
    return re.sub(r"[^A-Za-z0-9._-]+", "-", spec).strip("-") or "target"


def parse_target(spec: str, cfg: ServedConfig) -> Target:
    """A URL (http://host:port), 'serve' (our server, started here with --serve-args) or a Cargo
    folder (built and started here). ValueError says what else was expected."""
    if spec == OUR_SERVER:
        return Target(spec, "vdbbench-serve", "serve", our_server(cfg.serve_args, cpus=cfg.server_cpus))
    u = urlparse(spec)
    if u.scheme in ("http", "https"):
        if not u.hostname:
            raise ValueError(f"--target {spec!r}: a URL needs a host, e.g. http://127.0.0.1:8080")
        return Target(spec, _label(f"http-{u.hostname}-{u.port or 80}"), "url")
    folder = Path(spec)
    if folder.is_dir():
        return Target(spec, _label(folder.resolve().name), "cargo", CargoServer(folder, cpus=cfg.server_cpus))
    raise ValueError(f"--target {spec!r}: expected a URL (http://HOST:PORT), '{OUR_SERVER}' (our server) "
                     "or a Cargo folder that serves the API")


def _server_stats(url: str) -> dict | None:
    """GET /stats of servers that have one (ours); None for the others."""
    import json
    import urllib.request

    try:
        with urllib.request.urlopen(url.rstrip("/") + "/stats", timeout=5) as r:
            return json.loads(r.read())
    except Exception:  # not every server has /stats: that is no error of theirs
        return None


def load(t: Target, ds, cfg: ServedConfig, say) -> None:
    """Insert the base vectors and send the warm-up (which triggers a lazy index build)."""
    if cfg.insert:
        t0 = time.perf_counter()
        t.facts["inserted"] = http.insert(t.url, ds.train, batch=cfg.batch, progress=True)
        t.facts["insert_s"] = time.perf_counter() - t0
        say(f"{t.label}: inserted {t.facts['inserted']:,} vectors in {t.facts['insert_s']:.1f} s")
    if cfg.warmup:
        m = min(cfg.warmup, ds.nq)
        t0 = time.perf_counter()
        w = http.query(t.url, ds.test[:m], cfg.k, clients=1, warmup=0, shuffle=False, timeout_s=max(cfg.timeout_s, 3600))
        t.facts["warmup_s"] = time.perf_counter() - t0
        t.facts["first_answer_s"] = float(w.latency_s[0]) if np.isfinite(w.latency_s[0]) else None
        t.facts["warmup_errors"] = w.errors
        say(f"{t.label}: {m} warm-up queries in {t.facts['warmup_s']:.1f} s (first answer after "
            f"{t.facts['first_answer_s'] or float('nan'):.2f} s, which includes any lazy build)")


def measure_round(t: Target, ds, clients: int, cfg: ServedConfig, rnd: int) -> dict:
    run = http.query(t.url, ds.test, cfg.k, clients=clients, warmup=0, seed=cfg.seed + rnd, timeout_s=cfg.timeout_s)
    s = score(run, ds.neighbors, cfg.k, base=ds.train, queries=ds.test, gt_distances=ds.distances, metric=ds.metric)
    p50, p95, p99, p999 = run.latency_ms(50, 95, 99, 99.9)
    return {"round": rnd, "clients": clients, "qps": run.qps, "p50_ms": p50, "p95_ms": p95, "p99_ms": p99,
            "p999_ms": p999, "calls": run.answered, "errors": run.errors, "first_error": run.first_error,
            "wall_s": run.wall_s, "recall10": s["recall_tie"], "recall10_ids": s["recall_ids"],
            "anti_cheat": s["anti_cheat"]}


def _level(rows: list[dict]) -> dict:
    """One client count over its rounds: the median round's QPS and latencies, the spread of
    QPS, the lowest recall and any failed anti-cheat check."""
    by_qps = sorted(rows, key=lambda r: r["qps"])
    mid = by_qps[len(by_qps) // 2]
    worst = min(rows, key=lambda r: r["recall10_ids"])
    cheat = next((r["anti_cheat"] for r in rows if not r["anti_cheat"]["passed"]), mid["anti_cheat"])
    return {"clients": mid["clients"], "qps": mid["qps"], "qps_rounds": [r["qps"] for r in rows],
            "p50_ms": mid["p50_ms"], "p95_ms": mid["p95_ms"], "p99_ms": mid["p99_ms"], "p999_ms": mid["p999_ms"],
            "calls": mid["calls"], "wall_s": mid["wall_s"], "errors": sum(r["errors"] for r in rows),
            "first_error": next((r["first_error"] for r in rows if r["first_error"]), None),
            "recall10": worst["recall10"], "recall10_ids": worst["recall10_ids"], "anti_cheat": cheat}


def ratios(targets: list[Target]) -> dict:
    """Per client count, each target's QPS over the first target's, round by round: the median
    and the range of the per-round ratios."""
    out: dict = {}
    if len(targets) < 2:
        return out
    ref = targets[0]
    for t in targets[1:]:
        per = {}
        for c in sorted({r["clients"] for r in ref.rounds}):
            pairs = [(a["qps"], b["qps"]) for a in t.rounds for b in ref.rounds
                     if a["clients"] == b["clients"] == c and a["round"] == b["round"] and b["qps"] > 0]
            rs = sorted(a / b for a, b in pairs)
            if rs:
                per[str(c)] = {"median": float(np.median(rs)), "low": rs[0], "high": rs[-1], "rounds": len(rs)}
        out[t.label] = {"over": ref.label, "by_clients": per}
    return out


def result(t: Target, ds, cfg: ServedConfig, ceiling: dict[int, float], ratio: dict | None, sha: str) -> dict:
    levels = [_level([r for r in t.rounds if r["clients"] == c]) for c in cfg.clients]
    for lv in levels:
        lv["client_ceiling_qps"] = ceiling.get(lv["clients"])
        lv["client_bound"] = bool(ceiling.get(lv["clients"]) and lv["qps"] > 0.5 * ceiling[lv["clients"]])
    stats = t.facts.get("stats") or {}
    reach = all(lv["recall10_ids"] >= cfg.target and lv["anti_cheat"]["passed"] and lv["errors"] == 0 for lv in levels)
    return {
        "schema": results.SCHEMA,
        "schema_minor": results.SCHEMA_MINOR,
        "created": results.now_iso(),
        "vdbbench_version": _version(),
        "git": results.git_info(),
        "dataset": results.dataset_record(ds, sha),
        "index": {"name": t.label, "params": {"target": t.spec, "kind": t.kind,
                                              **({"serve_args": cfg.serve_args} if t.kind == "serve" else {})},
                  "source": "served"},
        "machine": results.machine_info(stats.get("simd")),
        "build": {"train_s": float((stats.get("build") or {}).get("train_s") or 0.0),
                  "add_s": float(t.facts.get("insert_s") or 0.0), "bytes": None, "cached": False},
        "run": {"k": cfg.k, "target_recall": cfg.target, "threads": [], "modes": ["served"],
                "clients": list(cfg.clients), "rounds": cfg.rounds, "warmup": cfg.warmup, "seed": cfg.seed},
        "points": [],
        "headline": [],
        "concurrent": {
            "params": stats.get("params") or {},
            "recall10": min(lv["recall10"] for lv in levels) if levels and levels[0]["recall10"] is not None else 0.0,
            "recall10_ids": min(lv["recall10_ids"] for lv in levels) if levels else 0.0,
            "reaches_target": reach, "recall_gate": "ids",
            "duration_s": None, "workers": "http", "threads_per_call": None, "levels": levels,
        },
        "served": {"url": t.url, "kind": t.kind, "spec": t.spec, "server_cpus": cfg.server_cpus, **t.facts,
                   "ratios": ratio},
    }


def _version() -> str:
    from vdbbench import __version__

    return __version__


def run_other_clients(targets: list[Target], ds, cfg: ServedConfig, others: dict[str, str], sha: str, say) -> None:
    """The seed harness's own client against a fresh instance of each target this run started (it
    inserts the base itself); a URL target cannot be made fresh here and is said so."""
    binary = others.get("kcores")
    if not binary:
        return
    files = kcores_client.data_files(ds, sha)
    for t in targets:
        if t.proc is None:
            t.facts["kcores_client"] = {"skipped": "a URL target is not restarted empty by this run"}
            continue
        say(f"{t.label}: the seed harness's client ({binary}), concurrency {http.DEFAULT_CLIENTS}, on a fresh instance")
        try:
            url = t.proc.start()
            t.facts["kcores_client"] = kcores_client.run(binary, url, files, http.DEFAULT_CLIENTS, cfg.warmup)
        except ServedError as exc:  # what our own client measured stands; this pass is said failed
            t.facts["kcores_client"] = {"error": str(exc)}
            say(f"{t.label}: the seed harness's client failed: {exc}")
            continue
        finally:
            t.proc.stop()
        b = t.facts["kcores_client"]["benchmark"]
        say(f"{t.label}: the seed harness's client read {b['qps']:,.0f} QPS, recall {b['recall']:.4f}")


def run_targets(specs: list[str], ds, cfg: ServedConfig, out: Path, say, others: dict[str, str] | None = None) -> list[dict]:
    """Start, load and time every target; write `<out>/<label>.json` for each; stop what was started."""
    targets = [parse_target(s, cfg) for s in specs]
    labels = [t.label for t in targets]
    for i, t in enumerate(targets):
        if labels.count(t.label) > 1:
            t.label = f"{t.label}-{i + 1}"
    sha = results.dataset_sha256(ds)
    try:
        for t in targets:
            t.start(say)
            load(t, ds, cfg, say)
            t.facts["stats"] = _server_stats(t.url)
        for rnd in range(cfg.rounds):
            for c in cfg.clients:
                for t in (targets[rnd % len(targets):] + targets[: rnd % len(targets)]):
                    say(f"round {rnd + 1}/{cfg.rounds}: {t.label}, {c} client{'s' if c > 1 else ''}")
                    t.rounds.append(measure_round(t, ds, c, cfg, rnd))
        for t in targets:
            after = _server_stats(t.url)
            if after is not None:
                t.facts["stats"] = after
    finally:
        for t in targets:
            t.stop()
    say("the client alone against a server that answers at once (its ceiling)")
    ceiling = {c: http.client_ceiling(ds.test, cfg.k, c, seconds=1.0) for c in cfg.clients}
    ratio = ratios(targets)

    def write() -> list[dict]:
        runs = [result(t, ds, cfg, ceiling, ratio.get(t.label), sha) for t in targets]
        for t, r in zip(targets, runs):
            results.write_json(out / f"{t.label}.json", r)
        return runs

    runs = write()  # what was measured is on disk before any other client runs
    if others:
        run_other_clients(targets, ds, cfg, others, sha, say)
        runs = write()
    return runs
