"""Statistics over measured intervals: per-interval counts and their distribution, and the noise `knee compare`
judges differences against (each run's rate by batch means, its p99 by order statistics, a floor for the variation
from run to run that one step cannot show; failures by a two-proportion z-test). numpy and scipy are imported where
they are needed: `knee run` must not pay for them."""

from __future__ import annotations

import itertools
import math
from collections.abc import Sequence
from dataclasses import dataclass

from knee.analysis.levels import window
from knee.analysis.steady import intervals
from knee.model import GroupStats, Outcomes, RequestStats, StepResult

CONFIDENCE = 0.95
# docs/reports.md: the run-to-run variation of a level's figure that one step's own series cannot show (a standard
# deviation, as a share of the figure): back-to-back identical sweeps of a wandering service differed by up to 15 %
NOISE_FLOOR = 0.05
# a p99 is compared over at least this many operations per client (5 of them above it): identical 2 s steps of
# 5 clients at 400/s (160 per client) had p99s 40–200 % apart, one stall of the shared machine each
P99_SAMPLES = 500
# the p99's run-to-run variation, as a multiple of the rate's floor: a tail moves more than a mean
P99_FLOOR = 2.0
FEW_INTERVALS = 5  # fewer whole intervals than this cannot estimate a step's noise: counting noise and the floor


def interval_counts(g: GroupStats) -> list[int]:
    """Succeeded per interval, over whole intervals only (a final partial interval is left out)."""
    counts = [p.succeeded for p in g.series]
    whole = int(g.elapsed_s / g.interval_s + 1e-9) if g.interval_s > 0 else len(counts)
    return counts[:whole] if 0 < whole < len(counts) else counts


@dataclass(frozen=True)
class IntervalDistribution:
    """The distribution (density) of per-interval success counts."""

    interval_s: float
    n: int
    min: float
    p5: float
    median: float
    p95: float
    max: float
    bins: list[tuple[float, float, int]]  # (lo, hi, count)


def interval_distribution(g: GroupStats, n_bins: int = 8) -> IntervalDistribution:
    import numpy as np

    counts = np.array([p.succeeded for p in g.series], dtype=float)
    lo, hi = float(counts.min()), float(counts.max())
    edges = np.linspace(lo, hi if hi > lo else lo + 1, n_bins + 1)
    hist, _ = np.histogram(counts, bins=edges)
    p5, med, p95 = (float(x) for x in np.percentile(counts, [5, 50, 95]))
    return IntervalDistribution(
        interval_s=g.interval_s,
        n=len(counts),
        min=lo,
        p5=p5,
        median=med,
        p95=p95,
        max=hi,
        bins=[(float(edges[i]), float(edges[i + 1]), int(hist[i])) for i in range(n_bins)],
    )


def interval_rates(g: GroupStats, elapsed_s: float | None = None) -> list[float]:
    """Successes per second of each complete interval (a trailing partial interval is left out)."""
    per = g.interval_s or 1.0
    end = elapsed_s if elapsed_s is not None else g.elapsed_s
    return [p.succeeded / per for p in g.series if p.t + per <= end + 1e-6]


@dataclass(frozen=True)
class Estimate:
    """One run's figure at one level (a rate in Hz, a p99 in ms) with its standard error: `df` its degrees of
    freedom (inf: the error's form is known, as a count's), `method` how it was estimated."""

    value: float
    se: float
    df: float
    method: str  # "batch means" | "counting" | "order statistics"


@dataclass(frozen=True)
class Change:
    """B's figure against A's, in % of A's, with the half-width of its interval (percentage points)."""

    pct: float
    noise_pct: float

    @property
    def low(self) -> float:
        return self.pct - self.noise_pct

    @property
    def high(self) -> float:
        return self.pct + self.noise_pct


def batch_se(series: Sequence[float]) -> tuple[float, int]:
    """(the standard error of the series' mean, its degrees of freedom) by batch means: k = max(5, ⌊√n⌋) batches
    of equal length (early intervals left over are dropped), so that neighbouring intervals, which a closed loop
    correlates, mostly share a batch (fewer than 5 values: each its own batch). Needs at least 2 values."""
    n = len(series)
    k = min(n, max(FEW_INTERVALS, math.isqrt(n)))
    size = n // k
    tail = series[n - k * size :]
    means = [sum(tail[i * size : (i + 1) * size]) / size for i in range(k)]
    m = sum(means) / k
    return math.sqrt(sum((x - m) ** 2 for x in means) / (k - 1) / k), k - 1


