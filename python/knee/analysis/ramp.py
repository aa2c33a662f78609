"""The ramp's verdict (docs/load-shapes.md): a run under a rising rate profile read interval by interval, which
finds in one run what a rate sweep finds step by step: where the achieved rate first falls behind the offered one,
and where errors start, each with the bracket the per-interval series gives.

Per whole interval i (the trailing partial one is left out): offered o_i (arrivals meant to start in it, the
engine's `offered` series), achieved s_i (operations that succeeded in it), errors e_i (failed + hung).

- behind: o_i − s_i > max(RAMP_SHORTFALL · o_i, RAMP_SLACK_COUNTS), in interval i and in the next one too (or i is
  the last): a shortfall that lasts, not one interval's jitter. An operation that ends in the interval after its
  arrival's moves one count between neighbours, hence the slack of a few counts.
- where: the service's achieved rate once behind is read as the median of s/dt over the first RAMP_BEHIND_READ
  behind intervals, and the offered rate fell behind where the profile crossed it: that rate, kept within the
  offered rates of the interval before the first behind one and of that one (each interval's start and end rates
  are estimated from its neighbours' means, exact for a linear ramp). Its bracket is the interval it lies in.
  Reading the crossing, rather than the first behind interval's mean, keeps the answer within the service's
  capacity whatever the ramp's slope; the bracket still says how far the series supports it.
- errors: (e_i) / (s_i + e_i) > onset, in interval i and in the next too (or i is the last): the offered rate of
  that interval (its mean), bracketed by its start and end.
- kept up to: the achieved rate of the last interval before the first behind one.
- knee's own lag: more than SATURATION_LATE of the interval's arrivals started late while a client was free for them
  (`lagged`: knee's scheduling, its CPU or its timer, not the service), in interval i and in the next too (or i is the
  last): the offered rate of that interval (its mean), bracketed by its start and end. A ramp that fell behind there
  or later was held back by the load side.
- the SLO (where the scenario has one): an interval misses it as a level does (knee.analysis.slo), its p99 the
  successes' in that interval (the series' buckets); where it misses it in that interval and in the next too (or
  that is the last): the offered rate of that interval (its mean), bracketed by its start and end.
"""

from __future__ import annotations

from collections.abc import Sequence
from statistics import median
from typing import NamedTuple

from knee import fmt
from knee.analysis.levels import SATURATION_LATE
from knee.analysis.slo import missed
from knee.model import GroupStats, Ramp, RampPoint, RunRecord, SeriesPoint
from knee.scenario import Slo

RAMP_SHORTFALL = 0.05  # the share of the offered arrivals an interval may miss and still keep up (levels.py's)
RAMP_SLACK_COUNTS = 3.0  # and a few counts: operations that end one interval after their arrival's
RAMP_BEHIND_READ = 3  # behind intervals whose median achieved rate is the service's


def judge_ramp(g: GroupStats, onset: float = 0.001, slo: Slo | None = None) -> Ramp | None:
    """The ramp's verdict on one group's measurement (against `slo` too, if given); None when it holds no offered
    arrivals (a closed loop) or fewer than two whole intervals."""
    dt = g.interval_s or 1.0
    whole = [p for p in g.series if p.t + dt <= g.elapsed_s + 1e-6]
    if len(whole) < 2 or not any(p.offered for p in whole):
        return None
    offered = [p.offered / dt for p in whole]
    edges = _edges(offered)
    ramp = Ramp(interval_s=dt, top_offered_hz=max(offered))
    short = [p.offered - p.succeeded > max(RAMP_SHORTFALL * p.offered, RAMP_SLACK_COUNTS) for p in whole]
    i = lasting(short)
    if i is not None:
        read = [p.succeeded / dt for p in whole[i : i + RAMP_BEHIND_READ]]
        achieved = median(read)
        first = max(i - 1, 0)
        crossing = min(max(achieved, edges[first]), edges[i + 1])
        k = i if crossing >= edges[i] or i == 0 else i - 1
        ramp.behind = RampPoint(offered_hz=crossing, low_hz=edges[k], high_hz=edges[k + 1], at_s=whole[k].t)
        ramp.kept_up_to_hz = whole[i - 1].succeeded / dt if i > 0 else None

    def located(i: int) -> RampPoint:
        """Interval i's point: its mean offered rate, bracketed by its start and end."""
        return RampPoint(offered_hz=offered[i], low_hz=edges[i], high_hz=edges[i + 1], at_s=whole[i].t)

    j = lasting([(p.failed + p.hung) > onset * (p.succeeded + p.failed + p.hung) for p in whole])
    ramp.errors = None if j is None else located(j)
    j = lasting([p.lagged > SATURATION_LATE * p.offered for p in whole])
    ramp.lagged = None if j is None else located(j)
    slo = slo if slo is not None and _timed(whole, slo) else None
    if slo is not None:
        misses = [interval_missed(slo, p) for p in whole]
        k = lasting([bool(m) for m in misses])
        if k is not None:
            ramp.slo_broken = located(k)
            ramp.slo_missed = misses[k]
    ramp.sentences = _sentences(ramp, slo)
    return ramp


