"""Every scenario becomes one plan: a list of Steps, and an engine spec per step (`knee.spec`).

This is the one road: `knee run`, `knee sweep FILE`, `knee sweep TARGET`, `knee demo` and the
Python API all build a Scenario and come here for their engine specs.

A plain sweep is one step per level (a client count, or an arrival rate: `[sweep] rates`);
stages (fixed work per operation type) give one step per level and stage; `direction = "up-down"`
adds the same levels back down.
Recovery probes are decided while running (see knee.sweep) but built here too.
"""

from __future__ import annotations

import re
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from knee import fmt
from knee.analysis.precision import NOISE
from knee.analysis.search import Config as SearchConfig
from knee.clientspec import client_spec, fill_stage, ms
from knee.errors import UserError
from knee.scenario import DEFAULT_MAX_IN_FLIGHT, Group, Scenario, tlsfiles
from knee.scenario.messages import Source, describe
from knee.scenario.profiles import RateProfile
from knee.spec import (
    ClosedPacer,
    DataSource,
    DurationMs,
    EngineSpec,
    GroupSpec,
    PerClient,
    PointsProfile,
    RatePacer,
    SineProfile,
    StopRule,
    Total,
    WhileOthers,
)

Phase = Literal["sweep", "recovery"]
Direction = Literal["up", "down"]


@dataclass(frozen=True)
class PlannedStep:
    level: int | float  # clients, or the offered rate (/s) of a rate sweep
    label: str = ""
    direction: Direction = "up"
    phase: Phase = "sweep"
    reason: str = ""  # a searched level (levels = "auto"): why the search chose it


def sweep_plan(scenario: Scenario) -> list[PlannedStep]:
    """The sweep's steps in order (recovery probes are added while running)."""
    levels = scenario.levels()
    stages = scenario.sweep.stages or [""]
    steps = [PlannedStep(level, stage) for level in levels for stage in stages]
    if scenario.sweep.direction == "up-down":
        steps += [PlannedStep(level, stage, "down") for level in reversed(levels[:-1]) for stage in stages]
    return steps


def probe_step(scenario: Scenario) -> PlannedStep:
    """A recovery probe: the baseline (first) level again, with its reason (run.json's `reason`)."""
    stages = scenario.sweep.stages or [""]
    level = scenario.levels()[0]
    back = fmt.pct(scenario.recovery.tolerance)
    why = (
        f"recovery probe: the baseline level ({fmt.load(level, 'rate' if scenario.rate_sweep else 'clients')}) again "
        f"after the load, until its rate is back within {back} of its first measurement"
    )
    return PlannedStep(level, stages[0], "up", "recovery", why)


def step_seconds(scenario: Scenario) -> float | None:
    """How long one sweep step lasts when that is known in advance (duration-based stops)."""
    durations: list[float] = []
    for g in scenario.groups.values():
        if g.background:
            continue
        if g.duration is not None:
            durations.append(g.duration)
        elif g.per_client is None and g.total is None and scenario.sweep.duration is not None:
            durations.append(sweep_seconds(scenario))
        elif g.over_time is not None and g.over_time.end_s is not None and not scenario.sweep.has_stop():
            durations.append(max(0.001, g.over_time.end_s - scenario.sweep.warmup))
        else:
            return None
    return max(durations) + scenario.sweep.warmup if durations else None


def planned_seconds(scenario: Scenario) -> float | None:
    """About how long the sweep's steps take in all, when that is known in advance (duration-based stops): its
    steps (a level search: at most its max_steps) and the pauses between them; recovery probes aside."""
    each = step_seconds(scenario)
    if each is None:
        return None
    n = scenario.search.max_steps if scenario.sweep.auto_levels else len(sweep_plan(scenario))
    return n * each + max(0, n - 1) * scenario.sweep.pause


def tls_notes(scenario: Scenario) -> tuple[list[str], list[str]]:
    """What the scenario's https groups present and trust, and a warning for a client certificate that expires
    within the sweep's planned time (knee.scenario.tlsfiles.notes)."""
    return tlsfiles.notes(scenario, planned_seconds(scenario))


