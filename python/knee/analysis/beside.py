"""A background group's verdict: how it fared beside the swept group, level by level — no peak of its own.

A group whose clients do not follow the level (a baseload of 50 clients) beside a group whose clients do
(the stress group, `RunRecord.measured_group`) ran at the same size in every step: its rows are the stress
group's levels, not its own. A peak "with 2 clients" would name the stress level as its own, so it gets none;
instead (docs/analysis.md, "Background groups"):
- its degradation: its rate and p99 at the lowest stress level against the highest (and its lowest rate
  between, when that is elsewhere), the rates the same when within noise (precision.same_rate);
- the stress level from which its operations failed (error onset, past `onset`) and from which some hung;
- under an SLO, the highest stress level beside which it met it.
Its verdict's levels (`error_onset_level`, `hung_by_level`, `capacity_under_slo`) are the stress group's.
"""

from __future__ import annotations

from knee import fmt
from knee.analysis.levels import LevelRow, failed_or_hung
from knee.analysis.precision import same_rate
from knee.analysis.slo import capacity
from knee.model import LevelUnit, RunRecord, Verdict
from knee.scenario import Slo


def stress_group(record: RunRecord, group: str) -> str | None:
    """The swept group that `group` ran beside, when `group` is a background group: its clients do not follow
    the level while the measured group's do (`record.scenario`); else None."""
    measured = record.measured_group
    groups = record.scenario.groups
    if group == measured or group not in groups or measured not in groups:
        return None
    if groups[group].follows_level or not groups[measured].follows_level:
        return None
    return measured


def against(
    v: Verdict, rows: list[LevelRow], stress: str, *, onset: float, slo: Slo | None, searched: bool = False
) -> None:
    """The background group's verdict in `v` (its sentences, error onset, hung, SLO capacity), from its `rows`
    at the stress group's levels."""
    unit = v.level_unit

    def at(level: float) -> str:
        return f"{stress} at {fmt.load(level, unit)}"

    first, last = rows[0], rows[-1]
    if len(rows) == 1:
        p99 = f" (p99 {fmt.ms(first.p99_ms)})" if first.p99_ms > 0 else ""
        v.sentences.append(f"{fmt.rate(first.rate)} beside {at(first.level)}{p99}")
    else:
        v.sentences.append(_degradation(rows, stress, unit))
    failing = next((r for r in rows if r.failure_ratio > onset), None)
    if failing is not None:
        v.error_onset_level = failing.level
        v.sentences.append(f"errors from beside {at(failing.level)} ({failed_or_hung(failing, fmt.pct)})")
    elif first.rate > 0:
        v.sentences.append(f"no errors beside {stress} up to {fmt.load(last.level, unit)}")
    for r in rows:
        v.hung_by_level[r.level] = r.hung
    hung = [r for r in rows if r.hung]
    if hung:
        total = sum(r.hung for r in hung)
        v.sentences.append(f"{total:,} operation{'s' if total != 1 else ''} hung (from beside {at(hung[0].level)})")
    if slo is not None:
        v.capacity_under_slo, v.slo_passed = capacity(rows, slo, searched)
        if v.capacity_under_slo is None:
            v.sentences.append(f"it missed the SLO ({slo.describe()}) already beside {at(first.level)}")
        else:
            up_to = fmt.load(v.capacity_under_slo, unit)
            v.sentences.append(f"it met the SLO ({slo.describe()}) beside {stress} up to {up_to}")


def _degradation(rows: list[LevelRow], stress: str, unit: LevelUnit) -> str:
    """'beside stress from 1 to 8 clients its rate fell 57 % (94.7 Hz → 40.4 Hz) and its p99 went from 24.3 ms
    to 59.9 ms'."""
    first, last = rows[0], rows[-1]
    if same_rate(first, last):
        moved = "held within noise"
    elif first.rate <= 0:
        moved = "rose from nothing"
    elif last.rate < first.rate:
        moved = f"fell {fmt.pct(1 - last.rate / first.rate)}"
    else:
        moved = f"rose {fmt.pct(last.rate / first.rate - 1)}"
    words = (
        f"beside {stress} from {fmt.span(first.level, last.level, unit)} its rate {moved} ({fmt.rate(first.rate)} → "
        f"{fmt.rate(last.rate)})"
    )
    if first.p99_ms > 0 and last.p99_ms > 0:
        words += f" and its p99 went from {fmt.ms(first.p99_ms)} to {fmt.ms(last.p99_ms)}"
    low = min(rows, key=lambda r: r.rate)
    if low is not first and low is not last and not same_rate(low, last):
        words += f"; its lowest rate was {fmt.rate(low.rate)}, beside {stress} at {fmt.load(low.level, unit)}"
    return words
