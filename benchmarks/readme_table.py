"""The README's performance table, from the result folders `peer_table.py` wrote.

Usage: python benchmarks/readme_table.py benchmarks/results/peers-synth-sift-1m-g5-2026-12-01-abc1234 ...

Per folder (one dataset) and mode: our QPS at the headline, the best IVF-family peer (every faiss
IVF configuration and ScaNN: the one with the smallest ours/peer ratio, i.e. the hardest), the
best graph peer (faiss HNSW32, hnswlib, usearch, likewise), and the two ratios; then our build
time against faiss IVF-SQ8's. Ratios are the run's own paired, interleaved re-timing
(`vdbbench.bench.report.paired_ratio`), never numbers from different runs, with the lowest and
highest ratio of single rounds beside them; the notes list the knobs every index swept. A peer missing from
the folder (not installed, or not asked for) is simply not a candidate, and the peers compared
are listed.
"""

from __future__ import annotations

import sys
from pathlib import Path

from vdbbench.bench.report import knob_text, paired_ratio, ratio_spread
from vdbbench.bench.results import load_result, measured_on

NAMES = {
    "faiss-ivf-flat": "IVF-Flat", "faiss-ivf-sq8": "IVF-SQ8", "faiss-ivf-sqfp16": "IVF-SQfp16",
    "faiss-ivf-sq8-refine": "IVF-SQ8+Refine", "faiss-ivfpq-fs": "IVF-PQ fs", "scann": "ScaNN",
    "faiss-hnsw": "faiss HNSW32", "hnswlib": "hnswlib", "usearch": "usearch",
}
IVF_FAMILY = ("faiss-ivf-flat", "faiss-ivf-sq8", "faiss-ivf-sqfp16", "faiss-ivf-sq8-refine", "faiss-ivfpq-fs", "scann")
GRAPHS = ("faiss-hnsw", "hnswlib", "usearch")


class BadInput(ValueError):
    """A folder the table cannot be made from (unreadable result, results of two datasets)."""


def hardest(h: dict, heads: dict[str, dict], family: tuple[str, ...]) -> tuple[float, str] | None:
    """(ours / peer, peer) for the family's peer with the smallest ratio in this mode, among those
    that reached the target in it (a peer that missed has no QPS at the target to compare)."""
    ratios = [(paired_ratio(h, heads[n]), n) for n in family if n in heads and heads[n]["qps"] is not None]
    return min(ratios) if ratios else None


def _load(path: Path) -> dict:
    try:
        return load_result(path)
    except ValueError as exc:
        raise BadInput(str(exc)) from None


def rows(folder: Path) -> tuple[list[str], list[str], list[str]]:
    ours = _load(folder / "ivf.json")
    peers = {p.stem: _load(p) for p in sorted(folder.glob("*.json")) if p.stem in NAMES}
    rule = lambda r: (r["run"].get("target_recall"), r["run"].get("recall_confidence") or 0.0,  # noqa: E731
                      r["run"].get("k"))
    for name, p in peers.items():  # a file left by an earlier run into the same folder
        if measured_on(p) != measured_on(ours):
            raise BadInput(f"{folder / (name + '.json')} was measured on {p['dataset']['name']} "
                           f"(nq={p['dataset']['nq']:,}), ivf on {ours['dataset']['name']} "
                           f"(nq={ours['dataset']['nq']:,}): not the same run, no ratio to take")
        partners = lambda r: r["run"].get("paired_with") or []  # noqa: E731
        if (partners(ours) and name not in partners(ours)) or (partners(p) and "ivf" not in partners(p)):
            raise BadInput(f"{folder / (name + '.json')} was re-timed in another run than ivf.json (paired with "
                           f"{', '.join(partners(p)) or 'nothing'}; ivf with {', '.join(partners(ours)) or 'nothing'}): "
                           "not the same run, no ratio to take")
        if rule(p) != rule(ours):
            raise BadInput(f"{folder / (name + '.json')} chose its headline at target, confidence, k = "
                           f"{rule(p)}, ivf at {rule(ours)}: not the same run, no ratio to take")
    ds = ours["dataset"]["name"]
    out = []
    missed = []
    for h in ours["headline"]:
        key = (h["mode"], h["threads"])
        heads = {n: x for n, p in peers.items()
                 if (x := next((x for x in p["headline"] if (x["mode"], x["threads"]) == key), None))}
        mode = f"{'batch' if h['mode'] == 'batch' else 'single query'}, {h['threads']} thread{'s' if h['threads'] > 1 else ''}"
        missed += [f"{NAMES[n]} ({mode})" for n, x in heads.items() if x["qps"] is None]
        if h["qps"] is None:
            out.append("| " + " | ".join([ds, mode, "missed the target", "-", "-", "-", "-"]) + " |")
            continue
        cells = [ds, mode, f"{(h.get('qps_paired') or h['qps']):,.0f} ({h['recall10']:.3f})"]
        for found in (hardest(h, heads, IVF_FAMILY), hardest(h, heads, GRAPHS)):
            if found:
                ratio, name = found
                peer = heads[name]
                # the QPS shown is the one the ratio is taken over: the paired re-timing when both
                # sides have it (`paired_ratio`), else the sweep's own, marked
                paired = bool(h.get("qps_paired") and peer.get("qps_paired"))
                spread = ratio_spread(h, peer) if paired else None
                cells += [f"{NAMES[name]} {(peer['qps_paired'] if paired else peer['qps']):,.0f}",
                          f"{ratio:.2f}x" + (f" ({spread[0]:.2f}-{spread[1]:.2f})" if spread else "")
                          + ("" if paired else f" (unpaired: ivf {h['qps']:,.0f})")]
            else:
                cells += ["-", "-"]
        out.append("| " + " | ".join(cells) + " |")
    b = ours["build"]
    sq8 = peers.get("faiss-ivf-sq8", {}).get("build")
    notes = [f"- {ds}: missed the target, not compared: {', '.join(missed)}"] if missed else []
    if sq8:
        cached = " (its cached build, from an earlier run)" if sq8.get("cached") else ""
        notes.append(f"- {ds}: build (train + add) {b['train_s'] + b['add_s']:.1f} s, faiss IVF-SQ8 "
                f"{sq8['train_s'] + sq8['add_s']:.1f} s{cached}")
    for name, r in [("ivf", ours), *peers.items()]:
        knobs = r["run"].get("knobs")
        if knobs:
            notes.append(f"- {ds}: {NAMES.get(name, name)} swept " + "; ".join(knob_text(k, v) for k, v in knobs.items()))
    return out, notes, sorted(peers)


def main(argv: list[str]) -> int:
    if not argv or argv[0] in ("-h", "--help"):
        print(__doc__)
        return 0 if argv else 2
    lines = ["| data | mode | ivf QPS (recall@10) | best IVF-family peer | ivf / it (round range) | best graph peer "
             "| ivf / it (round range) |",
             "|---|---|---:|---|---:|---|---:|"]
    notes = []
    for folder in argv:
        try:
            table, folder_notes, compared = rows(Path(folder))
        except BadInput as exc:  # before anything is printed: no half table to paste
            print(f"readme_table: {exc}", file=sys.stderr)
            return 2
        lines += table
        notes += folder_notes
        notes.append(f"- {Path(folder).name}: peers compared: {', '.join(NAMES[n] for n in compared)}")
    print("\n".join(lines) + "\n\n" + "\n".join(notes))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
