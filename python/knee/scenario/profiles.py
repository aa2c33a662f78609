"""Rate profiles: an open loop's arrivals per second over time (docs/load-shapes.md).

    rate = "0s:10, 60s:400"                                 a ramp: linear between the points
    rate = {points = "0s:50, 30s:200, 60s:50", step = true}  steps: each rate held until the next point
    rate = "sine(mean=200, amplitude=100, period=60s)"
    rate = "spike(base=50, peak=2000, at=30s, hold=10s)"     base, then peak from `at` for `hold`, then base

Times count from the step's start (warm-up included); before the first point the first rate holds, after the last
point the last one. The engine (crates/engine/src/profile.rs) paces arrival i of the group where the profile's
integral Λ(t) = i, so every interval holds the integral over it, rounded; `integral` here is the same function (the
analysis and the tests hold counts against it).
"""

from __future__ import annotations

import math
import re
from itertools import pairwise
from typing import Any, Literal, NamedTuple

from pydantic import BaseModel, ConfigDict, model_serializer

from knee.scenario.units import DurationError, parse_duration

MAX_RATE_HZ = 10_000_000.0  # crates/engine/src/pacer.rs MAX_RATE_HZ (knee.scenario.fields says why)
_FORMS = (
    'give points like "0s:10, 60s:400" (a ramp; with step = true, steps), sine(mean=200, amplitude=100, '
    "period=60s) or spike(base=50, peak=2000, at=30s, hold=10s)"
)
_ARGS = {"sine": ("mean", "amplitude", "period"), "spike": ("base", "peak", "at", "hold")}
_TIMES = {"period", "at", "hold"}