def sweep_seconds(scenario: Scenario) -> float:
    """The sweep's duration in seconds (duration = "auto": the most a level may run, max_duration)."""
    duration = scenario.sweep.duration
    assert duration is not None
    return scenario.sweep.duration_bounds()[1] if duration == "auto" else duration


def engine_spec(
    scenario: Scenario,
    step: PlannedStep,
    *,
    continuous: bool = False,
    record: bool = False,
    used: Mapping[str, int] | None = None,
) -> EngineSpec:
    """The engine spec of one step. With `continuous`, background groups are left out: they run across
    the steps in a shard of their own (`background_spec`). With `record`, the spec as run.json keeps it (of the
    recorded scenario, secrets as placeholders): TLS files are not read, no certificate or key is in it.
    `used`: rows of each queue or shuffle source that earlier steps used (this step starts after them)."""
    groups = [
        _group(scenario, name, g, step, record)
        for name, g in scenario.groups.items()
        if not (continuous and g.background)
    ]
    return EngineSpec(
        threads=scenario.sweep.threads,
        interval_ms=_interval_ms(scenario),
        seed=scenario.seed,
        data=data_sources(scenario, used or {}),
        groups=groups,
    )


def data_sources(scenario: Scenario, used: Mapping[str, int]) -> list[DataSource]:
    """The scenario's data sources as the engine reads them: absolute paths; a queue or shuffle shared by the run
    starts where the earlier steps stopped (each row once across the steps)."""
    out = []
    for d in scenario.data:
        once = d.runs_out and d.scope == "run"  # a recycling queue starts again from its first row
        start = used.get(d.name, 0)
        out.append(
            DataSource(
                name=d.name,
                file=str(Path(d.file).resolve()),
                format=d.file_format,  # type: ignore[arg-type]
                order=d.order,
                on_exhausted=d.on_exhausted,
                scope=d.scope,
                ranges=[(start, 2**63 - 1)] if once and start else None,
            )
        )
    return out


def background_spec(scenario: Scenario) -> EngineSpec | None:
    """The shard of a sweep's background groups, run across all its steps and cut into per-step windows
    (a baseload that never restarts); None without background groups."""
    first = sweep_plan(scenario)[0]
    groups = [_group(scenario, name, g, first) for name, g in scenario.groups.items() if g.background]
    if not groups:
        return None
    return EngineSpec(
        threads=scenario.sweep.threads,
        interval_ms=_interval_ms(scenario),
        seed=scenario.seed,
        data=data_sources(scenario, {}),
        groups=groups,
    )


def operations_log(scenario: Scenario, index: int) -> str | None:
    """Where step `index` writes its operations (sweep.operations_log, `--operations-log FILE`): FILE itself for a run
    of one step (knee run, a soak), else FILE with the step's index before its suffix (ops.bin: ops.step0.bin …)."""
    if scenario.sweep.operations_log is None:
        return None
    path = Path(scenario.sweep.operations_log).resolve()
    single = scenario.mode == "soak" or (
        not scenario.sweep.auto_levels and len(sweep_plan(scenario)) == 1 and not scenario.recovery_enabled()
    )
    return str(path if single else path.with_name(f"{path.stem}.step{index}{path.suffix}"))


def soak_spec(scenario: Scenario, step: PlannedStep) -> EngineSpec:
    """A soak's shard (mode = "soak"): every group at the step's level, running until stopped, so that the runner
    cuts it into windows as it goes (knee.soaking) and stops it at the soak's end."""
    spec = engine_spec(scenario, step)
    groups = [g.model_copy(update={"stop": WhileOthers()}) for g in spec.groups]
    return spec.model_copy(update={"groups": groups, "operations_log": operations_log(scenario, 0)})


def _interval_ms(scenario: Scenario) -> int:
    return ms(scenario.sweep.interval)


