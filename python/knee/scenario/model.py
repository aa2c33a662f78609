"""The scenario: its client groups, the sweep, stop rules, recovery probe, SLO, cluster and monitor.

A scenario is TOML (see docs/scenarios.md); `knee.scenario.load` reads it, fills its placeholders and
validates it against these types, turning every problem into one sentence (`knee.scenario.messages`).
"""

import re
from typing import Annotated, Any, Literal, TypeVar

from pydantic import Discriminator, Field, Tag, ValidationError, field_validator, model_validator

from knee.errors import UserError
from knee.scenario.cluster import Cluster
from knee.scenario.data import DataTable
from knee.scenario.fields import Duration, DurationOrAuto, PositiveInt, PositiveRate, Precision, Table
from knee.scenario.groups import Group
from knee.scenario.machines import Monitor, Serve
from knee.scenario.messages import Source, describe
from knee.scenario.soak import check_soak
from knee.scenario.think import closed_only

DEFAULT_MAX_IN_FLIGHT = 10_000
DEFAULT_SEARCH_START_RATE = 10.0  # rates = "auto": the first offered rate (/s) without search.start
DEFAULT_MIN_DURATION = 10.0  # duration = "auto": the least a level runs
DEFAULT_MAX_DURATION = 120.0  # and the most


def _whole(value: float) -> int | float:
    """500.0 → 500, so rates read like client counts where they can."""
    return int(value) if float(value).is_integer() else value


def _levels_kind(value: Any) -> str:
    if isinstance(value, str):
        return "auto"
    return "range" if isinstance(value, dict | _Range) else "list"


class _Range(Table):
    """{start, stop, count} (geometric) or {..., spacing = "linear", step | count}: the values, unrounded."""

    start: PositiveRate
    stop: PositiveRate
    count: Annotated[int, Field(ge=2)] | None = None
    step: PositiveRate | None = None
    spacing: Literal["geometric", "linear"] = "geometric"

    @model_validator(mode="after")
    def _check(self) -> "_Range":
        if self.stop < self.start:
            raise ValueError(f"stop ({self.stop:g}) must not be below start ({self.start:g})")
        if self.spacing == "geometric" and self.count is None:
            raise ValueError("a geometric range needs count, the number of levels")
        if self.spacing == "linear" and (self.count is None) == (self.step is None):
            raise ValueError("a linear range needs exactly one of step or count")
        return self

    def spaced(self) -> list[float]:
        n = self.count or 2
        if self.spacing == "linear" and self.step is not None:
            steps = int((self.stop - self.start) / self.step + 1e-9)
            return [self.start + i * self.step for i in range(steps + 1)]
        if self.spacing == "linear":
            return [self.start + (self.stop - self.start) * i / (n - 1) for i in range(n)]
        ratio = (self.stop / self.start) ** (1 / (n - 1))
        return [self.start * ratio**i for i in range(n - 1)] + [self.stop]


class LevelRange(_Range):
    """levels = {start = 5, stop = 1000, count = 10} (geometric) or {..., spacing = "linear", step = 100}."""

    start: PositiveInt
    stop: PositiveInt
    step: PositiveInt | None = None

    def expand(self) -> list[int]:
        return sorted({round(v) for v in self.spaced()})


class RateRange(_Range):
    """rates = {start = 100, stop = 2000, count = 6}: as LevelRange, in arrivals per second (3 significant digits)."""

    def expand(self) -> list[int | float]:
        return sorted({_whole(float(f"{v:.3g}")) for v in self.spaced()})


_Value = TypeVar("_Value")
_RangeT = TypeVar("_RangeT", bound=_Range)

# The sweep's levels or rates: a non-empty list of values, a range table that expands to them, or "auto" (the
# level search, knee.analysis.search: the levels are chosen while the sweep runs, within the [search] table's bounds).
ListOrRange = Annotated[
    Annotated[Annotated[list[_Value], Field(min_length=1)], Tag("list")]
    | Annotated[_RangeT, Tag("range")]
    | Annotated[Literal["auto"], Tag("auto")],
    Discriminator(_levels_kind),
]


DEFAULT_SETTLE_WAIT = 30.0  # seconds: how long knee waits before a step for the service to come back to rest


