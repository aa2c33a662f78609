"""The scenario file: client groups, the sweep, stop rules, recovery probe, SLO.

A scenario is TOML (see docs/scenarios.md). `load_scenario(path, variables)` reads
it, fills `${name}` placeholders from `[vars]` and the command line, validates it
with pydantic and turns every problem into one sentence that names the file, the
line, the key, the value and what is allowed:

    scenario.toml line 12: groups.stress.clients must be at least 1 (got 0)
"""

from __future__ import annotations

import re
import tomllib
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated, Any, Literal

from pydantic import (
    AliasChoices,
    BaseModel,
    BeforeValidator,
    ConfigDict,
    Discriminator,
    Field,
    Tag,
    ValidationError,
    field_validator,
    model_validator,
)

from knee.errors import UserError
from knee.secrets import lift_credentials, remember, resolve
from knee.units import parse_duration, parse_status_ranges

# Placeholders the engine (or the plan) fills in itself, left untouched here.
RUNTIME_PLACEHOLDERS = frozenset({"client", "iteration", "stage"})
_PLACEHOLDER = re.compile(r"\$\{([A-Za-z_][A-Za-z0-9_]*)\}")


def _duration(value: Any) -> Any:
    if isinstance(value, str | int | float) and not isinstance(value, bool):
        try:
            return parse_duration(value, "value")
        except UserError as exc:
            raise ValueError("must be a duration like 10s, 2m or 500ms") from exc
    return value


def _clients(value: Any) -> Any:
    if value == "level":
        return value
    if isinstance(value, int) and not isinstance(value, bool):
        if value < 1:
            raise ValueError("must be at least 1")
        return value
    raise ValueError('must be a number of clients (at least 1) or "level" (follow the sweep level)')


def _rate(value: Any) -> Any:
    if value is None or value == "level":
        return value
    raise ValueError('must be "level" (the group\'s arrivals per second follow sweep.rates)')


def _whole(value: float) -> int | float:
    """500.0 → 500, so rates read like client counts where they can."""
    return int(value) if float(value).is_integer() else value


def _levels_kind(value: Any) -> str:
    return "range" if isinstance(value, dict | _Range) else "list"


Duration = Annotated[float, BeforeValidator(_duration), Field(ge=0)]
PositiveInt = Annotated[int, Field(ge=1)]
Clients = Annotated[int | Literal["level"], BeforeValidator(_clients)]
PositiveRate = Annotated[float, Field(gt=0, allow_inf_nan=False)]
DEFAULT_MAX_IN_FLIGHT = 10_000


class _Model(BaseModel):
    model_config = ConfigDict(extra="forbid", populate_by_name=True)


class _GroupBase(_Model):
    clients: Clients = "level"
    rate: Annotated[Literal["level"] | None, BeforeValidator(_rate)] = None
    per_client: PositiveInt | None = None
    total: PositiveInt | None = None
    duration: Duration | None = None
    # baseload: runs as long as the step's other groups, then stops (engine stop `while_others`)
    background: bool = False
    timeout: Duration = Field(default=30.0, validation_alias=AliasChoices("timeout", "hang_after"))
    think: Duration = 0.0

    @model_validator(mode="after")
    def _one_stop(self) -> _GroupBase:
        given = [k for k in ("per_client", "total", "duration") if getattr(self, k) is not None]
        if len(given) > 1:
            raise ValueError(f"give at most one of per_client, total, duration (got {', '.join(given)})")
        if self.background and given:
            raise ValueError(
                f"background = true runs the group as long as the others, so it takes no {given[0]} of its own; "
                f"remove {given[0]} or background"
            )
        if self.timeout <= 0:
            raise ValueError("timeout must be more than 0")
        return self

    @property
    def follows_level(self) -> bool:
        """Its clients (closed loop) or its arrival rate (open loop) follow the sweep level."""
        return self.clients == "level" or self.rate == "level"

    def client_count(self, level: float) -> int:
        """Its clients in a step at `level` (an open-loop group's clients are its connections)."""
        return int(level) if self.clients == "level" else self.clients


