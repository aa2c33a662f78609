"""knee's engine against the target's behaviours in time, the ones the level search is tested on:
a queueing worker pool (a plateau of λ·N from N clients on, latency growing with the queue), a
warm-up (slow for the first seconds after the first request) and per-second noise."""

from __future__ import annotations

import statistics
import subprocess
import sys
from typing import Any

import pytest

from knee import engine
from knee.demo_target import start_target
from knee.model import GroupStats

from servers import run_spec

FLAT = {"lam": 50.0, "sigma": 0.0, "kappa": 0.0}  # S = 20 ms whatever the load

# Serial (make test-py runs it beside one other serial test at most): per-second rates and their noise.
pytestmark = pytest.mark.serial


def closed_loop(url: str, clients: int, duration_ms: int, *, warmup_ms: int = 0, interval_ms: int = 1000) -> GroupStats:
    """`clients` back-to-back clients on one engine thread; the group's stats with its series."""
    spec: dict[str, Any] = {
        "threads": 1,
        "interval_ms": interval_ms,
        "groups": [
            {
                "name": "main",
                "clients": clients,
                "stop": {"duration_ms": duration_ms},
                "warmup_ms": warmup_ms,
                "timeout_ms": 5000,
                "client": {"kind": "http", "url": url},
            }
        ],
    }
    return engine.group_stats(run_spec(spec))["main"]


def per_interval(g: GroupStats, interval_s: float) -> list[tuple[float, float]]:
    """(interval start, succeeded per second) of every whole interval."""
    return [(p.t, p.succeeded / interval_s) for p in g.series]


def test_workers_queue_past_n_a_plateau_of_lambda_n_with_latency_growing_with_the_queue() -> None:
    with start_target(**FLAT, workers=8) as t:
        assert t.model["plateau_rate"] == 400.0 and t.model["peak_clients"] is None, t.model
        got: dict[int, GroupStats] = {}
        for n in (4, 8, 16):
            t.reset()
            g = closed_loop(t.url + "/", n, 1500, warmup_ms=300)
            stats = t.stats()
            assert g.failed == 0 and g.hung == 0, g.failures
            assert stats["max_in_flight"] <= n and stats["max_queued"] == max(0, n - 8), stats
            got[n] = g
    rates = {n: round(g.rate_hz) for n, g in got.items()}
    for n, want in ((4, 200), (8, 400), (16, 400)):
        assert abs(got[n].rate_hz - want) / want < 0.10, f"λ·min(N, 8) = {want}/s at N = {n}: {rates}"
    # Little's law: twice the clients at the same rate wait twice as long (8 served, 8 queued).
    ratio = got[16].latency_ms.mean / got[8].latency_ms.mean
    assert 1.8 < ratio < 2.2, f"mean latency 16 vs 8 clients: ×{ratio:.2f} ({got[8].latency_ms.mean:.1f} ms)"


def test_workers_behind_a_connection_limit_serve_8_queue_8_and_leave_the_rest_unaccepted() -> None:
    spec = {
        "threads": 1,
        "groups": [
            {
                "name": "main",
                "clients": 24,
                "stop": {"duration_ms": 1500},
                "warmup_ms": 300,
                "timeout_ms": 5000,
                "client": {"kind": "http"},
            }
        ],
    }
    with start_target(**FLAT, workers=8, max_connections=16) as t:
        spec["groups"][0]["client"]["url"] = t.url + "/"  # type: ignore[index]
        g = engine.summary(run_spec(spec)).groups[0]
    # 16 clients got a connection: 8 served at a time, 8 queued (40 ms a request); the other 8
    # waited to be accepted for the whole run and got nothing.
    assert abs(g.succeeded / g.elapsed_s - 400) / 400 < 0.10, g.succeeded / g.elapsed_s
    assert sorted(c > 0 for c in g.per_client).count(True) == 16, g.per_client
    assert abs(g.latency_us.mean / 1000 - 40) / 40 < 0.15, g.latency_us
    assert g.failed == 0, g.failures


def test_warm_up_is_a_quarter_of_the_rate_for_its_first_seconds() -> None:
    with start_target(**FLAT, warmup_for=2.0, warmup_factor=4.0) as t:
        assert t.stats()["clock_s"] is None, "the clock waits for the first request"
        g = closed_loop(t.url + "/", 4, 5000, interval_ms=500)
    series = per_interval(g, 0.5)
    cold = [r for start, r in series if start < 2.0 - 1e-6]
    warm = [r for start, r in series if 2.5 - 1e-6 <= start < 4.5 - 1e-6]
    assert len(cold) == 4 and len(warm) == 4, series
    warm_rate = statistics.mean(warm)
    # 4 clients at S = 20 ms: 200/s warm; × 4 slower while warming up: 50/s.
    assert abs(warm_rate - 200) / 200 < 0.10, series
    for r in cold:
        assert abs(r / warm_rate - 0.25) < 0.05, f"{r:.0f}/s vs {warm_rate:.0f}/s warm: {series}"


def cv(values: list[float]) -> float:
    return statistics.stdev(values) / statistics.mean(values)


@pytest.mark.parametrize(("noise", "low", "high"), [(0.5, 0.15, 10.0), (0.0, 0.0, 0.05)])
def test_noise_moves_the_rate_second_by_second(noise: float, low: float, high: float) -> None:
    with start_target(lam=100.0, sigma=0.0, kappa=0.0, noise=noise) as t:
        g = closed_loop(t.url + "/", 4, 6000)
    rates = [r for _, r in per_interval(g, 1.0)][:6]
    assert len(rates) == 6, g.series
    assert low <= cv(rates) < high, f"noise {noise}: per-second rates {[round(r) for r in rates]}, cv {cv(rates):.3f}"


@pytest.mark.parametrize(
    ("args", "words"),
    [
        (["--workers", "-1"], ["workers = -1", "0 = no limit"]),
        (["--warmup-for", "2", "--warmup-factor", "0.5"], ["warmup_factor = 0.5", "≥ 1"]),
        (["--noise", "-0.1"], ["noise = -0.1", "from 0 (no noise)"]),
        (["--body-bytes", "99999999999999"], ["body_bytes = 99999999999999", "0 to 1073741824"]),
        (["--port", "0", "--ready-file", "/nonexistent/dir/x"], ["--ready-file /nonexistent/dir/x: cannot write it"]),
        (["--port", "99999"], ["--port must be a whole number from 0 to 65535 (got '99999')"]),
        (["--lambda", "inf"], ["--lambda must be a number (got 'inf')"]),
    ],
)
def test_bad_values_are_one_clear_line(args: list[str], words: list[str]) -> None:
    r = subprocess.run(
        [sys.executable, "-m", "knee", "target", *args],
        capture_output=True,
        text=True,
        timeout=30,
        stdin=subprocess.DEVNULL,
    )
    lines = r.stderr.strip().splitlines()
    assert r.returncode == 2 and len(lines) == 1 and lines[0].startswith("knee: error: "), r.stderr
    assert all(w in lines[0] for w in words), lines[0]


def test_help_names_the_new_options() -> None:
    r = subprocess.run([sys.executable, "-m", "knee", "target", "--help"], capture_output=True, text=True, timeout=30)
    assert r.returncode == 0, r.stderr
    for flag in ("--workers", "--warmup-for", "--warmup-factor", "--noise", "--seed"):
        assert flag in r.stdout, flag
