"""Context compaction from the journal (vdbbench.agent.session.compaction)."""

from __future__ import annotations

import json

import pytest

from vdbbench.agent.session.compaction import (
    SUMMARY_HEADER,
    build_state_summary,
    chars_tokens,
    compact,
    estimate_tokens,
    needs_compaction,
)

from test_agent_long_journal import JournalBuilder

CARD = {"name": "ivf-core", "description": "Make rust_vdb/core search faster at recall@10 >= 0.95.",
        "recall_floor": 0.95, "module": "vdbbench._rust_vdb", "class": "IvfIndex"}


def session_journal() -> JournalBuilder:
    j = JournalBuilder()
    j.start()
    j.model_call()
    j.submit("no_change", message="resubmit", reason="unchanged code: nothing to evaluate")
    j.submit("accepted", qps=1500.0, recall=0.962, message="u8 prescore with f16 rerank",
             diff_stat="src/ivf.rs | 120 +++++---")
    j.note("routing takes 40% of the time at nprobe=48; try two-level routing")
    j.submit("build_failed", message="AVX-512 kernel", reason="error[E0658]: use of unstable library feature 'stdarch_x86_avx512'")
    j.submit("recall_below_floor", qps=4000.0, recall=0.81, message="nprobe 8",
             reason="recall@10 0.8100 is under the floor 0.95")
    j.submit("accepted", qps=2100.0, recall=0.958, message="AVX2 u8 kernel with run-time dispatch",
             diff_stat="src/simd.rs | 80 ++++++")
    j.submit("slower", qps=2050.0, recall=0.96, message="prefetch next list",
             reason="median gain -2.4% < margin 3%")
    j.note("prefetching lists does not pay on this machine")
    return j


def conversation(turns: int, result_chars: int = 2000) -> list[dict]:
    msgs = [{"role": "system", "content": "You optimize a Rust IVF engine. " * 20},
            {"role": "user", "content": "Start by reading src/lib.rs."}]
    for i in range(turns):
        cid = f"call_{i}"
        msgs.append({"role": "assistant", "content": f"step {i}", "tool_calls": [
            {"id": cid, "type": "function", "function": {"name": "read_file", "arguments": json.dumps({"path": f"src/f{i}.rs"})}},
            {"id": cid + "b", "type": "function", "function": {"name": "benchmark", "arguments": "{}"}},
        ]})
        msgs.append({"role": "tool", "tool_call_id": cid, "content": f"// file {i}\n" + "x" * result_chars})
        msgs.append({"role": "tool", "tool_call_id": cid + "b", "content": f"qps {1000 + i}"})
    return msgs


def test_estimate_uses_last_usage_then_chars_for_newer_messages():
    msgs = conversation(3)
    assert estimate_tokens(msgs) == chars_tokens(msgs)
    # The last response measured everything up to the last assistant message; the two tool
    # results after it are estimated.
    est = estimate_tokens(msgs, {"prompt_tokens": 5000, "completion_tokens": 40})
    assert est == 5040 + chars_tokens(msgs[-2:])
    assert estimate_tokens(msgs, {"prompt_tokens": 5000, "completion_tokens": 40, "n_messages": len(msgs)}) == 5040
    assert needs_compaction(msgs, window_tokens=6000, reserve=1000, last_usage={"prompt_tokens": 5000, "completion_tokens": 40})
    assert not needs_compaction(msgs, window_tokens=100_000, reserve=1000)


def test_summary_holds_best_metrics_accepted_changes_dead_ends_and_notes():
    text = build_state_summary(session_journal().events, CARD)
    assert "ivf-core" in text and "0.95" in text
    assert "Best so far: 2,100 QPS at recall@10 0.9580" in text
    assert "1,500 -> 2,100 QPS" in text and "AVX2 u8 kernel with run-time dispatch" in text
    assert "u8 prescore with f16 rerank" in text and "src/ivf.rs" in text
    assert "recall_below_floor" in text and "0.8100 is under the floor" in text
    assert "stdarch_x86_avx512" in text and "median gain -2.4%" in text
    assert "two-level routing" in text and "prefetching lists does not pay" in text
    assert "6 submissions, 2 accepted, 1 since the last improvement" in text