class HttpGroup(_GroupBase):
    kind: Literal["http"]
    url: str
    method: str | None = None  # default: POST when there is a body, else GET (knee.plan)
    headers: dict[str, str] = Field(default_factory=dict)
    cookies: dict[str, str] = Field(default_factory=dict)
    body: str | None = None
    body_file: str | None = None
    insecure: bool = False
    new_connection: bool = False
    http2: bool = False
    expect_status: list[tuple[int, int]] = Field(default_factory=lambda: [(200, 399)])
    expect_body: str | None = None
    expect_body_regex: str | None = None
    expect_length: Annotated[int, Field(ge=0)] | None = None

    @field_validator("url")
    @classmethod
    def _url(cls, v: str) -> str:
        if not re.match(r"^https?://[^/\s]+", v):
            raise ValueError("must be an http:// or https:// URL with a host, like http://host:port/path")
        return v

    @field_validator("expect_status", mode="before")
    @classmethod
    def _status(cls, v: Any) -> Any:
        if isinstance(v, int) and not isinstance(v, bool):
            return [(v, v)]
        if isinstance(v, str):
            try:
                return parse_status_ranges(v, "value")
            except UserError as exc:
                raise ValueError("must be statuses like 200, 200-299 or 2xx, separated by commas") from exc
        if isinstance(v, list) and all(isinstance(x, int | str) and not isinstance(x, bool) for x in v):
            out: list[tuple[int, int]] = []
            for x in v:
                out.extend(cls._status(x))
            return out
        return v

    @model_validator(mode="after")
    def _one_body(self) -> HttpGroup:
        if self.body is not None and self.body_file is not None:
            raise ValueError("give either body or body_file, not both")
        if self.http2:
            raise ValueError("http2 = true is not supported yet (knee speaks HTTP/1.1); remove it")
        return self


class TcpGroup(_GroupBase):
    kind: Literal["tcp"]
    addr: str
    send: str | None = None
    expect: str | None = None

    @field_validator("addr")
    @classmethod
    def _addr(cls, v: str) -> str:
        if not re.match(r"^(\[[0-9a-fA-F:.]+\]|[^:\s]+):\d+$", v):
            raise ValueError("must be host:port, like 127.0.0.1:9000")
        return v


class ExpectFile(_Model):
    path: str
    min_size: Annotated[int, Field(ge=0)] = 1


class ExecGroup(_GroupBase):
    kind: Literal["exec"]
    argv: Annotated[list[str], Field(min_length=1)]
    env: dict[str, str] = Field(default_factory=dict)
    cwd: str | None = None
    expect_stdout: str | None = None
    expect_stderr: str | None = None
    expect_file: ExpectFile | None = None
    bytes_from: Annotated[str, Field(min_length=1)] | None = None  # "stdout" or a file path: the payload's size


class WorkerGroup(_GroupBase):
    """A client program in any language speaking knee's worker protocol (docs/worker-protocol.md)."""

    kind: Literal["worker"]
    argv: Annotated[list[str], Field(min_length=1)]
    env: dict[str, str] = Field(default_factory=dict)
    cwd: str | None = None
    processes: Annotated[int, Field(ge=0)] = 0  # in all; 0 = one per engine thread (one per core)
    start_timeout: Annotated[float, BeforeValidator(_duration), Field(gt=0)] = 30.0


class PythonGroup(_GroupBase):
    """A flow: a Python function `module:name` run by knee's own worker (knee.pyworker), many clients per
    process, one process per core by default."""

    kind: Literal["python"]
    function: Annotated[str, Field(pattern=r"^[A-Za-z_][\w.]*:[A-Za-z_]\w*$")]
    path: str | None = None  # where to import the module from (default: the current directory)
    env: dict[str, str] = Field(default_factory=dict)
    processes: Annotated[int, Field(ge=0)] = 0
    start_timeout: Annotated[float, BeforeValidator(_duration), Field(gt=0)] = 30.0


