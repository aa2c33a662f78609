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

import re
from collections.abc import Callable, Sequence

from knee import fmt
from knee.analysis.levels import LevelRow, sweep_steps
from knee.analysis.precision import same_rate
from knee.analysis.slo import capacity
from knee.model import Level, LevelUnit, RunRecord, StepResult, Verdict
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
    v: Verdict,
    rows: list[LevelRow],
    stress: str,
    *,
    onset: float,
    slo: Slo | None,
    searched: bool = False,
    reasons: Callable[[Level | None], str] | None = None,
) -> None:
    """The background group's verdict in `v` (its sentences, error onset, hung, SLO capacity), from its `rows`
    at the stress group's levels; `reasons`: the failures' main reasons in words at a level, or at every level
    for None (`why_failed`)."""
    unit = v.level_unit
    why = reasons or (lambda _: "")

    def at(level: float) -> str:
        """'2 clients of main', 'main at 500/s offered': where the stress group was."""
        return f"{stress} at {fmt.load(level, unit)}" if unit == "rate" else f"{fmt.load(level, unit)} of {stress}"

    first, last = rows[0], rows[-1]
    never = all(r.succeeded == 0 for r in rows)  # nothing ever succeeded: its counts are the news, not its rates
    if len(rows) == 1:
        v.sentences.append(f"beside {at(first.level)}: {_outcome(first, why(first.level))}")
    elif never:
        where = fmt.span(first.level, last.level, unit)
        where = f"{stress} at {where}" if unit == "rate" else f"{where} of {stress}"
        every = LevelRow(
            level=last.level, direction=last.direction, **{k: sum(getattr(r, k) for r in rows) for k in _COUNTS}
        )
        v.sentences.append(f"beside {where}: {_outcome(every, why(None))}")
    else:
        v.sentences.append(_degradation(rows, stress, unit))
    failing = next((r for r in rows if r.failure_ratio > onset), None)
    if failing is not None:
        v.error_onset_level = failing.level
        if len(rows) > 1 and not (never and failing is first):  # else the outcome above says it all
            v.sentences.append(f"first errors beside {at(failing.level)}: {_outcome(failing, why(failing.level))}")
    elif first.rate > 0 and len(rows) > 1:
        v.sentences.append(f"no errors beside {stress} up to {fmt.load(last.level, unit)}")
    for r in rows:
        v.hung_by_level[r.level] = r.hung
    hung = [r for r in rows if r.hung]
    if hung and len(rows) > 1:
        total = sum(r.hung for r in hung)
        v.sentences.append(f"{total:,} operation{'s' if total != 1 else ''} hung, the first beside {at(hung[0].level)}")
    if slo is not None:
        v.capacity_under_slo, v.slo_passed = capacity(rows, slo, searched)
        if v.capacity_under_slo is None:
            v.sentences.append(f"it missed the SLO ({slo.describe()}) already beside {at(first.level)}")
        else:
            up_to = fmt.load(v.capacity_under_slo, unit)
            v.sentences.append(f"it met the SLO ({slo.describe()}) beside {stress} up to {up_to}")


def _outcome(r: LevelRow, why: str) -> str:
    """'40 succeeded (10.0 Hz, p99 3.10 ms), 16 failed (401 Unauthorized)', '0 succeeded, 16 failed (…), 2 hung':
    how the group's operations ended at one level, with the failures' main reasons (`why`)."""
    how = ", ".join(x for x in (fmt.rate(r.rate) * (r.rate > 0), f"p99 {fmt.ms(r.p99_ms)}" * (r.p99_ms > 0)) if x)
    words = f"{r.succeeded:,} succeeded" + (f" ({how})" if r.succeeded and how else "")
    words += f", {r.failed:,} failed" + (f" ({why})" if r.failed and why else "")
    return words + (f", {r.hung:,} hung" if r.hung else "")


def why_failed(steps: Sequence[StepResult], group: str, level: Level | None = None) -> str:
    """The group's failures at `level` (None: at every level) by their main reasons in words: '401 Unauthorized',
    or with more than one '12 × 401 Unauthorized, 4 × refused' (the two most frequent; an HTTP status by its code
    and phrase, another failure by its class); "" without failures."""
    by: dict[str, int] = {}
    for s in sweep_steps(steps, group):
        if level is not None and s.level != level:
            continue
        for r in s.groups[group].reasons:
            m = _STATUS.match(r.sample)
            said = m[1] if m else r.class_
            by[said] = by.get(said, 0) + r.count
    top = sorted(by.items(), key=lambda kv: -kv[1])[:2]
    if len(by) <= 1:
        return top[0][0] if top else ""
    return ", ".join(f"{n:,} × {said}" for said, n in top)


_COUNTS = ("succeeded", "failed", "hung", "abandoned")
_STATUS = re.compile(r"HTTP/[\d.]+ (\d{3}(?: [^:;]*)?)")


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