class RateProfile(BaseModel):
    """One profile, parsed and checked (`parse`); `text` is what the user wrote, normalised."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    shape: Literal["points", "sine", "spike"]
    points: tuple[tuple[float, float], ...] = ()
    step: bool = False
    mean: float = 0.0
    amplitude: float = 0.0
    period: float = 0.0
    base: float = 0.0
    peak: float = 0.0
    at: float = 0.0
    hold: float = 0.0

    @property
    def stepped(self) -> bool:
        """Each rate holds until the next point (steps, and a spike)."""
        return self.step or self.shape == "spike"

    def breakpoints(self) -> tuple[tuple[float, float], ...]:
        """(seconds, rate) points of a points profile or a spike (a spike is steps: base, peak, base)."""
        if self.shape == "spike":
            peak = ((self.at, self.peak), (self.at + self.hold, self.base))
            return peak if self.at == 0 else ((0.0, self.base), *peak)
        return self.points

    @property
    def end_s(self) -> float | None:
        """Where the profile ends of itself: its last point; a spike as long after the peak as before it; a sine
        never (it needs a duration)."""
        if self.shape == "points":
            return self.points[-1][0] if self.points[-1][0] > 0 else None
        if self.shape == "spike":
            return 2 * self.at + self.hold if self.at > 0 else self.hold * 2
        return None

    @property
    def peak_hz(self) -> float:
        if self.shape == "sine":
            return self.mean + self.amplitude
        return max(r for _, r in self.breakpoints())

    @property
    def rising(self) -> bool:
        """A profile whose rate never falls and does rise: a ramp, read by knee.analysis.ramp."""
        if self.shape != "points" or len(self.points) < 2:
            return False
        rates = [r for _, r in self.points]
        return all(b >= a for a, b in pairwise(rates)) and rates[-1] > rates[0]

    def rate_at(self, t: float) -> float:
        if self.shape == "sine":
            return self.mean + self.amplitude * math.sin(2 * math.pi * t / self.period)
        pts = self.breakpoints()
        k = max(i for i, (x, _) in enumerate(pts) if x <= t) if t >= pts[0][0] else 0
        if k + 1 == len(pts) or self.stepped or t < pts[0][0]:
            return pts[k][1]
        (t0, r0), (t1, r1) = pts[k], pts[k + 1]
        return r0 + (r1 - r0) * (t - t0) / (t1 - t0)

    def integral(self, t: float) -> float:
        """Λ(t): the arrivals due from the start to `t` seconds."""
        if self.shape == "sine":
            w = 2 * math.pi / self.period
            return self.mean * t + self.amplitude / w * (1 - math.cos(w * t))
        pts = list(self.breakpoints())
        if pts[0][0] > 0:
            pts.insert(0, (0.0, pts[0][1]))
        total = 0.0
        for (t0, r0), (t1, r1) in pairwise(pts):
            if t <= t0:
                return total
            end = min(t, t1)
            r_end = r0 if self.stepped else r0 + (r1 - r0) * (end - t0) / (t1 - t0)
            total += (end - t0) * (r0 + r_end) / 2
        if t > pts[-1][0]:
            total += (t - pts[-1][0]) * pts[-1][1]
        return total

    @property
    def text(self) -> str:
        """The profile as written in a scenario (without `step`, which is a key of its own)."""
        if self.shape == "points":
            return ", ".join(f"{_exact(t)}s:{_exact(r)}" for t, r in self.points)
        keys = _ARGS[self.shape]
        return f"{self.shape}(" + ", ".join(f"{k}={_exact(getattr(self, k))}{'s' * (k in _TIMES)}" for k in keys) + ")"

    def squeezed(self, seconds: float) -> RateProfile:
        """The same shape over at most `seconds` (`--quick`): its times scaled down, its rates kept."""
        span = self.end_s if self.end_s is not None else self.period
        f = min(1.0, seconds / span) if span > 0 else 1.0
        return self.model_copy(
            update={
                "points": tuple((t * f, r) for t, r in self.points),
                "period": self.period * f,
                "at": self.at * f,
                "hold": self.hold * f,
            }
        )

    @model_serializer
    def toml_value(self) -> str | dict[str, Any]:
        """What `rate` holds in a scenario file (`--save-scenario`): the text, or a table with step = true."""
        return {"points": self.text, "step": True} if self.step else self.text


def _num(x: float) -> str:
    return f"{x:g}"


def _exact(x: float) -> str:
    """`x` as a decimal that reads back as the same float (the text a run.json or --save-scenario keeps: `:g`'s six
    digits made 1234567/s 1234570, and 1000000s `1e+06s`, which is no duration)."""
    text = repr(float(x))
    if "e" in text:
        text = f"{x:f}".rstrip("0")
    return text.removesuffix(".").removesuffix(".0")


def ends_of_itself(text: str) -> bool:
    """A profile written `text` has an end of its own (points, a spike; not a sine); a mistake in it counts as one
    (the scenario's validation names it)."""
    try:
        return parse(text).end_s is not None
    except ValueError:
        return True


class Words(NamedTuple):
    """How the errors speak of a profile's values: a rate's (`rate`) or a number of clients's (`clients`)."""

    key: str  # the scenario key that holds the profile
    value: str  # what one value is
    values: str  # and more than one
    unit: str  # what a value counts
    none: str  # what all-zero values mean


RATE = Words("rate", "rate", "rates", "arrivals per second", "no arrival would ever be due")
CLIENTS = Words("clients", "number of clients", "numbers of clients", "clients", "no client would ever run")


def parse(value: Any, words: Words = RATE) -> RateProfile:
    """A profile from a scenario's `rate` or `clients` (a string, or a table {points, step}); ValueError names the
    value and the fix."""
    step = False
    if isinstance(value, dict):
        unknown = sorted(set(value) - {"points", "step"})
        if unknown or "points" not in value:
            raise ValueError(
                f'a {words.key} table holds points and step, like {{points = "0s:50, 30s:200", step = true}} '
                f"(got {', '.join(unknown) or 'no points'})"
            )
        step = value.get("step", False)
        if not isinstance(step, bool):
            raise ValueError(f"step must be true or false (got {step!r})")
        value = value["points"]
    if not isinstance(value, str) or not value.strip():
        raise ValueError(f"a {words.key} profile must be text (got {value!r}); {_forms(words)}")
    text = value.strip()
    call = re.fullmatch(r"([A-Za-z_]\w*)\s*\((.*)\)", text, re.S)
    if call:
        if step:
            raise ValueError(f"step = true applies to points, not to {call.group(1)}(…); drop step")
        return _shape(text, call.group(1), call.group(2), words)
    if ":" not in text:
        raise ValueError(f"{text!r} is not a {words.key} profile; {_forms(words)}")
    return _points(text, step, words)


def _forms(words: Words) -> str:
    return _FORMS if words is RATE else _FORMS.replace("10, 60s:400", "1, 60s:40")


def _points(text: str, step: bool, words: Words) -> RateProfile:
    points: list[tuple[float, float]] = []
    for part in text.split(","):
        t_s, sep, r_s = part.strip().partition(":")
        if not sep:
            raise ValueError(
                f"{text!r}: {part.strip()!r} is not a point TIME:{words.key.upper()} like 30s:200; {_forms(words)}"
            )
        t = _seconds(text, t_s, "a point's time")
        r = _rate(text, r_s, f"the {words.value} at {_num(t)}s", words)
        if points and t <= points[-1][0]:
            raise ValueError(
                f"{text!r}: the times must increase, but {_num(t)}s comes after {_num(points[-1][0])}s; "
                "give the points in increasing time"
            )
        points.append((t, r))
    if all(r == 0 for _, r in points):
        raise ValueError(f"{text!r}: every {words.value} is 0, so {words.none}; give a {words.value} above 0")
    return RateProfile(shape="points", points=tuple(points), step=step)


def _shape(text: str, name: str, args: str, words: Words) -> RateProfile:
    if name not in _ARGS:
        raise ValueError(f"{text!r}: unknown shape {name!r}; {_FORMS}")
    want = _ARGS[name]
    got: dict[str, float] = {}
    for part in filter(None, (p.strip() for p in args.split(","))):
        key, sep, raw = part.partition("=")
        key = key.strip()
        if not sep or key not in want:
            raise ValueError(f"{text!r}: {name} takes {', '.join(want)} (got {part!r}); e.g. {_example(name)}")
        got[key] = _seconds(text, raw, key) if key in _TIMES else _rate(text, raw, key, words)
    missing = [k for k in want if k not in got]
    if missing:
        raise ValueError(f"{text!r}: {name} needs {', '.join(missing)}; e.g. {_example(name)}")
    if name == "sine":
        if got["mean"] <= 0:
            raise ValueError(f"{text!r}: mean must be above 0 (got {_num(got['mean'])}); give the mean {words.value}")
        if got["amplitude"] > got["mean"]:
            raise ValueError(
                f"{text!r}: amplitude {_num(got['amplitude'])} is more than mean {_num(got['mean'])}, so the "
                f"{words.value} would fall below 0; give an amplitude of at most the mean"
            )
        if got["period"] <= 0:
            raise ValueError(f"{text!r}: period must be longer than 0s; give one like 60s")
    elif got["hold"] <= 0:
        raise ValueError(f"{text!r}: hold must be longer than 0s; give how long the peak lasts, like 10s")
    elif got["base"] == 0 and got["peak"] == 0:
        raise ValueError(f"{text!r}: base and peak are both 0, so {words.none}; give a {words.value} above 0")
    return RateProfile(shape=name, **got)  # type: ignore[arg-type]


def _example(name: str) -> str:
    return (
        "sine(mean=200, amplitude=100, period=60s)" if name == "sine" else "spike(base=50, peak=2000, at=30s, hold=10s)"
    )


def _seconds(text: str, raw: str, what: str) -> float:
    try:
        return float(parse_duration(raw.strip(), what))
    except DurationError as exc:
        if exc.form:
            raise ValueError(f"{text!r}: {what} {raw.strip()!r} is not a duration like 30s, 2m or 500ms") from None
        raise ValueError(f"{text!r}: {what} {raw.strip()!r} {exc.why}; give one like 30s") from None


def _rate(text: str, raw: str, what: str, words: Words) -> float:
    raw = raw.strip().removesuffix("/s")
    try:
        r = float(raw)
    except ValueError:
        raise ValueError(f"{text!r}: {what} {raw!r} is not a number of {words.unit}") from None
    if not math.isfinite(r):
        raise ValueError(f"{text!r}: {what} {raw!r} is not a finite number of {words.unit}")
    if r < 0:
        raise ValueError(f"{text!r}: {what} is {raw}, below 0; give {words.values} of 0 or more")
    if words is RATE and r > MAX_RATE_HZ:
        raise ValueError(f"{text!r}: {what} {raw} is more than knee's engine can pace ({MAX_RATE_HZ:,.0f}/s); lower it")
    return r
