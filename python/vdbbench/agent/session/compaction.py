"""Context compaction: a state summary rebuilt from the journal replaces old turns when the conversation nears the model's window."""

from __future__ import annotations

import json
import re
from collections import Counter
from typing import Any, Iterable, Mapping, Sequence

from vdbbench.agent.core.facts import Facts
from vdbbench.agent.evaluation.eval_report import fmt_qps

# Rough size of a message's envelope (role, separators) in tokens, on top of its text.
_MESSAGE_OVERHEAD = 4
# Harness plumbing, and what the summary states in its own words (the reference line) or the
# system prompt already carries in full (the hints), stay out of the summary's task lines.
_TASK_SKIP = frozenset({"path", "start", "build", "tests", "limits", "session", "budgets", "prices", "card",
                        "reference", "hints", "index_cache"})
SUMMARY_HEADER = "## Session state (compacted from the journal; older turns were dropped)"


def _text_chars(message: Mapping[str, Any]) -> int:
    n = 0
    content = message.get("content")
    if isinstance(content, str):
        n += len(content)
    elif isinstance(content, list):  # content parts
        for part in content:
            if isinstance(part, Mapping):
                n += len(str(part.get("text", "")))
            else:
                n += len(str(part))
    for key in ("reasoning_content", "name", "tool_call_id"):
        value = message.get(key)
        if isinstance(value, str):
            n += len(value)
    for call in message.get("tool_calls") or ():
        fn = call.get("function", call) if isinstance(call, Mapping) else {}
        n += len(str(fn.get("name", ""))) + len(
            fn.get("arguments") if isinstance(fn.get("arguments"), str) else json.dumps(fn.get("arguments", {}))
        ) + len(str(call.get("id", "")) if isinstance(call, Mapping) else "")
    return n


