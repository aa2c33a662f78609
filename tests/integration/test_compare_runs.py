"""`knee compare` on real sweeps of `knee target`: two identical runs of one service are no change within noise
(exit 0, even under --fail-on), and a run of a service 20 % slower is the regression --fail-on throughput:5%
exits 3 for, with the other target named first."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from knee.demo_target import start_target

from conftest import knee_cli

LAMBDA = 100.0  # requests/s per client: 8 and 16 clients do 800 and 1,600/s (σ = κ = 0)
LEVELS = "8,16"


def _sweep(url: str, out: Path, name: str) -> list[str]:
    """`knee sweep URL` of LEVELS, 2 s each, into `out` as run `name`."""
    sweep = ["sweep", url + "/", "--levels", LEVELS, "-d", "2s", "--no-recovery", "--out", str(out), "--name", name]
    return [sys.executable, "-m", "knee", *sweep]


def _run_dir(out: Path, name: str) -> Path:
    [found] = out.glob(f"*-{name}")
    return found


@pytest.mark.serial  # two runs' rates held against each other
def test_identical_runs_are_no_change_and_a_slower_service_fails(tmp_path: Path) -> None:
    with (
        start_target(lam=LAMBDA, sigma=0.0, kappa=0.0) as same,
        start_target(lam=LAMBDA * 0.8, sigma=0.0, kappa=0.0) as slower,
    ):
        # one after another: a sweep beside another shares the 2 cores with it, and is not the same run
        for t, name in ((same, "a"), (same, "b"), (slower, "slow")):
            run = subprocess.run(_sweep(t.url, tmp_path, name), capture_output=True, text=True, timeout=60)
            assert run.returncode == 0, run.stdout + run.stderr
    a, b, slow = (_run_dir(tmp_path, n) for n in ("a", "b", "slow"))

    twice = knee_cli("compare", str(a), str(b), "--fail-on", "throughput:5%")
    assert twice.returncode == 0, twice.stdout + twice.stderr
    assert "no change within noise at any of 2 levels" in twice.stdout, twice.stdout
    assert "warning:" not in twice.stdout and "passed: --fail-on throughput:5%" in twice.stdout, twice.stdout

    worse = knee_cli("compare", str(a), str(slow), "--fail-on", "throughput:5%")
    assert worse.returncode == 3, worse.stdout + worse.stderr
    lines = worse.stdout.splitlines()
    assert lines[0].startswith(f"warning: targets differ: main: {same.url}/ in A, {slower.url}/ in B"), lines[0]
    assert "B is worse than A beyond noise at" in worse.stdout, worse.stdout
    [failed] = [line for line in lines if line.startswith("failed: --fail-on throughput:5%: main at ")]
    assert "rate -2" in failed or "rate -1" in failed, failed  # about −20 %
