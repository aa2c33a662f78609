"""How precisely the verdict's points are located: each with its bracket (the level it was found at and the highest
level measured below it) and, for the peak, the levels whose rate is within noise of it.

A rate's noise is its 95 % interval half-width by batch means over the step's intervals (StepResult.steady), or
the counting noise of its successes when the step had too few intervals (LevelRow.noise_hz); two levels' rates
are the same when they differ by less than their combined noise, and never by less than `NOISE` of the higher.
"""

from __future__ import annotations

from collections.abc import Sequence

from knee import fmt
from knee.analysis.levels import LevelRow
from knee.model import Bracket, Level, LevelUnit

NOISE = 0.05


def within_noise(rate_a: float, noise_a: float, rate_b: float, noise_b: float, noise: float = NOISE) -> bool:
    """Two rates, each with its 95 % half-width, are the same: they differ by less than their combined noise, or
    by less than `noise` of the higher."""
    measured = (noise_a**2 + noise_b**2) ** 0.5
    return abs(rate_a - rate_b) <= max(measured, noise * max(rate_a, rate_b))


def same_rate(a: LevelRow, b: LevelRow, noise: float = NOISE) -> bool:
    """The two levels' rates are within noise of each other."""
    return within_noise(a.rate, a.noise_hz, b.rate, b.noise_hz, noise)


def bracket(rows: Sequence[LevelRow], at: LevelRow) -> Bracket:
    """`at`'s bracket among `rows` (ascending levels)."""
    below = [r.level for r in rows if r.level < at.level]
    return Bracket(at=at.level, below=below[-1] if below else None)


def peak_bracket(rows: Sequence[LevelRow], peak: LevelRow, noise: float = NOISE) -> Bracket:
    """The peak's bracket, with the contiguous levels around it whose rate is within noise of the peak's."""
    b = bracket(rows, peak)
    i = list(rows).index(peak)
    lo = hi = i
    while lo > 0 and same_rate(rows[lo - 1], peak, noise):
        lo -= 1
    while hi + 1 < len(rows) and same_rate(rows[hi + 1], peak, noise):
        hi += 1
    b.low, b.high = rows[lo].level, rows[hi].level
    return b


def _at(level: Level, unit: LevelUnit) -> str:
    return fmt.level_rate(level) if unit == "rate" else fmt.level(level)


def below_words(rows: Sequence[LevelRow], b: Bracket, unit: LevelUnit, what: str) -> str:
    """'; 20: none' — the level below a located point and what it showed there (`what`); '' when none was
    measured below."""
    if b.below is None:
        return ""
    return f"; {_at(b.below, unit)}: {what}"


def peak_words(b: Bracket, unit: LevelUnit) -> str:
    """' (7–10 within noise)' when other levels came within noise of the peak, else ''."""
    if b.low is None or b.high is None or b.low == b.high:
        return ""
    return f" ({_at(b.low, unit)}–{_at(b.high, unit)} within noise)"
