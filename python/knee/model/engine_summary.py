"""The engine's summary, typed: the Python mirror of `crates/engine/src/summary.rs`.

`knee.engine.summary(result)` reads a shard result's summary into `EngineSummary`; `GroupStats.from_engine`
turns each group into the run record's form (all latencies from there on in milliseconds). Every field is
required and no unknown field is allowed (`Mirror`), so a key renamed on either side of the PyO3 boundary
fails loudly; `tests/unit/test_boundary.py` holds these fields against the keys the engine writes.
"""

from typing import Any

from pydantic import BaseModel, ConfigDict, Field, model_validator

from knee.model.base import Counts, GroupIdentity, Outcomes


class Mirror(BaseModel):
    """A model of what the engine writes: no unknown key, and every field required (defaults inherited
    from a shared shape such as `Counts` do not apply)."""

    model_config = ConfigDict(extra="forbid", populate_by_name=True)

    @model_validator(mode="before")
    @classmethod
    def _every_field(cls, data: Any) -> Any:
        if isinstance(data, dict):
            keys = {name: f.alias or name for name, f in cls.model_fields.items()}
            missing = [key for name, key in keys.items() if key not in data and name not in data]
            if missing:
                raise ValueError(f"{cls.__name__}: missing {', '.join(missing)}")
        return data


class EngineLatency(Mirror):
    """One histogram's figures in µs (summary.rs `LatencySummary`)."""

    count: int
    min: int
    mean: float
    stdev: float
    p50: int
    p90: int
    p95: int
    p99: int
    p999: int
    max: int


class EngineReason(Mirror):
    """Failures of one class with one normalised message (summary.rs `ReasonSummary`)."""

    class_: str = Field(alias="class")
    key: str
    sample: str
    count: int


class EngineSeriesPoint(Mirror):
    t: float
    succeeded: int
    failed: int
    hung: int
    offered: int
    late: int
    lagged: int = 0  # of the late, those issued with a client free (the load side's lag); 0 before knee kept it
    dropped: int
    p50_us: int | None
    p99_us: int | None
    latency: list[tuple[int, int]]
    failures: dict[str, int]


class EngineStep(Mirror):
    """A named step's durations (summary.rs `StepSummary`)."""

    name: str
    latency_us: EngineLatency


class EngineRequest(Mirror, Outcomes):
    """One request of a group's mix (summary.rs `RequestSummary`)."""

    name: str
    started_: int = Field(alias="started")
    failures: dict[str, int]
    latency_us: EngineLatency
    failed_latency_us: EngineLatency
    percentiles: list[tuple[float, int]]


class EngineDataUse(Mirror):
    """What one data source did in a shard (data/feed.rs `DataUse`)."""

    name: str
    rows: int
    available: int
    taken: int
    used: int
    exhausted_after_s: float | None
    memory_bytes: int


class EngineGroup(Mirror, Counts, GroupIdentity):
    """One group of the engine's summary (summary.rs `GroupSummary`): name, kind and clients from
    `GroupIdentity`, the counts from `Counts`."""

    # the engine's own sum of the four outcomes (named `started` on the wire; `.started` computes it)
    started_: int = Field(alias="started")
    elapsed_s: float
    failures: dict[str, int]
    error_samples: dict[str, list[str]]
    reasons: list[EngineReason]
    bytes_sent: int
    bytes_received: int
    payload_bytes: int
    messages_sent: int
    messages_received: int
    tls_resumed: int
    latency_us: EngineLatency
    failed_latency_us: EngineLatency
    connect_us: EngineLatency
    tls_us: EngineLatency
    ttfb_us: EngineLatency
    latency_uncorrected_us: EngineLatency
    processing_us: EngineLatency
    open_loop: bool
    offered: int
    late: int
    lagged: int = 0  # of the late, those issued with a client free (the load side's lag)
    dropped: int
    offered_rate_hz: float | None
    achieved_rate_hz: float
    percentiles: list[tuple[float, int]]
    series: list[EngineSeriesPoint]
    per_client: list[int]
    hung_clients: list[int]
    steps: list[EngineStep]
    ran_out: str | None
    requests: list[EngineRequest]


class EngineSummary(Mirror):
    """The engine's summary of a shard result (summary.rs `Summary`)."""

    elapsed_s: float
    started_unix: float
    interval_s: float
    stopped: bool
    lost: list[str] = []  # what failed in knee itself (a client's task, a runtime thread), in words
    groups: list[EngineGroup]
    data: list[EngineDataUse]
