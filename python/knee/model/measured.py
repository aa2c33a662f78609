"""What a step measured: each group's counts, latencies and series, and the step that holds them.

All latencies here are in milliseconds (`GroupStats.from_engine` converts the engine's microseconds).
"""

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from knee.model.base import Counts, GroupIdentity, Outcomes
from knee.model.engine_summary import EngineDataUse, EngineGroup, EngineLatency, EngineRequest, EngineSeriesPoint
from knee.model.resources import GeneratorStats, HostCounters, RemoteStats, SoakSample, TargetStats

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
    def from_engine_us(cls, e: EngineLatency) -> "LatencyStats":
        return cls(count=e.count, **{k: float(getattr(e, k)) / 1000.0 for k in _LAT_KEYS})


_LAT_KEYS = ("min", "mean", "stdev", "p50", "p90", "p95", "p99", "p999", "max")


class SeriesPoint(BaseModel):
    t: float
    succeeded: int
    failed: int
    hung: int
    offered: int = Field(default=0, description="open loop: arrivals meant to start in the interval (dropped included)")
    late: int = Field(default=0, description="open loop: of those, the ones that started more than 10 ms late")
    lagged: int = Field(
        default=0, description="open loop: of the late, those issued while a client was free (knee's own lag)"
    )
    dropped: int = Field(
        default=0, description="open loop: of those, the ones dropped (the in-flight cap, the timeout)"
    )
    p50_ms: float | None = Field(default=None, description="the successes' median latency in the interval")
    p99_ms: float | None = Field(default=None, description="the successes' 99th percentile in the interval")
    latency: list[tuple[int, int]] = Field(
        default_factory=list,
        description="the successes' latency, (bucket, count): 1/16 of an octave each (knee.analysis.series_latency)",
    )
    failures: dict[str, int] = Field(default_factory=dict, description="the interval's failures by class")

    @classmethod
    def from_engine(cls, p: EngineSeriesPoint) -> "SeriesPoint":
        ms = {k: None if v is None else v / 1000.0 for k, v in (("p50_ms", p.p50_us), ("p99_ms", p.p99_us))}
        return cls(**p.model_dump(exclude={"p50_us", "p99_us"}), **ms)


class OpenLoopStats(BaseModel):
    """An open-loop group's arrivals (docs/open-vs-closed.md): what was offered and what kept up."""

    offered: int = Field(description="arrivals due inside the measured window")
    offered_rate_hz: float
    achieved_rate_hz: float = Field(description="(succeeded + failed + hung) / elapsed_s")
    late: int = Field(description="operations that started more than 10 ms after their intended start")
    lagged: int = Field(
        default=0, description="of the late, those issued while a client was free: knee's own lag, not the service"
    )
    dropped: int = Field(description="arrivals that never started (max_in_flight, or waited past the timeout)")
    latency_uncorrected_ms: LatencyStats = Field(
        default_factory=LatencyStats,
        description="succeeded operations' latency from the actual start (latency_ms counts from the intended)",
    )

    @classmethod
    def from_engine(cls, g: EngineGroup) -> "OpenLoopStats | None":
        if not g.open_loop:
            return None
        return cls(
            offered=g.offered,
            offered_rate_hz=g.offered_rate_hz or 0.0,
            achieved_rate_hz=g.achieved_rate_hz,
            late=g.late,
            lagged=g.lagged,
            dropped=g.dropped,
            latency_uncorrected_ms=LatencyStats.from_engine_us(g.latency_uncorrected_us),
        )


class Reason(BaseModel):
    """Failures of one class with one normalised message: "24 × FATAL: sorry, too many clients already"."""

    model_config = ConfigDict(populate_by_name=True)

    class_: str = Field(alias="class", serialization_alias="class")
    key: str = Field(description="the message with numbers, ids and addresses masked (the grouping key)")
    sample: str = Field(description="the first such message, as the client said it")
    count: int


