"""The USL fit: known parameters from synthetic data, and published fits on public data sets."""

from __future__ import annotations

import math
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from knee.analysis import FitError, fit_usl, usl
from knee.analysis.advice import nice
from knee.analysis.table import read_points

DATA = Path(__file__).parent / "data"
LEVELS = np.array([1, 5, 10, 20, 30, 50, 75, 100, 150, 200], dtype=float)
TRUE = {"sigma": 0.05, "kappa": 0.001, "lam": 10.0}


def _se(fit_ci: tuple[float, float], dof: int) -> float:
    """The standard error behind a 95 % t interval (half width / t(0.975, dof))."""
    from scipy import stats  # here, not at the top: its 0.7 s import is paid by every pytest process that collects

    return (fit_ci[1] - fit_ci[0]) / 2 / float(stats.t.ppf(0.975, dof))


def test_usl_formula() -> None:
    assert usl(1.0, 0.3, 0.01, 7.0) == pytest.approx(7.0)  # X(1) = λ whatever σ, κ
    assert usl(10.0, 0.0, 0.0, 2.0) == pytest.approx(20.0)  # linear without contention
    assert usl(10.0, 0.1, 0.01, 1.0) == pytest.approx(10 / (1 + 0.9 + 0.9))
    arr = usl(np.array([1.0, 10.0]), 0.1, 0.01, 1.0)
    assert arr == pytest.approx([1.0, 10 / 2.8])


def test_fit_recovers_exact_parameters() -> None:
    f = fit_usl(LEVELS, usl(LEVELS, **TRUE))
    assert f.sigma == pytest.approx(TRUE["sigma"], rel=1e-6)
    assert f.kappa == pytest.approx(TRUE["kappa"], rel=1e-6)
    assert f.lam == pytest.approx(TRUE["lam"], rel=1e-6)
    n_star = math.sqrt((1 - 0.05) / 0.001)
    assert f.n_star == pytest.approx(n_star, rel=1e-6)
    assert f.peak_rate == pytest.approx(usl(n_star, **TRUE), rel=1e-6)
    assert f.r2 == pytest.approx(1.0, abs=1e-9)
    assert f.warnings == []


def test_fit_recovers_parameters_from_noisy_data() -> None:
    rng = np.random.default_rng(0)
    noisy = usl(LEVELS, **TRUE) * (1 + 0.03 * rng.standard_normal(len(LEVELS)))
    f = fit_usl(LEVELS, noisy)
    assert f.sigma == pytest.approx(TRUE["sigma"], rel=0.2)
    assert f.kappa == pytest.approx(TRUE["kappa"], rel=0.2)
    assert f.lam == pytest.approx(TRUE["lam"], rel=0.2)
    assert 0.95 < f.r2 < 1.0


def test_confidence_intervals_cover_the_truth_about_95_percent_of_the_time() -> None:
    # 200 fixed seeds: a 95 % interval covers the truth 190 ± 3 times; intervals too wide (covering always)
    # or too narrow both fail. κ's interval, of the least linear parameter, covers a little less.
    trials = 200
    hits = dict.fromkeys(TRUE, 0)
    for seed in range(trials):
        rng = np.random.default_rng(seed)
        f = fit_usl(LEVELS, usl(LEVELS, **TRUE) * (1 + 0.03 * rng.standard_normal(len(LEVELS))))
        for name in hits:
            hits[name] += f.ci[name][0] <= TRUE[name] <= f.ci[name][1]
    cover = {name: n / trials for name, n in hits.items()}
    assert 0.90 <= cover["sigma"] <= 0.985, cover
    assert 0.90 <= cover["lam"] <= 0.985, cover
    assert 0.87 <= cover["kappa"] <= 0.985, cover


def test_kappa_zero_means_no_peak() -> None:
    f = fit_usl(LEVELS, usl(LEVELS, 0.1, 0.0, 5.0))
    assert f.kappa == 0.0
    assert f.n_star is None and f.peak_rate is None
    assert f.sigma == pytest.approx(0.1, rel=1e-6)


def test_warns_and_advises_when_too_few_levels_below_the_peak() -> None:
    f = fit_usl([1, 50, 100, 200], [1.0, 20.0, 15.0, 8.0])
    assert any("below the measured peak at 50" in w for w in f.warnings)
    assert f.advice == ["add levels between 1 and 50, e.g. 10 and 25"]


def test_warns_on_three_levels_and_gives_no_intervals() -> None:
    f = fit_usl([1, 50, 100], [1.0, 20.0, 10.0])
    assert any("only 3 levels" in w for w in f.warnings)
    assert any("degrees of freedom" in w for w in f.warnings)
    assert f.ci == {}


def test_advises_higher_levels_when_still_rising() -> None:
    f = fit_usl([1, 2, 4, 8, 16], [1.0, 1.9, 3.6, 6.5, 11.0])
    assert any("still rising at the highest level (16)" in w for w in f.warnings)
    assert f.advice == ["add levels above 16, e.g. 30 and 60"]


def test_advises_levels_below_a_left_out_collapse() -> None:
    f = fit_usl([1, 2, 4, 8, 16], [1.0, 1.9, 3.6, 6.5, 11.0], left_out=[32])
    assert any("no fitted level lies past the measured peak at 16 (32 was left out" in w for w in f.warnings)
    assert f.advice == ["add levels between 16 and 32, e.g. 20 and 25"]


