"""Steady state of a level: cut its warm-up from the per-interval series, then ask whether its rate has settled.

docs/analysis.md: the warm-up is cut by MSER-5 (White's Marginal Standard Error Rule on batches of five
intervals: the cut that minimises the standard error of the mean of what remains, searched over the first
half), and the rate has settled when its 95 % confidence interval, by batch means over the intervals after
the cut, is within ±5 % of its mean (both configurable). `duration = "auto"` runs a level until this says
settled (at least `min`, at most `max`); every level records its cut and its interval either way.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from knee.model import GroupStats, RunRecord, SeriesPoint, SteadyState

MSER_BATCH = 5  # MSER-5: intervals are averaged five at a time before the cut is searched
MSER_MIN_BATCHES = 4  # fewer batches of five than this: MSER-1, each interval its own batch
MIN_BATCHES = 5  # fewer batch means than this give no confidence interval worth the name
MAX_BATCHES = 20
CONFIDENCE = 0.95
WITHIN = 0.05  # the interval's half-width as a share of the mean
ENDED_AT_MOST_S = 0.01  # a level whose window is this much shorter than max_duration was ended by the live rule
# Student's t at 0.975 for k - 1 degrees of freedom, k = MIN_BATCHES … MAX_BATCHES (scipy.stats.t.ppf, checked
# against it by tests/unit/test_steady.py): every step computes its interval, and importing scipy for it cost a
# run 0.6 CPU-s and 97 MB. Another confidence asks scipy.
T_975 = {
    4: 2.7764451051977934,
    5: 2.5705818356363146,
    6: 2.4469118511449786,
    7: 2.364624251592784,
    8: 2.306004135204166,
    9: 2.262157162798205,
    10: 2.228138851986274,
    11: 2.200985160091639,
    12: 2.1788128296672284,
    13: 2.1603686564627913,
    14: 2.144786687917804,
    15: 2.131449545559776,
    16: 2.1199052992212546,
    17: 2.1098155778333156,
    18: 2.1009220402410382,
    19: 2.0930240544083087,
}


@dataclass(frozen=True)
class Steady:
    """What the per-interval series says about its rate."""

    cut: int  # intervals cut as warm-up, from the start
    intervals: int  # intervals kept after the cut
    mean: float  # the mean count per interval after the cut
    half_width: float  # the confidence interval's half-width (same unit); inf when too few intervals
    settled: bool  # half_width <= within × mean

    @property
    def relative(self) -> float:
        """The half-width as a share of the mean (inf when there is no mean or no interval)."""
        return self.half_width / self.mean if self.mean > 0 else math.inf


def mser_cut(series: Sequence[float], batch: int | None = None) -> int:
    """The warm-up to cut, in intervals (a multiple of `batch`): the d minimising the MSER statistic
    Σ_{i>d} (Y_i − Ȳ_d)² / (n − d)² over the batch means Y, for d in the first half that leaves two batch means or
    more (one alone scores 0 and would always win: 10 intervals were always cut to their last 5). `batch`: MSER-5
    where the series holds `MSER_MIN_BATCHES` batches of five, else the intervals themselves (MSER-1: two batches of
    five leave no cut to choose, and a first slow second stayed in the rate); none under two batches of five."""
    if batch is None:
        if len(series) < 2 * MSER_BATCH:
            return 0  # too short to tell a warm-up from noise
        batch = MSER_BATCH if len(series) >= MSER_MIN_BATCHES * MSER_BATCH else 1
    n = len(series) // batch
    if n < 2:
        return 0
    means = [sum(series[i * batch : (i + 1) * batch]) / batch for i in range(n)]
    best, best_d = math.inf, 0
    for d in range(min(n // 2, n - 2) + 1):
        rest = means[d:]
        m = sum(rest) / len(rest)
        score = sum((y - m) ** 2 for y in rest) / len(rest) ** 2
        if score < best - 1e-12:
            best, best_d = score, d
    return best_d * batch


def batch_means(series: Sequence[float], confidence: float = CONFIDENCE) -> tuple[float, float]:
    """The mean of `series` and its confidence interval's half-width by batch means: the series in
    `MIN_BATCHES` to `MAX_BATCHES` batches of equal length (early intervals left over are dropped), Student's t
    on the batch means. The half-width is inf when the series is too short for `MIN_BATCHES` batches."""
    n = len(series)
    if n == 0:
        return 0.0, math.inf
    mean = sum(series) / n
    k = min(MAX_BATCHES, n)
    if k < MIN_BATCHES:
        return mean, math.inf
    size = n // k
    tail = series[n - k * size :]
    bm = [sum(tail[i * size : (i + 1) * size]) / size for i in range(k)]
    m = sum(bm) / k
    sd = math.sqrt(sum((b - m) ** 2 for b in bm) / (k - 1))
    return mean, student_t(confidence, k - 1) * sd / math.sqrt(k)


def student_t(confidence: float, df: int) -> float:
    """The two-sided `confidence` quantile of Student's t with `df` degrees of freedom."""
    if confidence == CONFIDENCE and df in T_975:
        return T_975[df]
    from scipy import stats  # on first use: scipy takes a while to import

    return float(stats.t.ppf(0.5 + confidence / 2, df))


