"""Session budgets (iterations, tool calls, tokens, cost, wall time) and model prices; usage comes from the journal's facts."""

from __future__ import annotations

import fnmatch
import json
import math
import re
import sys
from dataclasses import dataclass, fields
from pathlib import Path
from typing import Any, Iterable, Mapping

if sys.version_info >= (3, 11):
    import tomllib
else:  # Python 3.10: the same parser from PyPI
    import tomli as tomllib

from vdbbench.agent.core.facts import Usage  # noqa: F401 - budgets are checked against it
from vdbbench.common.console import say_warning

# Names used in the journal's `budget_stop.which`, in the order they are checked.
BUDGET_NAMES = ("iterations", "tool_calls", "tokens", "cost", "wall_time")

# Accepted spellings of each budget in a task card's [budgets] table or a CLI override dict.
_ALIASES = {
    "iterations": "iterations",
    "max_iterations": "iterations",
    "submissions": "iterations",
    "tool_calls": "tool_calls",
    "max_tool_calls": "tool_calls",
    "tokens": "tokens",
    "max_tokens": "tokens",
    "cost_usd": "cost_usd",
    "cost": "cost_usd",
    "max_cost_usd": "cost_usd",
    "wall_s": "wall_s",
    "wall_time": "wall_s",
    "wall_time_s": "wall_s",
    "max_wall_s": "wall_s",
}

_DURATION = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*(s|sec|m|min|h|hr|d)?\s*$", re.IGNORECASE)
_UNIT_S = {None: 1.0, "s": 1.0, "sec": 1.0, "m": 60.0, "min": 60.0, "h": 3600.0, "hr": 3600.0, "d": 86400.0}


def parse_duration(value: Any) -> float:
    """Seconds from a number or a string such as "90", "45s", "30m", "2h"."""
    if isinstance(value, bool):
        raise ValueError(f"wall time must be a number of seconds or a string like '2h', got {value!r}")
    if isinstance(value, (int, float)):
        return float(value)
    if isinstance(value, str):
        m = _DURATION.match(value)
        if m:
            unit = m.group(2).lower() if m.group(2) else None
            return float(m.group(1)) * _UNIT_S[unit]
    raise ValueError(f"wall time must be a number of seconds or a string like '90m' or '2h', got {value!r}")


@dataclass(frozen=True)
class Budgets:
    """Limits of one session; None means unlimited. Reaching a limit stops the session cleanly."""

    iterations: int | None = None
    tool_calls: int | None = None
    tokens: int | None = None
    cost_usd: float | None = None
    wall_s: float | None = None

    @classmethod
    def from_mapping(cls, table: Mapping[str, Any] | None, source: str = "budgets") -> "Budgets":
        """Budgets from a mapping such as a task card's [budgets] table; unknown keys are refused."""
        values: dict[str, Any] = {}
        for key, raw in (table or {}).items():
            name = _ALIASES.get(key)
            if name is None:
                known = ", ".join(sorted(_ALIASES))
                raise ValueError(f"{source}: unknown budget {key!r}; expected one of {known}")
            if raw is None:
                continue
            values[name] = _check_limit(name, raw, source)
        return cls(**values)

    @classmethod
    def merged(cls, card: Mapping[str, Any] | None, cli_overrides: Mapping[str, Any] | None = None) -> "Budgets":
        """The card's budgets with each CLI override that was given (not None) taking precedence.

        `card` is either the parsed task card (its `budgets` table is used) or that table itself.
        """
        table = card or {}
        if isinstance(table.get("budgets"), Mapping):
            table = table["budgets"]
        base = cls.from_mapping(table, "task card [budgets]")
        given = {k: v for k, v in (cli_overrides or {}).items() if v is not None}
        over = cls.from_mapping(given, "command-line budget")
        return cls(**{f.name: getattr(over, f.name) if getattr(over, f.name) is not None else getattr(base, f.name)
                      for f in fields(cls)})

    def as_dict(self) -> dict[str, Any]:
        return {f.name: getattr(self, f.name) for f in fields(self)}


