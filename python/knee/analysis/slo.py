"""Service-level objectives: the capacity under an SLO and whether the run met it.

Capacity under the SLO is the highest level L such that L *and every lower
measured level* have p99 ≤ the limit and failure ratio ≤ the limit (a level that
only passes above a failing one does not count: the service would have to go
through the failing level to get there). A level with no operations at all fails. The p99 is the
succeeded operations' (failures are timed apart), so under a p99 limit a level where nothing
succeeded fails too: it has no latency to meet the limit with.
`slo_passed` is True when the capacity reaches `min_clients` (the capacity the
service must have; `min_rate` for a rate sweep, whose levels are offered rates), or,
without it, when every measured level met the SLO. A sweep that deliberately goes
past the knee wants `min_clients` / `min_rate`.
"""

from __future__ import annotations

from collections.abc import Sequence

from knee.analysis.levels import LevelRow
from knee.scenario import Slo


def met_by(slo: Slo, row: LevelRow) -> bool:
    """The level met the SLO (a level with no operations at all fails it)."""
    if row.total == 0:
        return False
    if slo.p99_ms is not None and (row.succeeded == 0 or row.p99_ms > slo.p99_ms):
        return False
    return not (slo.failure_ratio is not None and row.failure_ratio > slo.failure_ratio)


def capacity(rows: Sequence[LevelRow], slo: Slo) -> tuple[int | float | None, bool]:
    """(highest level that, with all lower levels, met the SLO; whether the SLO was met)."""
    cap: int | float | None = None
    every = bool(rows)
    for r in rows:  # ascending levels
        if not met_by(slo, r):
            every = False
            break
        cap = r.level
    if slo.required is not None:
        return cap, cap is not None and cap >= slo.required
    return cap, every
