"""The HTML pages without a browser: what `vdbbench report` and `vdbbench agent report --html` put
in the file (data, figures, tables, diffs), that nothing is fetched from elsewhere, and clear
errors on bad input. tests/test_pages_browser.py loads the same pages in headless Chromium."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
from pathlib import Path

import pytest

from vdbbench.cli import main
from vdbbench.pages.bench import benchmark_page, load_results, log_axis, pareto
from vdbbench.pages.html import script_json
from vdbbench.pages.session import NO_DIFF, references, session_page, submissions

from test_agent_long_journal import JournalBuilder

REPO = Path(__file__).resolve().parents[1]
BASELINE = REPO / "benchmarks" / "baselines" / "synth-sift-20k"


def figures(page: str) -> dict[str, tuple[list, dict]]:
    """Every plotly figure of a page: div id -> (traces, layout), read back from its newPlot call."""
    out = {}
    decoder = json.JSONDecoder()
    for m in re.finditer(r'Plotly\.newPlot\(\s*"([^"]+)",\s*', page):
        data, end = decoder.raw_decode(page, m.end())
        rest = page[end:].lstrip().lstrip(",").lstrip()
        layout, _ = decoder.raw_decode(rest)
        out[m.group(1)] = (data, layout)
    return out


def assert_self_contained(page: str) -> None:
    """Nothing the browser would fetch: no external scripts, styles, images or frames."""
    assert not re.search(r'<script[^>]+\bsrc=', page)
    assert not re.search(r'<link[^>]+href="(?!data:)', page)
    assert not re.search(r'<(img|iframe)[^>]+src="(?!data:)', page)
    assert "plotly.js" in page and "Plotly.newPlot" in page


def copy_results(tmp_path: Path, edit=None) -> Path:
    out = tmp_path / "results"
    out.mkdir()
    for f in BASELINE.glob("*.json"):
        r = json.loads(f.read_text())
        if edit:
            edit(r)
        (out / f.name).write_text(json.dumps(r))
    return out


# ---------------------------------------------------------------------------------------------
# The benchmark page
# ---------------------------------------------------------------------------------------------


def test_benchmark_page_holds_fronts_tables_machine_and_dataset(tmp_path):
    out = tmp_path / "report.html"
    assert main(["report", str(BASELINE), "-o", str(out)]) == 0
    page = out.read_text()
    assert_self_contained(page)
    ivf = json.loads((BASELINE / "ivf.json").read_text())
    figs = figures(page)
    assert set(figs) == {"pareto-0-batch-1"}  # the baseline holds batch @ 1 thread only
    traces, layout = figs["pareto-0-batch-1"]
    ours = [t for t in traces if t.get("legendgroup") == "ivf"]
    all_pts = next(t for t in ours if t["mode"] == "markers" and not t.get("showlegend", True) and len(t["x"]) > 1)
    assert len(all_pts["x"]) == len(ivf["points"])
    front = next(t for t in ours if t["mode"] == "lines+markers")
    # the front is the recall/QPS Pareto set, its hover text the parameters and latency
    assert [(x, y) for x, y in zip(front["x"], front["y"])] == [(p["recall10"], p["qps"]) for p in pareto(ivf["points"])]
    assert all(cd[0].startswith("nprobe=") for cd in front["customdata"]) and "recall@10" in front["hovertemplate"]
    assert layout["yaxis"]["type"] == "log"
    head = ivf["headline"][0]
    assert f"{head['qps']:,.0f}" in page and "nprobe=" in page
    for text in ("synth-sift-20k", "generated replica", "faiss-ivf-flat", ivf["machine"]["cpu"], "Headline", "build time and memory",
                 f"{ivf['build']['bytes'] / 2**20:.1f} MiB"):
        assert text in page, text
    assert "Concurrent clients" not in page  # no concurrent points: no such section, no failure


def test_concurrent_points_get_their_plots_and_table(tmp_path):
    def add_concurrent(r):
        for clients in (1, 4, 8):
            r["points"].append({"params": r["headline"][0]["params"], "threads": 1, "mode": "concurrent",
                                "clients": clients, "recall10": 0.96, "qps": 1000.0 * clients ** 0.5,
                                "p50_ms": 0.2 * clients, "p99_ms": 0.5 * clients, "p999_ms": 0.9 * clients})

    page = benchmark_page(load_results([copy_results(tmp_path, add_concurrent)]))
    figs = figures(page)
    assert {"conc-qps-0", "conc-lat-0"} <= set(figs)
    qps_traces, _ = figs["conc-qps-0"]
    assert len(qps_traces) == 2 and all(t["x"] == [1, 4, 8] for t in qps_traces)
    lat_traces, lat_layout = figs["conc-lat-0"]
    assert [t["name"].split()[-1] for t in lat_traces] == ["p99", "p99.9", "p99", "p99.9"]
    assert lat_traces[1]["y"] == pytest.approx([0.9, 3.6, 7.2])
    assert "Concurrent clients" in page and "p99.9 ms" in page
    # concurrent points are not drawn as recall/QPS fronts
    assert not any(k.startswith("pareto-0-concurrent") for k in figs)


def test_points_only_swept_for_recall_are_counted_not_drawn(tmp_path):
    def untime(r):
        for p in r["points"][:3]:
            p["qps"] = None

    page = benchmark_page(load_results([copy_results(tmp_path, untime)]))
    assert "6 points were only swept for recall" in page
    traces, _ = figures(page)["pareto-0-batch-1"]
    assert all(y is not None for t in traces for y in t["y"])


def test_several_datasets_get_a_section_each(tmp_path):
    def other(r):
        r["dataset"]["name"], r["dataset"]["synthetic"], r["dataset"]["sha256"] = "mine-20k", False, "x" * 64

    results = load_results([BASELINE, copy_results(tmp_path, other)])
    page = benchmark_page(results)
    assert page.count('<section class="dataset"') == 2
    assert {"pareto-0-batch-1", "pareto-1-batch-1"} <= set(figures(page))
    assert "real data" in page and "generated replica" in page


def test_log_axis_labels_are_values_not_bare_digits():
    axis = log_axis([900, 1500, 23_000])
    assert axis["ticktext"] == ["500", "1k", "2k", "5k", "10k", "20k"]  # within 2x of the data


@pytest.mark.parametrize("args, message", [
    (["nowhere.json"], "no such result file"),
    (["README.md"], "not a readable JSON result"),
    (["tests"], "no vdbbench result files"),
    ([str(BASELINE), "--ours", "hnswlib"], "--ours 'hnswlib' is not among the results"),
])
def test_report_bad_input_is_a_clear_usage_error(args, message, tmp_path, capsys, monkeypatch):
    monkeypatch.chdir(REPO)
    assert main(["report", *args, "-o", str(tmp_path / "r.html")]) == 2
    assert message in capsys.readouterr().err
    assert not (tmp_path / "r.html").exists()


def test_report_wants_an_html_name(tmp_path, capsys):
    assert main(["report", str(BASELINE), "-o", str(tmp_path / "r.png")]) == 2
    assert "-o expects an .html file name" in capsys.readouterr().err


def test_a_folder_skips_partial_and_foreign_json(tmp_path):
    folder = copy_results(tmp_path)
    (folder / "agent-report.json").write_text('{"schema": "vdbbench.agent-report/1"}')
    (folder / "ivf.partial.json").write_text((folder / "ivf.json").read_text())
    assert sorted(p.name for p, _ in load_results([folder])) == ["faiss-ivf-flat.json", "ivf.json"]


def test_script_json_cannot_close_the_script():
    text = script_json({"m": "</script><script>alert(1)</script> <!-- \u2028"})
    assert "<" not in text and ">" not in text and "\u2028" not in text
    assert json.loads(text)["m"].startswith("</script>")


# ---------------------------------------------------------------------------------------------
# The session page
# ---------------------------------------------------------------------------------------------


def git(cwd: Path, *args: str) -> str:
    env_args = ["-c", "user.name=t", "-c", "user.email=t@x"]
    return subprocess.run(["git", *env_args, *args], cwd=cwd, check=True, capture_output=True, text=True).stdout.strip()


def run_with_workspace(tmp_path: Path) -> tuple[Path, JournalBuilder, str]:
    """A run folder: a journal and a git workspace whose second commit is the accepted change."""
    run = tmp_path / "runs" / "s1"
    ws = run / "workspace"
    (ws / "src").mkdir(parents=True)
    git(ws, "init", "-q", "-b", "vdbbench-session")
    (ws / "src" / "lib.rs").write_text("const PASSES: usize = 4;\n")
    git(ws, "add", "-A")
    git(ws, "commit", "-q", "-m", "start")
    (ws / "src" / "lib.rs").write_text("const PASSES: usize = 1;\n")
    git(ws, "commit", "-q", "-am", "iteration 2: one pass")
    sha = git(ws, "rev-parse", "HEAD")
    # A flagged submission's commit: prepared for the audit, never on the branch.
    (ws / "src" / "lib.rs").write_text("const PASSES: usize = 0;\n")
    git(ws, "add", "-A")
    flagged = git(ws, "commit-tree", git(ws, "write-tree"), "-p", "HEAD", "-m", "iteration 4: zero passes")
    git(ws, "reset", "-q", "--hard", "HEAD")

    j = JournalBuilder()
    j.start()
    j.best_qps, j.best_recall = 100.0, 1.0
    j.add("reference", qps=350.0, recall10=0.99, label="vdbbench ivf (the project's engine)")
    j.model_call(1000, 100, cost=0.02)
    j.submit("build_failed", message="</script><script>alert('x')</script>", reason="error[E0061]: core/src/lib.rs:49")
    j.events[-1]["diff"] = "--- a/src/lib.rs\n+++ b/src/lib.rs\n-fn l2(a: &[f32])\n+fn l2(a: &[f32] oops)\n"
    j.note("PASSES is the waste")
    j.add("assistant", content="One pass is enough.", reasoning_content="think", tool_calls=[{"id": "c", "name": "submit", "arguments": "{}"}])
    j.submit("accepted", qps=400.0, recall=0.99, message="one pass", commit=sha, diff_stat="1 file changed, 1 insertion(+), 1 deletion(-)")
    j.submit("slower", qps=390.0, recall=0.99, message="unrolled", reason="not a real gain")
    j.add("audit", commit=flagged, verdict="flagged", findings=["fresh queries 10x slower"], fresh_qps=40.0,
          fresh_recall10=0.99, jump_factor=25.0)
    j.submit("flagged", qps=10_000.0, recall=0.99, message="zero passes", reason="the audit flagged it")
    j.write(run)
    return run, j, sha


def test_session_page_embeds_each_submission_with_its_diff_verdict_message_and_notes(tmp_path):
    run, j, sha = run_with_workspace(tmp_path)
    subs = submissions(j.events, run / "workspace")
    assert [s["outcome"] for s in subs] == ["build_failed", "accepted", "slower", "flagged"]
    failed, accepted, slower, flagged = subs
    assert "+const PASSES: usize = 0;" in flagged["diff"] and flagged["audit"]["verdict"] == "flagged"
    assert "oops" in failed["diff"] and failed["diff_source"] == "journal"  # the judge's own diff
    assert "-const PASSES: usize = 4;" in accepted["diff"] and "+const PASSES: usize = 1;" in accepted["diff"]
    assert sha[:12] in accepted["diff_source"]
    assert slower["diff"] is None and slower["diff_source"] == NO_DIFF
    assert failed["notes"] == [] and [n["text"] for n in accepted["notes"]] == ["PASSES is the waste"]
    assert accepted["said"] == "One pass is enough." and accepted["heldout"]["qps"] == 400.0
    assert accepted["audit"]["verdict"] == "clean" and accepted["diff_stat"] == "1 file +1 -1"
    assert references(j.events) == [{"label": "vdbbench ivf (the project's engine)", "qps": 350.0, "recall10": 0.99}]

    page = session_page(run)
    assert_self_contained(page)
    assert page.count("</script>") == page.count("<script")  # the model's message cannot end a script
    traces, layout = figures(page)["staircase"]
    clickable = [t for t in traces if t.get("customdata")]
    assert sorted(cd[0] for t in clickable for cd in t["customdata"]) == [0, 1, 2, 3]  # one point per submission
    assert any("the project's engine" in (a.get("text") or "") for a in layout.get("annotations", []))
    assert any(s.get("y0") == 350.0 for s in layout.get("shapes", []))  # the reference line
    for text in ("Accepted changes", "one pass", "×4.00", "$0.02", "slower / no gain", "build failed"):
        assert text in page, text


def test_agent_report_html_writes_the_page_beside_the_journal(tmp_path, capsys):
    run, _, _ = run_with_workspace(tmp_path)
    shutil.rmtree(run / "workspace")  # no workspace: accepted diffs are then "not recorded"
    assert main(["agent", "report", str(run), "--html"]) == 0
    out = run / "session.html"
    assert out.exists() and "wrote" in capsys.readouterr().out
    subs = json.loads(re.search(r"const SUBS = (.*);\n", out.read_text()).group(1))
    assert [s["diff_source"] for s in subs] == ["journal", NO_DIFF, NO_DIFF, NO_DIFF]
    assert not (run / "staircase.png").exists()  # --html writes the page instead of the PNG


def test_agent_report_html_on_a_missing_run_is_a_usage_error(tmp_path, capsys):
    assert main(["agent", "report", str(tmp_path / "nope"), "--html"]) == 2
    assert "does not exist" in capsys.readouterr().err


def test_a_session_without_submissions_still_has_a_page(tmp_path):
    j = JournalBuilder()
    j.start()
    j.add("evaluation", split="heldout", candidate={"qps": 120.0, "recall10": 1.0}, best=None)
    j.write(tmp_path / "run")
    page = session_page(tmp_path / "run")
    assert "No submission yet." in page and "staircase" not in figures(page)
    assert "No change was accepted" in page
