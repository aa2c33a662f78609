"""The Universal Scalability Law and its fit.

X(N) = λN / (1 + σ(N−1) + κN(N−1)), fitted in raw form (λ free, no normalisation by
X(1)) by bounded non-linear least squares, like the R package `usl` (Möding) with
nls/port: σ, κ ∈ [0, 1], λ ≥ 0. Standard errors come from the Jacobian at the
solution, covariance = s²·(JᵀJ)⁻¹ with s² = RSS/(n−3); the 95 % intervals use the
t-distribution with n−3 degrees of freedom. See docs/analysis.md.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import TYPE_CHECKING, overload

from knee.analysis import advice
from knee.errors import UserError
from knee.model import USLFit

if TYPE_CHECKING:  # numpy is imported by the functions that compute: a run that fits nothing does not load it
    import numpy as np

PARAMS = ("sigma", "kappa", "lam")
MIN_POINTS = 3  # three parameters
_SIGMA_STARTS = (0.0, 0.01, 0.1, 0.5)
_KAPPA_STARTS = (0.0, 1e-6, 1e-4, 1e-2)
_AT_BOUND = 1e-12  # a fitted σ or κ below this is reported as 0 (the solver stops just inside the bound)
_POOR_R2 = 0.8


class FitError(UserError):
    """The points cannot be fitted at all (too few, not numbers, negative)."""


@overload
def usl(n: float, sigma: float, kappa: float, lam: float) -> float: ...
@overload
def usl(n: np.ndarray, sigma: float, kappa: float, lam: float) -> np.ndarray: ...
def usl(n: np.ndarray | float, sigma: float, kappa: float, lam: float) -> np.ndarray | float:
    """Throughput X(N) = λN / (1 + σ(N−1) + κN(N−1))."""
    if not isinstance(n, int | float):  # an array
        return lam * n / (1 + sigma * (n - 1) + kappa * n * (n - 1))
    n = float(n)
    return lam * n / (1 + sigma * (n - 1) + kappa * n * (n - 1))


def _jacobian(p: np.ndarray, n: np.ndarray) -> np.ndarray:
    """∂X/∂(σ, κ, λ) at each N."""
    import numpy as np

    sigma, kappa, lam = p
    d = 1 + sigma * (n - 1) + kappa * n * (n - 1)
    return np.column_stack((-lam * n * (n - 1) / d**2, -lam * n * n * (n - 1) / d**2, n / d))


def _check(levels: Sequence[float] | np.ndarray, rates: Sequence[float] | np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    import numpy as np

    if len(levels) != len(rates):
        raise FitError(f"levels and rates differ in length ({len(levels)} levels, {len(rates)} rates)")
    n = np.asarray(levels, dtype=float)
    x = np.asarray(rates, dtype=float)
    if len(n) < MIN_POINTS:
        raise FitError(
            f"the USL has 3 parameters, so it needs at least {MIN_POINTS} levels (got {len(n)}); measure more levels"
        )
    if not (np.all(np.isfinite(n)) and np.all(np.isfinite(x))):
        raise FitError("levels and rates must be finite numbers")
    if np.any(n <= 0):
        raise FitError(f"levels must be positive (got {advice.level_list(n[n <= 0])})")
    if np.any(x < 0):
        raise FitError("rates must not be negative")
    if len(np.unique(n)) < MIN_POINTS:
        raise FitError(f"the USL needs at least {MIN_POINTS} distinct levels (got {len(np.unique(n))})")
    if not np.any(x > 0):
        raise FitError("every rate is 0: nothing succeeded, there is no curve to fit")
    return n, x


def _solve(n: np.ndarray, x: np.ndarray) -> np.ndarray:
    """Best of several starts, in units where the highest rate is 1 (σ and κ do not change with that scale)."""
    # numpy and scipy are imported on the first fit: start-up that runs, error paths and reports do not need
    import numpy as np
    from scipy.optimize import least_squares

    scale = float(x.max())
    xs = x / scale
    lam_starts = sorted({float(np.max(xs / n)), float(xs[np.argmin(n)] / n.min())})

    def resid(p: np.ndarray) -> np.ndarray:
        return usl(n, p[0], p[1], p[2]) - xs

    def jac(p: np.ndarray) -> np.ndarray:
        return _jacobian(p, n)

    best = None
    for s0 in _SIGMA_STARTS:
        for k0 in _KAPPA_STARTS:
            for l0 in lam_starts:
                res = least_squares(
                    resid,
                    np.array([s0, k0, max(l0, 1e-12)]),
                    jac=jac,
                    bounds=([0.0, 0.0, 0.0], [1.0, 1.0, np.inf]),
                    x_scale="jac",
                    ftol=1e-14,
                    xtol=1e-14,
                    gtol=1e-14,
                    max_nfev=5000,
                )
                if best is None or res.cost < best.cost:
                    best = res
    assert best is not None
    p = best.x.copy()
    p[0] = 0.0 if p[0] < _AT_BOUND else p[0]
    p[1] = 0.0 if p[1] < _AT_BOUND else p[1]
    p[2] *= scale
    return p


def _intervals(p: np.ndarray, n: np.ndarray, rss: float) -> tuple[dict[str, tuple[float, float]], str | None]:
    import numpy as np

    dof = len(n) - len(PARAMS)
    if dof <= 0:
        return {}, f"with {len(n)} levels there are no degrees of freedom left for confidence intervals"
    j = _jacobian(p, n)
    jtj = j.T @ j
    if np.linalg.cond(jtj) > 1e15:
        return {}, "the parameters cannot be told apart with these levels (singular Jacobian): no confidence intervals"
    cov = (rss / dof) * np.linalg.inv(jtj)
    se = np.sqrt(np.clip(np.diag(cov), 0.0, None))
    from scipy.special import stdtrit  # imported here: see _solve

    t = float(stdtrit(dof, 0.975))
    return {k: (float(v - t * e), float(v + t * e)) for k, v, e in zip(PARAMS, p, se, strict=True)}, None


def fit_usl(
    levels: Sequence[float] | np.ndarray, rates: Sequence[float] | np.ndarray, *, left_out: Sequence[float] = ()
) -> USLFit:
    """Fit the USL to (level, rate) points; warn and advise when the points cannot support the fit.

    `left_out`: levels that were measured but are not in the fit (collapsed ones); the advice uses them.
    """
    import numpy as np

    n, x = _check(levels, rates)
    p = _solve(n, x)
    sigma, kappa, lam = (float(v) for v in p)
    fitted = usl(n, sigma, kappa, lam)
    rss = float(np.sum((x - fitted) ** 2))
    tss = float(np.sum((x - x.mean()) ** 2))
    r2 = 1.0 - rss / tss if tss > 0 else (1.0 if rss == 0 else 0.0)
    n_star = math.sqrt((1 - sigma) / kappa) if kappa > 0 and sigma < 1 else None
    peak_rate = usl(n_star, sigma, kappa, lam) if n_star is not None else None
    ci, ci_warning = _intervals(p, n, rss)

    warnings, tips = advice.for_points(n, x, n_star, left_out)
    if ci_warning:
        warnings.append(ci_warning)
    if r2 < _POOR_R2:
        warnings.append(
            f"the USL fits these points poorly (R² = {r2:.2f}); the curve is not a USL shape, "
            "or the measurements are noisy: repeat levels or measure longer"
        )
    return USLFit(
        sigma=sigma,
        kappa=kappa,
        lam=lam,
        n_star=n_star,
        peak_rate=peak_rate,
        r2=r2,
        ci=ci,
        warnings=warnings,
        advice=tips,
    )
