"""The agent judge's quality, measured: false accepts of no-effect changes and power on a real
5-10% gain, through the real judge (real cargo builds of the fixture engine, real candidate
processes), with a background process keeping one core busy the whole time.

    python benchmarks/judge_quality.py                     # the judge of this checkout
    python benchmarks/judge_quality.py --code OLD/python   # another checkout's judge (e.g. main's)
    python benchmarks/judge_quality.py --card optimize-ivf-1m --power 6   # the project's engine at 1M

(a) one session starting from the fast fixture engine gets `--null` submissions that change no
    speed (a comment, a renamed local, alternately); every acceptance is a false accept.
(b) `--power` sessions start from a copy slowed by a fixed extra pass over part of its vectors
    and submit the fast version; every rejection is a miss. The gain's true size is measured
    directly: both builds timed alternately in one process over many long batches (CPU time).

With `--card NAME` (a card of agent/tasks/ that edits rust_vdb/core/src, e.g. optimize-ivf-1m)
the engine is this project's, at the checkout's HEAD: the slowed copy does an extra pass over
`--extra-percent` of each scanned list's rows inside the batch prescore (ivf/prescore.rs, head
codes, results black_box'ed), and the no-effect edits are a comment or a renamed local in that
file. The card is used as it is but for what does not bear on the verdict and would cost minutes
a session: no Rust tests, no reference line, no transfer checks, no final measurement. The true
gain is measured on the first power session's two builds (start and submitted), on the card's
data, with its held-out queries.

Prints one line per submission and the two figures; `--json FILE` keeps them. One run takes
~15-25 minutes on a 2-core machine with the default sizes.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
FIXTURE = HERE.parent / "tests" / "fixtures" / "agent_task"
LIB = "core/src/lib.rs"

# The slowed copy: after the needed pass, a second pass over the first EXTRA_PERCENT of the
# vectors (its results thrown away), the "fixed extra pass over its lists".
EXTRA = '''            for (s, v) in scores.iter_mut().zip(self.data.chunks_exact(self.dim)).take(self.len() * EXTRA_PERCENT / 100) {
                *s = l2(q, v);
            }
            std::hint::black_box(&mut scores);
'''


def fast_source() -> str:
    return (FIXTURE / LIB).read_text().replace("const PASSES: usize = 4;", "const PASSES: usize = 1;")


def slow_source(percent: int) -> str:
    src = fast_source().replace("const PASSES: usize = 1;", f"const PASSES: usize = 1;\nconst EXTRA_PERCENT: usize = {percent};")
    anchor = "            let top = top_k(&scores, k);\n"
    assert anchor in src
    return src.replace(anchor, EXTRA + anchor)


def no_effect_source(i: int) -> str:
    """The fast version with a comment (even i) or a renamed local (odd i)."""
    src = fast_source()
    if i % 2 == 0:
        return src.replace("fn l2(a: &[f32], b: &[f32]) -> f32 {", f"fn l2(a: &[f32], b: &[f32]) -> f32 {{\n    // no-effect change {i}")
    return re.sub(r"\bids_out\b", f"ids_out_{i}", src)


ENGINE_FILE = "rust_vdb/core/src/ivf/prescore.rs"
ENGINE_ANCHOR = "        self.begin_scan(probes, s, stats);\n"  # in IvfIndex::prescore (a block), before the scan
# The engine's slowed copy: each probe's query scored once more (head codes, the kernel the
# short runs use) against the first EXTRA_PERCENT of its list's rows, results thrown away.
ENGINE_EXTRA = """        if self.storage == Storage::U8F16 && !self.metric.is_similarity() {
            const EXTRA_PERCENT: usize = {percent};
            let (dim, hd) = (self.dim, self.head_dims());
            let longest = self.lists.iter().map(|l| l.len()).max().unwrap_or(0);
            let (mut xpos, mut xdist) = (vec![0u32; longest], vec![0u32; longest]);
            for &visit in probes {
                let list = &self.lists[visit.list()];
                let qi = visit.query();
                let m = list.len() * EXTRA_PERCENT / 100;
                let q = &s.qsplit[qi * dim..qi * dim + hd];
                let c = (kern.l2_u8_batch_pre_below)(q, &list.codes[..m * hd], &list.terms[..m], f32::INFINITY, &mut xpos, &mut xdist);
                std::hint::black_box((c, &mut xpos, &mut xdist));
            }
        }
