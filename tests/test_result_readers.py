"""The readers of result files (report, plot, page, compare, the README table) on damaged,
foreign and mixed inputs: a clear error (exit 2, no traceback), never a wrong figure. Fixtures
are the committed synth-sift-20k baseline, edited; no benchmark runs here."""

from __future__ import annotations

import copy
import json
import math
from pathlib import Path

import pytest

from vdbbench.bench.results import load_result
from vdbbench.cli import main

REPO = Path(__file__).resolve().parents[1]
BASELINE = REPO / "benchmarks" / "baselines" / "synth-sift-20k"


def result(name: str = "ivf") -> dict:
    return json.loads((BASELINE / f"{name}.json").read_text())


def folder(tmp_path: Path, edits: dict | None = None, name: str = "run") -> Path:
    """The baseline's result files copied to tmp_path/name, each edited by edits[index] if any."""
    out = tmp_path / name
    out.mkdir()
    for f in BASELINE.glob("*.json"):
        r = json.loads(f.read_text())
        if edits and f.stem in edits:
            edits[f.stem](r)
        (out / f.name).write_text(json.dumps(r))
    return out


def _set(path: str, value):
    """An edit setting result[a][b]... (ints index lists) to value, or deleting it (value=KeyError)."""
    def edit(r):
        *head, last = [int(k) if k.isdigit() else k for k in path.split(".")]
        for k in head:
            r = r[k]
        if value is KeyError:
            del r[last]
        else:
            r[last] = value
    return edit


# hand edits a reader took a figure from and crashed on (KeyError/TypeError traceback) or drew
HAND_EDITS = [
    ("headline.0.recall10", KeyError), ("headline.0.p50_ms", KeyError), ("points.0.qps", "77417"),
    ("headline.0.qps", "77417"), ("points.0.qps", math.nan), ("headline.0.qps", math.inf),
    ("headline.0.recall10", math.nan), ("points.0.recall10", math.nan), ("points.0.recall10", 9.5),
    ("build.train_s", KeyError), ("build", {}), ("build.bytes", "9MB"), ("dataset.n", "20000"),
    ("dataset.n", KeyError), ("machine", None), ("headline.0.threads", "1"), ("points.0.threads", None),
    ("points.0.qps", True), ("index.name", None),
]


@pytest.mark.parametrize("path, value", HAND_EDITS, ids=[f"{p}={v!r}" for p, v in HAND_EDITS])
def test_a_hand_edited_result_is_refused_by_every_reader(path, value, tmp_path, capsys):
    bad = folder(tmp_path, {"ivf": _set(path, value)})
    with pytest.raises(ValueError, match="not a well-formed vdbbench result"):
        load_result(bad / "ivf.json")
    for argv in (["plot", str(bad), "-o", str(tmp_path / "p.png")],
                 ["report", str(bad / "ivf.json"), "-o", str(tmp_path / "r.html")],
                 ["compare", str(bad / "ivf.json"), str(BASELINE / "ivf.json")]):
        assert main(argv) == 2, argv
        assert "ivf.json: not a well-formed vdbbench result" in capsys.readouterr().err
    assert not (tmp_path / "p.png").exists() and not (tmp_path / "r.html").exists()


def test_results_as_written_still_load():
    for f in BASELINE.glob("*.json"):
        load_result(f)
    missed = result()
    for h in missed["headline"]:  # a headline that missed the target: nulls
        h.update({k: None for k in ("params", "qps", "recall10", "p50_ms", "p99_ms")})
    untimed = copy.deepcopy(result())
    untimed["points"][0]["qps"] = None  # a point only swept for recall
    del untimed["points"][1]["qps"]  # (read as the same by the page: no QPS to draw; no KeyError)
    for r in (missed, untimed):
        from vdbbench.bench.results import _damage
        assert _damage(r) is None


# ---------------------------------------------------------------------------------------------
# The page (vdbbench report) on folders
# ---------------------------------------------------------------------------------------------


