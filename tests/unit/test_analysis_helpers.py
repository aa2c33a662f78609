"""Build StepResults by hand for the analysis tests (helpers only, no tests here)."""

from __future__ import annotations

from typing import Any

from knee.analysis import analyze
from knee.model import CurveShape, GroupStats, LatencyStats, StepResult

from sample_records import group_stats, step_result

T0 = 1_700_000_000.0


def step(
    index: int,
    level: int,
    succeeded: int,
    failed: int = 0,
    hung: int = 0,
    *,
    elapsed: float = 10.0,
    phase: str = "sweep",
    direction: str = "up",
    partial: bool = False,
    p99_ms: float = 10.0,
    mean_ms: float | None = None,
    failed_mean_ms: float | None = None,
    started: float | None = None,
    group: str = "main",
    clients: int | None = None,
    extra: dict[str, GroupStats] | None = None,
) -> StepResult:
    """One step whose `group` made `succeeded` successes in `elapsed` seconds (rate = succeeded / elapsed); the
    failures took `failed_mean_ms` (default: as long as the successes, `mean_ms`)."""
    completed = succeeded + failed
    n = level if clients is None else clients
    if mean_ms is None:  # by default the clients were busy all the time: Little's law holds
        mean_ms = n * elapsed / completed * 1000 if completed else 0.0
    failed_ms = LatencyStats(count=failed, mean=mean_ms if failed_mean_ms is None else failed_mean_ms)
    latency = LatencyStats(count=succeeded, mean=mean_ms, p99=p99_ms if succeeded else 0.0)
    g = group_stats(group, n, succeeded, elapsed, latency, failed=failed, hung=hung, failed_latency_ms=failed_ms)
    started_unix = T0 + index * 20.0 if started is None else started
    groups = {group: g, **(extra or {})}
    return step_result(index, level, started_unix, elapsed, groups, phase=phase, direction=direction, partial=partial)


def sweep(rates: dict[int, float], elapsed: float = 10.0) -> list[StepResult]:
    """An up sweep with these rates (Hz) per level and no failures."""
    return [step(i, lvl, round(r * elapsed), elapsed=elapsed) for i, (lvl, r) in enumerate(rates.items())]


def shape_named(steps: list[StepResult], name: str, evidence: str = "", **kw: Any) -> CurveShape:
    """The curve's shape the analysis names for group `main` of `steps` (`kw`: analyze's), which must be `name`,
    its evidence starting with `evidence`."""
    v = analyze(steps, "main", **kw)
    assert v.shape is not None and v.shape.name == name, v.shape
    assert v.shape.evidence.startswith(evidence), v.shape.evidence
    return v.shape
