"""A closed loop's think time, as a scenario (`think`) and `--think` say it: the same each time (`"2s"`), uniform
between two durations (`"uniform(1s, 3s)"`: Locust's `between`, Gatling's `pause(min, max)`), or exponential around
a mean (`"exponential(2s)"`: each client then starts its operations as a Poisson stream while it thinks). Clients
that all think the same time stay in step after a stall; drawn ones spread out, as people do.

A constant is written back as its seconds (run.json as before), the others as the text they were given.
"""

from __future__ import annotations

import re
from typing import Annotated, Any, Literal

from pydantic import BaseModel, BeforeValidator, ConfigDict, model_serializer

from knee.scenario.fields import DurationRefused, seconds
from knee.scenario.units import DurationError, parse_duration

_FORM = re.compile(r"^\s*(\w+)\s*\((.*)\)\s*$", re.S)
_FORMS = 'a duration like 2s, "uniform(1s, 3s)" or "exponential(2s)"'


class ThinkTime(BaseModel):
    """`mean` seconds; `uniform`: within `spread` seconds either side of it; `exponential`: of that mean."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    kind: Literal["constant", "uniform", "exponential"] = "constant"
    mean: float = 0.0
    spread: float = 0.0

    @model_serializer
    def _as_given(self) -> float | str:
        if self.kind == "uniform":
            return f"uniform({_text(self.mean - self.spread)}, {_text(self.mean + self.spread)})"
        if self.kind == "exponential":
            return f"exponential({_text(self.mean)})"
        return self.mean

    def engine(self) -> dict[str, Any]:
        """The engine's `think_random` (its `think_ms` is the mean)."""
        if self.kind == "uniform":
            return {"kind": "uniform", "spread_ms": round(self.spread * 1000)}
        return {"kind": self.kind}

    def __float__(self) -> float:
        return self.mean

    def __str__(self) -> str:
        """'2 s', or the form it was given in: 'uniform(1s, 3s)'."""
        return f"{self.mean:g} s" if self.kind == "constant" else str(self._as_given())


def closed_only(group: Any, where: str, paced_by: str) -> None:
    """A group paced by arrivals (`paced_by`) given a closed loop's pause, `think` or `think_on_failure`: one sentence
    naming the key (after `where`, "groups.NAME." or ""), its value and the fix."""
    for key in ("think", "think_on_failure"):
        value = getattr(group, key)
        if float(value) > 0:
            said = str(value) if isinstance(value, ThinkTime) else f"{value:g} s"
            raise ValueError(f"{where}{key} applies to closed loops only (got {said} with {paced_by}); drop {key}")


def _text(seconds: float) -> str:
    """Seconds as a duration reads back exactly: 2 → '2s', 0.05 → '50ms'."""
    ms = round(seconds * 1000, 6)
    return f"{seconds:g}s" if ms % 1000 == 0 else f"{ms:g}ms"


def _duration(text: str, what: str) -> float:
    try:
        return parse_duration(text.strip(), what)
    except DurationError as exc:
        raise ValueError(str(exc)) from None


def parse_think(value: Any) -> Any:
    """What a user typed (a number or a duration: a constant; a form) → a `ThinkTime`. One of mean 0 is the
    constant 0, whatever its form: it never pauses."""
    if isinstance(value, ThinkTime):
        return value
    m = _FORM.match(value) if isinstance(value, str) else None
    if m is None:
        try:
            mean = seconds(value)
        except DurationRefused as exc:
            raise ValueError(f"must be {_FORMS}" if exc.form else str(exc)) from None
        if not isinstance(mean, float):  # a table, a list: not a think time
            raise ValueError(f"must be {_FORMS}")
        return ThinkTime(mean=mean)
    form, args = m.group(1).lower(), m.group(2).split(",")
    if form == "uniform" and len(args) == 2:
        least, most = (_duration(a, f"uniform's {w}") for a, w in zip(args, ("least", "most"), strict=True))
        if least > most:
            raise ValueError(f"{value!r}: its least is above its most; give uniform(LEAST, MOST), like uniform(1s, 3s)")
        think = ThinkTime(kind="uniform", mean=(least + most) / 2, spread=(most - least) / 2)
    elif form == "exponential" and len(args) == 1:
        think = ThinkTime(kind="exponential", mean=_duration(args[0], "exponential's mean"))
    else:
        raise ValueError(f"must be {_FORMS}")
    return think if think.mean > 0 else ThinkTime()


Think = Annotated[ThinkTime, BeforeValidator(parse_think)]
