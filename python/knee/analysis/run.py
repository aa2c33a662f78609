"""analyze_run(): one verdict per group of a run, with the scenario's analysis settings.

Read from `record.scenario` (the scenario as run): analysis.onset, slo (p99_ms,
failure_ratio), recovery.tolerance and each group's think_s (or think_ms). Only
the measured group (whose clients follow the level) gets a USL fit.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from knee.analysis.recovery import WITHIN
from knee.analysis.slo import Slo
from knee.analysis.verdict import analyze
from knee.errors import UserError
from knee.model import RunRecord, Verdict


def _think_s(scenario: Mapping[str, Any], group: str) -> float:
    """Best effort: a group's think time from the scenario ("think_s" seconds or "think_ms")."""
    groups = scenario.get("groups")
    entries: list[Any] = []
    if isinstance(groups, Mapping):
        entries = [dict(g, name=name) for name, g in groups.items() if isinstance(g, Mapping)]
    elif isinstance(groups, list):
        entries = [g for g in groups if isinstance(g, Mapping)]
    for g in entries:
        if g.get("name") == group:
            if isinstance(g.get("think_s"), int | float):
                return float(g["think_s"])
            if isinstance(g.get("think_ms"), int | float):
                return float(g["think_ms"]) / 1000.0
    return 0.0


def group_names(record: RunRecord) -> list[str]:
    """The run's groups, the measured group first, then in order of first appearance."""
    names: list[str] = []
    for s in sorted(record.steps, key=lambda s: s.index):
        names.extend(n for n in s.groups if n not in names)
    if record.measured_group in names:
        names.remove(record.measured_group)
        names.insert(0, record.measured_group)
    return names


def analyze_run(record: RunRecord) -> list[Verdict]:
    """One verdict per group, with the scenario's analysis.onset, slo, recovery.tolerance and think times."""
    scenario = record.scenario or {}
    analysis = scenario.get("analysis") or {}
    onset = analysis.get("onset", 0.001) if isinstance(analysis, Mapping) else 0.001
    if isinstance(onset, bool) or not isinstance(onset, int | float) or not 0 <= onset < 1:
        raise UserError(f"analysis.onset must be a failure ratio between 0 and 1, e.g. 0.001 (got {onset!r})")
    slo_table = scenario.get("slo")
    if slo_table is not None and not isinstance(slo_table, Mapping):
        raise UserError(f"slo must be a table like {{p99_ms = 500, failure_ratio = 0.01}} (got {slo_table!r})")
    slo = Slo.from_dict(slo_table)
    rec = scenario.get("recovery") or {}
    tolerance = rec.get("tolerance", WITHIN) if isinstance(rec, Mapping) else WITHIN
    if isinstance(tolerance, bool) or not isinstance(tolerance, int | float) or not 0 < tolerance < 1:
        raise UserError(f"recovery.tolerance must be between 0 and 1, e.g. 0.1 for 10 % (got {tolerance!r})")
    return [
        analyze(
            record.steps,
            name,
            onset=float(onset),
            slo=slo,
            think_s=_think_s(scenario, name),
            fit=name == record.measured_group,
            recovery_tolerance=float(tolerance),
        )
        for name in group_names(record)
    ]