@pytest.mark.parametrize("damage, message", [
    (lambda f: f.write_text(f.read_text()[:5000]), "not a readable JSON result file"),  # interrupted copy
    (lambda f: f.write_text(""), "not a readable JSON result file"),
    (lambda f: f.write_text(json.dumps({**json.loads(f.read_text()), "schema": "vdbbench.result/0"})),
     "a result of schema 'vdbbench.result/0', which this vdbbench does not read"),
    (lambda f: f.write_text(json.dumps({**json.loads(f.read_text()), "build": {}})), "not a well-formed"),
])
def test_a_damaged_result_in_a_folder_is_not_left_out_of_the_page_unsaid(damage, message, tmp_path, capsys):
    # the page used to pass over any file of a folder it could not read: ivf.json truncated or of
    # an older schema gave a page of the peers alone ("ours: none among these results"), exit 0
    run = folder(tmp_path)
    damage(run / "ivf.json")
    (run / "agent-report.json").write_text('{"schema": "vdbbench.agent-report/1"}')  # foreign: still skipped
    assert main(["report", str(run), "-o", str(tmp_path / "r.html")]) == 2
    assert f"ivf.json: {message}" in capsys.readouterr().err
    assert not (tmp_path / "r.html").exists()


def _concurrent(r: dict, qps: tuple[float, ...], reaches: bool = True) -> None:
    """r as `vdbbench run --mode concurrent` writes it: no timed points or headline, a
    `concurrent` block with one level per client count (docs/result-schema.md)."""
    r["run"]["modes"] = ["concurrent"]
    r["points"], r["headline"] = [], []
    r["concurrent"] = {
        "params": {"nprobe": 24}, "recall10": 0.9838, "reaches_target": reaches, "duration_s": 0.3,
        "workers": "threads", "threads_per_call": 1,
        "levels": [{"clients": c, "qps": q, "p50_ms": 0.03 * c, "p99_ms": 0.05 * c, "p999_ms": 0.09 * c,
                    "calls": int(q * 0.3), "wall_s": 0.3} for c, q in zip((1, 2, 4), qps)],
    }


def test_the_page_draws_the_concurrent_levels_a_run_writes(tmp_path):
    from test_pages import figures

    from vdbbench.pages.bench import benchmark_page, load_results

    run = folder(tmp_path, {"ivf": lambda r: _concurrent(r, (33335.0, 29412.0, 30001.5)),
                            "faiss-ivf-flat": lambda r: _concurrent(r, (16034.0, 15662.0, 15000.0), reaches=False)})
    page = benchmark_page(load_results([run]))
    # it looked for points of mode "concurrent" only: a concurrent run's page had no figure, no
    # table and said "No timed recall/QPS points", and "target met: no" for every index
    figs = figures(page)
    traces, _ = figs["conc-qps-0"]
    by_name = {t["name"].split()[0]: t for t in traces}
    assert by_name["ivf"]["x"] == [1, 2, 4] and by_name["ivf"]["y"] == [33335.0, 29412.0, 30001.5]
    assert by_name["faiss-ivf-flat"]["y"] == [16034.0, 15662.0, 15000.0]
    lat, _ = figs["conc-lat-0"]
    assert next(t for t in lat if t["name"] == "ivf nprobe=24 p99.9")["y"] == pytest.approx([0.09, 0.18, 0.36])
    assert "Concurrent clients" in page and "33,335" in page
    import re
    indexes = page[page.index("<h3>Indexes"):]
    assert re.findall(r">(yes|no)<", indexes)[:2] == ["yes", "no"]  # ivf reached the target, the peer did not


# ---------------------------------------------------------------------------------------------
# The Pareto plot (vdbbench plot)
# ---------------------------------------------------------------------------------------------


def _other_data(r: dict) -> None:
    """r as if measured on other data: a second run into the same --out, or files put together."""
    r["dataset"].update(name="synth-sift-50k", n=50_000, sha256="0" * 64)


def test_plot_refuses_results_of_two_datasets_on_one_set_of_axes(tmp_path, capsys):
    # it drew both on one plot titled with the first file's dataset, exit 0
    run = folder(tmp_path, {"faiss-ivf-flat": _other_data})
    assert main(["plot", str(run), "-o", str(tmp_path / "p.png")]) == 2
    err = capsys.readouterr().err
    assert "was measured on synth-sift-" in err and "synth-sift-50k" in err and "synth-sift-20k" in err
    assert "Traceback" not in err and not (tmp_path / "p.png").exists()
    assert main(["plot", str(BASELINE), "-o", str(tmp_path / "p.png")]) == 0  # one dataset: drawn


