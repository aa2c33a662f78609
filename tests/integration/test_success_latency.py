"""Latency is the successes', failures are timed apart, and `--think-on-failure` paces failing clients.

The demo target with a pool of 2 at λ = 4/s (`knee target --pool 2`): each success takes 250 ms, every
request past the pool is refused with 503 at once. Ten clients then make a few successes and thousands of
instant failures; a p99 over both would be a fraction of a millisecond (issue 25, case 2).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import jsonschema
import pytest

import knee
from knee.analysis.compare import compare_runs
from knee.demo_target import start_target
from knee.store import load_run

from conftest import REPO, knee_cli

SCHEMA = json.loads((REPO / "schemas" / "knee-run.schema.json").read_text())
SERVICE_MS = 250.0  # 1 / λ

# Serial (make test-py runs it beside one other serial test at most): latencies against the service time.
pytestmark = pytest.mark.serial


def knee_run(tmp_path: Path, name: str, *args: str) -> dict[str, Any]:
    out = tmp_path / f"{name}.json"
    proc = knee_cli("run", "-q", "--json", str(out), "--out", str(tmp_path / name), *args, timeout=60)
    assert out.exists(), proc.stderr + proc.stdout
    doc: dict[str, Any] = json.loads(out.read_text())
    jsonschema.validate(doc, SCHEMA)
    return doc


def test_latency_is_of_successes_and_think_on_failure_paces_failing_clients(tmp_path: Path) -> None:
    with start_target(lam=1000.0 / SERVICE_MS, sigma=0.0, kappa=0.0, pool=2) as t:
        # 10 clients against a pool of 2: 2 in service, 8 refused at once, again and again.
        url = t.url + "/"
        spin = knee_run(tmp_path, "spin", url, "-c", "10", "-d", "1.5s")
        stats = t.stats()
        # (the server also refused what knee counts as abandoned: refusals that ended after the window closed)
        assert spin["failed"] <= stats["rejected_pool"] <= spin["failed"] + spin["abandoned"] + 2, (spin, stats)
        assert spin["failed"] > 20 * spin["succeeded"] > 0, spin
        lat, failed = spin["latency_ms"], spin["failed_latency_ms"]
        assert lat["count"] == spin["succeeded"]
        assert 0.9 * SERVICE_MS <= lat["p50"] <= 1.5 * SERVICE_MS, lat
        assert lat["p99"] >= 0.9 * SERVICE_MS, lat
        assert [q for q, v in spin["percentiles_ms"] if v < 0.9 * SERVICE_MS] == [], spin["percentiles_ms"]
        assert failed["count"] == spin["failed"]
        assert failed["p50"] < 0.1 * SERVICE_MS, failed

        # 3 clients against the pool of 2, backing off 100 ms after each failure: a client fails at most once
        # per 100 ms (3 × 1.5 s / 100 ms if all were always refused); the same 3 without the back-off spin.
        t.reset()
        backoff = knee.run(url, clients=3, duration="1.5s", think_on_failure="100ms", out=tmp_path)
        t.reset()
        spin3 = knee.run(url, clients=3, duration="1.5s", out=tmp_path)
    assert backoff.spec.groups[0].think_on_failure_ms == 100
    assert 0 < backoff.stats.failed <= 3 * 16, backoff.stats.failed
    assert spin3.stats.failed > 10 * 3 * 16, spin3.stats.failed
    assert backoff.stats.succeeded > 0 and backoff.stats.latency_ms.count == backoff.stats.succeeded

    # `knee compare` shows the successes' p99 of both: ~250 ms each, not B's instant 503s ("2.00 s → 0.113 ms").
    assert backoff.run_dir is not None and spin3.run_dir is not None
    cmp = compare_runs(load_run(backoff.run_dir), load_run(spin3.run_dir))
    p99s = [(d.p99_a_ms or 0.0, d.p99_b_ms or 0.0) for d in cmp.levels if d.level == 3]
    assert p99s and all(a >= 0.9 * SERVICE_MS and b >= 0.9 * SERVICE_MS for a, b in p99s), p99s