def test_compacted_prompt_fits_the_window_keeps_recent_turns_whole_and_the_state():
    j = session_journal()
    msgs = conversation(30)
    window = 6000
    assert chars_tokens(msgs) > 2 * window
    out = compact(msgs, j.events, CARD, window_tokens=window, keep_recent_turns=4, reserve=500)
    assert chars_tokens(out) <= window - 500
    assert out[0] == msgs[0]
    summary = out[1]["content"]
    assert summary.startswith(SUMMARY_HEADER)
    for needle in ("2,100 QPS", "AVX2 u8 kernel", "recall_below_floor", "prefetching lists does not pay"):
        assert needle in summary
    # Every assistant tool_calls message is followed by a tool reply for each of its calls.
    rest = out[2:]
    assert rest and rest[0]["role"] == "assistant"
    assert rest[-1] == msgs[-1]
    for i, m in enumerate(rest):
        if m["role"] == "assistant":
            ids = [c["id"] for c in m["tool_calls"]]
            replies = [r["tool_call_id"] for r in rest[i + 1 : i + 1 + len(ids)]]
            assert replies == ids
    assert 1 <= sum(m["role"] == "assistant" for m in rest) <= 4


def test_compaction_twice_replaces_the_old_summary_and_a_huge_last_turn_is_cut_to_fit():
    j = session_journal()
    msgs = conversation(10)
    once = compact(msgs, j.events, CARD, window_tokens=5000, keep_recent_turns=2)
    more = once + conversation(1, result_chars=40_000)[2:]  # one turn far larger than the window
    twice = compact(more, j.events, CARD, window_tokens=5000, keep_recent_turns=2)
    assert sum(str(m.get("content", "")).startswith(SUMMARY_HEADER) for m in twice) == 1
    assert chars_tokens(twice) <= 5000
    assert twice[-1]["role"] == "tool" and "cut by compaction" in twice[-2]["content"]


def test_a_long_session_summary_stays_bounded():
    j = JournalBuilder()
    j.start()
    for i in range(600):
        j.submit("slower", qps=1000.0, recall=0.96, message=f"attempt {i}", reason="median gain 0.5% < margin 3%")
        if i % 10 == 0:
            j.note(f"note {i}")
    out = compact(conversation(2), j.events, CARD, window_tokens=8000, keep_recent_turns=2)
    assert chars_tokens(out) <= 8000
    assert "older rejections not listed" in out[1]["content"] and "note 590" in out[1]["content"]


def test_bad_window_is_refused():
    with pytest.raises(ValueError, match="must exceed reserve"):
        compact(conversation(1), [], CARD, window_tokens=100, reserve=200)


def test_unchanged_resubmissions_never_push_informative_dead_ends_out():
    j = session_journal()
    j.iteration += 1
    j.tool("submit", {"message": "cache answers"})
    j.add("audit", commit="c0ffee", verdict="flagged", findings=["[query-hash] src/lib.rs:40: hashes ...",
                                                                  "[global-state] src/lib.rs:39: keeps ..."],
          fresh_qps=900.0, fresh_recall10=0.96, jump_factor=1.5)
    j.add("decision", outcome="flagged", qps=3200.0, recall10=0.96, best_qps_before=2100.0, best_qps_after=2100.0,
          commit=None, message="cache answers", reason="the change measured as a gain (" + "x" * 300 + ") but the audit flagged it",
          diff_stat="")
    for i in range(200):
        j.submit("no_change", message=f"same {i}", reason="identical to the best")
    text = build_state_summary(j.events, CARD, max_dead_ends=3)
    assert "201 submissions of unchanged code (no_change), the last at iteration 207" in text
    assert "same 199" not in text
    assert "it 7 flagged" in text and "the audit flagged it (global-state, query-hash)" in text
    assert "it 6 slower" in text and "it 4 recall_below_floor" in text
    assert "1 older rejections not listed: 1 build_failed" in text


def test_dense_tokenization_measured_by_the_endpoint_shrinks_the_compacted_prompt():
    j = session_journal()
    msgs = conversation(30, result_chars=4000)
    plain = compact(msgs, j.events, CARD, window_tokens=8000, keep_recent_turns=6)
    # The endpoint counted 1.6x what chars/4 estimates (code-heavy text): fit 8000 real tokens.
    usage = {"prompt_tokens": int(chars_tokens(msgs) * 1.6), "completion_tokens": 0, "n_messages": len(msgs)}
    dense = compact(msgs, j.events, CARD, window_tokens=8000, keep_recent_turns=6, last_usage=usage)
    assert chars_tokens(dense) * 1.6 <= 8000 < chars_tokens(plain) * 1.6
    assert len(dense) < len(plain)
