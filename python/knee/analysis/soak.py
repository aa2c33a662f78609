"""The soak's verdict (mode = "soak", `knee soak`; docs/load-shapes.md "Soak"): a level held for long, judged by its
trends rather than by a peak.

- Values: the measured group's whole intervals (the trailing partial one is left out): its achieved rate
  (succeeded / interval) and its successes' p50 and p99 (the series' latency buckets); the memory of the monitored
  target's process tree and of knee, sampled at the end of each interval (knee.soaking). A series longer than
  SOAK_POINTS is cut into that many bins of whole intervals, each bin one value (its rate, its merged buckets'
  percentiles, its samples' median): Theil–Sen compares every pair of values.
- Drift: the Theil–Sen slope of the values against time, per hour, with its 95 % interval (scipy's
  `theilslopes`). It drifts when the interval leaves out 0 and the fitted change over the soak is at least
  SOAK_MATTERS of the median (memory: and at least SOAK_MEMORY_MB; descriptors: at least SOAK_FDS): a slope that is
  real but moves the value by less over the whole soak is said as no drift, within the interval's bounds. Neighbour
  intervals are not independent (a slow minute is slow for a minute), so the interval is narrower than the truth;
  the share keeps that from calling noise a drift.
- Error bursts: runs of consecutive intervals whose failed + hung operations exceed analysis.onset of those that
  ended, each with its start, its length and its failures by class. When most intervals fail, the errors are not
  bursts: the verdict says how many intervals had them.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from statistics import median

from knee import fmt
from knee.analysis.series_latency import percentile_ms
from knee.model import Burst, Drift, GroupStats, RunRecord, SeriesPoint, Soak, SoakSample

SOAK_MATTERS = 0.05  # a fitted change over the whole soak below this share of the median is no drift
SOAK_MEMORY_MB = 1.0  # nor a memory change below this many MB
SOAK_FDS = 2.0  # nor a change of fewer descriptors
SOAK_POINTS = 400  # the most values a slope is fitted to (every pair of them is compared)
CONFIDENCE = 0.95
BURSTS_LISTED = 3


def run_soak(record: RunRecord, group: str) -> Soak | None:
    """The soak's verdict on `group` of a soak run (mode = "soak"); None for any other run, or a soak with fewer than
    three whole intervals."""
    if record.scenario.mode != "soak" or not record.steps:
        return None
    step = record.steps[-1]
    g = step.groups.get(group)
    if g is None:
        return None
    samples = step.soak if group == record.measured_group else []
    return judge_soak(g, samples, step.level, record.level_unit, record.scenario.analysis.onset)


def judge_soak(
    g: GroupStats, samples: Sequence[SoakSample], level: float, unit: str = "clients", onset: float = 0.001
) -> Soak | None:
    dt = g.interval_s or 1.0
    whole = [p for p in g.series if p.t + dt <= g.elapsed_s + 1e-6]
    if len(whole) < 3:
        return None
    seconds = max(g.elapsed_s, len(whole) * dt)
    bins = _bins(whole, SOAK_POINTS)
    mid = [(b[0].t + len(b) * dt / 2) / 3600 for b in bins]
    soak = Soak(seconds=seconds, interval_s=dt, level=level, intervals=len(whole))
    soak.throughput = _drift("throughput", "/s", mid, [sum(p.succeeded for p in b) / (len(b) * dt) for b in bins])
    for name in ("p50", "p99"):
        values = [(x, percentile_ms(b, 50.0 if name == "p50" else 99.0)) for x, b in zip(mid, bins, strict=True)]
        kept = [(x, v) for x, v in values if v is not None]
        setattr(soak, name, _drift(name, "ms", [x for x, _ in kept], [v for _, v in kept]))
    failing = [
        (p.failed + p.hung) > 0 and (p.failed + p.hung) > onset * (p.succeeded + p.failed + p.hung) for p in whole
    ]
    soak.failing_intervals = sum(failing)
    soak.failed = g.failed + g.hung
    if soak.failing_intervals * 2 <= len(whole):
        soak.bursts = _bursts(whole, failing, dt)
    # the samples binned as the series are (a 24 h soak's 8 640, every pair compared, took gigabytes): each bin's
    # median time and value
    t = [s.t_s / 3600 for s in samples]
    target = [(x, s.target_rss_mb) for x, s in zip(t, samples, strict=True) if s.target_rss_mb is not None]
    fds = [(x, float(s.target_fds)) for x, s in zip(t, samples, strict=True) if s.target_fds is not None]
    knee = [(x, s.knee_rss_mb) for x, s in zip(t, samples, strict=True)]
    soak.memory = _drift("target memory", "MB", *_medians(target), SOAK_MEMORY_MB)
    soak.descriptors = _drift("target descriptors", "", *_medians(fds), SOAK_FDS)
    soak.knee_memory = _drift("knee memory", "MB", *_medians(knee), SOAK_MEMORY_MB)
    soak.sentences = _sentences(soak, g, unit)
    return soak


def _medians(pairs: list[tuple[float, float]]) -> tuple[list[float], list[float]]:
    """(hours, values) of `pairs` in at most SOAK_POINTS bins, each its median hour and median value."""
    size = max(1, -(-len(pairs) // SOAK_POINTS))
    bins = [pairs[i : i + size] for i in range(0, len(pairs), size)]
    return [median(x for x, _ in b) for b in bins], [median(v for _, v in b) for b in bins]


def _bins(points: list[SeriesPoint], most: int) -> list[list[SeriesPoint]]:
    """`points` in at most `most` runs of equal length (the last may be shorter), in order."""
    size = -(-len(points) // most)
    return [points[i : i + size] for i in range(0, len(points), size)]


def _drift(what: str, unit: str, hours: list[float], values: list[float], least: float = 0.0) -> Drift | None:
    """The Theil–Sen trend of `values` at `hours`; None with fewer than three. `least`: a change over the soak
    smaller than this (in the unit) is no drift either."""
    if len(values) < 3:
        return None
    from scipy.stats import theilslopes

    fit = theilslopes(values, hours, alpha=CONFIDENCE)
    slope, lo, hi = float(fit.slope), float(fit.low_slope), float(fit.high_slope)
    start, end = min(hours), max(hours)
    first, last = float(fit.intercept) + slope * start, float(fit.intercept) + slope * end
    mid = float(median(values))
    change = abs(last - first)
    matters = change >= max(SOAK_MATTERS * abs(mid), least)
    line = {"first": first, "last": last, "per_hour": slope, "low_per_hour": lo, "high_per_hour": hi}
    return Drift(what=what, unit=unit, points=len(values), median=mid, drifting=(lo > 0 or hi < 0) and matters, **line)


def _bursts(points: list[SeriesPoint], failing: list[bool], dt: float) -> list[Burst]:
    out: list[Burst] = []
    run: list[SeriesPoint] = []
    for p, bad in zip([*points, None], [*failing, False], strict=True):
        if bad and p is not None:
            run.append(p)
            continue
        if run:
            classes: dict[str, int] = {}
            for q in run:
                for name, n in q.failures.items():
                    classes[name] = classes.get(name, 0) + n
            failed = sum(q.failed + q.hung for q in run)
            out.append(Burst(start_s=run[0].t, seconds=len(run) * dt, failed=failed, failures=classes))
            run = []
    return out


def _value(unit: str) -> Callable[[float], str]:
    if unit == "/s":
        return fmt.per_s
    if unit == "ms":
        return fmt.ms
    if unit == "MB":
        return lambda v: f"{fmt.sig3(v)} MB"
    return lambda v: f"{v:.0f}"


# How a trend's quantity is named in words, where that is not its `what`
_NAMES = {
    "target memory": "the target's memory",
    "target descriptors": "the target's open descriptors",
    "knee memory": "knee's own memory",
}


def _per_hour(d: Drift) -> str:
    """The unit of a memory or descriptors trend's slope: 'MB/h', 'descriptors/h'."""
    return f"{d.unit or 'descriptors'}/h"