def test_plot_passes_over_points_swept_for_recall_only(tmp_path):
    # the page draws only timed points (qps null: swept for recall only); the plot crashed on them
    from vdbbench.bench.plot import series

    def untime(r):
        r["points"][0]["qps"] = None

    run = folder(tmp_path, {"ivf": untime})
    assert main(["plot", str(run), "-o", str(tmp_path / "p.png")]) == 0
    r = load_result(run / "ivf.json")
    assert sum(map(len, series(r).values())) == len(r["points"]) - 1


def _held_to_a_lower_bound(r: dict) -> None:
    """r as a --recall-confidence 0.95 run writes it: each point also carries recall10_low."""
    r["run"]["recall_confidence"] = 0.95
    for p in r["points"]:
        p["recall10_low"] = round(p["recall10"] - 0.02, 4)


def test_plot_draws_points_at_the_recall_the_run_held_them_to(tmp_path, monkeypatch):
    # under --recall-confidence the headline is chosen by recall10_low; the plot drew the mean
    # recall10 beside the target line, so a point right of the line could miss the target
    from vdbbench.bench import plot

    figs = []
    monkeypatch.setattr(plot.plt, "close", figs.append)  # keep the figure to look at
    run = folder(tmp_path, {"ivf": _held_to_a_lower_bound, "faiss-ivf-flat": _held_to_a_lower_bound})
    assert main(["plot", str(run), "-o", str(tmp_path / "p.png")]) == 0
    ax = figs[0].axes[0]
    assert ax.get_xlabel() == "recall@10, 95% lower bound (k-nn, ann-benchmarks)"
    drawn = {round(x, 4) for line in ax.get_lines() for x in line.get_xdata()}
    ivf = load_result(run / "ivf.json")
    fronts = plot.pareto_front([(p["recall10_low"], p["qps"]) for p in ivf["points"]])
    assert {round(x, 4) for x, _ in fronts} <= drawn
    assert not {round(p["recall10"], 4) for p in ivf["points"]} & drawn - {round(x, 4) for x, _ in fronts}
    # mean and lower-bound results do not share one axis
    half = folder(tmp_path, {"ivf": _held_to_a_lower_bound}, name="half")
    assert main(["plot", str(half), "-o", str(tmp_path / "q.png")]) == 2
    # a run without a bound keeps the mean and its plain label
    figs.clear()
    assert main(["plot", str(BASELINE), "-o", str(tmp_path / "r.png")]) == 0
    assert figs[0].axes[0].get_xlabel() == "recall@10 (k-nn, ann-benchmarks)"


# ---------------------------------------------------------------------------------------------
# The README table (benchmarks/readme_table.py)
# ---------------------------------------------------------------------------------------------


def readme_table(folder: Path) -> tuple[int, str, str]:
    import subprocess
    import sys

    proc = subprocess.run([sys.executable, str(REPO / "benchmarks" / "readme_table.py"), str(folder)],
                          capture_output=True, text=True, timeout=60)
    return proc.returncode, proc.stdout, proc.stderr


def _rows(out: str) -> list[list[str]]:
    return [[c.strip() for c in line.strip("|").split("|")] for line in out.splitlines()
            if line.startswith("| ") and not line.startswith("| data")]


def _missed(r: dict) -> None:
    for h in r["headline"]:
        h.update({k: None for k in ("params", "qps", "recall10", "recall10_low", "recall10_ids", "p50_ms", "p99_ms")})
        h.pop("qps_paired", None)


def test_readme_table_refuses_a_peer_measured_on_other_data(tmp_path):
    # the peer's file left by an earlier run into the same folder: its QPS made the ratio, exit 0
    run = folder(tmp_path, {"faiss-ivf-flat": _other_data})
    rc, out, err = readme_table(run)
    assert rc == 2 and "faiss-ivf-flat.json was measured on synth-sift-50k" in err and "Traceback" not in err
    assert "x |" not in out


