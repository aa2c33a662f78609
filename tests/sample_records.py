"""Synthetic runs for the report tests: a USL-shaped sweep built from numbers.

`sample_record()` returns the kind of RunRecord a sweep of a slow storage service writes: the
rate peaks near 50 clients at a few Hz, errors start around 600, the service collapses near 1000
and does not come back during the recovery probes. Every count is derived from the USL curve plus
seeded noise, so two calls with the same arguments give the same record. The verdicts are not
invented: `knee.analysis.analyze_run` computes them from the steps, as after a real sweep (the
report tests also render real sweeps' run.json: tests/integration/test_reports_real.py).
"""

from __future__ import annotations

import math
import random
import re
from collections.abc import Sequence
from typing import Any

from knee.analysis import analyze_run
from knee.model import (
    GeneratorStats,
    GroupStats,
    LatencyStats,
    Reason,
    RunRecord,
    SeriesPoint,
    StepResult,
)
from knee.scenario import Scenario, parse_scenario


def scenario(levels: Sequence[int] = (1, 2), group: str = "main", extra: str = "") -> Scenario:
    """A minimal scenario with one http group following `levels`."""
    return parse_scenario(
        f'name = "srm"\n[groups.{group}]\nkind = "http"\nurl = "http://127.0.0.1:8080/obj"\n'
        f'[sweep]\nlevels = {list(levels)}\nduration = "10s"\n{extra}'
    )


SRM_LEVELS = (1, 2, 5, 10, 20, 50, 100, 200, 400, 600, 800, 1000)


def usl_rate(n: float, sigma: float, kappa: float, lam: float) -> float:
    """X(N) = lam*N / (1 + sigma*(N-1) + kappa*N*(N-1))."""
    return lam * n / (1 + sigma * (n - 1) + kappa * n * (n - 1))


def group_stats(
    name: str, clients: int, succeeded: int, elapsed: float, latency: LatencyStats, **more: Any
) -> GroupStats:
    """A group's stats whose rate is its successes over the elapsed seconds (0 when none passed)."""
    rate = succeeded / elapsed if elapsed else 0.0
    return GroupStats(
        name=name, clients=clients, succeeded=succeeded, elapsed_s=elapsed, rate_hz=rate, latency_ms=latency, **more
    )


def step_result(
    index: int, level: int | float, started: float, elapsed: float, groups: dict[str, GroupStats], **more: Any
) -> StepResult:
    """A step at `level` that started at `started` (Unix seconds) and in which these groups ran."""
    return StepResult(index=index, level=level, started_unix=started, elapsed_s=elapsed, groups=groups, **more)


def make_group(
    name: str,
    clients: int,
    rate_hz: float,
    *,
    seconds: int = 10,
    failed: int = 0,
    hung: int = 0,
    p50_ms: float = 10.0,
    p99_ms: float | None = None,
    noise: float = 0.05,
    seed: int = 0,
    interval_s: float = 1.0,
    failures: dict[str, int] | None = None,
    error_samples: dict[str, list[str]] | None = None,
) -> GroupStats:
    """One group's stats over `seconds` at `rate_hz`, with a per-interval series that adds up."""
    rng = random.Random(seed)
    n_int = max(1, round(seconds / interval_s))
    per = rate_hz * interval_s
    counts = [max(0, round(rng.gauss(per, per * noise))) for _ in range(n_int)]
    fails = _spread(failed, n_int, rng)
    hungs = _spread(hung, n_int, rng)
    series = [SeriesPoint(t=i * interval_s, succeeded=counts[i], failed=fails[i], hung=hungs[i]) for i in range(n_int)]
    succeeded = sum(counts)
    elapsed = n_int * interval_s
    p99 = p99_ms if p99_ms is not None else p50_ms * 2.5
    pct = _percentile_curve(p50_ms, p99)
    lat = LatencyStats(
        count=succeeded + failed,
        min=p50_ms * 0.3,
        mean=p50_ms * 1.1,
        stdev=p50_ms * 0.4,
        p50=p50_ms,
        p90=dict(pct)[90.0],
        p95=dict(pct)[95.0],
        p99=p99,
        p999=dict(pct)[99.9],
        max=dict(pct)[100.0],
    )
    if failures is None:
        failures = {"status": failed} if failed else {}
    if error_samples is None:
        error_samples = {"status": ["HTTP/1.1 503 Service Unavailable: pool full"]} if failed else {}
    reasons = [
        Reason.model_validate({"class": cls, "key": samples[0], "sample": samples[0], "count": failures.get(cls, 0)})
        for cls, samples in error_samples.items()
        if samples
    ]
    return group_stats(
        name,
        clients,
        succeeded,
        elapsed,
        lat,
        kind="http",
        failed=failed,
        hung=hung,
        failures=failures,
        error_samples=error_samples,
        reasons=reasons,
        percentiles_ms=pct,
        series=series,
        interval_s=interval_s,
        per_client=[],
        hung_clients=list(range(min(hung, 5))),
    )