"""


def engine_sources(sha: str) -> str:
    """The engine file at `sha`, as the fast version."""
    return subprocess.run(["git", "show", f"{sha}:{ENGINE_FILE}"], cwd=HERE.parent, check=True,
                          capture_output=True, text=True).stdout


def engine_slow(fast: str, percent: int) -> str:
    assert fast.count(ENGINE_ANCHOR) == 1, f"the anchor of the extra pass is not (once) in {ENGINE_FILE}"
    return fast.replace(ENGINE_ANCHOR, ENGINE_ANCHOR + ENGINE_EXTRA.replace("{percent}", str(percent)))


def engine_no_effect(fast: str, i: int) -> str:
    if i % 2 == 0:
        return fast.replace(ENGINE_ANCHOR, ENGINE_ANCHOR + f"        // no-effect change {i}\n", 1)
    out = re.sub(r"\bplanned\b", f"planned_{i}", fast)
    assert out != fast
    return out


def engine_repo(root: Path, sha: str, fast: str, slow: str) -> tuple[str, str]:
    """A repository of the checkout's tree at `sha` (commit "fast") and the slowed copy on top
    (commit "slow"): the null and the power sessions' start revisions."""
    root.mkdir(parents=True)
    env = {**os.environ, "GIT_AUTHOR_NAME": "q", "GIT_AUTHOR_EMAIL": "q@x", "GIT_COMMITTER_NAME": "q", "GIT_COMMITTER_EMAIL": "q@x"}
    tar = subprocess.run(["git", "archive", "--format=tar", sha], cwd=HERE.parent, check=True, capture_output=True).stdout
    subprocess.run(["tar", "-x"], cwd=root, input=tar, check=True)
    (root / ENGINE_FILE).write_text(fast)
    revs = []
    for name, text in (("fast", fast), ("slow", slow)):
        (root / ENGINE_FILE).write_text(text)
        for cmd in ([] if revs else [["init", "-q", "-b", "main"]]) + [["add", "-A"], ["commit", "-q", "-m", name]]:
            subprocess.run(["git", *cmd], cwd=root, check=True, env=env)
        revs.append(subprocess.run(["git", "rev-parse", "HEAD"], cwd=root, check=True, capture_output=True, text=True).stdout.strip())
    return revs[0], revs[1]


def engine_card(name: str, repo: Path, rev: str, repeat_seconds: float | None):
    """The card as a session reads it, starting from `rev` of `repo`, without what does not bear
    on the verdict (tests, reference, transfer, final measurement)."""
    from vdbbench.agent.core.task import Transfer, load_task

    card = load_task(HERE.parent / "agent" / "tasks" / f"{name}.toml")
    card.start.repo, card.start.rev = str(repo), rev
    card.tests.enabled = False
    card.reference.source = "none"
    card.transfer = Transfer()
    card.final.enabled = False
    if repeat_seconds:
        card.objective.repeat_seconds = repeat_seconds
    return card


def engine_data(card, queries: int):
    """The card's base vectors and its first `queries` held-out queries."""
    from vdbbench.agent.evaluation.eval_data import make_eval_data

    data = make_eval_data(card)
    return data.base, data.heldout.queries[:queries]


def make_repo(root: Path, lib_text: str, card_edit=None) -> Path:
    shutil.copytree(FIXTURE, root, ignore=shutil.ignore_patterns("target"))
    (root / LIB).write_text(lib_text)
    if card_edit:
        card = root / "task.toml"
        card.write_text(card_edit(card.read_text()))
    env = {**os.environ, "GIT_AUTHOR_NAME": "q", "GIT_AUTHOR_EMAIL": "q@x", "GIT_COMMITTER_NAME": "q", "GIT_COMMITTER_EMAIL": "q@x"}
    for cmd in (["init", "-q", "-b", "main"], ["add", "-A"], ["commit", "-q", "-m", "start"]):
        subprocess.run(["git", *cmd], cwd=root, check=True, env=env)
    return root


def session_decisions(runs: Path, run_id: str) -> list[dict]:
    out = []
    for line in (runs / run_id / "journal.jsonl").read_text().splitlines():
        e = json.loads(line)
        if e.get("type") == "decision":
            out.append(e)
    return out


