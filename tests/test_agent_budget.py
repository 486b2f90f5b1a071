"""Budgets, prices and usage rebuilt from the journal (vdbbench.agent.session.budget)."""

from __future__ import annotations

import json
import warnings

import pytest

from vdbbench.agent.session import budget
from vdbbench.agent.session.budget import Budgets, PriceTable, Usage, cost_of, exceeded

from test_agent_long_journal import JournalBuilder


def test_merged_cli_overrides_card_and_none_means_not_given():
    card = {"name": "t", "budgets": {"iterations": 50, "cost_usd": 2.5, "wall_time": "2h"}}
    b = Budgets.merged(card, {"iterations": 80, "tokens": None, "tool_calls": 500})
    assert b == Budgets(iterations=80, tool_calls=500, tokens=None, cost_usd=2.5, wall_s=7200.0)
    # The bare [budgets] table works too, and an empty card means unlimited.
    assert Budgets.merged({"iterations": 3}) == Budgets(iterations=3)
    assert Budgets.merged(None, None) == Budgets()


@pytest.mark.parametrize(
    "table, message",
    [
        ({"iterations": 0}, "must be > 0"),
        ({"iterations": 2.5}, "whole number"),
        ({"tokens": "many"}, "must be a number"),
        ({"wall_s": "soon"}, "like '90m'"),
        ({"iteratoins": 5}, "unknown budget 'iteratoins'"),
    ],
)
def test_bad_budgets_are_refused_with_what_was_expected(table, message):
    with pytest.raises(ValueError, match=message):
        Budgets.merged({"budgets": table})


def test_prices_cover_common_models_and_provider_prefixes():
    # 1M prompt + 1M completion tokens = the sum of the two list prices.
    assert cost_of("gpt-4o", 1_000_000, 1_000_000) == pytest.approx(12.5)
    assert cost_of("gpt-4o-mini-2024-07-18", 1_000_000, 0) == pytest.approx(0.15)
    assert cost_of("openai/gpt-4.1-mini", 0, 1_000_000) == pytest.approx(1.6)
    assert cost_of("GPT-5", 1_000_000, 0) == pytest.approx(1.25)
    assert cost_of("gpt-5-mini", 1_000_000, 0) == pytest.approx(0.25)
    assert cost_of("o4-mini", 1_000_000, 0) == pytest.approx(1.1)
    assert cost_of("zai/glm-4.6", 1_000_000, 0) == pytest.approx(0.6)
    assert cost_of("glm-5.1", 1_000_000, 0) > 0
    assert cost_of("deepseek-chat", 1_000_000, 0) == pytest.approx(0.27)
    assert cost_of("qwen3-coder-plus", 1_000_000, 0) > 0
    assert cost_of("anthropic/claude-sonnet-4.5", 1_000_000, 0) == pytest.approx(3.0)
    assert cost_of("local", 10**9, 10**9) == 0.0


def test_unknown_model_costs_zero_and_warns_once(capsys):
    table = PriceTable()
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # said on stderr, not as a Python warning (no source line)
        assert table.cost_of("my-private-model", 1000, 1000) == 0.0
        assert table.cost_of("my-private-model", 1000, 1000) == 0.0
    err = capsys.readouterr().err
    assert err.startswith("WARNING: no price known for model 'my-private-model'") and err.count("\n") == 1
    assert "[prices] table" in err  # brackets as text, not markup


def test_price_overrides_from_card_and_file(tmp_path):
    prices = tmp_path / "prices.json"
    prices.write_text(json.dumps({"gpt-4o": {"prompt": 1.0, "completion": 1.0}}))
    card = {"prices": {"my-model": {"prompt": 2.0, "completion": 4.0}}}
    table = budget.price_table(card, prices)
    assert table.cost_of("gpt-4o", 1_000_000, 1_000_000) == pytest.approx(2.0)  # file wins
    assert table.cost_of("my-model", 500_000, 500_000) == pytest.approx(3.0)  # card entry
    assert table.cost_of("gpt-4.1", 1_000_000, 0) == pytest.approx(2.0)  # defaults remain
    toml_file = tmp_path / "prices.toml"
    toml_file.write_text('[prices."glm-5*"]\nprompt = 0.5\ncompletion = 0.5\n')
    assert budget.price_table(None, toml_file).cost_of("glm-5.1", 2_000_000, 0) == pytest.approx(1.0)
    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps({"x": {"prompt": -1, "completion": 0}}))
    with pytest.raises(ValueError, match="must be a number >= 0"):
        budget.price_table(None, bad)
    with pytest.raises(ValueError, match="cannot read prices file"):
        budget.load_prices(tmp_path / "missing.toml")


def test_usage_from_journal_sums_across_resumes_without_the_dead_gap():
    j = JournalBuilder()
    j.start()
    for _ in range(3):
        j.tick(10)
        j.model_call(1000, 200, cost=0.01)
        j.tool("read_file", {"path": "src/lib.rs"})
    j.submit("slower", qps=90.0, recall=0.96)
    j.tick(20)
    j.submit("accepted", qps=120.0, recall=0.96)
    # 50 s of session, then the harness dies; resumed an hour later and runs 30 s more.
    j.tick(3600)
    j.start(resumed=True)
    j.tick(30)
    j.model_call(500, 50, cost=0.005)
    j.submit("no_change")
    usage = Usage.from_journal(j.events)
    assert usage.submissions == 3
    assert usage.tool_calls == 3 + 3  # three read_file + three submit
    assert usage.tokens == 3 * 1200 + 550
    assert usage.prompt_tokens == 3500 and usage.completion_tokens == 650
    assert usage.cost_usd == pytest.approx(0.035)
    assert usage.wall_s == pytest.approx(50 + 30)
    assert usage.model_calls == 4


def test_exceeded_says_which_limit_and_how_much_was_used():
    usage = Usage(submissions=10, tool_calls=40, tokens=9000, cost_usd=0.5, wall_s=100.0)
    assert exceeded(Budgets(), usage) is None
    assert exceeded(Budgets(iterations=11, tokens=10_000), usage) is None
    assert exceeded(Budgets(iterations=10), usage) == ("iterations", 10, 10)
    assert exceeded(Budgets(cost_usd=0.25), usage) == ("cost", 0.25, 0.5)
    assert exceeded(Budgets(wall_s=60), usage) == ("wall_time", 60.0, 100.0)
    assert exceeded(Budgets(iterations=20, tool_calls=40), usage)[0] == "tool_calls"
    # Raising the budget (as `resume` does) lets the session carry on.
    assert exceeded(Budgets(iterations=20), usage) is None
