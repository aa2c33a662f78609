"""A sweep of the demo service recovers the σ and κ the service was configured with (within 20 %)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from knee.demo_target import start_target
from knee.store import RunDir

SCENARIO = """\
name = "usl"

[groups.main]
kind = "http"
url = "${target}/"
clients = "level"
timeout = "5s"

[sweep]
levels = [1, 4, 8, 16, 24, 32, 48, 64, 96]
duration = "1500ms"

[stop]
at_collapse = false
"""

# Serial (make test-py runs it beside one other serial test at most): USL parameters fitted to measured rates.
pytestmark = pytest.mark.serial


@pytest.mark.timeout(120)
@pytest.mark.parametrize(("profile", "sigma", "kappa"), [("basic", 0.05, 0.001), ("srm-fast", 0.2, 0.00032)])
def test_usl_fit_recovers_the_configured_parameters(tmp_path: Path, profile: str, sigma: float, kappa: float) -> None:
    scenario = tmp_path / "usl.toml"
    scenario.write_text(SCENARIO)
    out = tmp_path / "runs"
    with start_target(profile, recovery={"mode": "recover"}) as target:
        proc = subprocess.run(
            [sys.executable, "-m", "knee", "sweep", str(scenario), "--out", str(out), "--var", f"target={target.url}"],
            capture_output=True, text=True, timeout=110, check=False,
        )  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    (run,) = [p for p in out.iterdir() if p.is_dir()]
    record = RunDir(run).load()
    fit = next(v for v in record.verdicts if v.group == "main").usl
    assert fit is not None
    assert fit.sigma == pytest.approx(sigma, rel=0.2), fit
    assert fit.kappa == pytest.approx(kappa, rel=0.2), fit
    assert fit.lam == pytest.approx(100.0, rel=0.1), fit
    assert fit.r2 > 0.95
