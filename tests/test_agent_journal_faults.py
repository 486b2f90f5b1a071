"""The session journal under a full disk: an event is written whole or not at all."""

from __future__ import annotations

import pytest

from vdbbench.agent.core.journal import Journal, read_events


def test_an_event_cut_short_by_a_full_disk_is_not_completed_later_under_a_reused_seq(tmp_path):
    # The journal wrote through a buffered file: when a write hit a full disk, the head of the
    # event stayed in the file without its newline, and the next event that got through (the
    # loop's `error` about the failure) was glued onto it under the same seq. read_events stops
    # at that broken line, so every later event (an accepted decision among them) was invisible
    # to resume, reports and budgets. Here the kernel's file-size limit fails the write() just
    # as ENOSPC does.
    resource = pytest.importorskip("resource")
    import signal

    journal = Journal(tmp_path / "journal.jsonl")
    journal.append("note", text="before")
    size = (tmp_path / "journal.jsonl").stat().st_size
    old_limit = resource.getrlimit(resource.RLIMIT_FSIZE)
    old_handler = signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
    resource.setrlimit(resource.RLIMIT_FSIZE, (size + 40, old_limit[1]))
    try:
        with pytest.raises(OSError):
            journal.append("evaluation", text="x" * 10_000)
    finally:
        resource.setrlimit(resource.RLIMIT_FSIZE, old_limit)
        signal.signal(signal.SIGXFSZ, old_handler)
    assert [e["type"] for e in read_events(tmp_path / "journal.jsonl")] == ["note"]  # nothing half-written
    journal.append("error", where="tool", text="the disk was full")  # the space is back
    journal.close()
    data = (tmp_path / "journal.jsonl").read_text()
    events = read_events(tmp_path / "journal.jsonl")
    assert [e["seq"] for e in events] == list(range(len(events))) and len(events) == len(data.splitlines())
    assert [e["type"] for e in events] == ["note", "error"]
    assert Journal(tmp_path / "journal.jsonl").seq == 2


# -- a line damaged in the middle (an editor, a disk fault, a cut copy, two files joined) --------

def _write(path, n=8):
    journal = Journal(path)
    for i in range(n):
        journal.iteration = i // 2 + 1
        if i % 2:
            journal.append("decision", outcome="accepted" if i in (1, 5) else "slower", commit=f"c{i}", qps=100.0 + i)
        else:
            journal.append("tool_call", id=f"t{i}", name="submit", arguments={})
    journal.close()
    return path.read_bytes().splitlines(keepends=True)


def test_a_damaged_middle_line_hides_no_later_event_and_the_file_is_kept(tmp_path):
    # read_events stopped at the first line that was not JSON: resume forgot every event after
    # it (the accepted decision of iteration 3 here), and the journal reopened at the damaged
    # line's seq, so the next events reused the seqs of the events it could no longer see.
    path = tmp_path / "journal.jsonl"
    lines = _write(path)
    lines[2] = lines[2][:25] + b"\n"  # a copy cut short, then more appended
    lines[3] = b"\x00" * (len(lines[3]) - 1) + b"\n"  # a disk fault: a block of zeros
    damaged = b"".join(lines)
    path.write_bytes(damaged)

    events = read_events(path)
    assert [e["seq"] for e in events] == [0, 1, 4, 5, 6, 7]
    assert [e["commit"] for e in events if e["type"] == "decision" and e["outcome"] == "accepted"] == ["c1", "c5"]
    journal = Journal(path)
    assert path.read_bytes() == damaged  # opening it rewrites nothing
    assert journal.damaged_lines == [3, 4] and any("line 3 is not JSON" in p for p in journal.problems)
    journal.append("note", text="after the damage")
    journal.close()
    assert path.read_bytes().startswith(damaged)
    assert read_events(path)[-1]["seq"] == 8  # past every line's seq, the unreadable ones' too


def test_a_whole_event_glued_to_a_torn_line_is_read(tmp_path):
    # A journal cut mid-line and appended to (or two files joined): the next event sits on the
    # same line as the torn one, whole. It is read; only the torn part is left out.
    path = tmp_path / "journal.jsonl"
    lines = _write(path)
    lines[4] = lines[4][:30]  # no newline: the accepted decision (seq 5) is glued onto it
    lines[6] = lines[6].rstrip(b"\n")  # a lost newline: two whole events on one line
    path.write_bytes(b"".join(lines))
    events = read_events(path)
    assert [e["seq"] for e in events] == [0, 1, 2, 3, 5, 6, 7]
    assert Journal(path).damaged_lines == [5, 6]


def test_a_torn_last_line_is_still_dropped_on_opening(tmp_path):
    # A cut write at the very end (a crash mid-append) keeps its handling: the journal drops it
    # so the next event starts on a line of its own.
    path = tmp_path / "journal.jsonl"
    lines = _write(path, 4)
    path.write_bytes(b"".join(lines) + lines[-1][:20])
    journal = Journal(path)
    assert path.read_bytes() == b"".join(lines) and journal.seq == 4


def test_facts_count_a_submission_whose_decision_line_is_gone_and_keep_the_later_best():
    from vdbbench.agent.core.facts import Facts

    def decision(seq, it, outcome, commit=None, qps=None, **kw):
        return {"seq": seq, "type": "decision", "iteration": it, "outcome": outcome, "commit": commit, "qps": qps, **kw}

    # Iteration 2's decision line is unreadable: the budget still counts three submissions.
    facts = Facts.fold([decision(1, 1, "accepted", "a", 200.0), decision(5, 3, "slower", qps=150.0)])
    assert len(facts.decisions) == 2 and facts.usage.submissions == 3
    # An accepted change of iteration 2 recovered on resume (after iteration 3's best) takes its
    # place among the changes and leaves the best the later one.
    facts = Facts.fold([decision(1, 1, "accepted", "a", 200.0), decision(5, 3, "accepted", "c", 400.0),
                        decision(9, 2, "accepted", "b", 300.0, recovered=True)])
    assert [d["commit"] for d in facts.accepted] == ["a", "b", "c"]
    assert [d["iteration"] for d in facts.decisions] == [1, 2, 3]
    assert (facts.best_commit, facts.best_qps, facts.usage.submissions) == ("c", 400.0, 3)
