"""A long agent session for real: a scripted model at the seed's scale (hundreds of submissions,
thousands of tool calls) drives the real loop on a small card, with a resume in the middle, and
the harness is held to what the script knows.

    python benchmarks/agent_soak.py                       # 600 submissions (about an hour on 2 cores)
    python benchmarks/agent_soak.py --submissions 40      # the test suite's version
    nice -n 15 python benchmarks/agent_soak.py --json soak.json --workdir /tmp/soak

The engine is the agent tests' fixture (a brute-force scan over 3,000 32-d vectors) rewritten
with two knobs the script turns: EXTRA_PERMILLE, rows scanned a second time for nothing (the
waste a real gain removes; the start wastes several passes), and SKIP_PERMILLE, rows never
scanned (a recall break). Each submission writes the whole engine file and submits it; what it
is, the script decides beforehand:

- no effect: the best's knobs with a new comment (rebuilt and measured; should be rejected);
- a real gain of 3-15%: EXTRA lowered so that the scan's cost falls by that much;
- a regression of 3-20%: EXTRA raised;
- a build failure: a syntax error; a recall break: the best's knobs, a tenth of the rows skipped.

Halfway the session is stopped (an iteration budget) and resumed with a new model object that
carries on the same plan. At the end it reports, from the journal and the script's own record:
false accepts (a no-effect change or a regression accepted) and missed gains (a real gain not
accepted, by size), harness overhead per submission (wall time outside builds, tests and timed
measurement, model replies being instant) over the first and the last 10% of submissions, peak
memory of the harness and of its children, the journal's size, the render times of the report,
the staircase PNG and the session page (and that page loaded in headless Chromium, when this
machine has chromium, chromedriver and selenium), and the session's final measurement (best vs
start, interleaved) against the true speed-up of the best over the start, measured here apart
by loading both builds in this process and timing them alternately.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import random
import re
import resource
import shutil
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
FIXTURE = ROOT / "tests" / "fixtures" / "agent_task"
LIB = "core/src/lib.rs"

ENGINE = """//! The soak's engine: an exact scan over a flat list of vectors with two knobs the script turns.
// submission: {nonce}

/// Rows scanned a second time for nothing, in thousandths of the data set (the waste a real gain removes).
const EXTRA_PERMILLE: usize = {extra};
/// Rows never scanned, in thousandths (more than a few lose recall).
const SKIP_PERMILLE: usize = {skip};

pub struct IvfIndex {{
    dim: usize,
    data: Vec<f32>,
}}

impl IvfIndex {{
    pub fn new(dim: usize) -> Self {{
        assert!(dim > 0, "dim must be positive");
        IvfIndex {{ dim, data: Vec::new() }}
    }}

    pub fn dim(&self) -> usize {{
        self.dim
    }}

    pub fn len(&self) -> usize {{
        self.data.len() / self.dim
    }}

    pub fn is_empty(&self) -> bool {{
        self.data.is_empty()
    }}

    pub fn train(&mut self, _sample: &[f32]) {{}}

    pub fn add(&mut self, vectors: &[f32]) {{
        assert_eq!(vectors.len() % self.dim, 0, "vectors must be a multiple of dim");
        self.data.extend_from_slice(vectors);
    }}

    pub fn search(&self, queries: &[f32], k: usize) -> (Vec<f32>, Vec<i64>) {{
        let (n, dim) = (self.len(), self.dim);
        let nq = queries.len() / dim;
        let mut dist_out = vec![f32::INFINITY; nq * k];
        let mut ids_out = vec![-1i64; nq * k];
        let mut scores = vec![f32::INFINITY; n];
        let mut waste = vec![0f32; n.max(1)];
        let scanned = n - n * SKIP_PERMILLE / 1000;
        let extra = n * EXTRA_PERMILLE / 1000;
        for (qi, q) in queries.chunks_exact(dim).enumerate() {{
            for (s, v) in scores.iter_mut().zip(self.data.chunks_exact(dim)).take(scanned) {{
                *s = l2(q, v);
            }}
            for i in 0..extra {{
                let r = i % n;
                waste[r] = l2(q, &self.data[r * dim..(r + 1) * dim]);
            }}
            std::hint::black_box(&mut waste);
            let top = top_k(&scores, k);
            for (j, (d, id)) in top.into_iter().enumerate() {{
                dist_out[qi * k + j] = d;
                ids_out[qi * k + j] = id as i64;
            }}
        }}
        (dist_out, ids_out)
    }}
}}

