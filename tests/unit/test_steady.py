"""Steady state: MSER-5 cuts a warm-up, batch means say whether the rate has settled."""

from __future__ import annotations

import math
import random
import subprocess
import sys

from knee.analysis.steady import MAX_BATCHES, MIN_BATCHES, T_975, batch_means, mser_cut, steady, student_t


def _noisy(mean: float, share: float, n: int, seed: int) -> list[float]:
    rng = random.Random(seed)
    return [max(0.0, rng.gauss(mean, mean * share)) for _ in range(n)]


def test_a_slow_start_is_cut_and_the_warm_rate_kept() -> None:
    warm = _noisy(100, 0.03, 60, seed=1)
    series = [10, 20, 30, 40, 50, 60, 70, 80, 90, 95, *warm]
    s = steady(series)
    assert 10 <= s.cut <= 20
    assert abs(s.mean - 100) <= 5
    assert s.settled


def test_a_steady_series_settles_at_its_mean() -> None:
    # MSER may still cut a batch or two of pure noise; never more than half, and the mean is the same.
    s = steady(_noisy(100, 0.03, 30, seed=2))
    assert s.cut <= 15 and s.intervals == 30 - s.cut
    assert s.settled and s.relative < 0.05
    assert abs(s.mean - 100) <= 3


def test_a_noisy_series_does_not_settle() -> None:
    rng = random.Random(3)
    s = steady([rng.choice([20.0, 180.0]) for _ in range(40)])
    assert not s.settled and s.relative > 0.05


def test_too_few_intervals_give_no_interval() -> None:
    mean, half = batch_means([100.0, 101.0, 99.0])
    assert mean == 100.0 and math.isinf(half)
    assert not steady([100.0, 101.0, 99.0]).settled
    assert mser_cut([1.0, 2.0, 3.0]) == 0


def test_batch_means_matches_the_t_interval_of_independent_batches() -> None:
    # Five batches of one interval each: the plain t interval of five numbers.
    xs = [10.0, 12.0, 11.0, 9.0, 13.0]
    mean, half = batch_means(xs)
    sd = math.sqrt(sum((x - 11.0) ** 2 for x in xs) / 4)
    assert mean == 11.0
    assert math.isclose(half, 2.7764451051977987 * sd / math.sqrt(5), rel_tol=1e-9)


def test_the_t_table_is_scipys_and_a_step_does_not_import_scipy() -> None:
    from scipy import stats

    for df, t in T_975.items():
        assert t == float(stats.t.ppf(0.975, df))
    assert set(T_975) == set(range(MIN_BATCHES - 1, MAX_BATCHES))
    assert student_t(0.9, 7) == float(stats.t.ppf(0.95, 7))  # another confidence: scipy's
    # a step's steady state (what every run computes) leaves scipy unloaded: 0.6 CPU-s and 97 MB at every run
    code = (
        "import sys; from knee.analysis.steady import steady; "
        "s = steady([100.0 + (i % 3) for i in range(30)]); print(s.settled, 'scipy' in sys.modules)"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.split() == ["True", "False"]