@pytest.mark.parametrize(
    ("levels", "rates", "message"),
    [
        ([1, 2], [1.0, 2.0], "at least 3 levels"),
        ([1, 2, 3], [1.0, 2.0], "differ in length"),
        ([0, 2, 3], [1.0, 2.0, 3.0], "positive"),
        ([1, 2, 3], [1.0, -2.0, 3.0], "negative"),
        ([1, 1, 2], [1.0, 1.0, 2.0], "distinct"),
        ([1, 2, 3], [0.0, 0.0, 0.0], "every rate is 0"),
    ],
)
def test_fit_rejects_points_it_cannot_fit(levels: list[float], rates: list[float], message: str) -> None:
    with pytest.raises(FitError, match=message):
        fit_usl(levels, rates)


def test_nice_levels() -> None:
    assert [nice(x) for x in (10.8, 25.5, 37, 128, 256, 0.5)] == [10, 25, 40, 120, 250, 1]


# --- published fits (R package usl by Stefan Möding; docs/analysis.md) -----------------------


def test_specsdm91_matches_the_r_package() -> None:
    p = read_points(DATA / "specsdm91.csv")
    f = fit_usl(p.levels, p.rates)
    # tests/summary.Rout.save: Estimate and Std. Error (4 significant digits)
    assert f"{f.sigma:.3e}" == "2.773e-02"
    assert f"{f.kappa:.3e}" == "1.044e-04"
    assert f"{f.lam:.3e}" == "9.000e+01"
    assert f"{_se(f.ci['sigma'], 4):.3e}" == "9.122e-03"
    assert f"{_se(f.ci['kappa'], 4):.3e}" == "1.988e-05"
    assert f"{_se(f.ci['lam'], 4):.3e}" == "1.421e+01"
    assert f"{f.r2:.4f}" == "0.9896"
    fitted = usl(np.asarray(p.levels), f.sigma, f.kappa, f.lam)
    rse = math.sqrt(float(np.sum((np.asarray(p.rates) - fitted) ** 2)) / 4)
    assert f"{rse:.2f}" == "82.85"
    # tests/fitted.Rout.save and tests/peak-scalability.Rout.save
    assert [f"{v:.0f}" for v in fitted] == ["90", "1078", "1541", "1850", "1879", "1822", "1646"]
    assert f.n_star is not None and f"{f.n_star:.2g}" == "97"


def test_raytracer_matches_the_r_package() -> None:
    p = read_points(DATA / "raytracer.csv")
    f = fit_usl(p.levels, p.rates)
    # tests/confint.Rout.save: coef() with 3 significant digits / 6 for gamma
    assert f"{f.sigma:.4f}" == "0.0578"
    assert f.kappa == 0.0
    assert f"{f.lam:.4f}" == "21.8488"
    assert f.n_star is None
    # usl's confint() is coef ± SE·qt(0.95, n − 1); rebuild it from our (t(0.975, n − 3)) intervals
    from scipy import stats

    t_r = float(stats.t.ppf(0.95, len(p.levels) - 1))
    published = {"sigma": (0.033677, 0.081864), "kappa": (-0.000214, 0.000214), "lam": (17.868380, 25.829306)}
    for key, (lo, hi) in published.items():
        se = _se(f.ci[key], len(p.levels) - 3)
        value = getattr(f, key)
        assert value - t_r * se == pytest.approx(lo, abs=1e-6 * max(1.0, abs(lo))), key  # printed to 6 decimals
        assert value + t_r * se == pytest.approx(hi, abs=1e-6 * max(1.0, abs(hi))), key


def test_gunther_toy_matches_the_r_package() -> None:
    p = read_points(DATA / "gunther-toy.csv")
    f = fit_usl(p.levels, p.rates)
    assert (f"{f.sigma:.3g}", f"{f.kappa:.3g}", f"{f.lam:.3g}") == ("0.02", "0.02", "1")


def test_cisco_matches_practical_scalability_analysis() -> None:
    p = read_points(DATA / "cisco.csv")
    f = fit_usl(p.levels, p.rates)
    # the book's coefficients, as usl4j checks them: within 0.02 %
    assert f.sigma == pytest.approx(0.02671591, rel=2e-4)
    assert f.kappa == pytest.approx(7.690945e-4, rel=2e-4)
    assert f.lam == pytest.approx(995.6486, rel=2e-4)
    # N max 35 and X max 12341: the book takes the whole number of clients below N* and X there
    assert f.n_star is not None and math.floor(f.n_star) == 35
    assert usl(35.0, f.sigma, f.kappa, f.lam) == pytest.approx(12341, rel=2e-4)


def test_a_run_loads_numpy_only_to_fit() -> None:
    """numpy costs a tenth of a CPU-second at every start: what `knee run` imports to run a level leaves it out
    (bench/run.py measures the one-request run's fixed cost); the first fit imports it."""
    code = (
        "import sys, knee.commands.run, knee.runner, knee.progress_line, knee.report.abtext\n"
        "print('numpy' in sys.modules)\n"
        "from knee.analysis.uslfit import fit_usl\n"
        "fit_usl([1, 2, 4, 8], [10, 19, 35, 50])\n"
        "print('numpy' in sys.modules)\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.split() == ["False", "True"]
