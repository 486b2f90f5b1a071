"""The session page of a long session: the model's notes are embedded once, not once per submission."""

from __future__ import annotations

import json
import re

from vdbbench.pages.session import session_page

from test_agent_long_journal import JournalBuilder

NOTE = "tried prefetch distance and lane width; " * 10


def test_notes_are_embedded_once_and_each_submission_sees_those_before_it(tmp_path):
    # Every submission carried a copy of all the notes so far: 600 submissions and 300 notes of
    # 400 characters made a 45 MB page from a 1 MB journal (it grows with submissions x notes).
    j = JournalBuilder()
    j.start()
    j.add("evaluation", split="heldout", candidate={"qps": 1000.0, "recall10": 0.97}, best=None, gain=None)
    j.best_qps, j.best_recall = 1000.0, 0.97
    for it in range(1, 301):
        j.model_call()
        if it % 2 == 0:
            j.note(f"note {it}: {NOTE}")
        j.submit("slower", qps=950.0, recall=0.96, message=f"m{it}")
    j.write(tmp_path / "run")
    page = session_page(tmp_path / "run")
    script = page[page.index("const SUBS = "):]
    subs = json.loads(re.search(r"const SUBS = (.*?);\n", script).group(1))
    notes = json.loads(re.search(r"const NOTES = (.*?);\n", script).group(1))
    assert len(subs) == 300 and len(notes) == 150 and notes[0]["text"].startswith("note 2: ")
    assert [s["notes"] for s in subs[:4]] == [0, 1, 1, 2]  # submission 2 noted before it submitted
    assert len(script) < 2 * len(json.dumps(notes)) + 2 * len(json.dumps(subs)) and len(script) < 1_000_000
    assert page.count(NOTE) == 150