def test_readme_table_refuses_a_peer_held_to_another_recall_rule(tmp_path):
    def lower_bound(r):
        r["run"]["recall_confidence"] = 0.95

    rc, out, err = readme_table(folder(tmp_path, {"faiss-ivf-flat": lower_bound}))
    assert rc == 2 and "faiss-ivf-flat.json chose its headline at target, confidence, k" in err


@pytest.mark.parametrize("damage", [lambda f: f.write_text(f.read_text()[:3000]),
                                    lambda f: f.write_text(json.dumps({**json.loads(f.read_text()), "build": {}}))])
def test_readme_table_on_a_damaged_result_is_a_clear_error(damage, tmp_path):
    run = folder(tmp_path)
    damage(run / "ivf.json")
    rc, _, err = readme_table(run)
    assert rc == 2 and "ivf.json: not a" in err and "Traceback" not in err


def test_readme_table_on_a_peer_or_ours_that_missed_the_target(tmp_path):
    # a peer with no point reaching the target in a mode (a null headline) ended the script in a
    # TypeError, and so did our own index missing it
    rc, out, err = readme_table(folder(tmp_path, {"faiss-ivf-flat": _missed}, "peer"))
    assert rc == 0, err
    (row,) = _rows(out)
    assert row[3:5] == ["-", "-"] and "missed the target, not compared: IVF-Flat (batch, 1 thread)" in out
    rc, out, err = readme_table(folder(tmp_path, {"ivf": _missed}, "ours"))
    assert rc == 0, err
    (row,) = _rows(out)
    assert row[2] == "missed the target" and row[4] == "-"


def test_readme_table_shows_the_qps_its_ratio_is_taken_over(tmp_path):
    ours, peer = result("ivf")["headline"][0], result("faiss-ivf-flat")["headline"][0]
    rc, out, _ = readme_table(folder(tmp_path, name="paired"))
    (row,) = _rows(out)
    assert row[3] == f"IVF-Flat {peer['qps_paired']:,.0f}" and row[2].startswith(f"{ours['qps_paired']:,.0f} (")
    # beside the ratio, the lowest and highest ratio of single interleaved rounds
    rounds = [a / b for a, b in zip(ours["qps_paired_samples"], peer["qps_paired_samples"])]
    assert len(rounds) > 1
    assert row[4] == f"{ours['qps_paired'] / peer['qps_paired']:.2f}x ({min(rounds):.2f}-{max(rounds):.2f})"

    def unpaired(r):
        r["headline"][0].pop("qps_paired")

    # the peer without a paired re-timing: the ratio is of the sweeps' QPS (paired_ratio), so the
    # peer's cell showed that while ours showed its paired QPS, a ratio the two cells did not give
    rc, out, _ = readme_table(folder(tmp_path, {"faiss-ivf-flat": unpaired}, "unpaired"))
    (row,) = _rows(out)
    assert row[3] == f"IVF-Flat {peer['qps']:,.0f}"
    assert row[4] == f"{ours['qps'] / peer['qps']:.2f}x (unpaired: ivf {ours['qps']:,.0f})"


def test_the_page_pareto_puts_points_at_the_recall_the_run_held_them_to(tmp_path):
    # the page's figures drew the mean recall10 beside the target line under --recall-confidence,
    # so a point right of the line could be one the headline rule refused (as the PNG plot did)
    from vdbbench.pages.bench import load_results, pareto_figure

    run = folder(tmp_path, {"ivf": _held_to_a_lower_bound, "faiss-ivf-flat": _held_to_a_lower_bound})
    runs = [r for _, r in load_results([run])]
    ivf = next(r for r in runs if r["index"]["name"] == "ivf")
    mode, threads = ivf["points"][0]["mode"], ivf["points"][0]["threads"]
    fig = pareto_figure(runs, mode, threads, 0.95)
    assert fig.layout.xaxis.title.text == "recall@10 (95% lower bound) (k-nn, ann-benchmarks)"
    faint = next(t for t in fig.data if t.name == "ivf (all points)")
    lows = [p["recall10_low"] for p in ivf["points"]
            if p["mode"] == mode and p["threads"] == threads and p.get("qps") is not None]
    assert sorted(faint.x) == sorted(lows)
    assert "recall@10 (95% lower bound) %{x" in faint.hovertemplate