Group = Annotated[HttpGroup | TcpGroup | ExecGroup | WorkerGroup | PythonGroup, Field(discriminator="kind")]


class _Range(_Model):
    """{start, stop, count} (geometric) or {..., spacing = "linear", step | count}: the values, unrounded."""

    start: PositiveRate
    stop: PositiveRate
    count: Annotated[int, Field(ge=2)] | None = None
    step: PositiveRate | None = None
    spacing: Literal["geometric", "linear"] = "geometric"

    @model_validator(mode="after")
    def _check(self) -> _Range:
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


class Sweep(_Model):
    levels: (
        Annotated[
            Annotated[Annotated[list[PositiveInt], Field(min_length=1)], Tag("list")]
            | Annotated[LevelRange, Tag("range")],
            Discriminator(_levels_kind),
        ]
        | None
    ) = None
    rates: (
        Annotated[
            Annotated[Annotated[list[PositiveRate], Field(min_length=1)], Tag("list")]
            | Annotated[RateRange, Tag("range")],
            Discriminator(_levels_kind),
        ]
        | None
    ) = None
    arrival: Literal["constant", "poisson"] | None = None  # open loop only; default constant
    max_in_flight: PositiveInt | None = None  # open loop only; default DEFAULT_MAX_IN_FLIGHT
    duration: Duration | None = None
    per_client: PositiveInt | None = None
    total: PositiveInt | None = None
    warmup: Duration = 0.0
    pause: Duration = 0.0
    direction: Literal["up", "up-down"] = "up"
    interval: Duration = 1.0
    stages: list[Annotated[str, Field(min_length=1)]] = Field(default_factory=list)
    threads: Annotated[int, Field(ge=0)] = 0  # engine threads; 0 = one per core

    @model_validator(mode="after")
    def _check(self) -> Sweep:
        given = [k for k in ("duration", "per_client", "total") if getattr(self, k) is not None]
        if len(given) > 1:
            raise ValueError(f"give at most one of duration, per_client, total (got {', '.join(given)})")
        if self.interval < 0.001:
            raise ValueError("interval must be at least 1ms")
        return self

    def level_list(self) -> list[int | float]:
        """The client levels, or the rates of a rate sweep, ascending."""
        values = self.rates if self.rates is not None else self.levels
        if values is None:
            return []
        if isinstance(values, _Range):
            return list(values.expand())
        return sorted({_whole(v) for v in values})

    def has_stop(self) -> bool:
        """The sweep gives its groups a stop (duration, per_client or total)."""
        return self.duration is not None or self.per_client is not None or self.total is not None


class StopRules(_Model):
    at_collapse: bool = True
    max_failure_ratio: Annotated[float, Field(ge=0, le=1)] | None = None
    max_level: PositiveInt | None = None  # client sweeps
    max_rate: PositiveRate | None = None  # rate sweeps


class Recovery(_Model):
    enabled: bool | None = None  # None: on when the sweep has more than one level
    probe: Duration | None = None  # length of each probe (default: the sweep's duration)
    limit: Duration = 60.0  # give up after this long
    pause: Duration = 1.0  # between probes
    tolerance: Annotated[float, Field(gt=0, lt=1)] = 0.10


class Slo(_Model):
    """Limits every level up to the capacity must stay within (docs/analysis.md); None: no limit."""

    p99_ms: Annotated[float, Field(gt=0)] | None = None
    failure_ratio: Annotated[float, Field(ge=0, le=1)] | None = None
    # The SLO must hold up to this many clients (rate sweeps: this offered rate); without it, at every level.
    min_clients: Annotated[int, Field(ge=1)] | None = None
    min_rate: PositiveRate | None = None

    @classmethod
    def from_dict(cls, d: dict[str, Any] | None) -> Slo | None:
        """From a table like {"p99_ms": 500, "failure_ratio": 0.01}; None when it sets no limit. One sentence per
        mistake (with the key), as in a scenario file."""
        if not d:
            return None
        try:
            slo = cls.model_validate(d)
        except ValidationError as exc:
            msgs = (_describe(e, Source("slo")).replace("slo: ", "slo.", 1) for e in exc.errors())
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