class RequestStats(Outcomes):
    """One request of a group's mix over one step: how its operations ended, its failures by class, its latency."""

    failures: dict[str, int] = Field(default_factory=dict)
    latency_ms: LatencyStats = Field(default_factory=LatencyStats, description="succeeded operations only")
    failed_latency_ms: LatencyStats = Field(default_factory=LatencyStats, description="failed operations")
    percentiles_ms: list[tuple[float, float]] = Field(default_factory=list)

    @classmethod
    def from_engine(cls, r: EngineRequest) -> "RequestStats":
        return cls(
            succeeded=r.succeeded,
            failed=r.failed,
            hung=r.hung,
            abandoned=r.abandoned,
            failures=dict(r.failures),
            latency_ms=LatencyStats.from_engine_us(r.latency_us),
            failed_latency_ms=LatencyStats.from_engine_us(r.failed_latency_us),
            percentiles_ms=[(float(q), float(v) / 1000.0) for q, v in r.percentiles],
        )


class DataUse(BaseModel):
    """What one data source did in a step: rows handed out, positions used (a queue's next step starts after
    them), and whether and when it ran out."""

    name: str
    rows: int = Field(description="rows in the file")
    available: int = Field(description="positions this step could use (the rows not used by earlier steps)")
    taken: int = Field(description="rows handed out to operations (a recycled row counted each time)")
    used: int = Field(default=0, description="queue and shuffle: positions used from the start of the available ones")
    exhausted_after_s: float | None = Field(default=None, description="seconds into the step when it ran out")
    memory_bytes: int = Field(default=0, description="memory its rows took in one load process")
    first_out: str | None = Field(default=None, description="distributed runs: the worker whose part ran out first")

    @classmethod
    def from_engine(cls, d: EngineDataUse, first_out: str | None = None) -> "DataUse":
        return cls(**d.model_dump(), first_out=first_out)


class GroupStats(Counts, GroupIdentity):  # run.json: name, kind, clients, then the counts (model/base.py)
    """One client group's measurement over one step.

    Every operation that started ended as exactly one of succeeded, failed, hung or abandoned (in
    flight when the step ended or was stopped): `started` is their sum, and it is what the service
    saw (plus `warmup_ops`, the operations that ended during warm-up, and up to `resent` requests read twice).
    """

    elapsed_s: float
    rate_hz: float = Field(description="succeeded / elapsed_s")
    failures: dict[str, int] = Field(default_factory=dict)
    error_samples: dict[str, list[str]] = Field(default_factory=dict)
    reasons: list[Reason] = Field(default_factory=list, description="failures by class and normalised message")
    bytes_sent: int = 0
    bytes_received: int = 0
    payload_bytes: int = Field(default=0, description="document bytes of succeeded operations")
    messages_sent: int = Field(default=0, description="WebSocket: data messages written by completed operations")
    messages_received: int = Field(default=0, description="WebSocket: data messages read by completed operations")
    tls_resumed: int = Field(default=0, description="TLS handshakes (of tls_ms.count) that resumed an earlier session")
    latency_ms: LatencyStats = Field(
        default_factory=LatencyStats,
        description="succeeded operations only (count = succeeded): a failure that comes at once is no fast service",
    )
    failed_latency_ms: LatencyStats = Field(
        default_factory=LatencyStats, description="failed operations, apart from the successes' (count = failed)"
    )
    connect_ms: LatencyStats = Field(
        default_factory=LatencyStats, description="every operation that connected, succeeded or failed: the TCP connect"
    )
    tls_ms: LatencyStats = Field(
        default_factory=LatencyStats, description="every operation that completed a TLS handshake, succeeded or failed"
    )
    ttfb_ms: LatencyStats = Field(
        default_factory=LatencyStats, description="every HTTP operation that got a response head, succeeded or failed"
    )
    processing_ms: LatencyStats = Field(
        default_factory=LatencyStats, description="succeeded operations: latency less connect and handshake time"
    )
    percentiles_ms: list[tuple[float, float]] = Field(
        default_factory=list, description="[percent, ms] of the succeeded operations' latency"
    )
    series: list[SeriesPoint] = Field(default_factory=list)
    interval_s: float = 1.0
    per_client: list[int] = Field(default_factory=list)
    hung_clients: list[int] = Field(default_factory=list)
    open_loop: OpenLoopStats | None = None  # set for a group paced by an arrival rate
    steps: dict[str, LatencyStats] = Field(
        default_factory=dict, description="worker clients: the named steps their programs timed (connect, auth …)"
    )
    requests: dict[str, RequestStats] = Field(
        default_factory=dict, description="a request mix: each request's counts, failures and latency, by name"
    )
    ran_out: str | None = Field(default=None, description="the data source whose running out ended the group")

    @property
    def operations_ms(self) -> float:
        """The time of every completed operation, succeeded and failed (what a timed step's share is of)."""
        return sum(s.mean * s.count for s in (self.latency_ms, self.failed_latency_ms))

    @classmethod
    def from_engine(cls, g: EngineGroup, interval_s: float = 1.0) -> "GroupStats":
        """Build from one group of the engine's summary."""
        return cls(
            **{k: getattr(g, k) for k in (*GroupIdentity.model_fields, *Counts.model_fields)},
            elapsed_s=g.elapsed_s,
            rate_hz=g.succeeded / g.elapsed_s if g.elapsed_s > 0 else 0.0,
            failures=dict(g.failures),
            error_samples=dict(g.error_samples),
            reasons=[Reason.model_validate(r.model_dump(by_alias=True)) for r in g.reasons],
            bytes_sent=g.bytes_sent,
            bytes_received=g.bytes_received,
            payload_bytes=g.payload_bytes,
            messages_sent=g.messages_sent,
            messages_received=g.messages_received,
            tls_resumed=g.tls_resumed,
            latency_ms=LatencyStats.from_engine_us(g.latency_us),
            failed_latency_ms=LatencyStats.from_engine_us(g.failed_latency_us),
            connect_ms=LatencyStats.from_engine_us(g.connect_us),
            tls_ms=LatencyStats.from_engine_us(g.tls_us),
            ttfb_ms=LatencyStats.from_engine_us(g.ttfb_us),
            processing_ms=LatencyStats.from_engine_us(g.processing_us),
            percentiles_ms=[(float(q), float(v) / 1000.0) for q, v in g.percentiles],
            series=[SeriesPoint.from_engine(p) for p in g.series],
            interval_s=interval_s,
            per_client=list(g.per_client),
            hung_clients=list(g.hung_clients),
            open_loop=OpenLoopStats.from_engine(g),
            steps={s.name: LatencyStats.from_engine_us(s.latency_us) for s in g.steps},
            requests={r.name: RequestStats.from_engine(r) for r in g.requests},
            ran_out=g.ran_out,
        )


