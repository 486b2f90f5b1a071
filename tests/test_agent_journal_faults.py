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