class Sweep(Table):
    levels: ListOrRange[PositiveInt, LevelRange] | None = None
    rates: ListOrRange[PositiveRate, RateRange] | None = None
    arrival: Literal["constant", "poisson"] | None = None  # open loop only; default constant
    max_in_flight: PositiveInt | None = None  # open loop only; default DEFAULT_MAX_IN_FLIGHT
    # "auto": each level runs until its rate has settled (knee.analysis.steady), at least min_duration and at most
    # max_duration
    duration: DurationOrAuto | None = None
    min_duration: Duration | None = None  # duration = "auto" only; default DEFAULT_MIN_DURATION
    max_duration: Duration | None = None  # duration = "auto" only; default DEFAULT_MAX_DURATION
    settle: Annotated[float, Field(gt=0, lt=1)] = 0.05  # settled: the rate's 95 % interval within ± this share
    per_client: PositiveInt | None = None
    total: PositiveInt | None = None
    warmup: Duration = 0.0
    pause: Duration = 0.0
    # before each step, wait at most this long for the service to be back at rest (knee.settle); 0 turns it off
    settle_wait: Duration = DEFAULT_SETTLE_WAIT
    direction: Literal["up", "up-down"] = "up"
    interval: Duration = 1.0
    stages: list[Annotated[str, Field(min_length=1)]] = Field(default_factory=list)
    threads: Annotated[int, Field(ge=0, le=1024)] = 0  # engine threads; 0 = one per core (at most 1024)
    operations_log: Annotated[str, Field(min_length=1)] | None = None  # every operation to a file (knee.operations)

    @field_validator("interval")
    @classmethod
    def _interval(cls, v: float) -> float:
        if v < 0.001:
            raise ValueError("must be at least 1ms, the shortest interval the engine counts by")
        return v

    @model_validator(mode="after")
    def _check(self) -> "Sweep":
        given = [k for k in ("duration", "per_client", "total") if getattr(self, k) is not None]
        if len(given) > 1:
            raise ValueError(f"give at most one of duration, per_client, total (got {', '.join(given)})")
        counted = [k for k in ("per_client", "total") if getattr(self, k) is not None]
        if counted and self.warmup > 0:
            raise ValueError(
                f"warmup applies to steps run for a duration; with {counted[0]} every operation is measured (the "
                f"warm-up was ignored): drop warmup, or give duration instead of {counted[0]}"
            )
        if isinstance(self.duration, float) and self.duration > 0 and self.warmup >= self.duration:
            raise ValueError(
                f"warmup ({self.warmup:g} s) must be shorter than duration ({self.duration:g} s), the part of each "
                "step that is measured after it; shorten warmup or lengthen duration"
            )
        bounds = [k for k in ("min_duration", "max_duration") if getattr(self, k) is not None]
        if bounds and self.duration != "auto":
            raise ValueError(f'{bounds[0]} bounds duration = "auto" only; set duration = "auto" or drop {bounds[0]}')
        if self.duration == "auto":
            low, high = self.duration_bounds()
            if high < low:
                raise ValueError(f"max_duration ({high:g} s) must not be below min_duration ({low:g} s)")
            if low < 5 * self.interval:
                raise ValueError(
                    f"min_duration ({low:g} s) must hold at least 5 intervals ({5 * self.interval:g} s) to judge "
                    "whether the rate has settled; raise min_duration or lower interval"
                )
        return self

    @property
    def auto_levels(self) -> bool:
        """The levels (or rates) are searched (`"auto"`), not listed."""
        return self.levels == "auto" or self.rates == "auto"

    def duration_bounds(self) -> tuple[float, float]:
        """duration = "auto": the least and the most a level runs (seconds)."""
        low = self.min_duration if self.min_duration is not None else DEFAULT_MIN_DURATION
        high = self.max_duration if self.max_duration is not None else max(low, DEFAULT_MAX_DURATION)
        return low, high

    def level_list(self) -> list[int | float]:
        """The client levels, or the rates of a rate sweep, ascending (none when they are searched)."""
        values = self.rates if self.rates is not None else self.levels
        if values is None or values == "auto":
            return []
        if isinstance(values, _Range):
            return list(values.expand())
        return sorted({_whole(v) for v in values})

    def has_stop(self) -> bool:
        """The sweep gives its groups a stop (duration, per_client or total)."""
        return self.duration is not None or self.per_client is not None or self.total is not None


class StopRules(Table):
    at_collapse: bool = True
    max_failure_ratio: Annotated[float, Field(ge=0, le=1)] | None = None
    max_level: PositiveInt | None = None  # client sweeps
    max_rate: PositiveRate | None = None  # rate sweeps