def run_session(card, runs: Path, run_id: str, steps: list, show: bool = False) -> list[dict]:
    """One real session of `card` (a TaskCard, or a fixture repository with its task.toml)."""
    from vdbbench.agent.core.task import load_task
    from vdbbench.agent.session.loop import Session
    from vdbbench.agent.session.model import ScriptedModel

    def on_event(e: dict) -> None:
        if show and e.get("type") == "decision":
            print(f"{run_id} {e.get('iteration'):2d}: {short(e)}", flush=True)

    if isinstance(card, Path):
        card = load_task(card / "task.toml")
    session = Session.create(card, ScriptedModel(steps), runs, run_id, on_event=on_event)
    try:
        session.run()
    finally:
        close = getattr(session.evaluator, "close", None)
        if close:
            close()
    return session_decisions(runs, run_id)


def short(d: dict) -> str:
    bits = [f"{d['outcome']:<18}"]
    if d.get("qps") and d.get("best_qps_before"):
        bits.append(f"qps {d['qps']:,.0f}")
    if d.get("gain") is not None:
        bits.append(f"gain {d['gain']:+.1%}")
    if d.get("pairs"):
        bits.append(f"pairs {d['pairs']}")
    if d.get("spread") is not None:
        bits.append(f"spread {d['spread']:.1%}")
    m = re.search(r"median gain ([-+][\d.]+%)", d.get("reason", ""))
    if m:
        bits.append(f"median gain {m.group(1)}")
    m = re.search(r"p=([\d.]+)", d.get("reason", ""))
    if m:
        bits.append(f"p={m.group(1)}")
    return "  ".join(bits)


def true_gain(fast_lib: Path, slow_lib: Path, batches: int, seconds: float, dim: int = 32,
              module: str = "fixture_vdb", data: tuple | None = None) -> dict:
    """Both builds loaded in this process, timed alternately over long batches (CPU time).
    `data` is (base, queries); by default the fixture engine's small float set of `dim`."""
    import numpy as np

    from vdbbench.agent.evaluation.harness_worker import load_class
    from vdbbench.datasets import synth

    base, queries = data if data is not None else synth.synth_float(3000, 2000, dim=dim, seed=7)
    idx = {}
    for name, lib in (("fast", fast_lib), ("slow", slow_lib)):
        cls = load_class(str(lib), module, "IvfIndex")
        ix = cls(dim=base.shape[1])
        ix.train(base)
        ix.add(base)
        idx[name] = ix
    qps = {"fast": [], "slow": []}
    for b in range(batches):
        for name in (("fast", "slow") if b % 2 == 0 else ("slow", "fast")):
            n, t = 0, 0.0
            while t < seconds:
                c0 = time.process_time()
                idx[name].search(queries, k=10)
                t += time.process_time() - c0
                n += queries.shape[0]
            qps[name].append(n / t)
    ratios = np.asarray(qps["fast"]) / np.asarray(qps["slow"])
    return {"batches": batches, "seconds_each": seconds, "median_ratio": float(np.median(ratios)),
            "mean_ratio": float(np.mean(ratios)), "min_ratio": float(ratios.min()), "max_ratio": float(ratios.max()),
            "fast_qps_median": float(np.median(qps["fast"])), "slow_qps_median": float(np.median(qps["slow"]))}


def build_both(work: Path) -> tuple[Path, Path]:
    """The fast (null-repo) and slowed (power-repo) versions built as a session builds them."""
    from vdbbench.agent.core import workspace as wsp
    from vdbbench.agent.core.task import load_task

    # Each version in a cargo target folder of its own: cargo keys a path package by its place
    # relative to the workspace, so the two repositories (same layout, sources older than the
    # last build) would share one fingerprint and the second build would reuse the first's library.
    libs = {}
    for name in ("null", "power"):
        repo = work / f"{name}-repo"
        target = Path(os.environ["VDBBENCH_AGENT_TARGET_DIR"]) / f"true-gain-{name}"
        res = wsp.build(repo, load_task(repo / "task.toml"), target, work / f"lib-{name}")
        if not res.ok:
            raise SystemExit(f"building the {name} version failed: {res.errors}")
        libs[name] = work / f"lib-{name}" / "fixture_vdb.so"
    if libs["null"].read_bytes() == libs["power"].read_bytes():
        raise SystemExit("the fast and the slowed builds are the same library: the true gain cannot be measured")
    return libs["null"], libs["power"]


