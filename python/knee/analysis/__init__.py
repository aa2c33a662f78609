"""The analysis: pure functions from measured steps to a verdict and a model.

    analyze(steps, group, *, onset=0.001, slo=None, think_s=0.0) -> Verdict
    analyze_run(record) -> list[Verdict]           one per group
    fit_usl(levels, rates) -> USLFit               the Universal Scalability Law
    usl(n, sigma, kappa, lam)                      X(N)

The definitions are in docs/analysis.md.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from knee.analysis.run import analyze_run
    from knee.analysis.uslfit import FitError, fit_usl, usl
    from knee.analysis.verdict import analyze
    from knee.scenario import Slo

__all__ = ["FitError", "Slo", "analyze", "analyze_run", "fit_usl", "usl"]

# The fit lives in `uslfit`, not `usl`: a submodule named like the function would replace it as this
# package's attribute once imported (`from knee.analysis import usl` would then give the module).
_WHERE = {
    "analyze_run": "knee.analysis.run",
    "analyze": "knee.analysis.verdict",
    "FitError": "knee.analysis.uslfit",
    "fit_usl": "knee.analysis.uslfit",
    "usl": "knee.analysis.uslfit",
    "Slo": "knee.scenario",
}


def __getattr__(name: str) -> Any:
    # Lazy: a module of the package (stats, levels) imports without numpy and the fit.
    if name in _WHERE:
        import importlib

        return getattr(importlib.import_module(_WHERE[name]), name)
    raise AttributeError(f"module 'knee.analysis' has no attribute {name!r}")
