"""Parsing of the small values users type: durations, status ranges, headers, lists of levels and rates."""

from __future__ import annotations

import re
from typing import Any

from knee.errors import UserError

_DURATION = re.compile(r"^\s*(\d+(?:\.\d*)?|\.\d+)\s*(us|µs|ms|s|m|h)?\s*$")
_UNIT_S = {"us": 1e-6, "µs": 1e-6, "ms": 1e-3, "s": 1.0, "m": 60.0, "h": 3600.0, None: 1.0}
# The longest duration anything takes: a thousand days (the engine counts milliseconds in 64 bits; 1e300 s and
# infinity passed every check before it and failed there, or as a run.json that could not be written).
MAX_DURATION_S = 1000 * 86_400.0
MAX_DURATION = "24000h (1000 days)"  # MAX_DURATION_S as said, in a unit knee reads
NEGATIVE = "must not be negative"
NOT_A_DURATION = "must be a duration like 10s, 2m or 500ms"


class DurationError(UserError):
    """parse_duration's refusal. `why` is it without the key, for a caller that names the key its own way;
    `form` is true when the value is not a duration at all (a caller that takes other forms too names those), false
    when it is one below 0 or above MAX_DURATION (words that hold wherever a duration goes)."""

    def __init__(self, key: str, why: str, value: object, form: bool = False) -> None:
        super().__init__(f"{key} {why} (got {value!r})")
        self.why = why
        self.form = form


def parse_duration(value: str | float | int, key: str) -> float:
    """'10s', '2m', '500ms', '1h', or a bare number of seconds → seconds."""
    if isinstance(value, bool):
        raise DurationError(key, NOT_A_DURATION, value, form=True)
    if isinstance(value, int | float):
        seconds = float(value) or 0.0  # -0.0 is 0
    else:
        negative = value.lstrip().startswith("-")  # "-1s": a duration, and below 0 (said so, below)
        m = _DURATION.match(value.lstrip()[1:] if negative else value)
        if not m:
            raise DurationError(key, NOT_A_DURATION, value, form=True)
        seconds = float(m.group(1)) * _UNIT_S[m.group(2)]
        seconds = -seconds if negative and seconds else seconds  # "-0s" is 0
    if seconds < 0:
        raise DurationError(key, NEGATIVE, value)
    if not seconds <= MAX_DURATION_S:  # NaN and infinity too
        raise DurationError(key, f"must be at most {MAX_DURATION}", value)
    return seconds


def parse_status_ranges(value: str, key: str = "--expect-status") -> list[tuple[int, int]]:
    """'200', '200-299,404', '2xx' → inclusive ranges."""
    ranges: list[tuple[int, int]] = []
    for part in (p.strip() for p in value.split(",")):
        m = re.fullmatch(r"([1-5])xx", part, re.IGNORECASE)
        if m:
            base = int(m.group(1)) * 100
            ranges.append((base, base + 99))
            continue
        m = re.fullmatch(r"(\d{3})(?:-(\d{3}))?", part)
        if not m:
            raise UserError(f"{key} must be statuses like 200, 200-299 or 2xx, separated by commas (got {value!r})")
        lo = int(m.group(1))
        hi = int(m.group(2) or lo)
        if hi < lo:
            raise UserError(f"{key}: range {part!r} ends before it starts")
        ranges.append((lo, hi))
    return ranges


_ESCAPES = {"n": "\n", "r": "\r", "t": "\t", "\\": "\\"}


def unescape(text: str) -> str:
    """An option's text with `\\n`, `\\r`, `\\t` and `\\\\` as the characters they stand for, all else as typed:
    a JSON message's own `\\"` stays, and so does every character past ASCII."""
    return re.sub(r"\\(.)", lambda m: _ESCAPES.get(m[1], m[0]), text)


def parse_header(value: str, key: str = "-H") -> tuple[str, str]:
    """'Name: value' → (name, value)."""
    name, sep, rest = value.partition(":")
    if not sep or not name.strip() or any(c.isspace() for c in name.strip()):
        raise UserError(f"{key} must look like 'Name: value' (got {value!r})")
    return name.strip(), rest.strip()


def parse_list(
    value: str | None, option: str, whole: bool, auto: bool = False, over_time: str | None = None
) -> list[Any] | str | None:
    """`--levels 5,20,50` / `--rates 100,200/s` → numbers; None when not given; with `auto`, "auto" stays (the
    level search). `over_time`: the option that takes a rate over time, named when `value` looks like one."""
    if value is None:
        return None
    if auto and value.strip().lower() == "auto":
        return "auto"
    out: list[Any] = []
    for part in value.split(","):
        text = part.strip().removesuffix("/s")
        unit = "a whole number of clients, e.g. 5,20,50" if whole else "operations per second, e.g. 500 or 100,200"
        try:
            x: float = int(text) if whole else float(text)
        except ValueError:
            what = "a whole number" if whole else "a number"
            said = f"{option} {value!r}: {part.strip()!r} is not {what}; use {unit}"
            if over_time is not None and (":" in value or "(" in value):  # points "0s:10, 60s:400", or sine(…)
                said += f'; a rate over time is {over_time}, e.g. {over_time} "0s:10, 60s:400"'
            raise UserError(said) from None
        if not (0 < x < float("inf")):
            what = "level must be a positive number of clients" if whole else "rate must be a positive number"
            raise UserError(f"{option} {value!r}: every {what} ({unit})")
        out.append(x)
    return out
