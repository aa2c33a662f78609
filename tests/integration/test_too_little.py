"""Nothing concluded from too little (issue 34, item 4), against `knee target` on 127.0.0.1: an open loop is not
called saturated on a shortfall within its count's noise, a search's own overshoot does not fail the SLO, and
`-d auto`'s live stop and its record judge a level alike (docs/analysis.md "Rate sweeps", "The level search",
"Steady state").
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from knee.demo_target import start_target
from knee.model import RunRecord, Verdict
from knee.store import RunDir


def knee(*args: str, timeout: float) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "knee", *args], capture_output=True, text=True, timeout=timeout, stdin=subprocess.DEVNULL
    )


def the_run(out: Path) -> tuple[RunRecord, str]:
    (run,) = [p for p in out.iterdir() if p.is_dir()]
    return RunDir(run).load(), (run / "report.md").read_text()


def verdict(record: RunRecord) -> Verdict:
    return next(v for v in record.verdicts if v.group == record.measured_group)


@pytest.mark.timeout(60)
def test_a_level_stopped_as_settled_is_recorded_as_settled(tmp_path: Path) -> None:
    # 8 clients of 100 ms operations (λ = 10/s, no contention): 80/s, after a first second at 56-64 (the service's
    # first 0.4 s twice as slow). The live rule, which never saw that first second, stopped the level at its 6th
    # reading (80 x 5) while its record (56, 80 x 5) said "did not settle by max_duration after 6.0 s".
    with start_target(lam=10.0, sigma=0.0, kappa=0.0, warmup_for=0.4, warmup_factor=2.0) as target:
        proc = knee(
            "sweep", f"{target.url}/", "--levels", "8", "-d", "auto", "--min-duration", "5s", "--max-duration", "20s",
            "--settle", "0", "--no-recovery", "--out", str(tmp_path), timeout=50,
        )  # fmt: skip
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    record, report = the_run(tmp_path)
    (step,) = record.steps
    series = [p.succeeded for p in step.groups["main"].series]
    print("per second:", series, "step", step.elapsed_s, "s; steady:", step.steady)
    assert series[0] < 0.9 * series[2], series  # the slow first second the live view used to miss
    st = step.steady
    assert st is not None and st.auto
    stopped = step.groups["main"].elapsed_s < 19.5  # ended by the live rule, not at max_duration
    assert stopped and st.settled, (series, st)
    assert st.rate_hz == pytest.approx(80, rel=0.03)
    assert "did not settle" not in report and "settled after" in report
