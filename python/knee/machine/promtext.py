"""Prometheus' text exposition format (version 0.0.4, and OpenMetrics text, which it is a near subset of), read.

    name{label="value",…} value [timestamp]
    # HELP name text
    # TYPE name counter|gauge|histogram|summary|untyped

`parse(text, keep)` returns the samples of the metrics `keep` accepts, and each metric's TYPE. A line of a metric
not kept is skipped after its name is read, so an exporter's thousand lines cost little when knee keeps twenty
(node_exporter's page is ~1,500 lines, and it is read once a second per host). Written here rather than taken from
prometheus_client (its parser reads and builds every sample of every family): the grammar is a few lines, and
this is the one place that reads it.
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable
from dataclasses import dataclass

_NAME = re.compile(r"[a-zA-Z_:][a-zA-Z0-9_:]*")
_LABEL = re.compile(r'\s*([a-zA-Z_][a-zA-Z0-9_]*)\s*=\s*"((?:[^"\\]|\\.)*)"\s*(,|$)')
_ESCAPES = {"\\\\": "\\", '\\"': '"', "\\n": "\n"}
_SPECIAL = {"NaN": math.nan, "+Inf": math.inf, "Inf": math.inf, "-Inf": -math.inf}


class PromTextError(ValueError):
    """Text that is not Prometheus' exposition format (the line number and what is wrong)."""


@dataclass(frozen=True)
class Sample:
    name: str
    labels: dict[str, str]
    value: float


def _unescape(value: str) -> str:
    return re.sub(r'\\[\\"n]', lambda m: _ESCAPES[m.group(0)], value) if "\\" in value else value


def _labels(text: str, number: int) -> dict[str, str]:
    out: dict[str, str] = {}
    pos = 0
    while pos < len(text):
        m = _LABEL.match(text, pos)
        if m is None:
            if text[pos:].strip() in ("", ","):
                break
            raise PromTextError(f'line {number}: a label is not name="value": {text[pos : pos + 40]!r}')
        out[m.group(1)] = _unescape(m.group(2))
        pos = m.end()
    return out


def _value(text: str, number: int) -> float:
    if text in _SPECIAL:
        return _SPECIAL[text]
    try:
        return float(text)
    except ValueError:
        raise PromTextError(f"line {number}: {text!r} is not a number") from None


def _close(line: str, start: int) -> int:
    """The index of the `}` that closes the label set opened at `start` (quotes and escapes skipped)."""
    quoted = False
    i = start + 1
    while i < len(line):
        c = line[i]
        if quoted:
            if c == "\\":
                i += 1
            elif c == '"':
                quoted = False
        elif c == '"':
            quoted = True
        elif c == "}":
            return i
        i += 1
    return -1


def parse(text: str, keep: Callable[[str], bool] | None = None) -> tuple[list[Sample], dict[str, str]]:
    """The samples of the metrics that `keep(name)` accepts (all when None), and each metric's declared TYPE."""
    samples: list[Sample] = []
    types: dict[str, str] = {}
    for number, raw in enumerate(text.splitlines(), 1):
        line = raw.strip()
        if not line:
            continue
        if line[0] == "#":
            parts = line.split(None, 3)
            if len(parts) >= 4 and parts[1] == "TYPE":
                types[parts[2]] = parts[3].strip()
            continue
        m = _NAME.match(line)
        if m is None:
            raise PromTextError(f"line {number}: does not start with a metric name: {line[:60]!r}")
        name = m.group(0)
        rest = line[m.end() :]
        if keep is not None and not keep(name):
            if rest[:1] not in ("{", " ", "\t"):  # a line not kept is still a sample's, or the text is not this format
                raise PromTextError(f"line {number}: not `name{{labels}} value`: {line[:60]!r}")
            continue
        labels: dict[str, str] = {}
        if rest.startswith("{"):
            end = _close(rest, 0)
            if end < 0:
                raise PromTextError(f"line {number}: its labels are not closed with '}}': {line[:60]!r}")
            labels = _labels(rest[1:end], number)
            rest = rest[end + 1 :]
        fields = rest.split()
        if not fields or len(fields) > 2 or not rest[:1].isspace():
            raise PromTextError(f"line {number}: not `name{{labels}} value`: {line[:60]!r}")
        samples.append(Sample(name, labels, _value(fields[0], number)))
    return samples, types
