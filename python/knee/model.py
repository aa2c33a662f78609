"""The data knee passes between its parts: a step's measured groups, a run, a verdict.

Everything here is plain data (pydantic models) that round-trips through JSON:
`run.json` in the run directory is a `RunRecord` dumped with `model_dump(mode="json")`.
The engine's own summary (see docs/engine-spec.md) is turned into `GroupStats` by
`GroupStats.from_engine`; all latencies here are in milliseconds.
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, Field

SCHEMA_VERSION = 1


class LatencyStats(BaseModel):
    """Latency summary in milliseconds (count 0 when nothing was recorded)."""

    count: int = 0
    min: float = 0.0
    mean: float = 0.0
    stdev: float = 0.0
    p50: float = 0.0
    p90: float = 0.0
    p95: float = 0.0
    p99: float = 0.0
    p999: float = 0.0
    max: float = 0.0

    @classmethod
    def from_engine_us(cls, d: dict[str, Any] | None) -> LatencyStats:
        if not d:
            return cls()
        return cls(count=int(d.get("count", 0)), **{k: float(d.get(k, 0)) / 1000.0 for k in _LAT_KEYS})


_LAT_KEYS = ("min", "mean", "stdev", "p50", "p90", "p95", "p99", "p999", "max")


class SeriesPoint(BaseModel):
    t: float
    succeeded: int
    failed: int
    hung: int


class GroupStats(BaseModel):
    """One client group's measurement over one step."""

    name: str
    kind: str = ""
    clients: int
    succeeded: int
    failed: int
    hung: int
    elapsed_s: float
    rate_hz: float = Field(description="succeeded / elapsed_s")
    failures: dict[str, int] = Field(default_factory=dict)
    error_samples: dict[str, list[str]] = Field(default_factory=dict)
    latency_ms: LatencyStats = Field(default_factory=LatencyStats)
    connect_ms: LatencyStats = Field(default_factory=LatencyStats)
    ttfb_ms: LatencyStats = Field(default_factory=LatencyStats)
    percentiles_ms: list[tuple[float, float]] = Field(default_factory=list)
    series: list[SeriesPoint] = Field(default_factory=list)
    interval_s: float = 1.0
    per_client: list[int] = Field(default_factory=list)
    hung_clients: list[int] = Field(default_factory=list)

    @property
    def total(self) -> int:
        return self.succeeded + self.failed + self.hung

    @property
    def failure_ratio(self) -> float:
        """(failed + hung) / all operations; 0 when there were none."""
        n = self.total
        return (self.failed + self.hung) / n if n else 0.0

    @classmethod
    def from_engine(cls, g: dict[str, Any], interval_s: float = 1.0) -> GroupStats:
        """Build from one entry of the engine summary's `groups` list."""
        elapsed = float(g.get("elapsed_s", 0.0))
        succeeded = int(g["succeeded"])
        return cls(
            name=g["name"],
            kind=g.get("kind", ""),
            clients=int(g.get("clients", 0)),
            succeeded=succeeded,
            failed=int(g["failed"]),
            hung=int(g["hung"]),
            elapsed_s=elapsed,
            rate_hz=succeeded / elapsed if elapsed > 0 else 0.0,
            failures={k: int(v) for k, v in g.get("failures", {}).items()},
            error_samples=g.get("error_samples", {}),
            latency_ms=LatencyStats.from_engine_us(g.get("latency_us")),
            connect_ms=LatencyStats.from_engine_us(g.get("connect_us")),
            ttfb_ms=LatencyStats.from_engine_us(g.get("ttfb_us")),
            percentiles_ms=[(float(q), float(v) / 1000.0) for q, v in g.get("percentiles", [])],
            series=[SeriesPoint(**p) for p in g.get("series", [])],
            interval_s=interval_s,
            per_client=list(g.get("per_client", [])),
            hung_clients=list(g.get("hung_clients", [])),
        )


class GeneratorStats(BaseModel):
    """knee's own CPU use during a step (to flag a saturated load generator)."""

    cpu_s: float = 0.0
    cpu_cores: float = 0.0  # cpu_s / elapsed_s: 1.0 = one core fully busy
    cores_available: int = 1
    saturated: bool = False


class StepResult(BaseModel):
    """One step of a plan: one level (or a recovery probe), all its groups."""

    index: int
    level: int
    label: str = ""  # e.g. the operation type of a fixed-work stage ("store", "fetch")
    phase: Literal["sweep", "recovery"] = "sweep"
    direction: Literal["up", "down"] = "up"
    partial: bool = False
    started_unix: float
    elapsed_s: float
    groups: dict[str, GroupStats]
    generator: GeneratorStats = Field(default_factory=GeneratorStats)
    rate_hz: float | None = Field(default=None, description="open-loop offered rate for this step, if any")


class USLFit(BaseModel):
    """X(N) = lam*N / (1 + sigma*(N-1) + kappa*N*(N-1))."""

    sigma: float
    kappa: float
    lam: float
    n_star: float | None  # None when kappa == 0 (no peak)
    peak_rate: float | None
    r2: float
    ci: dict[str, tuple[float, float]] = Field(default_factory=dict)  # 95 % intervals for sigma, kappa, lam
    warnings: list[str] = Field(default_factory=list)
    advice: list[str] = Field(default_factory=list)


class LittleCheck(BaseModel):
    level: int
    expected_n: float  # X * (R + Z)
    gap: float  # relative: |N - expected| / N


class Verdict(BaseModel):
    """What the analysis concluded about one group over a sweep."""

    group: str
    peak_level: int | None = None
    peak_rate: float | None = None
    error_onset_level: int | None = None
    collapse_level: int | None = None
    hung_by_level: dict[int, int] = Field(default_factory=dict)
    recovered: bool | None = None
    time_to_recover_s: float | None = None
    hysteresis: dict[int, float] = Field(default_factory=dict)  # level -> (up - down) / up rate gap
    capacity_under_slo: int | None = None
    slo_passed: bool | None = None
    little: list[LittleCheck] = Field(default_factory=list)
    usl: USLFit | None = None
    sentences: list[str] = Field(default_factory=list)  # the verdict in words
    warnings: list[str] = Field(default_factory=list)


class RunRecord(BaseModel):
    """The run directory's run.json."""

    schema_version: int = SCHEMA_VERSION
    run_id: str
    created_unix: float
    status: Literal["running", "complete", "interrupted", "aborted", "stopped"] = "running"
    knee_version: str = ""
    machine: dict[str, Any] = Field(default_factory=dict)
    scenario: dict[str, Any] = Field(default_factory=dict)
    measured_group: str = "main"  # the group whose level the sweep varies
    steps: list[StepResult] = Field(default_factory=list)
    verdicts: list[Verdict] = Field(default_factory=list)