def _stop(scenario: Scenario, g: Group, step: PlannedStep) -> StopRule:
    sweep = scenario.sweep
    if g.background:
        return WhileOthers()
    if g.per_client is not None:
        return PerClient(per_client=g.per_client)
    if g.total is not None:
        return Total(total=g.total)
    seconds = (
        g.duration if g.duration is not None else (sweep_seconds(scenario) if sweep.duration is not None else None)
    )
    if step.phase == "recovery" and seconds is not None:
        if scenario.recovery.probe is not None:
            seconds = scenario.recovery.probe
        elif g.duration is None and sweep.duration == "auto":
            seconds = sweep.duration_bounds()[0]  # a probe compares rates: the least a level runs is enough
    if seconds is not None:
        return DurationMs(duration_ms=round(seconds * 1000))
    if sweep.per_client is not None:
        return PerClient(per_client=sweep.per_client)
    if sweep.total is not None:
        return Total(total=sweep.total)
    if g.over_time is not None and g.over_time.end_s is not None:
        # the profile's own end: its clock counts from the step's start, warm-up included
        return DurationMs(duration_ms=max(1, round((g.over_time.end_s - sweep.warmup) * 1000)))
    raise AssertionError("Scenario validation guarantees every group a stop")


def _group(scenario: Scenario, name: str, g: Group, step: PlannedStep, record: bool = False) -> GroupSpec:
    stop = _stop(scenario, g, step)
    pacer: ClosedPacer | RatePacer = ClosedPacer(
        profile=None if g.clients_profile is None else engine_profile(g.clients_profile)
    )
    if g.rate == "level" or g.profile is not None:
        pacer = RatePacer(
            rate_hz=float(step.level) if g.profile is None else None,
            profile=None if g.profile is None else engine_profile(g.profile),
            poisson=scenario.sweep.arrival == "poisson",
            max_in_flight=scenario.sweep.max_in_flight or DEFAULT_MAX_IN_FLIGHT,
        )
    return GroupSpec(
        name=name,
        clients=g.client_count(step.level),
        stop=stop,
        think_ms=round(g.think.mean * 1000),
        think_random=g.think.engine(),
        think_on_failure_ms=round(g.think_on_failure * 1000),
        timeout_ms=ms(g.timeout),
        warmup_ms=round(scenario.sweep.warmup * 1000) if isinstance(stop, DurationMs) else 0,
        pacer=pacer,
        client=fill_stage(client_spec(g, scenario.vars, record=record, sources=scenario.data), step.label),
    )


# An engine spec error about a group's client: `groups[0].client.headers[0] name "X-é" is not a valid header name`.
_CLIENT_ERROR = re.compile(r"groups\[(\d+)\]\.client\.([A-Za-z_]+(?:\[\d+\]|\.[A-Za-z_]+)*?)(?:\[\d+\])? (.+)", re.S)


def check_engine(scenario: Scenario, source: Source | None) -> None:
    """What only the engine reads (a method, a header name, a regex in its dialect, a URL as it parses one), checked
    in the spec of the scenario's first step and said by the key at fault or the option that set it, as `source`
    names them (the engine named groups[0].client.method, when the first step started)."""
    from knee import _engine

    try:
        spec = engine_spec(scenario, probe_step(scenario))
    except UserError:
        return  # said where the step is planned, in its own words
    try:
        text = spec.to_json()
    except ValueError:  # pydantic's serialization error: a lone surrogate, a byte Python could not decode as UTF-8
        bad = next((v for v in _strings(spec.model_dump()) if _not_utf8(v)), "?")
        raise UserError(
            f"{bad.encode('utf-8', 'surrogateescape')!r} is not UTF-8 (an argument, a file's name or the "
            "environment's): knee sends and writes UTF-8 only; give it in UTF-8, or pass it through a file"
        ) from None
    try:
        _engine.check_spec(text)
    except _engine.SpecError as exc:
        m = _CLIENT_ERROR.fullmatch(str(exc))
        if m is None:
            raise UserError(str(exc)) from None
        loc = ("groups", spec.groups[int(m.group(1))].name, *(p for p in re.split(r"[.\[\]]+", m.group(2)) if p))
        said = describe({"loc": loc, "msg": m.group(3), "type": "engine"}, source or Source("scenario"))
        raise UserError(said) from None


def _strings(value: object) -> Iterator[str]:
    """Every string inside `value` (dicts, lists)."""
    if isinstance(value, str):
        yield value
    elif isinstance(value, dict):
        for v in value.values():
            yield from _strings(v)
    elif isinstance(value, list | tuple):
        for v in value:
            yield from _strings(v)


