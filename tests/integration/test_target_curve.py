"""knee's own engine against `knee target`: the measured rate follows the configured USL curve,
and every count knee reports matches the server's own /admin/stats."""

from __future__ import annotations

from typing import Any

import psutil
import pytest

from knee import engine
from knee.demo_target import TargetProcess, start_target
from knee.model import GroupStats

from servers import http_spec, run_spec, settled

# S(1) = 20 ms; N* = sqrt(0.9 / 0.01) ≈ 9.5: the curve rises, peaks and falls over 1..20 clients.
CURVE = {"lam": 50.0, "sigma": 0.1, "kappa": 0.01}

# Alone (make test-py runs it with nothing beside it): rates and latencies within 10 %, the target's CPU.
pytestmark = pytest.mark.alone


def usl(n: int, lam: float, sigma: float, kappa: float) -> float:
    return lam * n / (1 + sigma * (n - 1) + kappa * n * (n - 1))


def run(spec: dict[str, Any]) -> tuple[GroupStats, Any]:
    s = engine.summary(run_spec(spec))
    return GroupStats.from_engine(s.groups[0], s.interval_s), s.groups[0]


@pytest.fixture(scope="module")
def target() -> Any:
    with start_target(**CURVE) as t:
        yield t


def test_rate_follows_the_configured_usl_curve_within_10_percent(target: TargetProcess) -> None:
    proc = psutil.Process(target.pid)
    cpu0 = sum(proc.cpu_times()[:2])
    rates = {}
    for n in (1, 4, 10, 20):
        target.reset()
        g, _ = run(http_spec(target.url + "/", n, {"duration_ms": 2000}, warmup_ms=500))
        want = usl(n, CURVE["lam"], CURVE["sigma"], CURVE["kappa"])
        assert g.failed == 0 and g.hung == 0, g.failures
        assert abs(g.rate_hz - want) / want < 0.10, f"N={n}: knee measured {g.rate_hz:.1f}/s, the USL says {want:.1f}/s"
        # Every request the target saw is one knee counted: warm-up, or started (abandoned at the end included).
        seen = g.started + g.warmup_ops
        assert settled(lambda: target.stats()["requests"], seen) == seen
        assert target.stats()["max_in_flight"] <= n
        rates[n] = g.rate_hz
    assert rates[10] > rates[1] and rates[10] > rates[20], f"the curve peaks near N* ≈ 9.5: {rates}"
    # The target waits on timers: over ~10 s of load it used a small fraction of one core.
    cpu = sum(proc.cpu_times()[:2]) - cpu0
    assert cpu < 0.25 * 10, f"the target burned {cpu:.2f} s of CPU in ~10 s"


def test_every_count_matches_the_servers_own(target: TargetProcess) -> None:
    target.reset()
    g, summary = run(http_spec(target.url + "/", 6, {"per_client": 20}, warmup_ms=200))
    stats = target.stats()
    assert g.succeeded == 120 and g.failed == g.hung == 0
    # Warm-up operations are not in knee's counts but the server served them too.
    assert stats["served"] == g.succeeded + summary.warmup_ops == stats["requests"]
    assert stats["rejected_pool"] == stats["timed_out"] == stats["hung"] == stats["aborted"] == 0
    assert stats["in_flight"] == 0


def test_path_costs_differ() -> None:
    with start_target(lam=50.0, sigma=0.0, kappa=0.0, paths={"/ls": {"cost": 0.5}, "/login": {"cost": 4.0}}) as t:
        ls, _ = run(http_spec(t.url + "/ls", 2, {"duration_ms": 1000}, warmup_ms=200))
        login, _ = run(http_spec(t.url + "/login", 2, {"duration_ms": 1000}, warmup_ms=200))
    # S = cost / λ: /ls 10 ms, /login 80 ms; two clients.
    assert abs(ls.rate_hz - 200) / 200 < 0.10, ls.rate_hz
    assert abs(login.rate_hz - 25) / 25 < 0.15, login.rate_hz


def test_new_connections_pay_the_setup_cost() -> None:
    # S = 10 ms; the first request of every connection pays 20 ms more.
    with start_target(lam=100.0, sigma=0.0, kappa=0.0, new_connection_ms=20.0) as t:
        keep, _ = run(http_spec(t.url + "/", 1, {"duration_ms": 1000}, warmup_ms=200))
        s = http_spec(t.url + "/", 1, {"duration_ms": 1000}, warmup_ms=200)
        s["groups"][0]["client"]["new_connection"] = True  # type: ignore[index]
        fresh, _ = run(s)
        stats = t.stats()
    # Medians, not rates: one client's rate over a second moves by 10 % with a single
    # 100 ms scheduling stall on a busy machine, its median latency does not.
    assert abs(keep.latency_ms.p50 - 10) / 10 < 0.10, keep.latency_ms
    assert abs(fresh.latency_ms.p50 - 30) / 30 < 0.10, fresh.latency_ms
    assert abs(fresh.rate_hz - 1000 / 30) / (1000 / 30) < 0.25, fresh.rate_hz
    assert stats["connections_accepted"] > fresh.succeeded