def interval(k: int, n: int, level: float = 0.95) -> tuple[float, float]:
    """The Clopper-Pearson interval of a rate seen k times in n."""
    from scipy.stats import beta

    a = (1 - level) / 2
    lo = 0.0 if k == 0 else float(beta.ppf(a, k, n - k + 1))
    hi = 1.0 if k == n else float(beta.ppf(1 - a, k + 1, n - k))
    return lo, hi


def spreads(ds: list[dict]) -> str:
    sp = sorted(d["spread"] for d in ds if d.get("spread") is not None)
    return f"per-pair spread {sp[0]:.1%}..{sp[-1]:.1%} (median {sp[len(sp) // 2]:.1%})" if sp else "no spread"


def uptime() -> str:
    return "load " + " ".join(Path("/proc/loadavg").read_text().split()[:3])


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--card", help="measure on this card of agent/tasks/ with the project's engine (e.g. optimize-ivf-1m)")
    ap.add_argument("--rev", default="HEAD", help="with --card: the checkout's commit whose engine is measured")
    ap.add_argument("--code", help="a python/ source folder whose vdbbench judge to measure (default: this checkout's)")
    ap.add_argument("--null", type=int, default=20, help="no-effect submissions (default 20)")
    ap.add_argument("--power", type=int, default=10, help="real-gain submissions (default 10)")
    ap.add_argument("--extra-percent", type=int, default=8, help="the slowed copy's extra pass, in percent of the vectors")
    ap.add_argument("--gain-batches", type=int, default=30, help="alternate batches per version for the true gain (0: skip it)")
    ap.add_argument("--gain-from", help="with --card: a power session's folder (runs/power0 of an earlier --workdir) whose "
                                        "start and submitted builds the true gain times (default: this run's first)")
    ap.add_argument("--repeat-seconds", type=float, help="set the card's objective.repeat_seconds (judges that have it)")
    ap.add_argument("--no-load", action="store_true", help="do not keep a core busy (for comparison)")
    ap.add_argument("--json", help="write the figures here")
    ap.add_argument("--workdir", help="keep sessions here (default: a temporary folder, removed)")
    args = ap.parse_args(argv)
    if args.code:
        sys.path.insert(0, str(Path(args.code).resolve()))
    import vdbbench

    code = str(Path(vdbbench.__file__).resolve().parents[1])  # the python/ folder: whatever the agent's layout
    print(f"judge code: {code}", flush=True)
    os.environ.setdefault("VDBBENCH_AGENT_TARGET_DIR", str(HERE.parent / "target" / ("judge-quality" + ("-engine" if args.card else ""))))
    work = Path(args.workdir) if args.workdir else Path(tempfile.mkdtemp(prefix="judge-quality-"))
    work.mkdir(parents=True, exist_ok=True)
    busy = None
    if not args.no_load:
        busy = subprocess.Popen([sys.executable, "-c", "while True: pass"])
        print(f"background load: pid {busy.pid} keeps one core busy", flush=True)
    t0 = time.monotonic()
    out: dict = {"code": code, "load": not args.no_load, "repeat_seconds": args.repeat_seconds, "null": [], "power": []}
    try:
        # (a) no-effect changes against the fast version
        def card_edit(text: str) -> str:
            # The fixture card's short test repeats give way to 1 s (the default of real cards).
            return text.replace("repeat_seconds = 0.3\n", f"repeat_seconds = {args.repeat_seconds or 1.0}\n")

        if args.card:
            sha = subprocess.run(["git", "rev-parse", args.rev], cwd=HERE.parent, check=True, capture_output=True,
                                 text=True).stdout.strip()
            fast = engine_sources(sha)
            fast_rev, slow_rev = engine_repo(work / "engine-repo", sha, fast, engine_slow(fast, args.extra_percent))
            out.update(card=args.card, engine_commit=sha, extra_percent=args.extra_percent)
            print(f"engine at {sha[:12]}, slowed copy: +{args.extra_percent}% of each scanned list's rows", flush=True)
            repo = engine_card(args.card, work / "engine-repo", fast_rev, args.repeat_seconds)
            power_repo = engine_card(args.card, work / "engine-repo", slow_rev, args.repeat_seconds)
            path, fast_text, null_text = ENGINE_FILE, fast, lambda i: engine_no_effect(fast, i)
        else:
            repo = make_repo(work / "null-repo", fast_source(), card_edit)
            power_repo = make_repo(work / "power-repo", slow_source(args.extra_percent), card_edit)
            path, fast_text, null_text = LIB, fast_source(), no_effect_source
        null_s = power_s = 0.0

        def null_arm() -> float:
            steps = []
            for i in range(args.null):
                steps.append({"tool_calls": [("revert_to_best", {}), ("write_file", {"path": path, "content": null_text(i)}),
                                             ("submit", {"message": f"no-effect change {i}"})]})
            t = time.monotonic()
            out["null"] = run_session(repo, work / "runs", "null", steps, show=True) if args.null else []
            return time.monotonic() - t

        def power_arm() -> float:
            # the real gain: fresh session per trial, from the slowed copy
            t = time.monotonic()
            for i in range(args.power):
                steps = [{"tool_calls": [("write_file", {"path": path, "content": fast_text}),
                                         ("submit", {"message": "drop the extra pass"})]}]
                ds = run_session(power_repo, work / "runs", f"power{i}", steps)
                out["power"].extend(ds)
                print(f"power {i + 1:2d}: {short(ds[-1])}  ({uptime()})", flush=True)
            return time.monotonic() - t

        # at 1M the power sessions first: each is a few minutes, and a run cut short keeps both arms
        if args.card:
            power_s = power_arm()
            null_s = null_arm()
        else:
            null_s = null_arm()
            power_s = power_arm()
        # the gain's true size: both versions built as the sessions build them, timed directly
        tg = None
        if args.gain_batches and args.card:
            run0 = Path(args.gain_from or work / "runs" / "power0") / "builds"
            leaf = f"{power_repo.entry.leaf}.so"
            slow_lib = run0 / "start" / leaf if (run0 / "start" / leaf).exists() else run0 / "best" / leaf
            os.environ["RAYON_NUM_THREADS"] = "1"  # one thread, as the card's candidate processes run
            tg = true_gain(run0 / "submitted" / leaf, slow_lib, args.gain_batches, 2.0, module=power_repo.entry.module,
                           data=engine_data(power_repo, power_repo.batch_queries))
        elif args.gain_batches:
            tg = true_gain(*build_both(work), args.gain_batches, 2.0)
        out["true_gain"] = tg
    finally:
        if busy is not None:
            busy.kill()
            busy.wait()
        if not args.workdir:
            shutil.rmtree(work, ignore_errors=True)
    fa = sum(d["outcome"] == "accepted" for d in out["null"])
    hits = sum(d["outcome"] == "accepted" for d in out["power"])
    out["false_accepts"], out["null_n"] = fa, len(out["null"])
    out["power_accepts"], out["power_n"] = hits, len(out["power"])
    out["seconds"] = {"null": round(null_s), "power": round(power_s), "total": round(time.monotonic() - t0)}
    if tg:
        print(f"\ntrue gain of the fast version over the slowed copy: x{tg['median_ratio']:.3f} median "
              f"(mean x{tg['mean_ratio']:.3f}, {tg['min_ratio']:.3f}..{tg['max_ratio']:.3f}) over {tg['batches']} "
              f"alternate batches of >= {tg['seconds_each']:g} s CPU each")
    for key, k, n in (("false_accepts_ci95", fa, len(out["null"])), ("power_ci95", hits, len(out["power"]))):
        out[key] = interval(k, n) if n else None
    ci = lambda key: f"95% interval {out[key][0]:.1%}..{out[key][1]:.1%}; " if out[key] else ""  # noqa: E731
    print(f"false accepts: {fa} of {len(out['null'])} no-effect submissions ({ci('false_accepts_ci95')}"
          f"{spreads(out['null'])}; {null_s / 60:.1f} min)")
    print(f"power: {hits} of {len(out['power'])} real-gain submissions accepted ({ci('power_ci95')}"
          f"{spreads(out['power'])}; {power_s / 60:.1f} min)")
    out["loadavg_end"] = uptime()
    print(f"total {out['seconds']['total'] / 60:.1f} min, load: {'one core busy' if busy else 'none'}; {out['loadavg_end']}")
    if args.json:
        slim = {k: v for k, v in out.items() if k not in ("null", "power")}
        slim["null"] = [short(d) for d in out["null"]]
        slim["power"] = [short(d) for d in out["power"]]
        Path(args.json).write_text(json.dumps(slim, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
