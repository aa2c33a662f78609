"""What the analysis concluded (`knee.analysis`): a verdict per group, with its fits, shape and findings."""

from typing import Literal

from pydantic import BaseModel, Field

from knee.model.measured import Level, LevelUnit


class Finding(BaseModel):
    """A reason the analysis found, with its evidence and the fix: one sentence each."""

    kind: str  # listen_overflow, ports, refused, load_side, shared_machine, target_memory, fd_limit …
    level: Level | None = None  # the lowest level where it appeared
    what: str
    fix: str = ""


class CurveShape(BaseModel):
    """The shape of the curve, named with its evidence (analysis.shape)."""

    name: Literal["pool", "retrograde", "refusing", "load_side", "rising", "flat", "connection_limit"]
    evidence: str
    pool_size: float | None = None  # "pool": peak rate × single-client latency
    # "connection_limit", or a pool behind one: the connections the service served (X·(R+Z), Little's law) at
    # the levels where the other clients waited at its door
    connections: int | None = None


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
    disowned: str | None = Field(
        default=None,
        description="why this fit explains nothing of the curve (set on Verdict.usl_disowned, docs/analysis.md)",
    )


class LittleCheck(BaseModel):
    level: Level
    expected_n: float  # X * (R + Z)
    gap: float  # relative: |N - expected| / N


class Bracket(BaseModel):
    """How precisely a point of the verdict is located: the level it was found at and the highest level measured
    below it; a peak also has the levels around it whose rate is within noise of its own (`low`–`high`)."""

    at: Level
    below: Level | None = Field(default=None, description="the highest level measured below (null: none was)")
    low: Level | None = None
    high: Level | None = None


class RampPoint(BaseModel):
    """A point located in a ramp's per-interval series: the offered rate there, and the offered rates the series
    brackets it by (the located interval's start and end)."""

    offered_hz: float
    low_hz: float
    high_hz: float
    at_s: float = Field(description="the located interval's start, seconds from the measured start")


class Ramp(BaseModel):
    """A run under a rising rate profile, read interval by interval (knee.analysis.ramp, docs/load-shapes.md)."""

    interval_s: float
    top_offered_hz: float = Field(description="the highest offered rate of a whole interval")
    kept_up_to_hz: float | None = Field(
        default=None,
        description="the achieved (succeeded) rate of the last interval that kept up before falling behind",
    )
    behind: RampPoint | None = Field(
        default=None, description="where the achieved rate fell behind the offered one for good; null: it kept up"
    )
    errors: RampPoint | None = Field(default=None, description="where errors started; null: none started")
    slo_broken: RampPoint | None = Field(
        default=None, description="where the scenario's SLO broke for good, interval by interval; null: held, or no SLO"
    )
    lagged: RampPoint | None = Field(
        default=None,
        description="where knee's own lag lasted: more than 5 % of an interval's arrivals started late while a client "
        "was free for them (the load side, not the service); null: it did not",
    )
    slo_missed: list[str] = Field(default_factory=list, description="what the interval there missed of the SLO")
    sentences: list[str] = Field(default_factory=list)


class ClientRampPoint(BaseModel):
    """A point located in a clients ramp's per-interval series: the clients there (the interval's mean), those it
    began and ended with (the bracket), and the achieved rate."""

    clients: float
    low: int
    high: int
    at_s: float = Field(description="the located interval's start, seconds from the measured start")
    rate_hz: float = Field(description="the interval's achieved (succeeded) rate")


class ClientRamp(BaseModel):
    """A closed loop under a rising clients profile, read interval by interval (knee.analysis.client_ramp)."""

    interval_s: float
    top_clients: float = Field(description="the most clients of a whole interval (its mean)")
    peak_hz: float = Field(description="the highest achieved rate, the median of three neighbouring intervals")
    peak: ClientRampPoint
    no_faster: ClientRampPoint | None = Field(
        default=None, description="from where more clients made it no faster; null: still rising at the top"
    )
    errors: ClientRampPoint | None = Field(default=None, description="where errors started; null: none started")
    slo_broken: ClientRampPoint | None = Field(default=None, description="where the SLO broke for good; null: held")
    slo_missed: list[str] = Field(default_factory=list, description="what the interval there missed of the SLO")
    sentences: list[str] = Field(default_factory=list)


class SpikeWindow(BaseModel):
    """A background group over a run of intervals around a spike: their mean rate and their p99 together."""

    intervals: int
    rate_hz: float
    p99_ms: float | None = Field(default=None, description="null: nothing succeeded (or no latency was kept)")


