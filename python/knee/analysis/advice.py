"""Which levels to add when the measured points cannot support a USL fit."""

from __future__ import annotations

import math
from collections.abc import Iterable
from typing import TYPE_CHECKING

from knee import fmt

if TYPE_CHECKING:
    import numpy as np

MIN_LEVELS = 4
MIN_BELOW_PEAK = 2
_NICE = (1.0, 1.2, 1.5, 2.0, 2.5, 3.0, 4.0, 5.0, 6.0, 8.0)


def nice(x: float) -> int:
    """The 'round' number nearest to x on a log scale: 10.8 → 10, 25.5 → 25, 37 → 40."""
    if x <= 1:
        return 1
    exp = math.floor(math.log10(x))
    candidates: list[float] = [m * 10.0**e for e in (exp - 1, exp, exp + 1) for m in _NICE]
    best = min(candidates, key=lambda c: abs(math.log(c / x)))
    return round(best)


def level_list(levels: Iterable[float]) -> str:
    """[10, 25] → '10 and 25'; [5, 10, 25] → '5, 10 and 25'."""
    return fmt.and_list([f"{v:.0f}" if float(v).is_integer() else f"{v:.3g}" for v in levels])


def between(lo: float, hi: float, measured: Iterable[float], count: int = 2) -> list[int]:
    """Up to `count` round levels strictly between lo and hi that were not measured (e.g. 1..50 → 10, 25)."""
    taken = {float(v) for v in measured}
    out: list[int] = []
    for frac in (0.2, 0.5, 0.35, 0.65, 0.8):
        v = nice(lo + (hi - lo) * frac)
        if lo < v < hi and float(v) not in taken and v not in out:
            out.append(v)
        if len(out) == count:
            break
    return sorted(out)


def for_points(
    n: np.ndarray, x: np.ndarray, n_star: float | None, left_out: Iterable[float] = ()
) -> tuple[list[str], list[str]]:
    """Warnings (why the fit is weak) and advice (which levels to add) for these points.

    `left_out`: levels that were measured but not given to the fit (e.g. mostly failures).
    """
    warnings: list[str] = []
    tips: list[str] = []
    levels = sorted({float(v) for v in n})
    peak = float(n[int(x.argmax())])
    below = [v for v in levels if v < peak]
    above = [v for v in levels if v > peak]
    if len(levels) < MIN_LEVELS:
        warnings.append(f"only {len(levels)} levels: too few to pin down σ, κ and λ (measure at least {MIN_LEVELS})")
    if len(below) < MIN_BELOW_PEAK:
        lo = below[-1] if below else 0.0
        add = between(lo, peak, levels)
        where = f"between {level_list([lo])} and {level_list([peak])}" if below else f"below {level_list([peak])}"
        warnings.append(
            f"only {len(below)} level{'s' if len(below) != 1 else ''} below the measured peak at {level_list([peak])}: "
            "σ (contention) is poorly determined"
        )
        if add:
            tips.append(f"add levels {where}, e.g. {level_list(add)}")
    higher = sorted(v for v in left_out if v > levels[-1])
    if not above and higher:
        top, nxt = levels[-1], higher[0]
        warnings.append(
            f"no fitted level lies past the measured peak at {level_list([top])} "
            f"({level_list([nxt])} was left out of the fit): κ, N* and the predicted peak are extrapolated"
        )
        add = between(top, nxt, [*levels, *higher])
        if add:
            tips.append(f"add levels between {level_list([top])} and {level_list([nxt])}, e.g. {level_list(add)}")
    elif not above:
        top = levels[-1]
        warnings.append(
            f"throughput was still rising at the highest level ({level_list([top])}): "
            "κ, N* and the predicted peak are extrapolated"
        )
        tips.append(f"add levels above {level_list([top])}, e.g. {level_list([nice(2 * top), nice(4 * top)])}")
    elif n_star is not None and n_star > 4 * levels[-1]:
        warnings.append(f"the predicted peak N* = {n_star:.0f} is far beyond the highest level measured")
    return warnings, tips
