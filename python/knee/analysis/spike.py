"""The spike's verdict (docs/load-shapes.md): a background group read interval by interval through another group's
spike (`spike(base, peak, at, hold)`): what the baseload's service was before, how deep it fell, how long after
the spike it took to be back within its noise, and what failed meanwhile.

Per whole interval of the background group (the trailing partial one left out): its rate (successes per second)
and its p99 (the successes' in the interval: the series' latency buckets, knee.analysis.series_latency).

- before: the intervals that end by the spike's start. Their rates' mean and p99 (over them together) are the
  baseline; its noise band: an interval is *back* when its rate is at least the lowest rate before less
  SPIKE_RATE_SLACK of the mean, and its p99 at most the highest p99 before plus SPIKE_P99_SLACK of it, or at most
  what the intervals before, together, read at the highest rank an interval of as many successes may put its p99
  at by chance (`p99_noise`) — or it has no p99: nothing succeeded is not back.
- the fall: the lowest interval rate from the spike's start until the background was back; its depth is that rate
  against the mean before.
- back: the first interval starting at or after the spike's end that is back, and the next one too (or it is the
  last): a return that lasts. The recovery time is its start less the spike's end, bracketed by the interval
  before it (the return happened within it) — both clipped at 0.
- during and after: the rate and p99 over the intervals inside the spike, and over those from the return to the
  run's end.
- failures: each group's failures by class in the intervals from the spike's start to the return (to the end when
  it never came back).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from math import sqrt
from statistics import mean

from knee import fmt
from knee.analysis.series_latency import percentile_ms
from knee.model import RunRecord, SeriesPoint, Spike, SpikeWindow, StepResult
from knee.scenario.profiles import RateProfile

SPIKE_RATE_SLACK = 0.05  # the share of the mean rate before that a returned interval may still fall below the lowest
SPIKE_P99_SLACK = 0.10  # and the share of the highest p99 before that its p99 may rise above it
SPIKE_P99_Z = 1.96  # standard errors of the p99's rank that an interval's p99 may stray by chance (two-sided 95 %)


def p99_noise(before: Sequence[SeriesPoint], n: int) -> float | None:
    """The highest p99 an interval of `n` successes drawn from the intervals `before` (their latencies together) may
    read by chance: their percentile at 99 % plus SPIKE_P99_Z standard errors of a quantile's rank, √(0.99 · 0.01 /
    n). A p99 of 500 successes rests on its 5 slowest: the band reaches the before's 99.87th percentile; of 50 000,
    the 99.09th. None without successes."""
    if n <= 0:
        return None
    return percentile_ms(before, min(100.0, 100.0 * (0.99 + SPIKE_P99_Z * sqrt(0.99 * 0.01 / n))))


def run_spike(record: RunRecord, group: str) -> Spike | None:
    """The spike's verdict on background group `group`: when another group of the scenario runs a spike profile and
    one step measured both."""
    sc = record.scenario
    g = sc.groups.get(group)
    spikes = [
        (name, o.over_time, o.clients_profile is not None)
        for name, o in sc.groups.items()
        if name != group and o.over_time is not None and o.over_time.shape == "spike"
    ]
    steps = [s for s in record.steps if s.phase == "sweep" and group in s.groups]
    if g is None or not g.background or len(spikes) != 1 or len(steps) != 1:
        return None
    (name, profile, of_clients), (step,) = spikes[0], steps
    return judge_spike(step, group, name, profile, warmup_s=sc.sweep.warmup, of_clients=of_clients)


def judge_spike(
    step: StepResult,
    group: str,
    spiking: str,
    profile: RateProfile,
    *,
    warmup_s: float = 0.0,
    of_clients: bool = False,
) -> Spike | None:
    """The spike's verdict on `group` of `step` through `spiking`'s spike `profile` (of arrivals, or `of_clients`).
    The profile's clock starts with the step (`warmup_s` before the spiking group's series), the background group's
    series `step.background_lead_s` before the step; None without a whole interval before the spike and one after
    it."""
    bg = step.groups[group]
    dt = bg.interval_s or 1.0
    whole = [p for p in bg.series if p.t + dt <= bg.elapsed_s + 1e-6]
    # times in the background group's series; the spiking group's series is `shift` seconds behind it
    lead = step.background_lead_s
    start, end, shift = profile.at + lead, profile.at + profile.hold + lead, lead + warmup_s
    before = [p for p in whole if p.t + dt <= start + 1e-6]
    after_end = [i for i, p in enumerate(whole) if p.t >= end - 1e-6]
    if not before or not after_end:
        return None
    rates = [p.succeeded / dt for p in before]
    base = mean(rates)
    p99s = [p.p99_ms for p in before if p.p99_ms is not None]
    floor = min(rates) - SPIKE_RATE_SLACK * base
    ceiling = max(p99s) * (1 + SPIKE_P99_SLACK) if p99s else None

    def back(p: SeriesPoint) -> bool:
        if p.succeeded / dt < floor:
            return False
        if ceiling is None:
            return True
        if p.p99_ms is None:
            return False
        return p.p99_ms <= max(ceiling, p99_noise(before, p.succeeded) or 0.0)

    first = after_end[0]
    flags = [back(p) for p in whole[first:]]
    k = next((first + j for j, f in enumerate(flags) if f and (j + 1 == len(flags) or flags[j + 1])), None)
    back_at = whole[k].t if k is not None else float("inf")

    def hit(p: SeriesPoint, shift: float = 0.0) -> bool:
        """Whether interval `p` (of a series `shift` seconds behind the background's) lies between the spike's start
        and the return (or the end)."""
        return p.t + shift + dt > start + 1e-6 and p.t + shift < back_at - 1e-6

    lowest = min((p.succeeded / dt for p in whole if hit(p)), default=base)
    spike = Spike(
        spiking=spiking,
        at_s=profile.at,
        hold_s=profile.hold,
        peak_hz=profile.peak,
        base_hz=profile.base,
        of="clients" if of_clients else "rate",
        interval_s=dt,
        before=_window(before, dt),
        during=_window([p for p in whole if p.t >= start - 1e-6 and p.t + dt <= end + 1e-6], dt),
        after=_window(whole[k:] if k is not None else [], dt),
        lowest_hz=lowest,
        fall=1 - lowest / base if base > 0 else 0.0,
        recovered_s=None if k is None else max(0.0, whole[k].t - end),
        recovered_low_s=None if k is None else max(0.0, whole[k].t - dt - end),
        measured_s=whole[-1].t + dt - end,
        failures={
            name: dict(_failures([p for p in s.series if hit(p, shift if name == spiking else 0.0)]))
            for name, s in step.groups.items()
            if name in (group, spiking)
        },
    )
    spike.sentences = _sentences(spike, group)
    return spike


def _window(points: Sequence[SeriesPoint], dt: float) -> SpikeWindow | None:
    if not points:
        return None
    return SpikeWindow(
        intervals=len(points),
        rate_hz=sum(p.succeeded for p in points) / (dt * len(points)),
        p99_ms=percentile_ms(points, 99.0),
    )


def _failures(points: Sequence[SeriesPoint]) -> Counter[str]:
    out: Counter[str] = Counter()
    for p in points:
        out.update(p.failures)
    return out


def _p99(w: SpikeWindow | None) -> str:
    return "no p99" if w is None or w.p99_ms is None else f"p99 {fmt.ms(w.p99_ms)}"


def _sentences(s: Spike, group: str) -> list[str]:
    if s.of == "clients":
        rates = f"from {fmt.level(s.base_hz)} to {fmt.level(s.peak_hz)} clients"
    else:
        rates = f"from {fmt.per_s(s.base_hz)} to {fmt.per_s(s.peak_hz)}"
    shape = f"{s.spiking} {rates} at {fmt.secs(s.at_s)} s for {fmt.secs(s.hold_s)} s"
    out = [
        f"through the spike ({shape}): {group} fell from {fmt.per_s(s.before.rate_hz)} to {fmt.per_s(s.lowest_hz)} "
        f"(−{fmt.pct(max(0.0, s.fall))}); {_p99(s.before)} before, {_p99(s.during)} during"
    ]
    dt = fmt.secs(s.interval_s)
    if s.recovered_s is None:
        out.append(
            f"{group} was not back within its noise by the run's end, {fmt.secs(s.measured_s)} s after the spike"
        )
    else:
        low = fmt.secs(s.recovered_low_s or 0.0)
        out.append(
            f"{group} was back within its noise {fmt.secs(s.recovered_s)} s after the spike "
            f"({low}–{fmt.secs(s.recovered_s)} s over {dt}-s intervals): "
            f"{fmt.per_s(s.after.rate_hz if s.after else 0)}, {_p99(s.after)}"
        )
    failed = [
        f"{name}: " + ", ".join(f"{cls} {n:,}" for cls, n in sorted(by.items(), key=lambda kv: -kv[1]))
        for name, by in s.failures.items()
        if by
    ]
    until = "the return" if s.recovered_s is not None else "the run's end"
    out.append(
        f"failures from the spike to {until}: {'; '.join(failed)}"
        if failed
        else f"no failures from the spike to {until}"
    )
    return out