def _check_limit(name: str, raw: Any, source: str) -> int | float:
    if name == "wall_s":
        value: Any = parse_duration(raw)
    elif isinstance(raw, bool) or not isinstance(raw, (int, float)):
        raise ValueError(f"{source}: budget {name!r} must be a number, got {raw!r}")
    else:
        value = raw
    if name in ("iterations", "tool_calls", "tokens"):
        if float(value) != int(value):
            raise ValueError(f"{source}: budget {name!r} must be a whole number, got {raw!r}")
        value = int(value)
    if not math.isfinite(value) or value <= 0:
        raise ValueError(f"{source}: budget {name!r} must be > 0 (leave it out for no limit), got {raw!r}")
    return float(value) if name in ("cost_usd", "wall_s") else value


# ---------------------------------------------------------------------------------------------
# Prices: USD per 1M prompt / completion tokens. List prices of the public APIs (2025); a
# gateway or a negotiated rate differs, so the table is overridable from a TOML/JSON file or
# the task card's [prices] table. Patterns are fnmatch globs on the lower-cased model name
# without any "provider/" prefix; the first match wins, so specific names come first.
# ---------------------------------------------------------------------------------------------

DEFAULT_PRICES: tuple[tuple[str, float, float], ...] = (
    ("local", 0.0, 0.0),
    ("local-*", 0.0, 0.0),
    ("scripted*", 0.0, 0.0),
    ("gpt-4o-mini*", 0.15, 0.60),
    ("gpt-4o*", 2.50, 10.00),
    ("gpt-4.1-nano*", 0.10, 0.40),
    ("gpt-4.1-mini*", 0.40, 1.60),
    ("gpt-4.1*", 2.00, 8.00),
    ("gpt-5*-nano*", 0.05, 0.40),
    ("gpt-5*-mini*", 0.25, 2.00),
    ("gpt-5*", 1.25, 10.00),
    ("o4-mini*", 1.10, 4.40),
    ("o3-mini*", 1.10, 4.40),
    ("o3-pro*", 20.00, 80.00),
    ("o3*", 2.00, 8.00),
    ("o1-mini*", 1.10, 4.40),
    ("o1*", 15.00, 60.00),
    ("glm-4.5-air*", 0.20, 1.10),
    ("glm-4.5-flash*", 0.0, 0.0),
    ("glm-4*", 0.60, 2.20),
    ("glm-5*", 1.00, 3.20),
    ("deepseek-reasoner*", 0.55, 2.19),
    ("deepseek-r1*", 0.55, 2.19),
    ("deepseek*", 0.27, 1.10),
    ("qwen*-max*", 1.60, 6.40),
    ("qwen*-coder*", 1.00, 5.00),
    ("qwen*-turbo*", 0.05, 0.20),
    ("qwen*", 0.40, 1.20),
    ("claude*opus*", 15.00, 75.00),
    ("claude*sonnet*", 3.00, 15.00),
    ("claude-3-5-haiku*", 0.80, 4.00),
    ("claude-3-haiku*", 0.25, 1.25),
    ("claude*haiku*", 1.00, 5.00),
)


@dataclass(frozen=True)
class Price:
    pattern: str
    prompt_per_m: float
    completion_per_m: float