def _spread(total: int, n: int, rng: random.Random) -> list[int]:
    out = [0] * n
    for _ in range(total):
        out[rng.randrange(n)] += 1
    return out


def _percentile_curve(p50: float, p99: float) -> list[tuple[float, float]]:
    """A plausible latency tail through p50 and p99 (log-linear in 1/(1-q))."""
    qs = (50.0, 66.0, 75.0, 80.0, 90.0, 95.0, 98.0, 99.0, 99.9, 100.0)
    k = math.log(p99 / p50) / math.log(50.0)  # x = 1/(1-q): 2 at p50, 100 at p99
    out = []
    for q in qs:
        x = 1 / (1 - q / 100) if q < 100 else 2000.0
        out.append((q, round(p50 * (x / 2) ** k, 3)))
    return out


def sample_record(
    levels: Sequence[int] = SRM_LEVELS,
    *,
    sigma: float = 0.05,
    kappa: float = 0.00038,
    lam: float = 4.0,
    seconds: int = 10,
    seed: int = 1,
    group: str = "main",
    error_from: int = 600,
    collapse_at: int = 1000,
    recovery_probes: int = 2,
    error_sample: str = "HTTP/1.1 503 Service Unavailable: pool full",
    run_id: str = "20261121-051700-srm",
    noise: float = 0.05,
) -> RunRecord:
    """A whole sweep (plus recovery probes) shaped like the srm demo profile."""
    rng = random.Random(seed)
    steps: list[StepResult] = []
    t0 = 1_795_000_000.0
    for i, n in enumerate(levels):
        rate = usl_rate(n, sigma, kappa, lam)
        failed = hung = 0
        if n >= collapse_at:
            rate *= 0.3
        if n >= error_from:
            failed = int(rate * seconds * (0.02 if n < collapse_at else 0.8)) + 3
        if n >= collapse_at:
            hung = 12
        r_ms = 1000.0 * n / rate
        g = make_group(
            group,
            n,
            rate,
            seconds=seconds,
            failed=failed,
            hung=hung,
            p50_ms=r_ms * 0.9,
            p99_ms=r_ms * 2.4,
            seed=rng.randrange(1 << 30),
            noise=noise,
            error_samples={"status": [error_sample]} if failed else {},
        )
        gen = GeneratorStats(
            cpu_s=0.01 * n, cpu_cores=min(2.0, 0.002 * n), cores_available=2, saturated=n >= collapse_at
        )
        partial = n == levels[-1] and collapse_at > levels[-1]
        steps.append(step_result(i, n, t0, float(seconds), {group: g}, generator=gen, partial=partial))
        t0 += seconds + 2
    base = usl_rate(levels[0], sigma, kappa, lam)
    for k in range(recovery_probes):
        g = make_group(group, levels[0], base * 0.4, seconds=seconds, p50_ms=2500.0, seed=rng.randrange(1 << 30))
        started = t0 + 60 * k
        steps.append(
            step_result(len(steps), levels[0], started, float(seconds), {group: g}, phase="recovery", direction="down")
        )
    record = RunRecord(
        run_id=run_id,
        created_unix=1_795_000_000.0,
        status="complete",
        knee_version="0.1.0",
        machine={"hostname": "loadgen-1", "cpus": 2, "python": "3.11", "os": "Linux 6.1"},
        # a hostile group name (escaping tests) cannot be a scenario's: the scenario names it "main"
        scenario=scenario(levels, group if re.fullmatch(r"[A-Za-z0-9_-]+", group) else "main"),
        measured_group=group,
        steps=steps,
    )
    record.verdicts = analyze_run(record)
    return record


def long_level_record(seconds: int = 120, rate_hz: float = 40.0, seed: int = 3) -> RunRecord:
    """One long level with many intervals (a soak run)."""
    g = make_group("main", 20, rate_hz, seconds=seconds, p50_ms=500.0, noise=0.15, seed=seed)
    step = step_result(0, 20, 1_795_000_000.0, float(seconds), {"main": g})
    return RunRecord(
        run_id="soak", created_unix=1_795_000_000.0, status="complete", scenario=scenario([20]), steps=[step]
    )


def fixed_work_record(seed: int = 4) -> RunRecord:
    """Fixed-work stages with labels: store then fetch, each a set number of operations."""
    steps = []
    for i, (label, rate, secs) in enumerate((("store", 120.0, 25), ("fetch", 480.0, 6))):
        g = make_group("main", 16, rate, seconds=secs, p50_ms=16000 / rate * 0.9, seed=seed + i)
        steps.append(step_result(i, 16, 1_795_000_000.0 + 40 * i, secs, {"main": g}, label=label))
    sc = scenario([16], extra='stages = ["store", "fetch"]\n')
    return RunRecord(run_id="fixed", created_unix=1_795_000_000.0, status="complete", scenario=sc, steps=steps)
