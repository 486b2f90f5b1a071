"""The benchmark backs every index's memory with huge pages, so no engine is timed on 4 KiB pages."""

import os
import sys

import numpy as np
import pytest

from vdbbench.bench import hugepages

SMAPS = """\
55d0c0000000-55d0c4000000 rw-p 00000000 00:00 0                          [heap]
Size:              65536 kB
Rss:               65536 kB
7f0000000000-7f0010000000 rw-p 00000000 00:00 0 
Size:             262144 kB
Rss:              200000 kB
7f0010000000-7f0010800000 rw-p 00000000 00:00 0 
Size:               8192 kB
Rss:                  16 kB
7f0020000000-7f0030000000 r--p 00000000 08:01 1234                       /usr/lib/libfoo.so
Size:             262144 kB
Rss:              262144 kB
7f0040000000-7f0050000000 rw-s 00000000 00:01 99                         /dev/zero (deleted)
Size:             262144 kB
Rss:              262144 kB
7f0060000000-7f0070000000 r--p 00000000 00:00 0 
Size:             262144 kB
Rss:              262144 kB
"""


def test_only_resident_private_writable_anonymous_mappings_are_chosen():
    # the heap and the large anonymous region; not a stack-sized region barely touched, a
    # file mapping, a shared mapping or a read-only one
    assert hugepages.anonymous_mappings(SMAPS) == [
        (0x55D0C0000000, 0x55D0C4000000),
        (0x7F0000000000, 0x7F0010000000),
    ]


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="huge pages are advised on Linux only")
def test_advise_process_keeps_contents_and_reports(monkeypatch):
    monkeypatch.delenv("VDBBENCH_HUGEPAGES", raising=False)
    a = np.arange(8 << 20, dtype=np.float32)  # 32 MiB, resident
    before = a.copy()
    out = hugepages.advise_process()
    assert np.array_equal(a, before)
    assert out["thp"] == hugepages.thp_mode()
    readable = os.access("/proc/self/smaps", os.R_OK)
    if out["thp"] in (None, "never") or not readable:  # no THP here, or no way to see the mappings
        assert out["skipped"]
    else:
        assert out["advised_mb"] >= 32
        assert out["anon_huge_mb"] is not None


def test_switched_off_by_the_engines_variable(monkeypatch):
    monkeypatch.setenv("VDBBENCH_HUGEPAGES", "0")
    out = hugepages.advise_process()
    assert "skipped" in out and "advised_mb" not in out
