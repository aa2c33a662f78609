"""The interval of a level's change between two runs (knee.analysis.stats): batch means over a run's own series,
counting noise for a short step, the p99's order statistics, and the floor of run-to-run variation."""

from __future__ import annotations

import math
import random

import pytest

from knee.analysis.stats import Estimate, batch_se, change, p99_estimate, rate_estimate
from knee.model import LatencyStats

from sample_records import sample_record


def _ar1(n: int, phi: float, sd: float, rng: random.Random, mean: float = 100.0) -> list[float]:
    """n values of an AR(1) series around `mean` (phi = 0: independent)."""
    out, x = [], 0.0
    for _ in range(n):
        x = phi * x + rng.gauss(0, sd)
        out.append(mean + x)
    return out


def test_batch_means_match_the_textbook_error_of_independent_intervals() -> None:
    rng = random.Random(1)
    series = _ar1(400, 0.0, 10.0, rng)
    se, df = batch_se(series)
    assert df == 19  # ⌊√400⌋ = 20 batches of 20
    assert 0.35 < se < 0.7  # 10 / √400 = 0.5


def test_batch_means_see_the_correlation_a_closed_loop_puts_between_intervals() -> None:
    """Neighbouring intervals of an AR(1) series with φ = 0.8 are alike: the naive error (sd/√n) is about a third
    of the true one (√((1+φ)/(1−φ)) = 3); batch means recover most of it."""
    rng = random.Random(2)
    ratios = []
    for _ in range(40):
        series = _ar1(100, 0.8, 10.0, rng)
        m = sum(series) / len(series)
        naive = math.sqrt(sum((x - m) ** 2 for x in series) / (len(series) - 1) / len(series))
        ratios.append(batch_se(series)[0] / naive)
    assert sorted(ratios)[len(ratios) // 2] > 2.0, sorted(ratios)


def test_the_interval_adds_the_floor_to_both_runs_own_noise() -> None:
    a, b = Estimate(100.0, 0.0, math.inf, "counting"), Estimate(110.0, 0.0, math.inf, "counting")
    c = change(a, b, floor=0.05)
    assert c is not None and c.pct == pytest.approx(10.0)
    # z · floor · √(A² + B²) / A
    assert c.noise_pct == pytest.approx(1.959964 * 0.05 * math.hypot(100, 110), rel=1e-5)
    assert c.low < 0 < c.high  # +10 % is within the floor's ±14.6 %
    none = change(a, b, floor=0.0)
    assert none is not None and none.noise_pct == 0.0
    assert change(Estimate(0.0, 0.0, math.inf, "counting"), b) is None


def test_the_degrees_of_freedom_are_welch_satterthwaites() -> None:
    a, b = Estimate(100.0, 2.0, 4, "batch means"), Estimate(100.0, 2.0, 4, "batch means")
    c = change(a, b, floor=0.0)
    # df = (4 + 4)² / (4²/4 + 4²/4) = 8; t(0.975, 8) = 2.306; half-width 2.306 · √8
    assert c is not None and c.noise_pct == pytest.approx(2.306004 * math.sqrt(8), rel=1e-5)
    wider = change(a, b, confidence=0.99, floor=0.0)
    assert wider is not None and wider.noise_pct > c.noise_pct


def test_identical_runs_read_as_within_noise_despite_run_to_run_wander() -> None:
    """Simulated pairs of identical runs: each run's level sits 4 % (one sd) off the truth, its 10 intervals
    correlated (φ = 0.5). With the 5 % floor, about 5 % of pairs or fewer look changed; without it, most do."""
    rng = random.Random(3)
    flagged = {0.05: 0, 0.0: 0}
    pairs = 300
    for _ in range(pairs):
        runs = []
        for _ in range(2):
            mean = 100.0 * (1 + rng.gauss(0, 0.04))
            series = _ar1(10, 0.5, 3.0, rng, mean)
            se, df = batch_se(series)
            runs.append(Estimate(sum(series) / len(series), se, df, "batch means"))
        for floor in flagged:
            c = change(runs[0], runs[1], floor=floor)
            assert c is not None
            flagged[floor] += c.low > 0 or c.high < 0
    assert flagged[0.05] <= 0.06 * pairs, flagged
    assert flagged[0.0] > 0.3 * pairs, flagged


def test_a_short_step_falls_back_to_its_counting_noise_or_its_spread() -> None:
    rec = sample_record((10,), seconds=2, recovery_probes=0)
    s = rec.steps[0]
    g = s.groups["main"]
    e = rate_estimate(s, g)
    assert e.method == "counting" and math.isinf(e.df)
    assert e.value == pytest.approx(g.succeeded / g.elapsed_s)
    assert e.se >= math.sqrt(g.succeeded) / g.elapsed_s - 1e-12
    g.series[0].succeeded += 40  # two intervals far apart: their spread is wider than the counting noise
    g.succeeded += 40
    wide = rate_estimate(s, g)
    assert wide.se > math.sqrt(g.succeeded) / g.elapsed_s


def test_a_long_step_is_judged_by_batch_means_of_its_intervals() -> None:
    rec = sample_record((10,), seconds=30, recovery_probes=0)
    s = rec.steps[0]
    e = rate_estimate(s, s.groups["main"])
    assert e.method == "batch means" and e.df == 4  # 30 intervals: 5 batches of 6
    counts = [p.succeeded for p in s.groups["main"].series]
    assert e.value == pytest.approx(sum(counts) / 30)


def test_the_p99_error_comes_from_the_uncertainty_of_its_rank() -> None:
    """10 clients, 10,000 latencies: about 1,000 independent tail samples (a stall delays every client at once)."""
    rec = sample_record((10,), recovery_probes=0)
    g = rec.steps[0].groups["main"]
    g.latency_ms = LatencyStats(count=10_000, mean=8.0, p99=12.0)
    g.percentiles_ms = [(50.0, 8.0), (98.0, 10.0), (99.0, 12.0), (99.9, 20.0), (100.0, 30.0)]
    e = p99_estimate(g)
    assert e is not None and e.value == 12.0
    d = 1.959964 * math.sqrt(0.99 * 0.01 / 1_000) * 100  # the rank's half-width, in percentiles
    lo, hi = 10.0 + 2.0 * (1 - d), 12.0 + 8.0 * d / 0.9
    assert e.se == pytest.approx((hi - lo) / (2 * 1.959964), rel=1e-4)
    g.latency_ms = LatencyStats(count=4_000, mean=8.0, p99=12.0)  # 400 per client: one or two stalls, not judged
    assert p99_estimate(g) is None
    g.latency_ms = LatencyStats()
    assert p99_estimate(g) is None
