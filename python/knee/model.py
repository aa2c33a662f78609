"""The data knee passes between its parts: the engine's summary, a step's measured groups, a run,
a verdict.

Everything here is plain data (pydantic models) that round-trips through JSON:
`run.json` in the run directory is a `RunRecord` dumped with `model_dump(mode="json")`.
The engine's own summary (`EngineSummary`, the mirror of `crates/engine/src/summary.rs`: every
field required, no unknown field allowed, so a renamed key fails loudly) is turned into
`GroupStats` by `GroupStats.from_engine`; all latencies from there on are in milliseconds.
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

from knee.scenario import Scenario

SCHEMA_VERSION = 2

# A sweep level: a client count (closed loop) or an offered rate in operations per second (open
# loop, `[sweep] rates`); whole numbers stay ints so client levels read 50, not 50.0.
Level = int | float
LevelUnit = Literal["clients", "rate"]


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", populate_by_name=True)


class EngineLatency(_Strict):
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


class EngineReason(_Strict):
    """Failures of one class with one normalised message (summary.rs `ReasonSummary`)."""

    class_: str = Field(alias="class")
    key: str
    sample: str
    count: int


class EngineSeriesPoint(_Strict):
    t: float
    succeeded: int
    failed: int
    hung: int


class EngineStep(_Strict):
    """A named step's durations (summary.rs `StepSummary`)."""

    name: str
    latency_us: EngineLatency


class EngineGroup(_Strict):
    """One group of the engine's summary (summary.rs `GroupSummary`)."""

    name: str
    kind: str
    clients: int
    started: int
    succeeded: int
    failed: int
    hung: int
    abandoned: int
    warmup_ops: int
    elapsed_s: float
    failures: dict[str, int]
    error_samples: dict[str, list[str]]
    reasons: list[EngineReason]
    bytes_sent: int
    bytes_received: int
    payload_bytes: int
    latency_us: EngineLatency
    connect_us: EngineLatency
    ttfb_us: EngineLatency
    latency_uncorrected_us: EngineLatency
    processing_us: EngineLatency
    open_loop: bool
    offered: int
    late: int
    dropped: int
    offered_rate_hz: float | None
    achieved_rate_hz: float
    percentiles: list[tuple[float, int]]
    series: list[EngineSeriesPoint]
    per_client: list[int]
    hung_clients: list[int]
    steps: list[EngineStep]