class _WorkerPart(BaseModel):
    """Which load machine, with how many clients from when (what run.json lists before a share's counts)."""

    worker: str
    host: str
    clients: int
    started_unix: float = 0.0


class WorkerShare(Outcomes, _WorkerPart):  # run.json: worker, host, clients, started_unix, then the counts
    """One load machine's part of a step (distributed runs): who starved, who saw errors, whose CPU was busy."""

    rate_hz: float = 0.0
    generator: GeneratorStats = Field(default_factory=GeneratorStats)
    counters: HostCounters | None = None
    lost: bool = False  # the worker died or was unreachable: its shard's numbers are missing


SKEW_WARN_SHARE = 0.05


class SteadyState(BaseModel):
    """A step's rate judged over its per-interval series (knee.analysis.steady, docs/analysis.md): the warm-up
    cut by MSER-5 and the rest's mean with its 95 % confidence interval by batch means."""

    group: str = Field(description="the group judged: the sweep's measured group")
    cut_s: float = Field(description="seconds cut from the start as warm-up")
    kept_s: float = Field(description="seconds after the cut")
    rate_hz: float = Field(description="successes per second after the cut")
    half_width_hz: float | None = Field(description="the rate's 95 % interval half-width; null when too short")
    settled: bool = Field(description="the half-width is within `settle` (5 %) of the rate")
    auto: bool = Field(default=False, description="the step ran until settled (duration = auto): its rate is rate_hz")