def test_the_page_says_which_recall_rule_chose_the_headline_and_keeps_rules_apart(tmp_path):
    from vdbbench.pages.bench import benchmark_page, load_results

    def held(r):  # a run with --recall-confidence 0.95
        r["run"]["recall_confidence"] = 0.95
        for h in r["headline"]:
            h["recall10_low"] = h["recall10"] - 0.002

    page = benchmark_page(load_results([folder(tmp_path, {"ivf": held, "faiss-ivf-flat": held}, "held")]))
    # table.md said "(95% lower bound)", the page only "recall>=0.95" beside the mean recall10
    assert "QPS @ recall&gt;=0.95 (95% lower bound)" in page or "QPS @ recall>=0.95 (95% lower bound)" in page
    assert page.count('<section class="dataset"') == 1

    # ours chosen under the lower bound, the peer (left by another run) under the mean: the page
    # put them in one headline table with a ratio between QPS at different recalls
    page = benchmark_page(load_results([folder(tmp_path, {"ivf": held}, "mixed")]))
    assert page.count('<section class="dataset"') == 2
    import re
    assert set(re.findall(r">(\d+\.\d\d)x</td>", page)) == {"1.00"}  # no ratio across the two rules


# ---------------------------------------------------------------------------------------------
# vdbbench compare
# ---------------------------------------------------------------------------------------------


def test_compare_notes_a_different_recall_rule_k_or_query_count(tmp_path, capsys, monkeypatch):
    monkeypatch.setenv("COLUMNS", "200")  # one note a line
    # it noted a different dataset, CPU or target, but compared headlines chosen by the mean
    # recall with ones chosen by its lower bound (or on 1,000 vs 200 queries) without a word
    def other_rule(r):
        r["run"]["recall_confidence"] = 0.95
        r["dataset"]["nq"] = 200

    b = folder(tmp_path, {"ivf": other_rule}) / "ivf.json"
    assert main(["compare", str(BASELINE / "ivf.json"), str(b)]) == 0
    out = capsys.readouterr().out
    assert "different recall rules: the mean recall10 vs the 0.95 lower bound of recall10" in out
    assert "different queries: the first 1,000 vs 200" in out
    assert main(["compare", str(BASELINE / "ivf.json"), str(BASELINE / "ivf.json")]) == 0
    assert "note:" not in capsys.readouterr().out


# ---------------------------------------------------------------------------------------------
# benchmarks/peer_table.py (the run itself stubbed: it writes the baseline's files)
# ---------------------------------------------------------------------------------------------


def _peer_table(monkeypatch, out: Path, peers: str, files: tuple[str, ...], rc: int = 0) -> int:
    import shutil
    import sys

    sys.path.insert(0, str(REPO / "benchmarks"))
    try:
        import peer_table
    finally:
        sys.path.remove(str(REPO / "benchmarks"))

    def fake_run(argv):
        out.mkdir(parents=True, exist_ok=True)
        for f in files:
            shutil.copy(BASELINE / f, out / f)
        return rc

    monkeypatch.setattr(peer_table, "vdbbench_main", fake_run)
    return peer_table.main(["--dataset", "synth-sift-20k", "--peers", peers, "--out", str(out)])


def test_peer_table_when_the_first_peer_wrote_no_result(tmp_path, monkeypatch, capsys):
    # hnswlib first and not installed (reported and skipped, no hnswlib.json): the header's faiss
    # version was read from that file, a FileNotFoundError traceback after the whole run
    faiss = result("faiss-ivf-flat")["machine"]["faiss"]
    out = tmp_path / "t"
    assert _peer_table(monkeypatch, out, "hnswlib,faiss-ivf-flat", ("ivf.json", "faiss-ivf-flat.json", "table.md")) == 0
    assert f"faiss {faiss};" in (out / "table.md").read_text()


def test_peer_table_when_ivf_failed(tmp_path, monkeypatch, capsys):
    out = tmp_path / "t"
    assert _peer_table(monkeypatch, out, "faiss-ivf-flat", ("faiss-ivf-flat.json", "table.md"), rc=1) == 1
    assert "ivf.json was not written" in capsys.readouterr().err