class Spike(BaseModel):
    """A background group through another group's spike, read interval by interval (knee.analysis.spike)."""

    spiking: str = Field(description="the group whose rate profile (or clients profile) is the spike")
    of: Literal["rate", "clients"] = Field(
        default="rate", description="what spikes: the arrival rate (base_hz, peak_hz per second) or the clients"
    )
    at_s: float
    hold_s: float
    base_hz: float
    peak_hz: float
    interval_s: float
    before: SpikeWindow
    during: SpikeWindow | None = None
    after: SpikeWindow | None = Field(default=None, description="from the return to the run's end; null: no return")
    lowest_hz: float = Field(description="the lowest interval rate from the spike's start to the return")
    fall: float = Field(description="1 − lowest_hz / the mean rate before")
    recovered_s: float | None = Field(
        default=None, description="seconds after the spike's end until back within its noise; null: not by the end"
    )
    recovered_low_s: float | None = Field(default=None, description="the bracket's low end: it was back within it")
    measured_s: float = Field(description="whole intervals measured after the spike's end, in seconds")
    failures: dict[str, dict[str, int]] = Field(
        default_factory=dict, description="each group's failures by class from the spike's start to the return"
    )
    sentences: list[str] = Field(default_factory=list)


class Drift(BaseModel):
    """One quantity's trend over a soak (knee.analysis.soak): the Theil–Sen slope of its interval values against
    time, per hour in its unit (`per_hour`), with the slope's 95 % interval (`low_per_hour`, `high_per_hour`), the
    fitted line's values at the soak's start and end (`first`, `last`), and the values' `median`; `points`: the
    values fitted (intervals, or bins of them)."""

    what: str = Field(description='"throughput", "p50", "p99", "target memory", "target descriptors", "knee memory"')
    unit: str = Field(description='"/s", "ms", "MB" or "" (a count)')
    points: int
    median: float
    first: float
    last: float
    per_hour: float
    low_per_hour: float
    high_per_hour: float
    drifting: bool = Field(
        description="the slope's 95 % interval leaves out 0 and the fitted change over the soak is at least "
        "SOAK_MATTERS of the median (memory: at least SOAK_MEMORY_MB too)"
    )

    @property
    def pct_per_hour(self) -> tuple[float, float, float] | None:
        """The slope and its interval as % of the median per hour; None when the median is 0."""
        if self.median == 0:
            return None
        return tuple(100 * v / abs(self.median) for v in (self.per_hour, self.low_per_hour, self.high_per_hour))  # type: ignore[return-value]


class Burst(BaseModel):
    """A run of consecutive intervals with errors in a soak."""

    start_s: float = Field(description="seconds after the soak's start")
    seconds: float
    failed: int = Field(description="failed + hung operations in the run")
    failures: dict[str, int] = Field(default_factory=dict, description="by class")


class Soak(BaseModel):
    """A run that held one level for a long time, judged by its trends (knee.analysis.soak, docs/load-shapes.md)."""

    seconds: float
    interval_s: float
    level: float
    throughput: Drift | None = None
    p50: Drift | None = None
    p99: Drift | None = None
    failing_intervals: int = 0
    intervals: int = 0
    failed: int = Field(default=0, description="failed + hung operations over the soak")
    bursts: list[Burst] = Field(default_factory=list, description="runs of failing intervals (not every interval)")
    memory: Drift | None = Field(default=None, description="the monitored target's resident memory")
    descriptors: Drift | None = Field(default=None, description="the monitored target's open file descriptors")
    knee_memory: Drift | None = Field(default=None, description="knee's own resident memory")
    sentences: list[str] = Field(default_factory=list)


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
    usl: USLFit | None = Field(default=None, description="the USL model of the curve; null when none fits")
    usl_disowned: USLFit | None = Field(
        default=None,
        description="a fit made but disowned, its reason in `disowned`: its N* lies far beyond the levels measured, or "
        "the curve's shape contradicts it (refusing, connection_limit, pool, load_side); its numbers are no model",
    )
    usl_left_out: list[Level] = Field(default_factory=list, description="levels the USL fit left out, and why")
    shape: CurveShape | None = None
    brackets: dict[str, Bracket] = Field(
        default_factory=dict, description="peak, onset, saturation, collapse, slo: each located point's bracket"
    )
    degraded_after: Level | None = Field(
        default=None,
        description="the level after which the service did not come back to rest within the settle wait: the steps "
        "measured after it ran on a broken service and locate nothing; null when every step began at rest",
    )
    ramp: Ramp | None = Field(default=None, description="a run under a rising rate profile: where it fell behind")
    client_ramp: ClientRamp | None = Field(
        default=None, description="a closed loop under a rising clients profile: where more clients made it no faster"
    )
    spike: Spike | None = Field(default=None, description="a background group through another group's spike")
    soak: Soak | None = Field(default=None, description='mode = "soak": the trends of a level held for long')
    findings: list[Finding] = Field(default_factory=list)
    sentences: list[str] = Field(default_factory=list)  # the verdict in words
    warnings: list[str] = Field(default_factory=list)

    @property
    def flat(self) -> bool:
        """The curve flattens at its top (a fixed pool, or a plateau located): it does not turn down, so no USL N* is
        quoted or drawn for it."""
        return (self.shape is not None and self.shape.name == "pool") or "plateau" in self.brackets