class Settle(BaseModel):
    """The wait before a step until the service was back at rest (knee.settle, docs/analysis.md "Settling between
    steps"): none of knee's connections from the previous step still open, connecting or closing, the target's
    listen queue empty where it runs on this machine, and a probe no slower than the baseline latency."""

    seconds: float = Field(description="how long knee waited before the step")
    settled: bool = Field(description="the service was at rest when the step began (false: the wait ran out)")
    reason: str = Field(default="", description="what was still there, in words, or why the step ran unsettled")
    pending: int = Field(default=0, description="knee's connections still open, connecting or closing at the start")
    queued: int = Field(default=0, description="connections waiting in the target's listen queue at the start")
    probes: int = Field(default=0, description="probe operations sent to the service while waiting")
    probe_failed: int = Field(default=0, description="of which failed or hung (the service saw them too)")
    probe_ms: float | None = Field(default=None, description="the last probe's latency")
    rest_ms: float | None = Field(
        default=None, description="a single operation's latency at rest: the median of the probes before the first step"
    )
    baseline_ms: float | None = Field(default=None, description="the latency a probe had to be within (rest's noise)")


class StepResult(BaseModel):
    """One step of a plan: one level (or a recovery probe), all its groups."""

    index: int
    level: Level = Field(description="client count, or the offered rate (/s) of a rate sweep (RunRecord.level_unit)")
    label: str = ""  # e.g. the operation type of a fixed-work stage ("store", "fetch")
    phase: Literal["sweep", "recovery"] = "sweep"
    direction: Literal["up", "down"] = "up"
    partial: bool = False
    started_unix: float
    elapsed_s: float
    groups: dict[str, GroupStats]
    generator: GeneratorStats = Field(default_factory=GeneratorStats)
    counters: HostCounters | None = Field(default=None, description="the load machines' kernel counters")
    target: TargetStats | None = Field(default=None, description="the monitored target's process tree")
    remote: list[RemoteStats] = Field(
        default_factory=list, description="the Prometheus endpoints of [monitor] prometheus (the target's machines)"
    )
    workers: list[WorkerShare] = Field(default_factory=list, description="distributed runs: each worker's part")
    start_skew_s: float | None = Field(default=None, description="distributed runs: latest minus earliest shard start")
    lost_workers: list[str] = Field(
        default_factory=list,
        description="workers whose shard was lost, and parts of knee that failed (a defect of knee): step partial",
    )
    reason: str = Field(default="", description='levels = "auto": why the search chose this level')
    steady: SteadyState | None = Field(
        default=None, description="the measured group's steady state (its warm-up cut, its rate's interval)"
    )
    settle: Settle | None = Field(
        default=None, description="the wait for the service to be at rest before the step; null when not waited"
    )
    superseded: bool = Field(
        default=False,
        description="a level that contradicted both neighbours and was measured again without repeating: kept in "
        "the record, left out of the verdict and the fit",
    )
    unconfirmed: bool = Field(
        default=False,
        description="a level that contradicted both neighbours and could not be measured again (the search's budget, "
        "Ctrl-C, a service not at rest before the repeat): kept in the record, left out of the verdict and the fit",
    )
    repeat_of: int | None = Field(default=None, description="the index of the step this one measured again")
    background_lead_s: float = Field(
        default=0.0,
        description="background groups: their series starts this many seconds before the step's own start (their "
        "window opens before the step's engine starts); the spike's verdict aligns the two by it",
    )
    data: list[DataUse] = Field(default_factory=list, description="what each data source did in this step")
    soak: list[SoakSample] = Field(
        default_factory=list, description='mode = "soak": the memory of the target and of knee, window by window'
    )
    spec: dict[str, Any] | None = Field(
        default=None,
        description="what ran: the engine spec of the step's groups (docs/engine-spec.md), secrets as "
        "placeholders; null in a run.json written before steps kept it",
    )

    @property
    def unsettled(self) -> bool:
        """The service was not back at rest when the step began (the wait for it ran out)."""
        return self.settle is not None and not self.settle.settled

    @property
    def believed(self) -> bool:
        """The analysis locates points on this step: it was neither superseded by a measurement again nor run on a
        service that had not come back to rest, and lost no worker (what it measured came from fewer clients than
        its level: at 95 % of the peak, one of two workers lost read as a collapse), and it is not a contradiction
        left unconfirmed."""
        return not self.superseded and not self.unconfirmed and not self.unsettled and not self.lost_workers

    @property
    def skewed(self) -> bool:
        """A distributed step whose shards started further apart than SKEW_WARN_SHARE of its time: its
        workers did not load the service together."""
        skew = self.start_skew_s
        return skew is not None and self.elapsed_s > 0 and skew > SKEW_WARN_SHARE * self.elapsed_s