def test_a_run_with_another_k_is_labelled_recall_at_that_k(tmp_path, capsys):
    from vdbbench.pages.bench import benchmark_page, load_results

    def k20(r):  # vdbbench run --k 20: recall10 holds recall@20 (common.recall at k)
        r["run"]["k"] = 20

    run = folder(tmp_path, {"ivf": k20, "faiss-ivf-flat": k20})
    page = benchmark_page(load_results([run]))
    # the page said recall@10 on its axes, hover, headline and target ("recall@10 >= 0.95, k=20")
    assert "recall@10" not in page and "recall@20 &gt;= 0.95" in page
    assert "recall@20 (k-nn, ann-benchmarks)" in page

    mixed = folder(tmp_path, {"ivf": k20}, "mixed")
    assert main(["plot", str(mixed), "-o", str(tmp_path / "p.png")]) == 2  # recall@20 and @10 on one axis
    assert "k=20" in capsys.readouterr().err


# ---------------------------------------------------------------------------------------------
# benchmarks/heldout_check.py (refusals only: nothing is rebuilt)
# ---------------------------------------------------------------------------------------------


def test_heldout_check_refuses_damaged_and_mixed_results_before_building(tmp_path):
    import subprocess
    import sys

    def check(*files):
        return subprocess.run([sys.executable, str(REPO / "benchmarks" / "heldout_check.py"), *map(str, files)],
                              capture_output=True, text=True, timeout=60)

    run = folder(tmp_path, {"faiss-ivf-flat": _other_data})
    (run / "ivf.json").write_text((run / "ivf.json").read_text()[:4000])
    proc = check(run / "ivf.json")  # was a JSONDecodeError traceback
    assert proc.returncode == 2 and "ivf.json: not a readable JSON result file" in proc.stderr
    assert "Traceback" not in proc.stderr
    # --reselect prints the first file's QPS over the others': of a peer measured on other data
    proc = check(BASELINE / "ivf.json", run / "faiss-ivf-flat.json", "--reselect")
    assert proc.returncode == 2 and "faiss-ivf-flat.json was measured on synth-sift-50k" in proc.stderr


def test_the_page_tells_apart_one_index_measured_twice(tmp_path):
    from test_pages import figures

    from vdbbench.pages.bench import benchmark_page, load_results

    def faster(r):
        for x in r["points"] + r["headline"]:
            x["qps"] *= 2
            if x.get("qps_paired"):
                x["qps_paired"] *= 2

    old, new = folder(tmp_path, name="old"), folder(tmp_path, {"ivf": faster}, name="new")
    # `vdbbench report old/ new/`: two "ivf" rows no one could tell apart, one colour, one legend group
    page = benchmark_page(load_results([old, new]))
    traces, _ = figures(page)["pareto-0-batch-1"]
    fronts = {t["name"]: t for t in traces if t["mode"] == "lines+markers"}
    assert {"ivf (old/ivf.json)", "ivf (new/ivf.json)"} <= set(fronts)
    assert fronts["ivf (old/ivf.json)"]["line"]["color"] != fronts["ivf (new/ivf.json)"]["line"]["color"]
    assert "ivf (old/ivf.json) / this" in page and "0.50x" in page  # ratios to the first named
    # one file named twice (a folder and a file in it) is one result, not two rows
    page = benchmark_page(load_results([old, old / "ivf.json"]))
    assert "ivf (old/" not in page
    head = page[page.index("<h3>Headline"):page.index("</table>", page.index("<h3>Headline"))]
    assert head.count("<td") == benchmark_page(load_results([old])).split("<h3>Headline")[1].split("</table>")[0].count("<td")


def test_plot_tells_apart_one_index_from_two_runs(tmp_path, monkeypatch):
    from vdbbench.bench import plot

    labels = []
    real = plot.plot_results

    def spy(runs, out, **kw):
        labels.extend(r["index"]["name"] for r in runs)
        return real(runs, out, **kw)

    monkeypatch.setattr(plot, "plot_results", spy)
    old, new = folder(tmp_path, name="old"), folder(tmp_path, name="new")
    # two lines labelled "ivf batch @ 1t": which was the old one?
    assert main(["plot", str(old), str(new / "ivf.json"), str(old / "ivf.json"), "-o", str(tmp_path / "p.png")]) == 0
    assert sorted(labels) == ["faiss-ivf-flat", "ivf (new/ivf.json)", "ivf (old/ivf.json)"]