def steady(series: Sequence[float], within: float = WITHIN, confidence: float = CONFIDENCE) -> Steady:
    """Cut the warm-up of a per-interval series (counts of successes per interval) and say whether the rest has
    settled."""
    cut = mser_cut(series)
    rest = series[cut:]
    mean, half = batch_means(rest, confidence)
    return Steady(
        cut=cut,
        intervals=len(rest),
        mean=mean,
        half_width=half,
        settled=mean > 0 and half <= within * mean,
    )


def intervals(g: GroupStats, count: Callable[[SeriesPoint], int] = lambda p: p.succeeded) -> list[float]:
    """A group's successes (or what `count` counts of each point) per interval over its whole intervals (a last,
    partial interval left out; an interval with nothing in it is 0)."""
    if g.interval_s <= 0:
        return []
    n = int(g.elapsed_s / g.interval_s + 1e-6)
    counts = [0.0] * n
    for p in g.series:
        i = round(p.t / g.interval_s)
        if 0 <= i < n:
            counts[i] += count(p)
    return counts


Reading = tuple[float, float]  # (seconds since the step began, successes so far)


def judge(readings: Sequence[Reading], within: float = WITHIN) -> Steady:
    """Whether a level has settled, from readings of its successes so far: the one judgement `duration = "auto"`
    stops a level by (live, `Settling`) and a step's record is made by (after the fact, `steady_state`). Its series
    is the rate between consecutive readings, from (0, 0): the first second, warm-up and all, is in it either way."""
    series, (t0, n0) = [], (0.0, 0.0)
    for t, n in readings:
        if t > t0:
            series.append((n - n0) / (t - t0))
            t0, n0 = t, n
    return steady(series, within)


def readings(g: GroupStats) -> list[Reading]:
    """A finished step's readings, as the live view took them about once an interval: its successes so far at the
    end of each whole interval, and at its end (a last, partial interval shorter than half an interval joins the
    one before it, as a live reading taken a little late would)."""
    dt = g.interval_s
    counts = intervals(g)
    out: list[Reading] = []
    total = 0.0
    for i, c in enumerate(counts):
        total += c
        out.append(((i + 1) * dt, total))
    end = (g.elapsed_s, float(g.succeeded))
    if out and g.elapsed_s - out[-1][0] < dt / 2:
        out[-1] = end
    elif g.elapsed_s > (out[-1][0] if out else 0.0):
        out.append(end)
    return out


def steady_state(g: GroupStats, within: float = WITHIN, auto: bool = False) -> SteadyState | None:
    """The group's steady state over its step (None with fewer than MIN_BATCHES whole intervals, unless it ran until
    settled: `auto`), judged by `judge`
    on its readings (`readings`), as the live stop of `duration = "auto"` judged it; `auto`: the step ran until
    settled, so its rate is the one after the cut."""
    if len(intervals(g)) < MIN_BATCHES and not auto:
        return None
    # a level run until settled is judged as the live rule judged it, on the same readings, even where its last
    # interval is partial (stopped at min_duration, a whole interval may be a fraction of a second short)
    s = judge(readings(g), within)
    dt = g.interval_s
    return SteadyState(
        group=g.name,
        cut_s=s.cut * dt,
        kept_s=round(g.elapsed_s - s.cut * dt, 6),
        rate_hz=s.mean,
        half_width_hz=s.half_width if math.isfinite(s.half_width) else None,
        settled=s.settled,
        auto=auto,
    )


class Settling:
    """duration = "auto", live: fed the measured group's successes as the step runs (about once a second), says
    when the level has run at least `min_s` and its rate has settled by `judge` (then the step may end): the same
    judgement, on the same series from the step's start, as its record's (`steady_state`)."""

    def __init__(self, min_s: float, within: float = WITHIN) -> None:
        self.min_s = min_s
        self.within = within
        self._readings: list[Reading] = []

    def add(self, elapsed_s: float, succeeded: int) -> bool:
        """One reading; True when the level may end."""
        if elapsed_s > (self._readings[-1][0] if self._readings else 0.0):
            self._readings.append((elapsed_s, float(succeeded)))
        return elapsed_s >= self.min_s and judge(self._readings, self.within).settled


def as_the_rule_ended(record: RunRecord) -> None:
    """duration = "auto": each level's record says what the live rule (`Settling`, by `judge`) decided, which is what
    ended it: settled when it ended whole before max_duration, not settled when it ran to max_duration or was cut
    short. The cut and the interval stay the record's (`steady_state`); the live view read the successes up to a
    fifth of a second after each interval's end, so where it crossed ±`settle` the record's intervals can lie a
    little either side of it, and a level must not be said to have both settled and not."""
    sweep = record.scenario.sweep
    if sweep.duration != "auto":
        return
    most = sweep.duration_bounds()[1]
    for s in record.steps:
        st = s.steady
        g = s.groups.get(st.group) if st is not None and st.auto else None
        if st is None or g is None:
            continue
        ended = not s.partial and g.elapsed_s < most - ENDED_AT_MOST_S
        if st.settled != ended:
            s.steady = st.model_copy(update={"settled": ended})
