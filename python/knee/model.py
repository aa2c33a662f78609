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

# A sweep level: a client count (closed loop) or an offered rate in operations per second (open
# loop, `[sweep] rates`); whole numbers stay ints so client levels read 50, not 50.0.
Level = int | float
LevelUnit = Literal["clients", "rate"]


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


class OpenLoopStats(BaseModel):
    """An open-loop group's arrivals (docs/open-vs-closed.md): what was offered and what kept up."""

    offered: int = Field(description="arrivals due inside the measured window")
    offered_rate_hz: float
    achieved_rate_hz: float = Field(description="(succeeded + failed + hung) / elapsed_s")
    late: int = Field(description="operations that started more than 10 ms after their intended start")
    dropped: int = Field(description="arrivals that never started (max_in_flight, or waited past the timeout)")
    latency_uncorrected_ms: LatencyStats = Field(
        default_factory=LatencyStats, description="latency from the actual start (latency_ms counts from the intended)"
    )

    @classmethod
    def from_engine(cls, g: dict[str, Any]) -> OpenLoopStats | None:
        if not g.get("open_loop"):
            return None
        return cls(
            offered=int(g.get("offered", 0)),
            offered_rate_hz=float(g.get("offered_rate_hz") or 0.0),
            achieved_rate_hz=float(g.get("achieved_rate_hz", 0.0)),
            late=int(g.get("late", 0)),
            dropped=int(g.get("dropped", 0)),
            latency_uncorrected_ms=LatencyStats.from_engine_us(g.get("latency_uncorrected_us")),
        )


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
    open_loop: OpenLoopStats | None = None  # set for a group paced by an arrival rate

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
            open_loop=OpenLoopStats.from_engine(g),
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
    level: Level = Field(description="client count, or the offered rate (/s) of a rate sweep (rate_hz set)")
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
    level: Level
    expected_n: float  # X * (R + Z)
    gap: float  # relative: |N - expected| / N


class Verdict(BaseModel):
    """What the analysis concluded about one group over a sweep."""

    group: str
    level_unit: LevelUnit = "clients"  # "rate": the levels below are offered rates (/s), not client counts
    peak_level: Level | None = None
    peak_rate: float | None = None
    error_onset_level: Level | None = None
    saturation_level: Level | None = None  # rate sweeps: the first level that did not keep up (analysis.md)
    collapse_level: Level | None = None
    hung_by_level: dict[Level, int] = Field(default_factory=dict)
    recovered: bool | None = None
    time_to_recover_s: float | None = None
    hysteresis: dict[Level, float] = Field(default_factory=dict)  # level -> (up - down) / up rate gap
    capacity_under_slo: Level | None = None
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
