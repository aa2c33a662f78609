"""Every scenario becomes one plan: a list of Steps, and an engine spec per step.

A plain sweep is one step per level (a client count, or an arrival rate: `[sweep] rates`);
stages (fixed work per operation type) give one step per level and stage; `direction = "up-down"`
adds the same levels back down.
Recovery probes are decided while running (see knee.sweep) but built here too.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Literal

from knee.scenario import ExecGroup, HttpGroup, Scenario, TcpGroup

Phase = Literal["sweep", "recovery"]
Direction = Literal["up", "down"]


@dataclass(frozen=True)
class PlannedStep:
    level: int | float  # clients, or the offered rate (/s) of a rate sweep
    label: str = ""
    direction: Direction = "up"
    phase: Phase = "sweep"


def sweep_plan(scenario: Scenario) -> list[PlannedStep]:
    """The sweep's steps in order (recovery probes are added while running)."""
    levels = scenario.levels()
    stages = scenario.sweep.stages or [""]
    steps = [PlannedStep(level, stage) for level in levels for stage in stages]
    if scenario.sweep.direction == "up-down":
        steps += [PlannedStep(level, stage, "down") for level in reversed(levels[:-1]) for stage in stages]
    return steps


def probe_step(scenario: Scenario) -> PlannedStep:
    """A recovery probe: the baseline (first) level again."""
    stages = scenario.sweep.stages or [""]
    return PlannedStep(scenario.levels()[0], stages[0], "up", "recovery")


def step_seconds(scenario: Scenario) -> float | None:
    """How long one sweep step lasts when that is known in advance (duration-based stops)."""
    durations: list[float] = []
    for g in scenario.groups.values():
        if g.background:
            continue
        if g.duration is not None:
            durations.append(g.duration)
        elif g.per_client is None and g.total is None and scenario.sweep.duration is not None:
            durations.append(scenario.sweep.duration)
        else:
            return None
    return max(durations) + scenario.sweep.warmup if durations else None


def engine_spec(scenario: Scenario, step: PlannedStep) -> dict[str, Any]:
    """The engine spec (docs/engine-spec.md) of one step."""
    sweep = scenario.sweep
    groups = []
    for name, g in scenario.groups.items():
        if g.background:
            stop: dict[str, Any] = {"while_others": True}
        elif g.per_client is not None:
            stop = {"per_client": g.per_client}
        elif g.total is not None:
            stop = {"total": g.total}
        elif g.duration is not None:
            stop = {"duration_ms": round(g.duration * 1000)}
        else:
            stop = dict(sweep.stop_spec() or {})
        if step.phase == "recovery" and scenario.recovery.probe is not None and "duration_ms" in stop:
            stop = {"duration_ms": round(scenario.recovery.probe * 1000)}
        group: dict[str, Any] = {
            "name": name,
            "clients": g.client_count(step.level),
            "stop": stop,
            "think_ms": round(g.think * 1000),
            "timeout_ms": max(1, round(g.timeout * 1000)),
            "warmup_ms": round(sweep.warmup * 1000) if "duration_ms" in stop else 0,
            "client": _fill_stage(_client(g), step.label),
        }
        if g.rate == "level":
            group["pacer"] = sweep.pacer(step.level)
        groups.append(group)
    return {"threads": 0, "interval_ms": max(1, round(sweep.interval * 1000)), "groups": groups}


def _client(g: HttpGroup | TcpGroup | ExecGroup) -> dict[str, Any]:
    return {k: v for k, v in g.client_spec().items() if v is not None}


def _fill_stage(value: Any, stage: str) -> Any:
    if isinstance(value, dict):
        return {k: _fill_stage(v, stage) for k, v in value.items()}
    if isinstance(value, list):
        return [_fill_stage(v, stage) for v in value]
    if isinstance(value, str):
        return value.replace("${stage}", stage)
    return value


def max_clients(scenario: Scenario) -> int:
    """The most clients any step runs at once (for preflight checks)."""
    top = max(scenario.levels())
    return sum(g.client_count(top) for g in scenario.groups.values())


def quick(scenario: Scenario) -> Scenario:
    """A shortened copy for smoke tests (`--quick`): about 1 s per level, small counts, at most 4 levels ≤ 100
    (rate sweeps: at most 4 rates, of any size; an open loop's cost is its connections, capped like clients).

    Shapes stay the same (groups, stages, direction, recovery), only sizes shrink.
    """
    d = scenario.model_dump()
    sw = d["sweep"]
    if sw["levels"] is not None or sw["rates"] is not None:
        levels = scenario.levels()
        if not scenario.rate_sweep:
            levels = [lv for lv in levels if lv <= 100] or [min(levels)]
        if len(levels) > 4:
            idx = sorted({round(i * (len(levels) - 1) / 3) for i in range(4)})
            levels = [levels[i] for i in idx]
        sw["rates" if scenario.rate_sweep else "levels"] = levels
    if sw["duration"] is not None:
        sw["duration"] = min(sw["duration"], 1.0)
    if sw["per_client"] is not None:
        sw["per_client"] = min(sw["per_client"], 5)
    if sw["total"] is not None:
        sw["total"] = min(sw["total"], 200)
    sw["warmup"] = min(sw["warmup"], 0.2)
    sw["pause"] = min(sw["pause"], 0.2)
    longest = max([sw["duration"] or 1.0] + [g["duration"] or 0.0 for g in d["groups"].values()])
    sw["interval"] = min(sw["interval"], max(0.05, longest / 10))
    for g in d["groups"].values():
        if g["clients"] != "level":
            g["clients"] = min(g["clients"], 50)
        if g["per_client"] is not None:
            g["per_client"] = min(g["per_client"], 5)
        if g["total"] is not None:
            g["total"] = min(g["total"], 200)
        if g["duration"] is not None:
            g["duration"] = min(g["duration"], 1.5)
    rec = d["recovery"]
    rec["limit"] = min(rec["limit"], 3.0)
    rec["pause"] = min(rec["pause"], 0.2)
    if rec["probe"] is not None:
        rec["probe"] = min(rec["probe"], 1.0)
    d["stop"]["max_level"] = d["stop"]["max_rate"] = None
    return Scenario.model_validate(d)