def chars_tokens(messages: Iterable[Mapping[str, Any]]) -> int:
    """The chars/4 estimate (plus a small per-message envelope) for messages no response has measured."""
    return sum(_text_chars(m) // 4 + _MESSAGE_OVERHEAD for m in messages)


def estimate_tokens(messages: Sequence[Mapping[str, Any]], last_usage: Mapping[str, Any] | None = None) -> int:
    """Tokens the next prompt will take.

    With `last_usage` (the last response's usage: prompt_tokens, completion_tokens, and optionally
    `n_messages`, how many messages of `messages` that call's prompt plus its reply covered; by
    default everything up to the last assistant message), the measured count is used and only
    the messages added since are estimated at chars/4. Without it, all of them are.
    """
    if not last_usage or last_usage.get("prompt_tokens") is None:
        return chars_tokens(messages)
    covered = last_usage.get("n_messages")
    if covered is None:
        covered = 0
        for i, m in enumerate(messages):
            if m.get("role") == "assistant":
                covered = i + 1
    covered = max(0, min(int(covered), len(messages)))
    measured = int(last_usage.get("prompt_tokens") or 0) + int(last_usage.get("completion_tokens") or 0)
    return measured + chars_tokens(messages[covered:])


def token_ratio(messages: Sequence[Mapping[str, Any]], last_usage: Mapping[str, Any] | None) -> float:
    """Real tokens per estimated (chars/4) token for this conversation, from the last measured
    response, clipped to [1, 2]; 1 when nothing was measured."""
    if not last_usage or last_usage.get("prompt_tokens") is None:
        return 1.0
    covered = last_usage.get("n_messages")
    if covered is None:
        covered = max((i + 1 for i, m in enumerate(messages) if m.get("role") == "assistant"), default=0)
    estimated = chars_tokens(messages[: int(covered)])
    measured = int(last_usage.get("prompt_tokens") or 0) + int(last_usage.get("completion_tokens") or 0)
    if estimated <= 0 or measured <= 0:
        return 1.0
    return min(2.0, max(1.0, measured / estimated))


def needs_compaction(
    messages: Sequence[Mapping[str, Any]], window_tokens: int, reserve: int, last_usage: Mapping[str, Any] | None = None
) -> bool:
    """True when the prompt would leave fewer than `reserve` tokens of the window for the reply."""
    return estimate_tokens(messages, last_usage) > window_tokens - reserve


# ---------------------------------------------------------------------------------------------
# The state summary
# ---------------------------------------------------------------------------------------------


def _fmt_recall(v: Any) -> str:
    return "?" if v is None else f"{float(v):.4f}"


def one_line(text: Any, limit: int) -> str:
    """`text` on one line, at most about `limit` characters, cut between words so that no
    number is cut in half."""
    s = " ".join(str(text or "").split())
    if len(s) <= limit:
        return s
    cut = s.rfind(" ", 0, limit)
    return (s[:cut] if cut > limit // 2 else s[: s.find(" ", limit) if " " in s[limit:] else len(s)]).rstrip(" ,;:") + " …"


def _task_lines(task_card: Mapping[str, Any] | None) -> list[str]:
    card = dict(task_card or {})
    if isinstance(card.get("card"), Mapping):  # session_start's {path, card}
        card = dict(card["card"])
    lines = []
    name = card.get("name") or card.get("title") or "(unnamed task)"
    lines.append(f"Task: {name}")
    for key in ("description", "goal"):
        if card.get(key):
            lines.append(f"{key.capitalize()}: {one_line(card[key], 600)}")
    # Short scalar settings (recall floor, module, class, dataset...) and small tables.
    # The settings that shape the work (harness plumbing such as build, limits and budgets is left out).
    for key, value in card.items():
        if key in _TASK_SKIP or key in ("name", "title", "description", "goal"):
            continue
        if isinstance(value, Mapping):
            text = ", ".join(f"{k}={v}" for k, v in value.items() if isinstance(v, (str, int, float, bool)) or
                             (isinstance(v, (list, Mapping)) and len(json.dumps(v, default=str)) <= 80))
        elif isinstance(value, list):
            text = ", ".join(str(v) for v in value)
        else:
            text = str(value)
        if text and len(text) <= 400:
            lines.append(f"- {key}: {text}")
    return lines


def build_state_summary(
    events: Sequence[Mapping[str, Any]],
    task_card: Mapping[str, Any] | None,
    max_dead_ends: int = 40,
    max_notes: int = 40,
) -> str:
    """What the model needs to carry on, from the journal alone: the task, the best version and its
    metrics, the accepted changes, the dead ends with their reasons, and the model's own notes."""
    facts = Facts.fold(events)
    if task_card is None:
        task_card = facts.card
    decisions = facts.decisions
    accepted = facts.accepted
    rejected = [d for d in decisions if d.get("outcome") != "accepted"]
    notes = facts.notes
    audits = facts.audits
    audits_by_iteration = facts.audits_by_iteration
    usage = facts.usage

    out = [SUMMARY_HEADER, ""]
    out += _task_lines(task_card)
    out.append("")

    # The best version. Its baseline is the best QPS the first evaluation compared against.
    baseline = facts.baseline_qps
    if accepted:
        best = accepted[-1]
        out.append(
            f"Best so far: {fmt_qps(best.get('qps'))} QPS at recall@10 {_fmt_recall(best.get('recall10'))}, "
            f"commit {str(best.get('commit') or '?')[:12]} (iteration {best.get('iteration')}: "
            f"{one_line(best.get('message'), 160)})"
        )
        if baseline:
            out.append(f"Starting point: {fmt_qps(baseline)} QPS; best is {float(best['qps']) / float(baseline):.2f}x that.")
    else:
        out.append(
            "Best so far: the starting code (no change accepted yet)"
            + (f", {fmt_qps(baseline)} QPS." if baseline else ".")
        )
    since = facts.since_improvement
    if facts.reference and facts.reference.get("qps"):
        out.append(f"Reference (the project's own engine on this task): {fmt_qps(facts.reference['qps'])} QPS"
                   + (f"; the best is {facts.of_reference:.0%} of it." if facts.of_reference else "."))
    out.append(
        f"Progress: {len(decisions)} submissions, {len(accepted)} accepted, {since} since the last improvement; "
        f"{usage.tool_calls} tool calls, {usage.tokens:,} tokens, ${usage.cost_usd:.2f}."
    )
    out.append("")

    out.append("### Accepted changes (in order; each is a commit on the session branch)")
    if not accepted:
        out.append("- none yet")
    for d in accepted:
        audit = audits.get(d.get("commit"))
        verdict = f", audit {audit.get('verdict')}" if audit else ""
        stat = f" [{one_line(d.get('diff_stat'), 80)}]" if d.get("diff_stat") else ""
        out.append(
            f"- it {d.get('iteration')}: {fmt_qps(d.get('best_qps_before'))} -> {fmt_qps(d.get('qps'))} QPS, "
            f"recall {_fmt_recall(d.get('recall10'))}{verdict}: {one_line(d.get('message'), 200)}{stat}"
        )
    out.append("")

    out.append("### Dead ends (rejected submissions and why; do not repeat them without a new idea)")
    # Resubmissions of unchanged code teach nothing: one line for all of them, so they never
    # push the informative dead ends (failed builds, lost recall, no gain, flags) out of the list.
    unchanged = [d for d in rejected if d.get("outcome") == "no_change"]
    informative = [d for d in rejected if d.get("outcome") != "no_change"]
    if not rejected:
        out.append("- none yet")
    if unchanged:
        out.append(f"- {len(unchanged)} submissions of unchanged code (no_change), the last at iteration "
                   f"{unchanged[-1].get('iteration')}: edit the code before submitting")
    if informative:
        shown = informative[-max_dead_ends:] if max_dead_ends > 0 else []
        older = informative[: len(informative) - len(shown)]
        if older:
            counts = Counter(d.get("outcome") for d in older)
            out.append(
                f"- {len(older)} older rejections not listed: "
                + ", ".join(f"{n} {k}" for k, n in counts.most_common())
            )
        for d in shown:
            qps = f" {fmt_qps(d.get('qps'))} QPS," if d.get("qps") is not None else ""
            rec = f" recall {_fmt_recall(d.get('recall10'))}," if d.get("recall10") is not None else ""
            why = one_line(d.get("reason"), 220)
            audit = audits_by_iteration.get(d.get("iteration"))
            if d.get("outcome") == "flagged" and audit:
                rules = sorted({m.group(1) for f in audit.get("findings") or () if (m := re.match(r"\[([\w-]+)\]", str(f)))})
                why = f"the audit flagged it ({', '.join(rules) or 'see findings'}); " + one_line(d.get("reason"), 160)
            out.append(
                f"- it {d.get('iteration')} {d.get('outcome')}:{qps}{rec} tried: {one_line(d.get('message'), 140)}"
                f" — reason: {why}"
            )
    out.append("")

    out.append("### Your notes (from the `note` tool, oldest first)")
    if not notes:
        out.append("- none")
    else:
        if len(notes) > max_notes:
            out.append(f"- ({len(notes) - max_notes} older notes dropped)")
        for text in notes[-max_notes:]:
            out.append(f"- {one_line(text, 500)}")
    out.append("")
    out.append(
        "The workspace holds the best version plus any edits made since. Carry on from here: "
        "read the code you need again, and use `note` for anything you must not forget."
    )
    return "\n".join(out)


# ---------------------------------------------------------------------------------------------
# Compacting a conversation
# ---------------------------------------------------------------------------------------------


def _units(messages: Sequence[Mapping[str, Any]]) -> list[list[Mapping[str, Any]]]:
    """Group messages into turns: leading user messages, an assistant message and its tool results.

    A turn is never split, so an assistant `tool_calls` message always keeps its `tool` replies.
    """
    units: list[list[Mapping[str, Any]]] = []
    pending: list[Mapping[str, Any]] = []
    for m in messages:
        role = m.get("role")
        if role == "assistant":
            units.append(pending + [m])
            pending = []
        elif role == "tool" and units and not pending:
            units[-1].append(m)
        else:  # user (or an orphan tool message, kept with what follows)
            pending.append(m)
    if pending:
        units.append(pending)
    return units


def _truncate_message(m: Mapping[str, Any], max_chars: int) -> dict:
    out = dict(m)
    content = out.get("content")
    if isinstance(content, str) and len(content) > max_chars:
        head = max_chars * 2 // 3
        tail = max_chars - head
        out["content"] = content[:head] + f"\n[... {len(content) - max_chars} characters cut by compaction ...]\n" + content[-tail:]
    return out


def compact(
    messages: Sequence[Mapping[str, Any]],
    events: Sequence[Mapping[str, Any]],
    task_card: Mapping[str, Any] | None,
    window_tokens: int,
    keep_recent_turns: int = 4,
    reserve: int = 0,
    last_usage: Mapping[str, Any] | None = None,
) -> list[dict]:
    """The system prompt, the journal's state summary, and as many of the last `keep_recent_turns`
    turns as fit in `window_tokens - reserve` (estimated at chars/4). Turns are kept whole; if even
    the last turn does not fit, its long texts are cut; if the summary alone is too long, its
    lists of dead ends and notes are shortened.

    Code tokenizes denser than prose, so chars/4 can undercount: with `last_usage` (the last
    response's usage, as for estimate_tokens) the endpoint's real tokens per chars/4-token
    calibrate the budget, so the compacted prompt fits the real window too.
    """
    budget = window_tokens - reserve
    if budget <= 0:
        raise ValueError(f"window_tokens ({window_tokens}) must exceed reserve ({reserve})")
    ratio = token_ratio(messages, last_usage)
    budget = int(budget / ratio)
    system = [dict(messages[0])] if messages and messages[0].get("role") == "system" else []
    rest = list(messages[len(system):])
    # Drop the summary of an earlier compaction: the new one supersedes it.
    rest = [m for m in rest if not (m.get("role") == "user" and str(m.get("content", "")).startswith(SUMMARY_HEADER))]

    limits = (40, 20, 10, 5, 2, 0)
    summary_msg: dict = {}
    for lim in limits:
        summary_msg = {"role": "user", "content": build_state_summary(events, task_card, max_dead_ends=lim, max_notes=max(lim, 10))}
        if chars_tokens(system + [summary_msg]) <= budget * 0.6 or lim == 0:
            break
    base_tokens = chars_tokens(system + [summary_msg])
    if base_tokens > budget:
        # Cut the summary text itself as a last resort: the window is tiny.
        room = max(200, (budget - chars_tokens(system) - _MESSAGE_OVERHEAD) * 4)
        summary_msg = _truncate_message(summary_msg, room)
        base_tokens = chars_tokens(system + [summary_msg])

    units = _units(rest)
    kept: list[list[dict]] = []
    used = base_tokens
    for unit in reversed(units[-keep_recent_turns:] if keep_recent_turns > 0 else []):
        size = chars_tokens(unit)
        if used + size <= budget:
            kept.insert(0, [dict(m) for m in unit])
            used += size
            continue
        if not kept:  # the most recent turn must survive: cut its long texts until it fits
            room = budget - used
            cut = [dict(m) for m in unit]
            per = max(200, (room * 4) // max(1, len(cut)) - 64)
            cut = [_truncate_message(m, per) for m in cut]
            if chars_tokens(cut) <= room:
                kept.insert(0, cut)
                used += chars_tokens(cut)
        break
    # A conversation must not open with a tool message or with dangling tool results.
    flat = [m for unit in kept for m in unit]
    return system + [summary_msg] + flat
