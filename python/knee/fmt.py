"""How the analysis writes numbers in its sentences: rates, percentages, durations, parameters."""

from __future__ import annotations


def rate(hz: float) -> str:
    """4.6 → '4.6 Hz', 1853.2 → '1,853 Hz', 0.35 → '0.35 Hz'."""
    if hz >= 100:
        return f"{hz:,.0f} Hz"
    if hz >= 1:
        return f"{hz:.1f} Hz"
    return f"{hz:.2g} Hz"


def pct(ratio: float) -> str:
    """0.004 → '0.4 %', 0.25 → '25 %', 0.000012 → '0.0012 %'."""
    p = ratio * 100
    if p >= 10 or p == 0:
        return f"{p:.0f} %"
    if p >= 0.1:
        return f"{p:.1f} %"
    return f"{p:.2g} %"


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


def load(value: float, unit: str = "clients") -> str:
    """A sweep level in words: '50 clients', or for a rate sweep '500/s offered'."""
    if unit == "rate":
        return f"{level_rate(value)} offered"
    return f"{level(value)} clients"


def level_rate(hz: float) -> str:
    """An offered rate as the scenario wrote it: 500 → '500/s', 2.5 → '2.5/s'."""
    return f"{level(hz)}/s"


def span(lo: float, hi: float, unit: str = "clients") -> str:
    """'5 to 100 clients', '100/s to 600/s offered', or one level when lo == hi."""
    if lo == hi:
        return load(lo, unit)
    if unit == "rate":
        return f"{level_rate(lo)} to {level_rate(hi)} offered"
    return f"{level(lo)} to {level(hi)} clients"
