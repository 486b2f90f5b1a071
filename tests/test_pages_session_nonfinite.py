"""The session page of a journal holding NaN or infinite figures (Python's json writes them)."""

from __future__ import annotations

import json
import re

from vdbbench.cli import main
from vdbbench.pages.html import script_json

from test_agent_long_journal import JournalBuilder


def test_a_page_is_written_for_a_journal_with_nan_and_infinite_qps(tmp_path, capsys):
    # script_json refused NaN (allow_nan=False) with a ValueError traceback, so a journal whose
    # evaluation measured an infinite QPS (or a NaN gain) had no page at all.
    j = JournalBuilder()
    j.start()
    j.add("evaluation", split="heldout", candidate={"qps": 1000.0, "recall10": 0.97}, best=None, gain=None)
    j.best_qps, j.best_recall = 1000.0, 0.97
    j.model_call()
    j.submit("slower", qps=float("inf"), recall=0.97, message="inf")
    j.model_call()
    j.submit("crashed", qps=float("nan"), message="nan")
    j.write(tmp_path / "run")
    assert main(["agent", "report", str(tmp_path / "run"), "--html"]) == 0
    page = (tmp_path / "run" / "session.html").read_text()
    subs = json.loads(re.search(r"const SUBS = (.*?);\n", page).group(1))
    assert [s["message"] for s in subs] == ["inf", "nan"] and subs[0]["qps"] is None and subs[1]["qps"] is None
    assert json.loads(script_json({"a": [float("nan"), 1.5, {"b": float("-inf")}]})) == {"a": [None, 1.5, {"b": None}]}
