"""Statistics over measured intervals: per-interval counts and their distribution, and the noise tests
`knee compare` judges differences with (Welch's t-test on per-interval rates, Poisson and two-proportion
z-tests). numpy and scipy are imported where they are needed: `knee run` must not pay for them."""

from __future__ import annotations

import math
import warnings
from dataclasses import dataclass

from knee.model import GroupStats

MIN_INTERVALS = 3


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


def rate_test(a: GroupStats, b: GroupStats) -> tuple[float | None, str]:
    """(p-value that A's and B's rates are equal, the test used): Welch's t-test on per-interval rates
    with at least 3 complete intervals each, else a Poisson z-test on the counts."""
    import numpy as np
    from scipy import stats

    xa, xb = interval_rates(a), interval_rates(b)
    if len(xa) >= MIN_INTERVALS and len(xb) >= MIN_INTERVALS:
        va, vb = float(np.var(xa, ddof=1)), float(np.var(xb, ddof=1))
        if va == 0 and vb == 0:
            return (1.0 if np.mean(xa) == np.mean(xb) else 0.0), "welch"
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", RuntimeWarning)  # near-identical samples: precision notes only
            p = float(stats.ttest_ind(xa, xb, equal_var=False).pvalue)
        return (1.0 if math.isnan(p) else p), "welch"
    if a.elapsed_s <= 0 or b.elapsed_s <= 0:
        return None, ""
    var = a.succeeded / a.elapsed_s**2 + b.succeeded / b.elapsed_s**2
    if var == 0:
        return 1.0, "poisson"
    z = (b.rate_hz - a.rate_hz) / math.sqrt(var)
    return float(2 * stats.norm.sf(abs(z))), "poisson"


def failures_test(a: GroupStats, b: GroupStats) -> float | None:
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