class Cluster(_Model):
    """Where the steps run (docs/distributed.md): this machine (no address), or a Dask cluster."""

    address: Annotated[str, Field(min_length=1)] | None = None  # tcp://host:8786, or local:N worker processes
    weights: dict[str, Annotated[float, Field(gt=0)]] = Field(default_factory=dict)  # host -> share of clients


class Monitor(_Model):
    """The target's process tree to sample on this machine (docs/diagnosis.md): by pid or by name."""

    pid: Annotated[int, Field(gt=0)] | None = None
    name: Annotated[str, Field(min_length=1)] | None = None

    @model_validator(mode="after")
    def _one(self) -> Monitor:
        if self.pid is not None and self.name is not None:
            raise ValueError("give pid or name, not both")
        return self

    @property
    def enabled(self) -> bool:
        return self.pid is not None or self.name is not None


class Analysis(_Model):
    onset: Annotated[float, Field(ge=0, le=1)] = 0.001


class Scenario(_Model):
    name: str = ""
    description: str = ""
    vars: dict[str, str] = Field(default_factory=dict)
    # names of ${placeholders} whose values come from --secret or the environment and are never written
    secrets: list[Annotated[str, Field(pattern=r"^[A-Za-z_][A-Za-z0-9_]*$")]] = Field(default_factory=list)
    groups: Annotated[dict[str, Group], Field(min_length=1)]
    sweep: Sweep = Field(default_factory=Sweep)
    stop: StopRules = Field(default_factory=StopRules)
    recovery: Recovery = Field(default_factory=Recovery)
    slo: Slo | None = None
    analysis: Analysis = Field(default_factory=Analysis)
    cluster: Cluster = Field(default_factory=Cluster)
    monitor: Monitor = Field(default_factory=Monitor)

    @field_validator("groups")
    @classmethod
    def _names(cls, v: dict[str, Any]) -> dict[str, Any]:
        for name in v:
            if not re.fullmatch(r"[A-Za-z0-9_-]{1,64}", name):
                raise ValueError(f"group name {name!r} may use only letters, digits, '_' and '-'")
        return v

    @model_validator(mode="after")
    def _stops(self) -> Scenario:
        if all(g.background for g in self.groups.values()):
            raise ValueError(
                "every group has background = true, so none would end the step; "
                "give at least one group no background (it sets how long each step lasts)"
            )
        if not self.sweep.has_stop():
            missing = [
                n
                for n, g in self.groups.items()
                if g.per_client is None and g.total is None and g.duration is None and not g.background
            ]
            if missing:
                raise ValueError(
                    f"sweep needs duration, per_client or total (group {missing[0]!r} has no stop of its own)"
                )
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
            if g.rate == "level" and g.think > 0:
                raise ValueError(
                    f'groups.{name}.think applies to closed loops only (got {g.think:g} s with rate = "level"); '
                    "drop think"
                )
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
        """Open-loop keys are refused in a client sweep, each with its closed-loop counterpart."""
        for key, other in (
            ("sweep.arrival", None),
            ("sweep.max_in_flight", None),
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
            return [int(self.groups[self.measured_group].clients)]
        levels = self.sweep.level_list()
        top = self.stop.max_rate if self.rate_sweep else self.stop.max_level
        if top is not None:
            levels = [lv for lv in levels if lv <= top] or levels[:1]
        return levels

    def recovery_enabled(self) -> bool:
        return self.recovery.enabled if self.recovery.enabled is not None else len(self.levels()) > 1

    def to_toml(self) -> str:
        """The scenario as a TOML file that loads back to an equal scenario (`--save-scenario`)."""
        from knee.tomlout import to_toml

        return to_toml(self.model_dump(mode="json", exclude_defaults=True, exclude_none=True))


# ---- loading -------------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Loaded:
    """A scenario as it runs, and as it is written down."""

    scenario: Scenario  # every placeholder filled: what runs
    record: Scenario  # secrets (and credentials given literally) as ${placeholders}: what run.json keeps
    secrets: dict[str, str]  # name -> value of every secret the run uses


def load_scenario(
    path: Path, variables: dict[str, str] | None = None, secrets: dict[str, str] | None = None
) -> Scenario:
    """Read, fill placeholders, validate. Every problem becomes a UserError naming the line and key."""
    try:
        text = path.read_text()
    except OSError as exc:
        raise UserError(f"cannot read scenario {str(path)!r}: {exc.strerror}; check the path") from exc
    return read_scenario(text, path.name, variables, secrets).scenario


def parse_scenario(
    text: str,
    source: str = "scenario.toml",
    variables: dict[str, str] | None = None,
    secrets: dict[str, str] | None = None,
) -> Scenario:
    return read_scenario(text, source, variables, secrets).scenario


def read_scenario(
    text: str,
    source: str = "scenario.toml",
    variables: dict[str, str] | None = None,
    secrets: dict[str, str] | None = None,
) -> Loaded:
    """Parse TOML text into the scenario as it runs and as it is recorded."""
    try:
        raw = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        m = re.search(r"\(at line (\d+), column (\d+)\)", str(exc))
        where = f" line {m.group(1)}" if m else ""
        msg = re.sub(r"\s*\(at line \d+, column \d+\)", "", str(exc))
        raise UserError(f"{source}{where}: not valid TOML: {msg}") from exc
    return from_raw(raw, Source(source, text), variables, secrets)


@dataclass(frozen=True)
class Source:
    """Where a scenario came from, for error messages: a file's name and text (for line numbers), or the
    command line, whose keys are named by the options that set them."""

    name: str
    text: str = ""
    options: dict[str, str] | None = None  # scenario key -> the command-line option that sets it


def from_raw(
    raw: dict[str, Any],
    source: Source,
    variables: dict[str, str] | None = None,
    secrets: dict[str, str] | None = None,
) -> Loaded:
    """Fill placeholders and validate a scenario's tables (from TOML, or built from the command line)."""
    file_vars = raw.get("vars", {})
    if not isinstance(file_vars, dict):
        raise UserError(
            f'{source.name} line {_find_line(source.text, ("vars",))}: vars must be a table of name = "value"'
        )
    declared = raw.get("secrets", [])
    if not isinstance(declared, list) or not all(isinstance(n, str) for n in declared):
        raise UserError(f'{source.name}: secrets must be a list of names, e.g. secrets = ["token"]')
    values = {str(k): str(v) for k, v in file_vars.items()}
    values.update(variables or {})
    given = dict(secrets or {})
    secret_values = {**resolve([n for n in declared if n not in given], {}, f"{source.name} uses"), **given}
    run_raw = _substitute(raw, {**values, **secret_values}, source, keep=set())
    record_raw = _substitute(raw, values, source, keep=set(secret_values))
    if values:  # the effective [vars], command-line ones included (worker programs get them)
        run_raw["vars"] = record_raw["vars"] = dict(values)
    known = dict(secret_values)
    if isinstance(record_raw.get("groups"), dict) and isinstance(run_raw.get("groups"), dict):
        record_raw["groups"] = lift_credentials(record_raw["groups"], run_raw["groups"], known)
    lifted = {k: v for k, v in known.items() if k not in secret_values}
    names = list(dict.fromkeys([*declared, *given, *lifted]))
    if names:
        run_raw["secrets"] = record_raw["secrets"] = names
    scenario = _validate(run_raw, source)
    try:
        record = Scenario.model_validate(record_raw)
    except ValidationError as exc:
        err = exc.errors()[0]
        key = ".".join(str(p) for p in err["loc"])
        raise UserError(
            f"{source.name}: {key} holds a secret placeholder where the value is checked ({err['msg']}); "
            "use secrets in header, cookie, env, body and argv values only"
        ) from None
    all_secrets = {**secret_values, **lifted}
    remember(all_secrets)
    return Loaded(scenario, record, all_secrets)


def scenario_from_record(record: Scenario, secrets: dict[str, str] | None = None) -> Loaded:
    """The scenario a run was started with (run.json's), its secrets filled in again for `--resume`."""
    values = resolve(record.secrets, secrets or {}, "this run uses")
    raw = record.model_dump(mode="json", exclude_none=True)
    run_raw = _substitute(raw, values, Source("run.json"), keep=set(), strict=False)
    remember(values)
    return Loaded(_validate(run_raw, Source("run.json")), record, values)


def _validate(raw: dict[str, Any], source: Source) -> Scenario:
    try:
        return Scenario.model_validate(raw)
    except ValidationError as exc:
        raise UserError("\n".join(_describe(e, source) for e in exc.errors())) from None


def _substitute(value: Any, values: dict[str, str], source: Source, keep: set[str], strict: bool = True) -> Any:
    """Fill `${name}` from `values`; leave runtime placeholders and those in `keep` as they are. An undefined
    name is an error (`strict`) or left as it is."""
    if isinstance(value, dict):
        return {k: _substitute(v, values, source, keep, strict) for k, v in value.items()}
    if isinstance(value, list):
        return [_substitute(v, values, source, keep, strict) for v in value]
    if isinstance(value, str):

        def repl(m: re.Match[str]) -> str:
            name = m.group(1)
            if name in RUNTIME_PLACEHOLDERS or name in keep:
                return m.group(0)
            if name not in values:
                if not strict:
                    return m.group(0)
                line = next((i for i, ln in enumerate(source.text.splitlines(), 1) if m.group(0) in ln), None)
                where = f" line {line}" if line else ""
                raise UserError(
                    f"{source.name}{where}: ${{{name}}} is not defined; pass --var {name}=VALUE or add it under "
                    f"[vars] (or --secret {name}=VALUE for a value knee must never write)"
                )
            return values[name]

        return _PLACEHOLDER.sub(repl, value)
    return value


_KIND_TAGS = {"http", "tcp", "exec", "worker", "python"}


def _describe(err: Any, source: Source) -> str:
    loc = [str(p) for p in err["loc"]]
    # drop the discriminator tag pydantic inserts (groups.<name>.http.url) and union branch names
    if len(loc) >= 3 and loc[0] == "groups" and loc[2] in _KIND_TAGS:
        del loc[2]
    if len(loc) >= 3 and loc[0] == "sweep" and loc[1] in ("levels", "rates") and loc[2] in ("list", "range"):
        del loc[2]
    key = "".join(f"[{p}]" if p.isdigit() else f".{p}" for p in loc).lstrip(".")
    msg = _phrase(err)
    if source.options is not None:
        # the command line: name the option that set the key (or the key's own option, for a whole table)
        option = next((o for k, o in source.options.items() if key == k or key.startswith(k + ".")), None)
        if option is None:
            option = next((o for k, o in source.options.items() if k.startswith(key + ".")), None) if key else None
        return (
            f"{option or key or source.name} {msg}"
            if msg.startswith(("must", "is ", "needs"))
            else (f"{option or key or source.name}: {msg}")
        )
    line = _find_line(source.text, tuple(loc) if loc else tuple(msg.split()[0].split(".")))
    where = f"{source.name} line {line}" if line else source.name
    if not key:
        return f"{where}: {msg}"
    sep = " " if msg.startswith(("must", "is ", "needs", "kind")) else ": "
    return f"{where}: {key}{sep}{msg}"


def _phrase(err: Any) -> str:
    t = err["type"]
    ctx = err.get("ctx") or {}
    got = err.get("input")
    got_s = f" (got {got!r})" if not isinstance(got, dict | list) else ""
    if t == "missing":
        return "is required; add it"
    if t == "extra_forbidden":
        return "is not a known key; check its spelling in docs/scenarios.md"
    if t in ("greater_than_equal", "greater_than"):
        word = "at least" if t == "greater_than_equal" else "more than"
        return f"must be {word} {_bound(ctx.get('ge', ctx.get('gt')))}{got_s}"
    if t in ("less_than_equal", "less_than"):
        word = "at most" if t == "less_than_equal" else "less than"
        return f"must be {word} {_bound(ctx.get('le', ctx.get('lt')))}{got_s}"
    if t == "string_pattern_mismatch":
        if "function" in [str(p) for p in err["loc"]]:
            return f"must be module:function, like flows:login{got_s}"
        return f"must be a name of letters, digits and '_' not starting with a digit{got_s}"
    if t == "literal_error":
        return f"must be {ctx.get('expected')}{got_s}"
    if t == "union_tag_invalid":
        return f"kind must be one of {ctx.get('expected_tags')} (got {ctx.get('tag')!r})"
    if t == "union_tag_not_found":
        return 'needs kind = "http", "tcp", "exec", "worker" or "python"'
    if t in ("int_type", "int_parsing", "int_from_float"):
        return f"must be a whole number{got_s}"
    if t in ("float_type", "float_parsing"):
        return f"must be a number{got_s}"
    if t == "finite_number":
        return f"must be a finite number{got_s}"
    if t == "string_type":
        return f"must be a string{got_s}"
    if t in ("bool_type", "bool_parsing"):
        return f"must be true or false{got_s}"
    if t == "too_short":
        return f"must have at least {ctx.get('min_length')} item(s)"
    if t in ("dict_type", "model_type", "model_attributes_type"):
        return f"must be a table{got_s}"
    if t == "list_type":
        return f"must be a list{got_s}"
    msg = str(err.get("msg", "is not valid")).removeprefix("Value error, ")
    if t == "value_error" and msg.startswith("must"):
        return f"{msg}{got_s}"
    return msg


def _bound(value: Any) -> Any:
    """0.0 → 0 in messages (a float bound that is a whole number)."""
    return int(value) if isinstance(value, float) and value.is_integer() else value


def _find_line(text: str, loc: tuple[str, ...]) -> int | None:
    """The line where key `loc` is set, by scanning table headers and `key =` lines (tomllib keeps no positions)."""
    lines = text.splitlines()
    section: tuple[str, ...] = ()
    best: tuple[int, int] | None = None  # (matched depth, line number)
    header = re.compile(r"^\s*\[\[?\s*([^\]]+?)\s*\]\]?\s*(#.*)?$")
    assign = re.compile(r"^\s*([A-Za-z0-9_\-\".]+)\s*=")
    for n, line in enumerate(lines, 1):
        h = header.match(line)
        if h:
            section = tuple(p.strip().strip('"') for p in h.group(1).split("."))
            depth = _prefix_len(section, loc)
            if depth == len(section) and depth > 0 and (best is None or depth > best[0]):
                best = (depth, n)
            continue
        a = assign.match(line)
        if not a:
            continue
        full = section + tuple(p.strip().strip('"') for p in a.group(1).split("."))
        depth = _prefix_len(full, loc)
        if depth == len(full) and depth > 0 and (best is None or depth > best[0]):
            best = (depth, n)
    return best[1] if best else None


def _prefix_len(a: tuple[str, ...], b: tuple[str, ...]) -> int:
    n = 0
    for x, y in zip(a, b, strict=False):
        if x != y:
            break
        n += 1
    return n