def trend(d: Drift, seconds: float) -> str:
    """'p99 rose 12 %/h (9.1 to 15 %/h): 18.2 ms → 22.6 ms over 2 h', or 'throughput 1,234/s, no drift (within
    ±0.8 %/h)'; memory and descriptors in their units per hour."""
    show = _value(d.unit)
    name = _NAMES.get(d.what, d.what)
    pct = d.pct_per_hour
    absolute = d.unit in ("MB", "") or pct is None
    if absolute:
        per = f"{fmt.sig3(abs(d.per_hour))} {_per_hour(d)}"
        bounds = f"{fmt.sig3(d.low_per_hour)} to {fmt.sig3(d.high_per_hour)} {_per_hour(d)}"
        within = f"±{fmt.sig3(max(abs(d.low_per_hour), abs(d.high_per_hour)))} {_per_hour(d)}"
    else:
        assert pct is not None
        per = f"{fmt.sig3(abs(pct[0]))} %/h"
        bounds = f"{pct[1]:+.2g} to {pct[2]:+.2g} %/h"
        within = f"±{fmt.sig3(max(abs(pct[1]), abs(pct[2])))} %/h"
    if d.drifting:
        verb = ("grew" if d.per_hour > 0 else "shrank") if absolute else ("rose" if d.per_hour > 0 else "fell")
        return f"{name} {verb} {per} ({bounds}): {show(d.first)} → {show(d.last)} over {fmt.duration(seconds)}"
    return f"{name} {show(d.median)}, no drift (within {within})"