fn l2(a: &[f32], b: &[f32]) -> f32 {{
    a.iter().zip(b).map(|(x, y)| (x - y) * (x - y)).sum()
}}

fn top_k(scores: &[f32], k: usize) -> Vec<(f32, usize)> {{
    let mut order: Vec<usize> = (0..scores.len()).collect();
    let k = k.min(order.len());
    if k == 0 {{
        return Vec::new();
    }}
    let cmp = |a: &usize, b: &usize| scores[*a].total_cmp(&scores[*b]).then(a.cmp(b));
    order.select_nth_unstable_by(k - 1, cmp);
    order.truncate(k);
    order.sort_by(cmp);
    order.into_iter().filter(|&i| scores[i].is_finite()).map(|i| (scores[i], i)).collect()
}}
{broken}"""

START_EXTRA = 7000  # the start scans the data 8 times, 7 of them for nothing

# What a session of `n` submissions is made of (fractions; real gains are few: each one accepted
# removes waste for good, and the start has only so much).
MIX = (("none", 0.50), ("gain", 0.07), ("regression", 0.19), ("build", 0.12), ("recall", 0.12))


def engine(extra: int, skip: int = 0, nonce: str = "start", broken: bool = False) -> str:
    return ENGINE.format(extra=extra, skip=skip, nonce=nonce, broken="fn broken( {\n" if broken else "")


def cost(extra: int) -> float:
    """The scan's cost in passes over the data: the needed one plus the waste."""
    return 1.0 + extra / 1000.0


@dataclass
class Submission:
    n: int  # 1-based, the order the script submitted in (= the journal's iteration)
    kind: str
    extra: int
    skip: int
    nominal: float  # cost(best) / cost(this) - 1: the gain it is built to have (0 for none, build, recall)
    outcome: str | None = None


@dataclass
class Plan:
    """The script: what each submission is, decided up front from a seed, and what became of it.
    Gains and regressions are sized against the best at the time they are submitted."""

    total: int
    seed: int = 0
    kinds: list[str] = field(default_factory=list)
    best_extra: int = START_EXTRA
    done: list[Submission] = field(default_factory=list)
    pending: Submission | None = None

    def __post_init__(self):
        rng = random.Random(self.seed)
        counts = {k: int(round(f * self.total)) for k, f in MIX}
        counts["none"] += self.total - sum(counts.values())
        self.kinds = [k for k, c in counts.items() for _ in range(c)]
        rng.shuffle(self.kinds)
        self.rng = rng

    def _next(self) -> Submission:
        n = len(self.done) + 1
        kind = self.kinds[n - 1] if n <= len(self.kinds) else "none"
        best = self.best_extra
        if kind == "gain":
            g = self.rng.uniform(0.03, 0.15)
            extra = int(round((cost(best) / (1 + g) - 1) * 1000))
            if extra < 0 or extra >= best:  # no waste left to remove: a no-effect edit instead
                kind, extra = "none", best
            return Submission(n, kind, extra, 0, cost(best) / cost(extra) - 1)
        if kind == "regression":
            r = self.rng.uniform(0.03, 0.20)
            extra = int(round((cost(best) * (1 + r) - 1) * 1000))
            return Submission(n, kind, extra, 0, cost(best) / cost(extra) - 1)
        if kind == "recall":
            return Submission(n, kind, best, 100, 0.0)
        return Submission(n, kind, best, 0, 0.0)

    def reply(self, messages) -> dict:
        """The model's turn: note the verdict of the last submission, then write and submit the next."""
        last = ""
        for m in reversed(messages[-4:]):
            text = str(m.get("content", ""))
            if m.get("role") == "tool" and text.startswith(("ACCEPTED", "REJECTED")):
                last = text
                break
        said = re.match(r"(ACCEPTED|REJECTED) \(iteration (\d+)", last)
        if self.pending is not None and said and int(said.group(2)) == self.pending.n:
            s = self.pending
            s.outcome = "accepted" if said.group(1) == "ACCEPTED" else "rejected"
            if s.outcome == "accepted":
                self.best_extra = s.extra
            self.done.append(s)
            self.pending = None
        if len(self.done) >= self.total:
            return {"content": "That is all I planned."}
        if self.pending is not None:  # the verdict never came (a harness error): submit it again
            s = self.pending
        else:
            s = self.pending = self._next()
        src = engine(s.extra, s.skip, nonce=f"{s.n} {s.kind}", broken=s.kind == "build")
        return {"content": f"submission {s.n}: {s.kind}",
                "tool_calls": [("write_file", {"path": LIB, "content": src}), ("submit", {"message": f"{s.n}: {s.kind}"})]}


