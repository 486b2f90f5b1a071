"""The PNG plots draw the journal's text as it is: a '$' pair is not mathtext."""

from __future__ import annotations

from vdbbench.agent.reports.report_plots import compare_runs, staircase
from vdbbench.agent.tournaments import leaderboard

from test_agent_long_journal import JournalBuilder


def test_dollar_signs_in_messages_and_model_names_do_not_stop_the_plots(tmp_path):
    # matplotlib parsed "$\bar$" in an accepted change's message (its label on the staircase) and in
    # the model's name (titles, legends) as mathtext and raised a ValueError: no staircase, no
    # compare plot, no leaderboard.png, and `vdbbench agent report` ended in a traceback.
    j = JournalBuilder()
    j.start()
    j.events[0]["model"] = r"model $\bar$"
    j.add("evaluation", split="heldout", candidate={"qps": 1000.0, "recall10": 0.97}, best=None, gain=None)
    j.best_qps, j.best_recall = 1000.0, 0.97
    j.model_call()
    j.submit("accepted", qps=1500.0, recall=0.97, message=r"hoist $\frac{a}{$ out of the loop")
    j.write(tmp_path / "run")
    assert staircase(tmp_path / "run", tmp_path / "s.png")["n_points"] == 1
    assert compare_runs([tmp_path / "run"], tmp_path / "c.png")[0]["model"] == r"model $\bar$"
    leaderboard.staircases(leaderboard.leaderboard([tmp_path / "run"]), tmp_path / "lb.png")
    assert all((tmp_path / f).stat().st_size > 10_000 for f in ("s.png", "c.png", "lb.png"))
