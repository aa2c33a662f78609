"""Parsing of the small values users type: durations, status ranges, headers."""

from __future__ import annotations

import re

from knee.errors import UserError

_DURATION = re.compile(r"^\s*(\d+(?:\.\d*)?|\.\d+)\s*(us|µs|ms|s|m|h)?\s*$")
_UNIT_S = {"us": 1e-6, "µs": 1e-6, "ms": 1e-3, "s": 1.0, "m": 60.0, "h": 3600.0, None: 1.0}


def parse_duration(value: str | float | int, key: str) -> float:
    """'10s', '2m', '500ms', '1h', or a bare number of seconds → seconds."""
    if isinstance(value, bool):
        raise UserError(f"{key} must be a duration like 10s, 2m or 500ms (got {value!r})")
    if isinstance(value, int | float):
        seconds = float(value)
    else:
        m = _DURATION.match(value)
        if not m:
            raise UserError(f"{key} must be a duration like 10s, 2m or 500ms (got {value!r})")
        seconds = float(m.group(1)) * _UNIT_S[m.group(2)]
    if seconds < 0:
        raise UserError(f"{key} must not be negative (got {value!r})")
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


def parse_header(value: str, key: str = "-H") -> tuple[str, str]:
    """'Name: value' → (name, value)."""
    name, sep, rest = value.partition(":")
    if not sep or not name.strip() or any(c.isspace() for c in name.strip()):
        raise UserError(f"{key} must look like 'Name: value' (got {value!r})")
    return name.strip(), rest.strip()