def rate_estimate(s: StepResult, g: GroupStats) -> Estimate:
    """The level's rate as the report judges it (`levels.window`: after the ramp of the first operation latency)
    and its standard error: by batch means over the per-interval rates after the cut when there are at least
    FEW_INTERVALS whole intervals; else the counting noise of its successes (√n over the seconds), or the spread of
    its few intervals when that is wider (two intervals cannot estimate a spread: the floor of `change` must)."""
    w = window(s, g)
    rate = w.succeeded / w.seconds if w.seconds > 0 else 0.0
    dt = g.interval_s
    # the whole intervals the window holds (a group whose data ran out measured fewer than its step's window)
    series = [c / dt for c in intervals(g)[round(w.cut_s / dt) :]][: int(w.seconds / dt + 1e-6)] if dt > 0 else []
    if len(series) >= FEW_INTERVALS:
        se, df = batch_se(series)
        return Estimate(rate, se, df, "batch means")
    counting = math.sqrt(w.succeeded) / w.seconds if w.seconds > 0 else 0.0
    spread = batch_se(series)[0] if len(series) >= 2 else 0.0
    return Estimate(rate, max(counting, spread), math.inf, "counting")


def _interpolate(points: Sequence[tuple[float, float]], q: float) -> float:
    """The latency at percentile `q` between the recorded percentiles (clamped to the first and the last)."""
    if q <= points[0][0]:
        return points[0][1]
    for (q0, v0), (q1, v1) in itertools.pairwise(points):
        if q <= q1:
            return v0 + (v1 - v0) * (q - q0) / (q1 - q0) if q1 > q0 else v1
    return points[-1][1]


def p99_estimate(g: GroupStats | RequestStats, confidence: float = CONFIDENCE, clients: int = 0) -> Estimate | None:
    """The succeeded operations' p99 and its standard error from order statistics, or None when it cannot be
    judged. Operations in flight together share a stall (a pause of the service or of the machine delays all of
    them), so the tail's independent samples are about n ÷ clients: with fewer than P99_SAMPLES of them a p99 is one
    or two stalls, not a distribution's (None). Else the rank of the 99th percentile is uncertain by
    ±z·√(n'·0.99·0.01) of n' samples, read off the recorded percentiles (an error of 0 without them: the floor of
    `change` is then all its noise). `clients`: the group's, for a request of its mix (RequestStats)."""
    n = g.latency_ms.count / max(1, clients or getattr(g, "clients", 1))
    if n < P99_SAMPLES:
        return None
    points = sorted(g.percentiles_ms)
    if len(points) < 2:
        return Estimate(g.latency_ms.p99, 0.0, math.inf, "order statistics")
    z = _quantile(confidence, math.inf)
    d = z * math.sqrt(0.99 * 0.01 / n) * 100
    lo, hi = _interpolate(points, 99 - d), _interpolate(points, min(100.0, 99 + d))
    return Estimate(g.latency_ms.p99, (hi - lo) / (2 * z), math.inf, "order statistics")


def _quantile(confidence: float, df: float) -> float:
    """The two-sided `confidence` quantile of Student's t with `df` degrees of freedom (the normal's at inf)."""
    from scipy import stats

    q = 0.5 + confidence / 2
    return float(stats.norm.ppf(q) if math.isinf(df) else stats.t.ppf(q, df))


def change(a: Estimate, b: Estimate, confidence: float = CONFIDENCE, floor: float = NOISE_FLOOR) -> Change | None:
    """B against A with its `confidence` interval (None when A's figure is 0). Each run's figure carries its own
    error (its step's noise) and, on top, a run-to-run variation of `floor` × the figure (a standard deviation)
    that one step cannot show: the service's or the machine's state when the run began, a slow wander, the phase
    of a closed loop's completions against the step's end. The interval is the two combined:
    ±√(t²·(se_A² + se_B²) + z²·floor²·(A² + B²)), t at the Welch–Satterthwaite degrees of freedom."""
    if a.value <= 0:
        return None
    own = a.se**2 + b.se**2
    finite = sum(x.se**4 / x.df for x in (a, b) if math.isfinite(x.df))  # a counting error's df is inf: no term
    df = own**2 / finite if finite > 0 else math.inf
    t, z = _quantile(confidence, df), _quantile(confidence, math.inf)
    half = math.sqrt(t**2 * own + z**2 * floor**2 * (a.value**2 + b.value**2))
    return Change(pct=(b.value - a.value) / a.value * 100, noise_pct=half / a.value * 100)


def failures_test(a: Outcomes, b: Outcomes) -> float | None:
    """p-value that A's and B's failure ratios ((failed + hung) / all) are equal: two-proportion z-test."""
    from scipy import stats

    na, nb = a.total, b.total
    if na == 0 or nb == 0:
        return None
    fa, fb = a.failed + a.hung, b.failed + b.hung
    pooled = (fa + fb) / (na + nb)
    if pooled in (0.0, 1.0):
        return 1.0
    z = (fb / nb - fa / na) / math.sqrt(pooled * (1 - pooled) * (1 / na + 1 / nb))
    return float(2 * stats.norm.sf(abs(z)))