def _timed(points: Sequence[SeriesPoint], slo: Slo) -> bool:
    """Whether the series can be held to `slo`: its intervals keep their latency, where the SLO limits the p99 (a
    run recorded before they did has none)."""
    return slo.p99_ms is None or any(p.p99_ms is not None for p in points)


class _Interval(NamedTuple):
    """One interval as an SLO judges it (knee.analysis.slo.Judged)."""

    total: int
    succeeded: int
    p99_ms: float
    failure_ratio: float


def interval_missed(slo: Slo, p: SeriesPoint) -> list[str]:
    """What interval `p` missed of the SLO, in words; empty when it met it (as a level would)."""
    total = p.succeeded + p.failed + p.hung
    ratio = (p.failed + p.hung) / total if total else 0.0
    return missed(slo, _Interval(total, p.succeeded, p.p99_ms or 0.0, ratio))


def run_ramp(record: RunRecord, group: str) -> Ramp | None:
    """The ramp's verdict on `group` of a run: when its scenario gives it a rising rate profile and one step
    measured it."""
    g = record.scenario.groups.get(group)
    profile = g.profile if g is not None else None
    steps = [s for s in record.steps if s.phase == "sweep" and group in s.groups]
    if profile is None or not profile.rising or len(steps) != 1:
        return None
    return judge_ramp(steps[0].groups[group], record.scenario.analysis.onset, record.scenario.slo)


def lasting(flags: Sequence[bool]) -> int | None:
    """The first index flagged, and flagged at the next one too (or the last)."""
    for i, f in enumerate(flags):
        if f and (i + 1 == len(flags) or flags[i + 1]):
            return i
    return None


def _edges(rates: Sequence[float]) -> list[float]:
    """The offered rate at each interval's start and end (n + 1 edges): the mean of the neighbours' means inside,
    extended linearly at both ends (exact for a linear ramp), never below 0."""
    n = len(rates)
    inner = [(rates[k - 1] + rates[k]) / 2 for k in range(1, n)]
    first = rates[0] - (rates[1] - rates[0]) / 2
    last = rates[-1] + (rates[-1] - rates[-2]) / 2
    return [max(0.0, e) for e in (first, *inner, last)]


def _sig(x: float) -> str:
    """3 significant digits, a whole rate without its ".0" (89/s, 112/s, 1.25/s)."""
    return fmt.sig3(x).removesuffix(".0")


def _span(p: RampPoint, dt: float) -> str:
    return f"{_sig(p.low_hz)}–{fmt.per_s(p.high_hz)} over {fmt.level(dt)}-s intervals"


def _sentences(r: Ramp, slo: Slo | None) -> list[str]:
    out = []
    if r.behind is None:
        out.append(f"kept up with the ramp up to {fmt.per_s(r.top_offered_hz)} offered")
    else:
        kept = f"kept up to {fmt.per_s(r.kept_up_to_hz)}: " if r.kept_up_to_hz is not None else ""
        out.append(f"{kept}behind from {fmt.per_s(r.behind.offered_hz)} ({_span(r.behind, r.interval_s)})")
    if r.lagged is not None:
        held = "" if r.behind is None or r.behind.at_s < r.lagged.at_s else ", so the load side set the pace there"
        out.append(
            f"knee itself lagged from {fmt.per_s(r.lagged.offered_hz)} ({_span(r.lagged, r.interval_s)}): more than "
            f"{fmt.pct(SATURATION_LATE)} of the arrivals started late while a client was free for them{held} (give "
            "knee a core of its own, or spread the load)"
        )
    if r.errors is None:
        out.append(f"no errors up to {fmt.per_s(r.top_offered_hz)} offered")
    else:
        out.append(f"errors from {fmt.per_s(r.errors.offered_hz)} ({_span(r.errors, r.interval_s)})")
    at = r.slo_broken
    where = None if at is None else f"{fmt.per_s(at.offered_hz)} ({_span(at, r.interval_s)})"
    return out + slo_sentence(slo, where, r.slo_missed, f"{fmt.per_s(r.top_offered_hz)} offered")


def slo_sentence(slo: Slo | None, where: str | None, missed: Sequence[str], top: str) -> list[str]:
    """A ramp's sentence of its SLO: met up to the `top` of the ramp, or broken from `where` and what was missed
    there; none without an SLO."""
    if slo is None:
        return []
    if where is None:
        return [f"met the SLO ({slo.describe()}) up to {top}"]
    return [f"broke the SLO ({slo.describe()}) from {where}: {'; '.join(missed)}"]
