"""How knee writes numbers: one formatter for tables, verdict sentences and reports alike.

rate(44.62) == "44.6 Hz"      rate(1853.2) == "1,853 Hz"      rate(4.6) == "4.60 Hz"
pct(0.004) == "0.4 %"         ms(0.3) == "0.300 ms"           duration(260) == "4.3 min"
load(50) == "50 clients"      load(500, "rate") == "500/s offered"      and_list(["1", "2", "5"]) == "1, 2 and 5"
transfer(2_500_000) == "2.50 MB/s (20.0 Mbit/s)"
"""

from __future__ import annotations

from collections.abc import Sequence


def sig3(x: float) -> str:
    """Three significant digits without an exponent: 4.60, 44.6, 0.00123; 1,853 from 100 up."""
    if x >= 100:
        return f"{x:,.0f}"
    if x == 0:
        return "0"
    s = f"{x:#.3g}"
    if "e" in s:  # very small: write it out
        return f"{x:.6f}".rstrip("0")
    return s.rstrip(".")


def rate(hz: float) -> str:
    """Operations per second: 3 significant digits, whole numbers with separators from 100 up."""
    return f"{sig3(hz)} Hz"


def pct(ratio: float) -> str:
    """A share as a percentage: 0.25 → '25 %', 0.053 → '5.3 %', 0.000012 → '0.0012 %', 0 → '0 %'."""
    p = ratio * 100
    if p >= 10 or p == 0:
        return f"{p:.0f} %"
    if p >= 0.1:
        return f"{p:.1f} %"
    return f"{p:.2g} %"


def ms(value: float) -> str:
    """A latency in milliseconds: '-' for none, '0.300 ms', '12.5 ms', '125 ms', '1.25 s', '12.5 s'."""
    if value <= 0:
        return "-"
    if value >= 1000:
        return f"{sig3(value / 1000)} s"
    return f"{sig3(value)} ms"


def duration(seconds: float) -> str:
    """35 → '35 s', 260 → '4.3 min', 600 → '10 min', 5400 → '1.5 h'."""
    if seconds < 60:
        return f"{seconds:.0f} s" if seconds >= 10 else f"{seconds:.1f} s"
    minutes = seconds / 60
    if minutes < 60:
        return f"{minutes:.1f} min" if minutes < 10 and not minutes.is_integer() else f"{minutes:.0f} min"
    hours = seconds / 3600
    return f"{hours:.1f} h" if not hours.is_integer() else f"{hours:.0f} h"


def num(x: float) -> str:
    """A fitted parameter with 2 significant digits, plain when possible: 0.02, 0.0004, 49, 1.2e-07."""
    if x == 0:
        return "0"
    if 1e-4 <= abs(x) < 1e6:
        s = f"{x:.2g}"
        if "e" in s:  # .2g switches to exponent for values like 1234
            return f"{x:.0f}"
        return s
    return f"{x:.2g}"


def level(n: float) -> str:
    """A level as an integer when it is one."""
    return f"{n:.0f}" if float(n).is_integer() else f"{n:g}"


def secs(x: float) -> str:
    """A time in seconds to 3 significant digits, without trailing zeros: 30 → '30', 0.857143 → '0.857', 2.5 → '2.5'
    (a --quick run's squeezed times)."""
    s = sig3(x)
    return s.rstrip("0").rstrip(".") if "." in s else s


def and_list(items: Sequence[str]) -> str:
    """['a'] → 'a'; ['a', 'b', 'c'] → 'a, b and c'."""
    return ", ".join(items[:-1]) + " and " + items[-1] if len(items) > 1 else "".join(items)


def level_rate(hz: float) -> str:
    """An offered rate as the scenario wrote it: 500 → '500/s', 2.5 → '2.5/s'."""
    return f"{level(hz)}/s"


def per_s(hz: float) -> str:
    """A measured rate per second, 3 significant digits, a whole one without its ".0": 89/s, 1,500/s, 1.25/s."""
    return f"{sig3(hz).removesuffix('.0')}/s"


def load(value: float, unit: str = "clients") -> str:
    """A sweep level in words: '50 clients', or for a rate sweep '500/s offered'."""
    if unit == "rate":
        return f"{level_rate(value)} offered"
    return f"{level(value)} client{'' if value == 1 else 's'}"


def span(lo: float, hi: float, unit: str = "clients") -> str:
    """'5 to 100 clients', '100/s to 600/s offered', or one level when lo == hi."""
    if lo == hi:
        return load(lo, unit)
    if unit == "rate":
        return f"{level_rate(lo)} to {level_rate(hi)} offered"
    return f"{level(lo)} to {level(hi)} clients"


def size(n: float) -> str:
    """Bytes: '512 B', '1.50 kB', '10.0 MB', '1.20 GB' (decimal units, like transfer rates)."""
    for unit, scale in (("GB", 1e9), ("MB", 1e6), ("kB", 1e3)):
        if n >= scale:
            return f"{sig3(n / scale)} {unit}"
    return f"{n:.0f} B"


def transfer(bytes_per_s: float) -> str:
    """A transfer rate in MB/s and Mbit/s: '2.50 MB/s (20.0 Mbit/s)'."""
    return f"{sig3(bytes_per_s / 1e6)} MB/s ({sig3(bytes_per_s * 8 / 1e6)} Mbit/s)"


def clauses(sentence: str) -> list[str]:
    """A sentence split at its top-level '; ' (never inside brackets): 'a (x; y); b' → ['a (x; y)', 'b']. The
    verdict's sentences become its short points this way."""
    out, depth, start = [], 0, 0
    for i, ch in enumerate(sentence):
        depth += (ch in "([") - (ch in ")]")
        if depth == 0 and sentence.startswith("; ", i):
            out.append(sentence[start:i])
            start = i + 2
    out.append(sentence[start:])
    return [c for c in out if c]