def headline(s: Soak, unit: str) -> str:
    """The soak in one sentence: its length, level and rate, then what drifted (or "no drift"), its errors, and
    the memory that grew ('a soak of 2 h at 50 clients: 1,234/s; p99 rose 12 %/h; no errors; the target's memory
    grew 310 MB/h')."""
    rate = f": {fmt.per_s(s.throughput.median)}" if s.throughput is not None else ""
    parts = [f"a soak of {fmt.duration(s.seconds)} at {fmt.load(s.level, unit)}{rate}"]
    moved = [d for d in (s.throughput, s.p50, s.p99) if d is not None and d.drifting]
    parts += [
        f"{d.what} {'rose' if d.per_hour > 0 else 'fell'} {fmt.sig3(abs(d.pct_per_hour[0]))} %/h"
        for d in moved
        if d.pct_per_hour
    ]
    if not moved:
        parts.append("no drift")
    if s.bursts:
        parts.append(f"{len(s.bursts)} burst{'s' if len(s.bursts) > 1 else ''} of errors")
    elif s.failing_intervals:
        parts.append("errors throughout")
    else:
        parts.append(_few_errors(s))
    for d in (s.memory, s.descriptors, s.knee_memory):
        if d is not None and d.drifting:
            verb = "grew" if d.per_hour > 0 else "shrank"
            parts.append(f"{_NAMES[d.what]} {verb} {fmt.sig3(abs(d.per_hour))} {_per_hour(d)}")
    return "; ".join(parts)


def _few_errors(s: Soak) -> str:
    """A soak whose intervals all kept their failures below analysis.onset: none, or how many there were."""
    return "no errors" if not s.failed else f"{s.failed} failed or hung, below analysis.onset"


def _sentences(s: Soak, g: GroupStats, unit: str) -> list[str]:
    head = f"soak of {fmt.duration(s.seconds)} at {fmt.load(s.level, unit)}"
    parts = [trend(d, s.seconds) for d in (s.throughput, s.p50, s.p99) if d is not None]
    out = [f"{head}: {'; '.join(parts)}" if parts else head]
    if not s.failing_intervals:
        out.append(_few_errors(s))
    elif not s.bursts:
        out.append(
            f"errors throughout: {s.failing_intervals} of {s.intervals} intervals had them "
            f"({fmt.pct(s.failed / max(1, g.total))} of operations)"
        )
    else:
        said = []
        for b in s.bursts[:BURSTS_LISTED]:
            classes = ", ".join(f"{n} {c}" for c, n in sorted(b.failures.items(), key=lambda kv: -kv[1]))
            said.append(
                f"at {fmt.duration(b.start_s)} for {fmt.duration(b.seconds)} ({b.failed} failed or hung"
                + (f": {classes})" if classes else ")")
            )
        more = len(s.bursts) - BURSTS_LISTED
        tail = f", and {more} more" if more > 0 else ""
        n = len(s.bursts)
        out.append(f"{n} burst{'s' if n > 1 else ''} of errors: {'; '.join(said)}{tail}")
    for d in (s.memory, s.descriptors, s.knee_memory):
        if d is not None:
            out.append(trend(d, s.seconds))
    return out
