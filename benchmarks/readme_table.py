"""The README's performance table, from the result folders `peer_table.py` wrote.

Usage: python benchmarks/readme_table.py benchmarks/results/peers-synth-sift-1m-g5-2026-12-01-abc1234 ...

Per folder (one dataset) and mode: our QPS at the headline, the best IVF-family peer (every faiss
IVF configuration and ScaNN: the one with the smallest ours/peer ratio, i.e. the hardest), the
best graph peer (faiss HNSW32, hnswlib, usearch, likewise), and the two ratios; then our build
time against faiss IVF-SQ8's. Ratios are the run's own paired, interleaved re-timing
(`vdbbench.bench.report.paired_ratio`), never numbers from different runs. A peer missing from
the folder (not installed, or not asked for) is simply not a candidate, and the peers compared
are listed.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

from vdbbench.bench.report import paired_ratio

NAMES = {
    "faiss-ivf-flat": "IVF-Flat", "faiss-ivf-sq8": "IVF-SQ8", "faiss-ivf-sqfp16": "IVF-SQfp16",
    "faiss-ivf-sq8-refine": "IVF-SQ8+Refine", "faiss-ivfpq-fs": "IVF-PQ fs", "scann": "ScaNN",
    "faiss-hnsw": "faiss HNSW32", "hnswlib": "hnswlib", "usearch": "usearch",
}
IVF_FAMILY = ("faiss-ivf-flat", "faiss-ivf-sq8", "faiss-ivf-sqfp16", "faiss-ivf-sq8-refine", "faiss-ivfpq-fs", "scann")
GRAPHS = ("faiss-hnsw", "hnswlib", "usearch")


def hardest(h: dict, heads: dict[str, dict], family: tuple[str, ...]) -> tuple[float, str] | None:
    """(ours / peer, peer) for the family's peer with the smallest ratio in this mode, if any ran."""
    ratios = [(paired_ratio(h, heads[n]), n) for n in family if n in heads]
    return min(ratios) if ratios else None


def rows(folder: Path) -> tuple[list[str], str | None, list[str]]:
    ours = json.loads((folder / "ivf.json").read_text())
    peers = {p.stem: json.loads(p.read_text()) for p in sorted(folder.glob("*.json"))
             if p.stem in NAMES}
    ds = ours["dataset"]["name"]
    out = []
    qps = lambda x: f"{(x.get('qps_paired') or x['qps']):,.0f}"  # noqa: E731
    for h in ours["headline"]:
        key = (h["mode"], h["threads"])
        heads = {n: x for n, p in peers.items()
                 if (x := next((x for x in p["headline"] if (x["mode"], x["threads"]) == key), None))}
        mode = f"{'batch' if h['mode'] == 'batch' else 'single query'}, {h['threads']} thread{'s' if h['threads'] > 1 else ''}"
        cells = [ds, mode, f"{qps(h)} ({h['recall10']:.3f})"]
        for found in (hardest(h, heads, IVF_FAMILY), hardest(h, heads, GRAPHS)):
            if found:
                ratio, name = found
                cells += [f"{NAMES[name]} {qps(heads[name])}", f"{ratio:.2f}x"]
            else:
                cells += ["-", "-"]
        out.append("| " + " | ".join(cells) + " |")
    b = ours["build"]
    sq8 = peers.get("faiss-ivf-sq8", {}).get("build")
    note = None
    if sq8:
        cached = " (its cached build, from an earlier run)" if sq8.get("cached") else ""
        note = (f"- {ds}: build (train + add) {b['train_s'] + b['add_s']:.1f} s, faiss IVF-SQ8 "
                f"{sq8['train_s'] + sq8['add_s']:.1f} s{cached}")
    return out, note, sorted(peers)


def main(argv: list[str]) -> int:
    if not argv or argv[0] in ("-h", "--help"):
        print(__doc__)
        return 0 if argv else 2
    print("| data | mode | ivf QPS (recall@10) | best IVF-family peer | ivf / it | best graph peer | ivf / it |")
    print("|---|---|---:|---|---:|---|---:|")
    notes = []
    for folder in argv:
        table, note, compared = rows(Path(folder))
        print("\n".join(table))
        notes += [note] if note else []
        notes.append(f"- {Path(folder).name}: peers compared: {', '.join(NAMES[n] for n in compared)}")
    print("\n" + "\n".join(notes))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