class PriceTable:
    """An ordered list of (pattern, prompt $/1M, completion $/1M); overrides are looked up first."""

    def __init__(self, entries: Iterable[tuple[str, float, float]] = DEFAULT_PRICES):
        self.entries = [Price(p.lower(), float(a), float(b)) for p, a, b in entries]
        self._warned: set[str] = set()

    def with_overrides(self, overrides: Mapping[str, Any] | None, source: str = "prices") -> "PriceTable":
        """A new table whose entries from `overrides` ({pattern: {prompt, completion}}) take precedence."""
        extra = []
        for pattern, spec in (overrides or {}).items():
            if isinstance(spec, Mapping):
                try:
                    prompt, completion = spec["prompt"], spec["completion"]
                except KeyError as exc:
                    raise ValueError(
                        f"{source}: price for {pattern!r} needs 'prompt' and 'completion' (USD per 1M tokens), missing {exc}"
                    ) from None
            elif isinstance(spec, (list, tuple)) and len(spec) == 2:
                prompt, completion = spec
            else:
                raise ValueError(
                    f"{source}: price for {pattern!r} must be {{prompt = X, completion = Y}} in USD per 1M tokens, got {spec!r}"
                )
            for label, v in (("prompt", prompt), ("completion", completion)):
                if isinstance(v, bool) or not isinstance(v, (int, float)) or v < 0 or not math.isfinite(v):
                    raise ValueError(f"{source}: {label} price for {pattern!r} must be a number >= 0, got {v!r}")
            extra.append((str(pattern), float(prompt), float(completion)))
        return PriceTable(extra + [(p.pattern, p.prompt_per_m, p.completion_per_m) for p in self.entries])

    def lookup(self, model: str) -> Price | None:
        name = model.strip().lower()
        candidates = [name, name.rsplit("/", 1)[-1]] if "/" in name else [name]
        for price in self.entries:
            if any(fnmatch.fnmatchcase(c, price.pattern) for c in candidates):
                return price
        return None

    def cost_of(self, model: str, prompt_tokens: int | None, completion_tokens: int | None) -> float:
        """USD for one call; an unknown model costs 0 and is warned about once."""
        price = self.lookup(model)
        if price is None:
            if model not in self._warned:
                self._warned.add(model)
                say_warning(
                    f"no price known for model {model!r}: its cost is counted as 0; add it with a prices file "
                    f"(e.g. {{\"{model}\": {{\"prompt\": 1.0, \"completion\": 2.0}}}}) or the task card's [prices] table"
                )
            return 0.0
        return ((prompt_tokens or 0) * price.prompt_per_m + (completion_tokens or 0) * price.completion_per_m) / 1e6


def load_prices(path: str | Path) -> dict[str, Any]:
    """Price overrides from a TOML or JSON file: {pattern: {prompt, completion}}, optionally under [prices]."""
    path = Path(path)
    try:
        raw = path.read_bytes()
    except OSError as exc:
        raise ValueError(f"cannot read prices file {path}: {exc.strerror}") from None
    try:
        data = json.loads(raw) if path.suffix.lower() == ".json" else tomllib.loads(raw.decode())
    except (ValueError, tomllib.TOMLDecodeError) as exc:
        raise ValueError(f"prices file {path} is not valid {'JSON' if path.suffix.lower() == '.json' else 'TOML'}: {exc}") from None
    if isinstance(data, Mapping) and isinstance(data.get("prices"), Mapping):
        data = data["prices"]
    if not isinstance(data, Mapping):
        raise ValueError(f"prices file {path} must hold a table of {{pattern: {{prompt, completion}}}}")
    return dict(data)


def price_table(card: Mapping[str, Any] | None = None, prices_file: str | Path | None = None) -> PriceTable:
    """The default prices, then the card's [prices] table, then a prices file (highest precedence)."""
    table = PRICES
    if card and isinstance(card.get("prices"), Mapping):
        table = table.with_overrides(card["prices"], "task card [prices]")
    if prices_file is not None:
        table = table.with_overrides(load_prices(prices_file), str(prices_file))
    return table


PRICES = PriceTable()


def cost_of(model: str, prompt_tokens: int | None, completion_tokens: int | None, prices: PriceTable | None = None) -> float:
    """USD for one model call at `prices` (default: the built-in table)."""
    return (prices or PRICES).cost_of(model, prompt_tokens, completion_tokens)


def exceeded(budgets: Budgets, usage: Usage) -> tuple[str, float, float] | None:
    """The first budget reached as (which, limit, used), `which` as in the journal; None if all remain."""
    checks = (
        ("iterations", budgets.iterations, usage.iterations),
        ("tool_calls", budgets.tool_calls, usage.tool_calls),
        ("tokens", budgets.tokens, usage.tokens),
        ("cost", budgets.cost_usd, usage.cost_usd),
        ("wall_time", budgets.wall_s, usage.wall_s),
    )
    for which, limit, used in checks:
        if limit is not None and used >= limit:
            return which, limit, used
    return None