class EngineSummary(_Strict):
    """The engine's summary of a shard result (summary.rs `Summary`)."""

    elapsed_s: float
    started_unix: float
    interval_s: float
    stopped: bool
    groups: list[EngineGroup]


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
    def from_engine_us(cls, e: EngineLatency) -> LatencyStats:
        return cls(count=e.count, **{k: float(getattr(e, k)) / 1000.0 for k in _LAT_KEYS})


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
    def from_engine(cls, g: EngineGroup) -> OpenLoopStats | None:
        if not g.open_loop:
            return None
        return cls(
            offered=g.offered,
            offered_rate_hz=g.offered_rate_hz or 0.0,
            achieved_rate_hz=g.achieved_rate_hz,
            late=g.late,
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


class GroupStats(BaseModel):
    """One client group's measurement over one step.

    Every operation that started ended as exactly one of succeeded, failed, hung or abandoned (in
    flight when the step ended or was stopped): `started` is their sum, and it is what the service
    saw (plus `warmup_ops`, the operations that ended during warm-up).
    """

    name: str
    kind: str = ""
    clients: int
    succeeded: int
    failed: int
    hung: int
    abandoned: int = 0
    warmup_ops: int = 0
    elapsed_s: float
    rate_hz: float = Field(description="succeeded / elapsed_s")
    failures: dict[str, int] = Field(default_factory=dict)
    error_samples: dict[str, list[str]] = Field(default_factory=dict)
    reasons: list[Reason] = Field(default_factory=list, description="failures by class and normalised message")
    bytes_sent: int = 0
    bytes_received: int = 0
    payload_bytes: int = Field(default=0, description="document bytes of succeeded operations")
    latency_ms: LatencyStats = Field(default_factory=LatencyStats)
    connect_ms: LatencyStats = Field(default_factory=LatencyStats)
    ttfb_ms: LatencyStats = Field(default_factory=LatencyStats)
    processing_ms: LatencyStats = Field(default_factory=LatencyStats)
    percentiles_ms: list[tuple[float, float]] = Field(default_factory=list)
    series: list[SeriesPoint] = Field(default_factory=list)
    interval_s: float = 1.0
    per_client: list[int] = Field(default_factory=list)
    hung_clients: list[int] = Field(default_factory=list)
    open_loop: OpenLoopStats | None = None  # set for a group paced by an arrival rate
    steps: dict[str, LatencyStats] = Field(
        default_factory=dict, description="worker clients: the named steps their programs timed (connect, auth …)"
    )

    @property
    def total(self) -> int:
        """Operations that ended: succeeded + failed + hung."""
        return self.succeeded + self.failed + self.hung

    @property
    def started(self) -> int:
        """succeeded + failed + hung + abandoned."""
        return self.total + self.abandoned

    @property
    def failure_ratio(self) -> float:
        """(failed + hung) / all operations; 0 when there were none."""
        n = self.total
        return (self.failed + self.hung) / n if n else 0.0

    @classmethod
    def from_engine(cls, g: EngineGroup, interval_s: float = 1.0) -> GroupStats:
        """Build from one group of the engine's summary."""
        return cls(
            name=g.name,
            kind=g.kind,
            clients=g.clients,
            succeeded=g.succeeded,
            failed=g.failed,
            hung=g.hung,
            abandoned=g.abandoned,
            warmup_ops=g.warmup_ops,
            elapsed_s=g.elapsed_s,
            rate_hz=g.succeeded / g.elapsed_s if g.elapsed_s > 0 else 0.0,
            failures=dict(g.failures),
            error_samples=dict(g.error_samples),
            reasons=[Reason.model_validate(r.model_dump(by_alias=True)) for r in g.reasons],
            bytes_sent=g.bytes_sent,
            bytes_received=g.bytes_received,
            payload_bytes=g.payload_bytes,
            latency_ms=LatencyStats.from_engine_us(g.latency_us),
            connect_ms=LatencyStats.from_engine_us(g.connect_us),
            ttfb_ms=LatencyStats.from_engine_us(g.ttfb_us),
            processing_ms=LatencyStats.from_engine_us(g.processing_us),
            percentiles_ms=[(float(q), float(v) / 1000.0) for q, v in g.percentiles],
            series=[SeriesPoint(t=p.t, succeeded=p.succeeded, failed=p.failed, hung=p.hung) for p in g.series],
            interval_s=interval_s,
            per_client=list(g.per_client),
            hung_clients=list(g.hung_clients),
            open_loop=OpenLoopStats.from_engine(g),
            steps={s.name: LatencyStats.from_engine_us(s.latency_us) for s in g.steps},
        )


class GeneratorStats(BaseModel):
    """The load side's CPU during a step: knee's own, its child processes' (exec clients, worker
    programs) and the whole machine's, to flag a step the load side rather than the service limited."""

    cpu_s: float = 0.0  # knee's own process
    cpu_cores: float = 0.0  # cpu_s / elapsed_s: 1.0 = one core fully busy
    children_cpu_s: float = 0.0  # knee's child processes (exec clients, worker programs)
    children_cpu_cores: float = 0.0
    machine_cpu_cores: float = 0.0  # busy cores of the whole machine, every process included
    cores_busy: float = 0.0  # busy cores among those knee may run on (its affinity), every process included
    cores_available: int = 1
    # knee and its children used ≥ 90 % of the cores they may run on, or those cores were ≥ 90 % busy and
    # knee and its children held at least half of them
    saturated: bool = False

    @property
    def load_cores(self) -> float:
        """knee's cores plus its children's."""
        return self.cpu_cores + self.children_cpu_cores

    def others(self) -> str:
        """'; other processes took 0.40 of them' when others used a tenth of knee's cores or more, else ''."""
        rest = self.cores_busy - self.load_cores
        return f"; other processes took {rest:.2f} of them" if rest >= 0.1 * self.cores_available else ""


class HostCounters(BaseModel):
    """The load machine's kernel counters over a step (knee.machine.kernel), sampled about once a second:
    deltas of event counters, peaks of gauges. Linux only; empty elsewhere."""

    samples: int = 0
    # /proc/net/netstat TcpExt: connections the kernel dropped because a listen queue was full
    listen_overflows: int = 0
    listen_drops: int = 0
    syn_retrans: int = 0  # TcpExt TCPSynRetrans: SYNs sent again (a SYN dropped or unanswered)
    # /proc/net/snmp Tcp
    attempt_fails: int = 0  # connects that failed (refused, reset in SYN-RECV)
    estab_resets: int = 0  # established connections reset
    out_rsts: int = 0  # resets sent
    retrans_segs: int = 0
    # /proc/net/sockstat gauges (peaks over the step)
    tcp_inuse_peak: int = 0
    time_wait_peak: int = 0
    ephemeral_ports: int = 0  # the size of net.ipv4.ip_local_port_range
    # netlink sock_diag: ports of that range held by a socket that is not listening (TIME_WAIT included)
    ephemeral_in_use_peak: int = 0
    tcp_states_peak: dict[str, int] = Field(default_factory=dict)  # TCP sockets by state: each state's peak
    somaxconn: int = 0  # net.core.somaxconn: the cap on every listen queue of this machine
    mem_used_mb_peak: float = 0.0  # MemTotal - MemAvailable
    mem_total_mb: float = 0.0

    def merge(self, other: HostCounters) -> None:
        """Another machine's counters: events add up, peaks take the highest."""
        for k in ("samples", "listen_overflows", "listen_drops", "syn_retrans", "attempt_fails", "estab_resets"):
            setattr(self, k, getattr(self, k) + getattr(other, k))
        self.out_rsts += other.out_rsts
        self.retrans_segs += other.retrans_segs
        peaks = ("tcp_inuse_peak", "time_wait_peak", "ephemeral_ports", "ephemeral_in_use_peak", "somaxconn")
        for k in (*peaks, "mem_used_mb_peak", "mem_total_mb"):
            setattr(self, k, max(getattr(self, k), getattr(other, k)))
        for state, n in other.tcp_states_peak.items():
            self.tcp_states_peak[state] = max(self.tcp_states_peak.get(state, 0), n)


class ListenSocket(BaseModel):
    """One listening socket of the monitored target: its port, its backlog and how full its queue got."""

    port: int
    backlog: int = 0  # the accept queue's length limit (min of the server's backlog and somaxconn); 0 = unknown
    queue_peak: int = 0  # the most connections waiting to be accepted in one sample


class TargetStats(BaseModel):
    """The monitored target's process tree over a step (`--monitor-pid`, `--monitor-name`, `[monitor]`)."""

    pid: int
    name: str = ""
    alive: bool = True  # False: the process was gone at some sample (it crashed or was restarted)
    samples: int = 0
    processes_peak: int = 0
    cpu_s: float = 0.0  # CPU seconds of the tree over the step
    cpu_cores_mean: float = 0.0
    cpu_cores_peak: float = 0.0
    rss_mb_mean: float = 0.0
    rss_mb_peak: float = 0.0
    threads_peak: int = 0
    fds_peak: int = 0
    fd_limit: int = 0  # the top process's soft RLIMIT_NOFILE; 0 = unknown
    connections_peak: dict[str, int] = Field(default_factory=dict, description="TCP connections by state, peaks")
    listen: list[ListenSocket] = Field(default_factory=list)


class TargetHost(BaseModel):
    """Where a network group's service ran, as the machine that ran the sweep saw it when the run started
    (knee.machine.network.target_hosts): the findings read it, so `knee report` elsewhere does no lookup."""

    host: str
    port: int
    local: bool = Field(description="the host resolved to the load machine: a loopback address or one of its own")


class Finding(BaseModel):
    """A reason the analysis found, with its evidence and the fix: one sentence each."""

    kind: str  # listen_overflow, ports, refused, load_side, shared_machine, target_memory, fd_limit …
    level: Level | None = None  # the lowest level where it appeared
    what: str
    fix: str = ""


class CurveShape(BaseModel):
    """The shape of the curve, named with its evidence (analysis.shape)."""

    name: Literal["pool", "retrograde", "refusing", "load_side", "rising", "flat"]
    evidence: str
    pool_size: float | None = None  # "pool": peak rate × single-client latency


class WorkerShare(BaseModel):
    """One load machine's part of a step (distributed runs): who starved, who saw errors, whose CPU was busy."""

    worker: str
    host: str
    clients: int
    started_unix: float = 0.0
    succeeded: int = 0
    failed: int = 0
    hung: int = 0
    abandoned: int = 0
    rate_hz: float = 0.0
    generator: GeneratorStats = Field(default_factory=GeneratorStats)
    counters: HostCounters | None = None
    lost: bool = False  # the worker died or was unreachable: its shard's numbers are missing


class Counts(BaseModel):
    """How operations ended, for accounting outside a step (a continuous baseload between steps)."""

    succeeded: int = 0
    failed: int = 0
    hung: int = 0
    abandoned: int = 0
    warmup_ops: int = 0

    @property
    def started(self) -> int:
        return self.succeeded + self.failed + self.hung + self.abandoned

    def add(self, g: GroupStats) -> None:
        self.succeeded += g.succeeded
        self.failed += g.failed
        self.hung += g.hung
        self.abandoned += g.abandoned
        self.warmup_ops += g.warmup_ops


SKEW_WARN_SHARE = 0.05


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
    workers: list[WorkerShare] = Field(default_factory=list, description="distributed runs: each worker's part")
    start_skew_s: float | None = Field(default=None, description="distributed runs: latest minus earliest shard start")
    lost_workers: list[str] = Field(default_factory=list, description="workers whose shard was lost (step partial)")

    @property
    def skewed(self) -> bool:
        """A distributed step whose shards started further apart than SKEW_WARN_SHARE of its time: its
        workers did not load the service together."""
        skew = self.start_skew_s
        return skew is not None and self.elapsed_s > 0 and skew > SKEW_WARN_SHARE * self.elapsed_s


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
    usl_left_out: list[Level] = Field(default_factory=list, description="levels the USL fit left out, and why")
    shape: CurveShape | None = None
    findings: list[Finding] = Field(default_factory=list)
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
    # the scenario as run, secrets as ${placeholders} (what --resume starts from)
    scenario: Scenario
    measured_group: str = "main"  # the group whose level the sweep varies
    level_unit: LevelUnit = "clients"  # "rate": every step's level is an offered rate (/s), not a client count
    executor: str = "local"  # "local", or the Dask cluster the steps ran on
    targets: dict[str, TargetHost] | None = Field(
        default=None,
        description="the network groups' hosts and ports, by group, and whether each was the load machine, as "
        "recorded when the run started; absent (null) in run.json written before knee recorded them",
    )
    steps: list[StepResult] = Field(default_factory=list)
    # a continuous baseload's operations outside the steps (pauses, before the first and after the last)
    between: dict[str, Counts] = Field(default_factory=dict)
    verdicts: list[Verdict] = Field(default_factory=list)

    @property
    def rates(self) -> bool:
        """The levels are offered rates (a rate sweep), not client counts."""
        return self.level_unit == "rate"

    @model_validator(mode="before")
    @classmethod
    def _older(cls, data: Any) -> Any:
        """run.json of schema 1: the scenario's groups carried think_s; steps carried rate_hz."""
        if isinstance(data, dict) and data.get("schema_version", SCHEMA_VERSION) < SCHEMA_VERSION:
            data = dict(data)
            sc = dict(data.get("scenario") or {})
            groups = sc.get("groups")
            if isinstance(groups, dict):
                sc["groups"] = {n: {k: v for k, v in g.items() if k != "think_s"} for n, g in groups.items()}
            data["scenario"] = sc
            if "level_unit" not in data and any(s.get("rate_hz") is not None for s in data.get("steps", [])):
                data["level_unit"] = "rate"
        return data
