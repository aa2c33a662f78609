"""Option values said in knee's words: `-c/--clients must be a whole number of at least 1 (got '0')`, naming the
option, what it takes and what was given, where click would say `Invalid value for '-c' / '--clients': 0 is not in
the range x>=1`.

- `at_least(n)`: a whole number n or more (clients, requests, processes);
- `more_than(x)`: a number above x (a level, a latency limit);
- `between(lo, hi)`: a number from lo to hi (a ratio);
- `NUMBER`: any number (a command that checks its range itself, in its own words);
- `one_of(...)`: one of a few words (`--mode must be one of echo, session, listen (got 'x')`).
"""

from __future__ import annotations

import math
from typing import Any

import click


def _named(param: click.Parameter | None) -> str:
    """The option as its user may type it: -c/--clients."""
    return "/".join(param.opts) if param is not None else "the value"


class Number(click.ParamType):
    """A whole number (`whole`) or any number, within the bounds it says."""

    def __init__(self, *, whole: bool, low: float | None = None, high: float | None = None, above: bool = False):
        self.whole, self.low, self.high, self.above = whole, low, high, above
        self.name = "integer" if whole else "number"

    def _wants(self) -> str:
        what = "a whole number" if self.whole else "a number"
        if self.low is not None and self.high is not None:
            return f"{what} from {self.low:g} to {self.high:g}"
        if self.low is not None:
            return f"{what} {'above' if self.above else 'of at least'} {self.low:g}"
        return what

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> Any:
        if isinstance(value, int | float) and not isinstance(value, bool):
            number: float = value
        else:
            try:
                number = int(str(value), 10) if self.whole else float(str(value))
            except ValueError:
                number = float("nan")
        low_ok = self.low is None or (number > self.low if self.above else number >= self.low)
        high_ok = self.high is None or number <= self.high
        if not math.isfinite(number) or not (low_ok and high_ok):  # NaN: not a number at all
            raise click.UsageError(f"{_named(param)} must be {self._wants()} (got {str(value)!r})", ctx)
        return number


def at_least(low: int) -> Number:
    return Number(whole=True, low=low)


def more_than(low: float) -> Number:
    return Number(whole=False, low=low, above=True)


def between(low: float, high: float) -> Number:
    return Number(whole=False, low=low, high=high)


NUMBER = Number(whole=False)


class OneOf(click.Choice):
    """One of a few words, said as knee says a mistake: `--mode must be one of echo, session, listen (got 'x')`."""

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> Any:
        if value in self.choices:
            return value
        words = ", ".join(map(str, self.choices))
        raise click.UsageError(f"{_named(param)} must be one of {words} (got {str(value)!r})", ctx)


def one_of(*words: str) -> OneOf:
    return OneOf(list(words))
