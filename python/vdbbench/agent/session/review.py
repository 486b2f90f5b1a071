"""Strategic review: after a plateau of submissions without improvement, ask the model to step back and change approach."""

from __future__ import annotations

import re
from collections import Counter
from typing import Any, Mapping, Sequence

from vdbbench.agent.core.facts import Facts
from vdbbench.agent.evaluation.eval_report import fmt_qps
from vdbbench.agent.session.compaction import one_line

# Structural moves that produced the steps in published long runs; offered as examples only.
STRUCTURAL_IDEAS = (
    "probe fewer lists with better routing (two-level / hierarchical centroids, or nprobe chosen per query)",
    "shrink what is scanned: f16 or u8 codes, a two-stage search (u8 prescore, f16/f32 rerank of the best few)",
    "early pruning: stop scanning a list or skip a list once its bound cannot beat the current k-th distance",
    "memory layout: lists stored contiguously, vectors blocked for SIMD, queries batched per list",
    "kernels: AVX2/AVX-512 distance loops with run-time dispatch, fused distance + top-k",
    "top-k: a fixed-size heap or a partial selection instead of sorting all candidates",
    "threads: spread queries (or lists) over cores without per-call allocation",
)


def submissions_since_improvement(events: Sequence[Mapping[str, Any]]) -> int:
    """Decisions after the last accepted one (all decisions if none was accepted)."""
    n = 0
    for ev in reversed(events):
        if ev.get("type") != "decision":
            continue
        if ev.get("outcome") == "accepted":
            break
        n += 1
    return n


def review_due(facts: Facts, every_n_without_improvement: int | None) -> bool:
    """True when the last `every_n_without_improvement` submissions brought no gain and no review
    has been asked since then (so a long plateau gets one review per N submissions)."""
    n = every_n_without_improvement
    return bool(n and n > 0 and facts.since_review >= n)


def should_review(events: Sequence[Mapping[str, Any]], every_n_without_improvement: int | None) -> bool:
    """review_due for a list of journal events."""
    return review_due(Facts.fold(events), every_n_without_improvement)


_STAGE = re.compile(r"^\s*(?:[\w.]*\.)?(\w+?)_s\s*[:=]\s*([-+0-9.eE]+)\s*$", re.MULTILINE)
_COUNT = re.compile(r"^\s*(?:[\w.]*\.)?threads\s*[:=]\s*(\d+)\s*$", re.MULTILINE)
# `<name>_s` keys that time the whole search, not a stage of it.
WHOLE_SEARCH = frozenset({"wall", "total", "elapsed", "search", "time", "cpu", "all"})


def stage_shares(stages: dict[str, float], wall: float | None, threads: int = 1) -> list[tuple[str, float, float]]:
    """(stage, seconds, share) by decreasing time. Stage seconds are CPU seconds summed over
    threads, so the whole is wall x threads; what the stages do not cover is "overhead"."""
    stages = {k: float(v) for k, v in stages.items() if k not in WHOLE_SEARCH and float(v) >= 0}
    covered = sum(stages.values())
    whole = max(covered, wall * max(1, threads)) if wall else covered
    if not stages or whole <= 0:
        return []
    parts = sorted(stages.items(), key=lambda kv: -kv[1])
    if whole > covered:
        parts.append(("overhead (outside the stages)", whole - covered))
    return [(name, sec, sec / whole) for name, sec in parts]


def stats_stages(stats: dict) -> tuple[list[tuple[str, float, float]], dict]:
    """A last_search_stats() dict split into stage shares and the other entries (counters and
    whole-search times, shown as they are)."""
    stages, other = {}, {}
    for key, value in stats.items():
        if key.endswith("_s") and isinstance(value, (int, float)) and not isinstance(value, bool) \
                and key[:-2] not in WHOLE_SEARCH:
            stages[key[:-2]] = value
        else:
            other[key] = value
    wall = stats.get("wall_s") if isinstance(stats.get("wall_s"), (int, float)) else None
    threads = stats.get("threads") if isinstance(stats.get("threads"), int) else 1
    return stage_shares(stages, wall, threads), other


def stage_breakdown(profile_text: str | None) -> str | None:
    """Per-stage shares of search time from a profile's `<stage>_s: seconds` lines."""
    if not profile_text:
        return None
    stages: dict[str, float] = {}
    for name, value in _STAGE.findall(profile_text):
        try:
            stages[name] = float(value)
        except ValueError:
            continue
    wall = stages.get("wall")
    m = _COUNT.search(profile_text)
    parts = stage_shares(stages, wall, max(1, int(m.group(1))) if m else 1)
    if not parts:
        return None
    return "; ".join(f"{name} {100 * share:.0f}% ({sec:.4g} s)" for name, sec, share in parts)


def review_prompt(events: Sequence[Mapping[str, Any]], profile_text: str | None) -> str:
    """The text sent to the model: where the time goes, what was tried, and a request for a
    structurally different next approach."""
    decisions = [e for e in events if e.get("type") == "decision"]
    accepted = [d for d in decisions if d.get("outcome") == "accepted"]
    plateau = submissions_since_improvement(events)
    recent = decisions[len(decisions) - plateau:] if plateau else []

    lines = [
        f"## Strategic review: {plateau} submissions without improvement",
        "",
        "Stop tuning for a moment and step back.",
        "",
    ]
    if accepted:
        best = accepted[-1]
        lines.append(
            f"Best so far: {fmt_qps(best.get('qps'))} QPS at recall@10 {best.get('recall10')} "
            f"(iteration {best.get('iteration')}: {best.get('message') or 'no message'})."
        )
    else:
        lines.append("No change has been accepted yet: the best is still the starting code.")
    lines.append("")
    lines.append("### Where the time goes (the last profile)")
    shares = stage_breakdown(profile_text)
    if shares:
        lines.append(f"Share of search time by stage: {shares}.")
    lines.append((profile_text or "").strip() or "(no profile available: call the `profile` tool to get one)")
    lines.append("")
    lines.append("### What has been tried since the last improvement")
    counts = Counter(d.get("outcome") for d in recent)
    if counts:
        lines.append("Outcomes: " + ", ".join(f"{n} {k}" for k, n in counts.most_common()) + ".")
    for d in recent[-15:]:
        reason = one_line(d.get("reason"), 160)
        lines.append(f"- it {d.get('iteration')} {d.get('outcome')}: {d.get('message') or '(no message)'} — {reason}")
    if len(recent) > 15:
        lines.append(f"- ... and {len(recent) - 15} earlier ones")
    if accepted:
        lines.append("")
        lines.append("### Changes that did pay, in order")
        for d in accepted[-10:]:
            lines.append(f"- it {d.get('iteration')}: {fmt_qps(d.get('best_qps_before'))} -> {fmt_qps(d.get('qps'))} QPS: {d.get('message')}")
    lines += [
        "",
        "### What to do now",
        "Small variations of the same idea have stopped paying. Look at the stage that takes the most "
        "time in the profile and choose a structurally different approach to it, not another tweak "
        "of a parameter already tuned. Examples of structural moves (not a list to follow):",
    ]
    lines += [f"- {idea}" for idea in STRUCTURAL_IDEAS]
    lines += [
        "",
        "Before editing, reply with: (1) the stage you will attack and its share of the time, "
        "(2) the approach and why it should beat the current one, (3) how you will keep recall@10 "
        "at or above the floor. Record the plan with `note` so it survives compaction.",
    ]
    return "\n".join(lines)