class Recovery(Table):
    enabled: bool | None = None  # None: on when the sweep has more than one level
    probe: Duration | None = None  # length of each probe (default: the sweep's duration)
    limit: Duration = 60.0  # give up after this long
    pause: Duration = 1.0  # between probes
    tolerance: Annotated[float, Field(gt=0, lt=1)] = 0.10


class Slo(Table):
    """Limits every level up to the capacity must stay within (docs/analysis.md); None: no limit."""

    p99_ms: Annotated[float, Field(gt=0)] | None = None
    failure_ratio: Annotated[float, Field(ge=0, le=1)] | None = None
    # The SLO must hold up to this many clients (rate sweeps: this offered rate); without it, at every level.
    min_clients: Annotated[int, Field(ge=1)] | None = None
    min_rate: PositiveRate | None = None

    @classmethod
    def from_dict(cls, d: dict[str, Any] | None) -> "Slo | None":
        """From a table like {"p99_ms": 500, "failure_ratio": 0.01}; None when it sets no limit. One sentence per
        mistake (with the key), as in a scenario file."""
        if not d:
            return None
        try:
            slo = cls.model_validate(d)
        except ValidationError as exc:
            msgs = (describe(e, Source("slo")).replace("slo: ", "slo.", 1) for e in exc.errors())
            raise UserError("; ".join(msgs)) from None
        return None if slo.p99_ms is None and slo.failure_ratio is None else slo

    @property
    def required(self) -> float | None:
        """The level the SLO must hold up to (clients, or an offered rate), if any."""
        return self.min_rate if self.min_rate is not None else self.min_clients

    def describe(self) -> str:
        """'p99 ≤ 500 ms, failures ≤ 1 %'."""
        from knee.fmt import pct

        parts = []
        if self.p99_ms is not None:
            parts.append(f"p99 ≤ {self.p99_ms:g} ms")
        if self.failure_ratio is not None:
            parts.append(f"failures ≤ {pct(self.failure_ratio)}")
        if self.min_clients is not None:
            parts.append(f"up to {self.min_clients} clients")
        if self.min_rate is not None:
            parts.append(f"up to {self.min_rate:g}/s offered")
        return ", ".join(parts) or "no limits"


class Search(Table):
    """`levels = "auto"` (or `rates = "auto"`): where the level search starts, how far it may go, how precisely it
    locates each point, and how long it may take (knee.analysis.search, docs/analysis.md)."""

    start: PositiveRate | None = None  # default: 1 client, or DEFAULT_SEARCH_START_RATE
    max: PositiveRate | None = None
    precision: Precision = "10%"
    budget: Duration | None = None
    factor: Annotated[float, Field(gt=1, le=10)] = 2.0
    max_steps: Annotated[int, Field(ge=2, le=200)] = 30

    def relative_precision(self) -> tuple[float, bool]:
        """(the precision, whether it is a share of the level)."""
        return parse_precision(self.precision)


def parse_precision(value: str | float) -> tuple[float, bool]:
    """ "10%" → (0.10, True): a share of the level; 2 → (2.0, False): in the level's unit."""
    if isinstance(value, str):
        text = value.strip()
        if text.endswith("%"):
            return float(text[:-1]) / 100, True
        return float(text), False
    return float(value), False


class Analysis(Table):
    onset: Annotated[float, Field(ge=0, le=1)] = 0.001