def soak_card(repo: Path, submissions: int, repeat_seconds: float, max_pairs: int, final_seconds: float,
              keep_best: bool = False) -> Path:
    """The fixture's card for the soak: no cargo tests (every submission still builds), short
    timed repeats, a capped final measurement, and budgets that do not stop it early; with
    `keep_best`, the best's process is kept between submissions (one process start less each)."""
    text = (repo / "task.toml").read_text()
    for old, new in (
        ("[limits]\neval_timeout_s = 60\n", f"[limits]\neval_timeout_s = 60\nkeep_best_worker = {str(keep_best).lower()}\n"),
        ("[tests]\nmanifest = \"core/Cargo.toml\"\ntimeout_s = 300\n", "[tests]\nenabled = false\n"),
        ("repeat_seconds = 0.3\n", f"repeat_seconds = {repeat_seconds}\ndev_repeat_seconds = {min(0.05, repeat_seconds)}\n"
                                    f"max_pairs = {max_pairs}\n"),
        ("[budgets]\niterations = 20\ntool_calls = 200\n", f"[budgets]\niterations = {submissions}\ntool_calls = {submissions * 4}\n"),
        ("\nmax_seconds = 8\n", f"\nmax_seconds = {final_seconds}\n"),
    ):
        if text.count(old) != 1:
            raise SystemExit(f"{FIXTURE / 'task.toml'}: expected exactly one {old!r} to replace")
        text = text.replace(old, new)
    (repo / "task.toml").write_text(text)
    return repo / "task.toml"


def make_repo(work: Path, submissions: int, repeat_seconds: float, max_pairs: int, final_seconds: float,
              keep_best: bool = False) -> Path:
    repo = work / "fixture"
    shutil.copytree(FIXTURE, repo, ignore=shutil.ignore_patterns("target"))
    (repo / LIB).write_text(engine(START_EXTRA))
    soak_card(repo, submissions, repeat_seconds, max_pairs, final_seconds, keep_best)
    for cmd in (["git", "init", "-q", "-b", "main"], ["git", "add", "-A"],
                ["git", "-c", "user.name=soak", "-c", "user.email=soak@localhost", "commit", "-q", "-m", "soak start"]):
        subprocess.run(cmd, cwd=repo, check=True)
    return repo


class Clock:
    """Seconds spent in the harness's real work (builds, tests, timed measurement), by wrapping
    those calls: the rest of a submission's wall time is the harness's own overhead."""

    def __init__(self):
        self.work = 0.0
        self.marks: list[tuple[int, float, float]] = []  # (submissions done, wall, work) at each model turn
        self.wrapped: list[tuple] = []

    def unwrap(self) -> None:
        for owner, name, inner in reversed(self.wrapped):
            setattr(owner, name, inner)
        self.wrapped.clear()

    def wrap(self, owner, name: str) -> None:
        inner = getattr(owner, name)
        self.wrapped.append((owner, name, inner))
        clock = self

        def timed(*a, **kw):
            t0 = time.perf_counter()
            try:
                return inner(*a, **kw)
            finally:
                clock.work += time.perf_counter() - t0

        setattr(owner, name, timed)


def overhead(marks: list[tuple[int, float, float]], lo: int, hi: int) -> float | None:
    """Mean seconds per submission outside real work between the turns after submissions lo and hi."""
    a = next((m for m in marks if m[0] >= lo), None)
    b = next((m for m in marks if m[0] >= hi), None)
    if a is None or b is None or b[0] == a[0]:
        return None
    return ((b[1] - a[1]) - (b[2] - a[2])) / (b[0] - a[0])


