"""knee's engine against the target's limits: the error onset is the configured pool size, the
hung count is the configured fraction, and the recovery modes behave as configured."""

from __future__ import annotations

import time
from typing import Any

import pytest

from knee import engine
from knee.demo_target import TargetProcess, start_target
from knee.model import GroupStats

from servers import http_spec, run_spec


def run(s: dict[str, Any]) -> GroupStats:
    return engine.group_stats(run_spec(s))["main"]


def test_error_onset_is_the_pool_size() -> None:
    # S = 20 ms flat; a pool of 10; a rejection takes 5 ms so the rejected clients do not spin.
    with start_target(lam=50.0, sigma=0.0, kappa=0.0, pool=10, reject_ms=5.0) as t:
        seen = {}
        for n in (5, 10, 11, 16):
            t.reset()
            g = run(http_spec(t.url + "/", n, {"per_client": 15}))
            stats = t.stats()
            assert stats["rejected_pool"] == g.failures.get("status", 0) == g.failed, (n, g.failures, stats)
            assert stats["served"] == g.succeeded
            assert stats["max_in_flight"] <= 10
            seen[n] = g.failed
    assert seen[5] == 0 and seen[10] == 0, seen
    assert seen[11] > 0 and seen[16] > seen[11], seen


def test_hung_count_is_the_configured_fraction() -> None:
    with start_target(lam=100.0, sigma=0.0, kappa=0.0, hang_after=0, hang_fraction=0.2) as t:
        g = run(http_spec(t.url + "/", 4, {"per_client": 25}, timeout_ms=300))
        stats = t.stats()
    total = g.succeeded + g.failed + g.hung
    assert g.failed == 0
    assert g.hung == stats["hung"], (g, stats)
    assert stats["served"] == g.succeeded
    # Exactly a fifth of all the requests the server received hung (its selection is deterministic).
    assert stats["requests"] == total
    assert abs(g.hung - total * 0.2) < 1, (g.hung, total)


def test_requests_past_the_timeout_get_504() -> None:
    with start_target(lam=100.0, sigma=0.0, kappa=0.0, timeout_s=0.05, paths={"/slow": {"cost": 10.0}}) as t:
        g = run(http_spec(t.url + "/slow", 2, {"per_client": 5}))
        stats = t.stats()
    assert g.failed == 10 == stats["timed_out"] == g.failures.get("status")


def _one_client_rate(t: TargetProcess) -> float:
    """One client's rate as its median service time implies it (1000 / p50 ms).

    A rate counted over 0.6 s loses 15 % to one 100 ms scheduling stall on a busy machine;
    the median of ~60 operations does not move.
    """
    return 1000.0 / run(http_spec(t.url + "/", 1, {"duration_ms": 600})).latency_ms.p50


RECOVERY = {"threshold": 4, "after_s": 0.3, "factor": 4.0, "recover_s": 1.0}


@pytest.mark.serial  # one client's rate held to 100/s ± 15 %: a 10 ms service's median within 1.8 ms
def test_stuck_stays_degraded_after_the_load_stops_until_reset() -> None:
    with start_target(lam=100.0, sigma=0.0, kappa=0.0, recovery={"mode": "stuck", **RECOVERY}) as t:
        assert abs(_one_client_rate(t) - 100) < 15
        run(http_spec(t.url + "/", 8, {"duration_ms": 800}))
        time.sleep(0.5)
        assert t.stats()["state"] == "degraded"
        degraded = _one_client_rate(t)
        assert abs(degraded - 25) < 5, f"4x slower after the load stopped: {degraded:.1f}/s"
        assert t.stats()["state"] == "degraded"
        t.reset()
        assert abs(_one_client_rate(t) - 100) < 15
        assert t.stats()["state"] == "normal"


@pytest.mark.serial  # a recovery timed within 0.8-1.6 s
def test_slow_recovers_within_its_configured_time() -> None:
    with start_target(lam=100.0, sigma=0.0, kappa=0.0, recovery={"mode": "slow", **RECOVERY}) as t:
        run(http_spec(t.url + "/", 8, {"duration_ms": 800}))
        stopped = time.monotonic()
        assert t.stats()["state"] == "degraded"
        while t.stats()["state"] != "normal":
            assert time.monotonic() - stopped < 3.0, "slow mode never recovered"
            time.sleep(0.02)
        took = time.monotonic() - stopped
        assert 0.8 <= took <= 1.6, f"recover_s = 1.0, took {took:.2f} s"
        assert abs(_one_client_rate(t) - 100) < 15