def _not_utf8(value: str) -> bool:
    try:
        value.encode("utf-8")
    except UnicodeEncodeError:
        return True
    return False


def engine_profile(p: RateProfile) -> PointsProfile | SineProfile:
    """A scenario's rate profile as the engine reads it (a spike is steps: base, peak, base)."""
    if p.shape == "sine":
        return SineProfile(mean_hz=p.mean, amplitude_hz=p.amplitude, period_s=p.period)
    return PointsProfile(points=list(p.breakpoints()), step=p.stepped)


def max_clients(scenario: Scenario) -> int:
    """The most clients any step runs at once (for preflight checks)."""
    top = max(scenario.levels())
    return sum(g.client_count(top) for g in scenario.groups.values())


def _cap(d: dict[str, Any], **most: float) -> None:
    """Lower each key of `d` that is set to at most its `most`."""
    for key, cap in most.items():
        if d[key] is not None:
            d[key] = min(d[key], cap)


def quick(scenario: Scenario) -> Scenario:
    """A shortened copy for smoke tests (`--quick`): about 1 s per level, small counts, at most 4 levels ≤ 100
    (rate sweeps: at most 4 rates, of any size; an open loop's cost is its connections, capped like clients).

    Shapes stay the same (groups, stages, direction, recovery), only sizes shrink.
    """
    d = scenario.model_dump()
    sw = d["sweep"]
    if sw["duration"] == "auto":
        sw["duration"], sw["min_duration"], sw["max_duration"] = 1.0, None, None
    if scenario.sweep.auto_levels:
        search = d["search"]
        search["max_steps"] = min(search["max_steps"], 6)
        if not scenario.rate_sweep:
            search["max"] = min(search["max"] or 100, 100)
        search["budget"] = None
    elif sw["levels"] is not None or sw["rates"] is not None:
        levels = scenario.levels()
        if not scenario.rate_sweep:
            levels = [lv for lv in levels if lv <= 100] or [min(levels)]
        if len(levels) > 4:
            idx = sorted({round(i * (len(levels) - 1) / 3) for i in range(4)})
            levels = [levels[i] for i in idx]
        sw["rates" if scenario.rate_sweep else "levels"] = levels
    _cap(sw, duration=1.0, per_client=5, total=200, warmup=0.2, pause=0.2)
    longest = max([sw["duration"] or 1.0] + [g["duration"] or 0.0 for g in d["groups"].values()])
    sw["interval"] = min(sw["interval"], max(0.05, longest / 10))
    for name, group in scenario.groups.items():
        if group.profile is not None:  # the whole shape, over 2 s
            d["groups"][name]["rate"] = group.profile.squeezed(2.0).toml_value()
        if group.clients_profile is not None:
            d["groups"][name]["clients"] = group.clients_profile.squeezed(2.0).toml_value()
    for g in d["groups"].values():
        _cap(g, per_client=5, total=200, duration=1.5)
        if isinstance(g["clients"], int):
            g["clients"] = min(g["clients"], 50)
    _cap(d["recovery"], limit=3.0, pause=0.2, probe=1.0)
    d["stop"]["max_level"] = d["stop"]["max_rate"] = None
    return Scenario.model_validate(d)


def search_config(scenario: Scenario) -> SearchConfig:
    """The level search of `levels = "auto"` / `rates = "auto"` (knee.analysis.search), from the [search] table."""
    start, top = scenario.search_bounds()
    precision, relative = scenario.search.relative_precision()
    s = scenario.search
    return SearchConfig(
        start=start,
        max=top,
        precision=precision,
        relative=relative,
        resolution=1.0,
        factor=s.factor,
        onset=scenario.analysis.onset,
        noise=NOISE,  # the verdict's floor of "the same rate" (a settle of 15 % made the search call 12 % flat)
        max_steps=s.max_steps,
        budget_s=s.budget,
        integer=not scenario.rate_sweep,
        open_loop=scenario.rate_sweep,
        at_least=scenario.slo.required if scenario.slo is not None else None,
    )