def true_ratio(fast: Path, slow: Path, seconds: float = 0.3, rounds: int = 24,
               queries: slice = slice(150, 300)) -> float:
    """Both builds in this process, timed alternately on the card's data (CPU time): the median
    ratio. `queries` picks the card's query rows to time (default: its held-out slice)."""
    import numpy as np

    from vdbbench.agent.evaluation.harness_worker import load_class
    from vdbbench.datasets import synth

    base, q = synth.synth_float(3000, 1050, dim=32, seed=7)
    q = np.ascontiguousarray(q[queries])
    idx = {}
    for name, lib in (("fast", fast), ("slow", slow)):
        ix = load_class(str(lib), "fixture_vdb", "IvfIndex")(dim=32)
        ix.train(base)
        ix.add(base)
        idx[name] = ix
    ratios = []
    for r in range(rounds):
        qps = {}
        for name in (("fast", "slow") if r % 2 == 0 else ("slow", "fast")):
            n, t = 0, 0.0
            while t < seconds:
                c0 = time.process_time()
                idx[name].search(q, k=10)
                t += time.process_time() - c0
                n += q.shape[0]
            qps[name] = n / t
        ratios.append(qps["fast"] / qps["slow"])
    return float(np.median(ratios))


class LoadSampler:
    """The machine's 1-minute load average every `every` seconds in a background thread, so the
    figures say what load the whole soak ran under (not only at its end)."""

    def __init__(self, every: float = 10.0):
        import threading

        self.samples: list[float] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, args=(every,), daemon=True)
        self._thread.start()

    def _run(self, every: float) -> None:
        while not self._stop.is_set():
            self.samples.append(os.getloadavg()[0])
            self._stop.wait(every)

    def summary(self) -> dict:
        self._stop.set()
        self._thread.join(timeout=5)
        xs = sorted(self.samples) or [os.getloadavg()[0]]
        cores = os.cpu_count() or 1
        return {"cores": cores, "samples": len(xs), "min": xs[0], "median": xs[len(xs) // 2], "max": xs[-1],
                "share_at_2x_cores": round(sum(x >= 2 * cores for x in xs) / len(xs), 3)}


def chromium_load(page: Path) -> dict:
    """Open the page in headless Chromium (the browser tests' setup); {"skipped": why} without one."""
    chrome = os.environ.get("VDBBENCH_CHROMIUM", "/usr/bin/chromium")
    driver = os.environ.get("VDBBENCH_CHROMEDRIVER", "/usr/bin/chromedriver")
    for path, what in ((chrome, "chromium"), (driver, "chromedriver")):
        if not Path(path).exists():
            return {"skipped": f"{what} not found at {path}: the page was NOT loaded in a browser"}
    try:
        from selenium import webdriver
        from selenium.webdriver.chrome.service import Service
    except ImportError:
        return {"skipped": "selenium is not installed: the page was NOT loaded in a browser"}
    opts = webdriver.ChromeOptions()
    opts.binary_location = chrome
    for a in ("--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage"):
        opts.add_argument(a)
    drv = webdriver.Chrome(service=Service(driver), options=opts)
    try:
        t0 = time.perf_counter()
        drv.get(page.as_uri())
        points = drv.execute_script("return document.querySelectorAll('#staircase .point').length")
        return {"load_s": round(time.perf_counter() - t0, 3), "svg_points": points}
    finally:
        drv.quit()


def run(submissions: int, work: Path, seed: int = 0, repeat_seconds: float = 0.1, max_pairs: int = 16,
        final_seconds: float = 60.0, say=print, keep_best: bool = False) -> dict:
    """The whole soak; returns its figures (see the module docstring)."""
    from vdbbench.agent.core import workspace as wsp
    from vdbbench.agent.evaluation.evaluator import Evaluator

    clock = Clock()
    for owner, name in ((Evaluator, "run"), (Evaluator, "interleaved"), (Evaluator, "recall_of"),
                        (wsp, "build"), (wsp, "run_tests")):  # the loop calls these through the module
        clock.wrap(owner, name)
    try:
        return _run(submissions, work, seed, repeat_seconds, max_pairs, final_seconds, say, clock, keep_best)
    finally:
        clock.unwrap()


def _run(submissions, work, seed, repeat_seconds, max_pairs, final_seconds, say, clock, keep_best) -> dict:
    from vdbbench.agent.core.journal import read_events
    from vdbbench.agent.core.task import load_task
    from vdbbench.agent.reports import report, report_plots
    from vdbbench.agent.session.loop import Session
    from vdbbench.agent.session.model import ScriptedModel

    class Forgetful(ScriptedModel):
        """A scripted model that keeps no copy of each conversation (ScriptedModel keeps them all
        for assertions: at this length that would be the soak's peak memory, not the harness's)."""

        def query(self, messages, tools):
            try:
                return super().query(messages, tools)
            finally:
                self.seen.clear()

    repo = make_repo(work, submissions, repeat_seconds, max_pairs, final_seconds, keep_best)
    plan = Plan(submissions, seed=seed)
    t0 = time.perf_counter()

    def turn(messages):
        wall, work = time.perf_counter() - t0, clock.work
        reply = plan.reply(messages)  # first: it counts the verdict this turn brings
        clock.marks.append((len(plan.done), wall, work))
        if len(plan.done) % 50 == 0 and len(clock.marks) > 1 and clock.marks[-2][0] != len(plan.done):
            say(f"{len(plan.done)} submissions, {wall:.0f} s, best extra {plan.best_extra}")
        return reply

    card = load_task(repo / "task.toml")
    runs = work / "runs"
    half = submissions // 2
    first = Session.create(card, Forgetful([turn] * (submissions * 3), name="soak"), runs, run_id="soak",
                           budget_overrides={"iterations": half})
    first.run()
    say(f"budget stop at {len(plan.done)} submissions; resuming")
    run_dir = runs / "soak"
    second = Session.resume(run_dir, Forgetful([turn] * (submissions * 3), name="soak"),
                            budget_overrides={"iterations": submissions})
    second.run()
    wall = time.perf_counter() - t0
    events = read_events(run_dir / "journal.jsonl")
    decisions = {d["iteration"]: d for d in events if d["type"] == "decision"}
    by_kind: dict[str, dict] = {}
    for s in plan.done:
        d = decisions.get(s.n) or {}
        row = by_kind.setdefault(s.kind, {"submitted": 0, "outcomes": {}})
        row["submitted"] += 1
        row["outcomes"][d.get("outcome")] = row["outcomes"].get(d.get("outcome"), 0) + 1
        s.outcome = d.get("outcome")
    false_accepts = [s for s in plan.done if s.kind in ("none", "regression", "recall") and s.outcome == "accepted"]
    gains = [s for s in plan.done if s.kind == "gain"]
    missed = [s for s in gains if s.outcome != "accepted"]
    buckets = {}
    for lo, hi in ((0.03, 0.05), (0.05, 0.10), (0.10, 0.151)):
        inb = [s for s in gains if lo <= s.nominal < hi]
        buckets[f"{lo:.0%}-{min(hi, 0.15):.0%}"] = {"submitted": len(inb), "accepted": sum(s.outcome == "accepted" for s in inb)}
    n = len(plan.done)
    tenth = max(1, n // 10)
    figures = {
        "submissions": n, "wall_s": round(wall, 1), "seed": seed, "repeat_seconds": repeat_seconds, "max_pairs": max_pairs, "keep_best": keep_best,
        "by_kind": by_kind,
        "false_accepts": [{"n": s.n, "kind": s.kind, "nominal": round(s.nominal, 4)} for s in false_accepts],
        "false_accept_rate_no_effect": (sum(s.kind == "none" for s in false_accepts)
                                        / max(1, sum(s.kind == "none" for s in plan.done))),
        "gains": {"submitted": len(gains), "accepted": len(gains) - len(missed), "by_size": buckets},
        "missed_gains": [{"n": s.n, "nominal": round(s.nominal, 4), "outcome": s.outcome} for s in missed],
        "overhead_s_per_submission": {
            "first": overhead(clock.marks, 1, 1 + tenth), "last": overhead(clock.marks, n - tenth, n),
            "windows": [round(overhead(clock.marks, a, a + tenth) or 0, 4) for a in range(1, n - tenth + 1, tenth)],
        },
        "work_s": round(clock.work, 1),
        "tool_calls": sum(e["type"] == "tool_call" for e in events),
        "events": len(events),
        "journal_bytes": (run_dir / "journal.jsonl").stat().st_size,
        "peak_rss_mb": {"harness": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
                        "children_max": resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024},
        "compactions": sum(e["type"] == "compaction" for e in events),
        "resumes": sum(1 for e in events if e["type"] == "session_start" and e.get("resumed")),
        "start_extra": START_EXTRA, "best_extra": plan.best_extra,
        "nominal_speedup": cost(START_EXTRA) / cost(plan.best_extra),
    }
    # Render times: the report (totals and tables), the staircase PNG, the session page.
    from io import StringIO

    from rich.console import Console

    from vdbbench.agent.reports.report_cli import print_report

    t = time.perf_counter()
    evs = report.load_events(run_dir)
    print_report(evs, console=Console(file=StringIO(), width=120))
    figures["render_s"] = {"report": round(time.perf_counter() - t, 3)}
    t = time.perf_counter()
    drawn = report_plots.staircase(run_dir, work / "staircase.png")
    figures["render_s"]["staircase_png"] = round(time.perf_counter() - t, 3)
    figures["staircase_points"] = drawn["n_points"]
    from vdbbench.pages.session import write_session_page

    t = time.perf_counter()
    page = write_session_page(run_dir, run_dir / "session.html")
    figures["render_s"]["page"] = round(time.perf_counter() - t, 3)
    figures["page_bytes"] = page.stat().st_size
    try:
        figures["chromium"] = chromium_load(page)
    except Exception as exc:  # noqa: BLE001 - a browser fault is reported, the figures stand
        figures["chromium"] = {"error": f"{type(exc).__name__}: {exc}"}
    # The final measurement against the true speed-up of the best over the start.
    info = report.totals(evs)
    head = info["final"]
    figures["final"] = head and {k: head[k] for k in ("ratio", "lo", "hi", "half", "pairs", "stopped")}
    figures["product_of_steps"] = info["product_of_steps"]
    best, start = run_dir / "builds" / "best" / "fixture_vdb.so", run_dir / "builds" / "start" / "fixture_vdb.so"
    if head and best.exists() and start.exists():
        true = true_ratio(best, start)
        figures["true_speedup"] = true
        figures["final_vs_true"] = head["ratio"] / true - 1
    return figures


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--submissions", type=int, default=600)
    ap.add_argument("--seed", type=int, default=0, help="the script's seed (which submission is what)")
    ap.add_argument("--repeat-seconds", type=float, default=0.1, help="the card's timed repeat (default 0.1 s)")
    ap.add_argument("--max-pairs", type=int, default=16, help="the judge's cap of pairs (default 16)")
    ap.add_argument("--final-seconds", type=float, default=60.0, help="the final measurement's cap per target")
    ap.add_argument("--keep-best", action="store_true", help="keep the best's process between submissions")
    ap.add_argument("--workdir", help="keep the session here (default: a temporary folder, removed)")
    ap.add_argument("--json", help="write the figures here")
    ap.add_argument("--target-dir", help="cargo target folder (default target/agent-soak; never one another session builds in)")
    args = ap.parse_args(argv)
    work = Path(args.workdir) if args.workdir else Path(tempfile.mkdtemp(prefix="agent-soak-"))
    work.mkdir(parents=True, exist_ok=True)
    # A cargo target folder of its own: sessions sharing one race on the uplifted library
    # (target/release/libfixture_vdb.so), and a build could pick up another session's engine.
    os.environ["VDBBENCH_AGENT_TARGET_DIR"] = str(Path(args.target_dir).resolve() if args.target_dir else ROOT / "target" / "agent-soak")
    load = LoadSampler()
    try:
        figures = run(args.submissions, work, seed=args.seed, repeat_seconds=args.repeat_seconds,
                      max_pairs=args.max_pairs, final_seconds=args.final_seconds, keep_best=args.keep_best,
                      say=lambda m: print(m, file=sys.stderr, flush=True))
        from vdbbench.bench.results import cpu_model

        figures.update(cpu=cpu_model(), cores=os.cpu_count(), load1=os.getloadavg()[0], load=load.summary(),
                       commit=subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=ROOT, capture_output=True,
                                             text=True).stdout.strip(),
                       command=" ".join(["python", "benchmarks/agent_soak.py", *(argv if argv is not None else sys.argv[1:])]))
        text = json.dumps(figures, indent=2, default=str)
        print(text)
        if args.json:
            Path(args.json).write_text(text + "\n")
    finally:
        if not args.workdir:
            shutil.rmtree(work, ignore_errors=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