def test_the_page_names_each_index_s_own_library_version(tmp_path):
    from vdbbench.pages.bench import benchmark_page, load_results

    def as_hnswlib(r):  # what an hnswlib (or scann, usearch, plugin) result's machine holds
        r["index"]["name"] = "hnswlib"
        r["machine"] = {k: v for k, v in r["machine"].items() if k not in ("faiss", "faiss_compile")}
        r["machine"].update(simd=None, hnswlib="0.8.0")

    run = folder(tmp_path, {"faiss-ivf-flat": as_hnswlib})
    page = benchmark_page(load_results([run]))
    indexes = page[page.index("<h3>Indexes"):]
    row = next(r.split("</tr>")[0] for r in indexes.split("<tr")[1:] if ">hnswlib<" in r)
    # it said "vdbbench 0.1.0": the version of the harness, not of the library measured
    assert "hnswlib 0.8.0" in row and "vdbbench" not in row


# ---------------------------------------------------------------------------------------------
# Two runs into one folder: paired QPS of different sessions are no pair
# ---------------------------------------------------------------------------------------------


def _second_run(tmp_path: Path) -> Path:
    """ivf and faiss-ivf-flat from one run; then ivf alone again (say with faiss-hnsw, whose file
    is not here) into the same folder: ivf's qps_paired is of the second session, the peer's of
    the first."""
    def rerun(r):
        r["run"]["paired_with"] = ["faiss-hnsw", "ivf"]
        for h in r["headline"]:
            h["qps"] *= 1.5
            h["qps_paired"] *= 3

    return folder(tmp_path, {"ivf": rerun}, "two-runs")


def test_a_ratio_between_two_runs_is_not_called_paired(tmp_path):
    from vdbbench.bench.report import headline_markdown
    from vdbbench.pages.bench import benchmark_page, load_results

    run = _second_run(tmp_path)
    ours, peer = load_result(run / "ivf.json"), load_result(run / "faiss-ivf-flat.json")
    want = f"{ours['headline'][0]['qps'] / peer['headline'][0]['qps']:.2f}x (unpaired)"
    # it took ivf's qps_paired of one session over the peer's of another (3.0 / 1.0 x the true
    # paired ratio here) under the note "both sides saw the same machine load"
    page = benchmark_page(load_results([run]))
    assert want in page
    assert want in headline_markdown([ours, peer], "ivf", 0.95)
    # re-timed together (the baseline as written): the paired ratio, unmarked
    base = [load_result(BASELINE / "ivf.json"), load_result(BASELINE / "faiss-ivf-flat.json")]
    paired = base[0]["headline"][0]["qps_paired"] / base[1]["headline"][0]["qps_paired"]
    rounds = [a / b for a, b in zip(base[0]["headline"][0]["qps_paired_samples"],
                                    base[1]["headline"][0]["qps_paired_samples"])]
    table = headline_markdown(base, "ivf", 0.95)
    assert f"| {paired:.2f}x ({min(rounds):.2f}-{max(rounds):.2f}) |" in table and "unpaired" not in table


def test_readme_table_refuses_a_peer_re_timed_in_another_run(tmp_path):
    rc, out, err = readme_table(_second_run(tmp_path))
    assert rc == 2 and "faiss-ivf-flat.json was re-timed in another run than ivf.json" in err
    assert out == ""  # no half table printed before the error


def test_plot_of_results_without_timed_points_says_so(tmp_path, capsys):
    # a --mode concurrent run (no points): an empty axes written, exit 0, a matplotlib warning
    run = folder(tmp_path, {"ivf": lambda r: _concurrent(r, (3.0e4, 2.9e4, 3.1e4)),
                            "faiss-ivf-flat": lambda r: _concurrent(r, (1.6e4, 1.5e4, 1.5e4))})
    assert main(["plot", str(run), "-o", str(tmp_path / "p.png")]) == 2
    assert "nothing to plot: these results hold no timed recall/QPS points" in capsys.readouterr().err
    assert not (tmp_path / "p.png").exists()