class Scenario(Table):
    name: str = ""
    description: str = ""
    # "soak": one level held for sweep.duration and judged by its trends (knee.analysis.soak), not a sweep
    mode: Literal["sweep", "soak"] = "sweep"
    vars: dict[str, str] = Field(default_factory=dict)
    # names of ${placeholders} whose values come from --secret or the environment and are never written
    secrets: list[Annotated[str, Field(pattern=r"^[A-Za-z_][A-Za-z0-9_]*$")]] = Field(default_factory=list)
    groups: Annotated[dict[str, Group], Field(min_length=1)]
    # rows the groups' templates read (${NAME.COLUMN}; knee.scenario.data), and the seed of every random choice
    data: list[DataTable] = Field(default_factory=list)
    seed: Annotated[int, Field(ge=0, lt=2**63)] = 1
    sweep: Sweep = Field(default_factory=Sweep)
    stop: StopRules = Field(default_factory=StopRules)
    recovery: Recovery = Field(default_factory=Recovery)
    slo: Slo | None = None
    search: Search = Field(default_factory=Search)
    analysis: Analysis = Field(default_factory=Analysis)
    cluster: Cluster = Field(default_factory=Cluster)
    monitor: Monitor = Field(default_factory=Monitor)
    serve: Serve = Field(default_factory=Serve)

    @field_validator("groups")
    @classmethod
    def _names(cls, v: dict[str, Any]) -> dict[str, Any]:
        for name in v:
            if not re.fullmatch(r"[A-Za-z0-9_-]{1,64}", name):
                raise ValueError(f"group name {name!r} may use only letters, digits, '_' and '-'")
        return v

    @model_validator(mode="after")
    def _stops(self) -> "Scenario":
        if all(g.background for g in self.groups.values()):
            raise ValueError(
                "every group has background = true, so none would end the step; "
                "give at least one group no background (it sets how long each step lasts)"
            )
        if self.mode == "soak":
            check_soak(self)
        counted = next((k for k in ("total", "per_client") if getattr(self.sweep, k) is not None), None)
        for name, g in self.groups.items():
            if g.clients_profile is not None and counted is not None and g.duration is None and not g.background:
                raise ValueError(
                    f"groups.{name}.clients is a profile, which runs for a duration, not a count of operations (got "
                    f"sweep.{counted}); give sweep.duration, or none to run the profile to its last point"
                )
        for n, g in self.groups.items() if not self.sweep.has_stop() else ():
            end = None if g.over_time is None else g.over_time.end_s
            if g.per_client is None and g.total is None and g.duration is None and not g.background:
                if end is None:
                    raise ValueError(f"sweep needs duration, per_client or total (group {n!r} has no stop of its own)")
                if self.sweep.warmup >= end:  # the profile's clock counts from the step's start, warm-up included
                    raise ValueError(
                        f"sweep.warmup ({self.sweep.warmup:g} s) must be shorter than the profile of group {n!r}, "
                        f"which ends at {end:g} s, warm-up included: shorten warmup, or give sweep.duration"
                    )
        self._check_search()
        if self.sweep.rates is not None or any(g.rate == "level" for g in self.groups.values()):
            self._check_rates()
            return self
        self._check_closed_only()
        followers = [n for n, g in self.groups.items() if g.follows_level]
        if followers and self.sweep.levels is None:
            raise ValueError(
                f'sweep needs levels, the client counts of group {followers[0]!r} (clients = "level"), '
                "e.g. levels = [5, 20, 50]"
            )
        if not followers and self.sweep.levels is not None:
            raise ValueError(
                'sweep.levels needs a group whose clients follow the level (clients = "level"); '
                "every group here has a fixed number of clients"
            )
        return self

    def _check_search(self) -> None:
        """levels = "auto" / rates = "auto" and the [search] table go together; a search is one curve, going up."""
        sw, search = self.sweep, self.search
        if not sw.auto_levels:
            default = Search()
            changed = [k for k in Search.model_fields if getattr(search, k) != getattr(default, k)]
            if changed:
                key = changed[0]
                raise ValueError(
                    f'search.{key} bounds a level search: set levels = "auto" (or rates = "auto") in [sweep], '
                    "or drop the [search] table"
                )
            return
        what = "rates" if sw.rates == "auto" else "levels"
        if sw.stages:
            raise ValueError(
                f'sweep.{what} = "auto" searches one curve, but sweep.stages gives several (one per stage); '
                f"list the {what} instead, or drop stages"
            )
        if sw.direction != "up":
            raise ValueError(
                f'sweep.{what} = "auto" searches going up; direction = "{sw.direction}" needs listed {what}'
            )
        if what == "levels":
            for key in ("start", "max"):
                value = getattr(search, key)
                if value is not None and not float(value).is_integer():
                    raise ValueError(f"search.{key} is a number of clients here: a whole number (got {value:g})")
        start, top = self.search_bounds()
        if top is not None and top < start:
            raise ValueError(f"search.max ({top:g}) must not be below search.start ({start:g})")

    def search_bounds(self) -> tuple[float, float | None]:
        """A level search's first level and its highest allowed (search.max, else stop.max_level / max_rate)."""
        first = DEFAULT_SEARCH_START_RATE if self.rate_sweep else 1.0
        start = self.search.start if self.search.start is not None else first
        cap = self.stop.max_rate if self.rate_sweep else self.stop.max_level
        top = self.search.max if self.search.max is not None else cap
        if top is not None and cap is not None:
            top = min(top, cap)
        return start, top

    def _check_rates(self) -> None:
        """A rate sweep: sweep.rates, a group with rate = "level" and a number of clients, no closed-loop levels."""
        sw = self.sweep
        if sw.levels is not None and sw.rates is not None:
            raise ValueError(
                "sweep.levels and sweep.rates exclude each other: levels are client counts (closed loop), "
                "rates are arrivals per second (open loop); keep one of them"
            )
        for name, g in self.groups.items():
            if g.rate == "level" and g.clients == "level":
                raise ValueError(
                    f'groups.{name}.clients must be a number of connections when rate = "level" (got "level"): '
                    "each arrival is handed to one of that many clients, e.g. clients = 50"
                )
            if g.rate == "level":
                closed_only(g, f"groups.{name}.", 'rate = "level"')
            if g.clients == "level" and sw.rates is not None:
                raise ValueError(
                    f'groups.{name}.clients = "level" follows client levels, but this sweep has sweep.rates: '
                    f'write rate = "level" and clients = N (the connections its arrivals are handed to)'
                )
        followers = [n for n, g in self.groups.items() if g.rate == "level"]
        if sw.levels is not None:
            raise ValueError(
                f'groups.{followers[0]}.rate = "level" follows sweep.rates, but the sweep has levels (client counts); '
                "give the arrival rates instead, e.g. rates = [100, 200, 500]"
            )
        if sw.rates is None:
            raise ValueError(
                f'sweep needs rates, the arrivals per second of group {followers[0]!r} (rate = "level"), '
                "e.g. rates = [100, 200, 500]"
            )
        if not followers:
            raise ValueError(
                'sweep.rates needs a group whose arrival rate follows it (rate = "level", with clients = N '
                "connections); every group here has a fixed number of clients"
            )
        for key, closed in (("stop.max_level", "stop.max_rate"), ("slo.min_clients", "slo.min_rate")):
            section, name = key.split(".")
            table = getattr(self, section)
            if table is not None and getattr(table, name) is not None:
                raise ValueError(
                    f"{key} counts clients, but this sweep has sweep.rates (got {getattr(table, name)}); "
                    f"use {closed}, in arrivals per second"
                )

    def _check_closed_only(self) -> None:
        """Open-loop keys are refused in a client sweep, each with its closed-loop counterpart (a group with a rate
        profile takes the arrivals' keys)."""
        profiled = any(g.profile is not None for g in self.groups.values())
        for key, other in (
            *((("sweep.arrival", None), ("sweep.max_in_flight", None)) if not profiled else ()),
            ("stop.max_rate", "stop.max_level"),
            ("slo.min_rate", "slo.min_clients"),
        ):
            section, name = key.split(".")
            table = getattr(self, section)
            value = getattr(table, name) if table is not None else None
            if value is None:
                continue
            fix = f"use {other}, in clients" if other else 'add sweep.rates and a group with rate = "level"'
            shown = f"{value:g}" if isinstance(value, float) else repr(value)
            raise ValueError(f"{key} applies to rate sweeps (sweep.rates) only (got {shown}); {fix}")

    @property
    def rate_sweep(self) -> bool:
        """The levels are arrival rates (open loop), not client counts."""
        return self.sweep.rates is not None

    @property
    def measured_group(self) -> str:
        """The group whose client count follows the level (else the first group)."""
        for name, g in self.groups.items():
            if g.follows_level:
                return name
        return next(iter(self.groups))

    def levels(self) -> list[int | float]:
        """The sweep's levels (client counts, or the rates of a rate sweep); without a group that follows the
        level, the one step's client count."""
        if self.sweep.levels is None and self.sweep.rates is None:
            return [self.groups[self.measured_group].client_count(0)]
        if self.sweep.auto_levels:  # searched: the levels known before it runs are its bounds
            start, top = self.search_bounds()
            bounds = [start, top] if top is not None and top > start else [start]
            return [_whole(b) for b in bounds]
        levels = self.sweep.level_list()
        top = self.stop.max_rate if self.rate_sweep else self.stop.max_level
        if top is not None:
            levels = [lv for lv in levels if lv <= top] or levels[:1]
        return levels

    def recovery_enabled(self) -> bool:
        if self.recovery.enabled is not None:
            return self.recovery.enabled
        return self.sweep.auto_levels or len(self.levels()) > 1

    def to_toml(self) -> str:
        """The scenario as a TOML file that loads back to an equal scenario (`--save-scenario`)."""
        from knee.scenario.tomlout import to_toml

        return to_toml(self.model_dump(mode="json", exclude_defaults=True, exclude_none=True))
