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

from knee import fmt
from knee.analysis.levels import LevelRow
from knee.scenario import Slo


def missed(slo: Slo, row: LevelRow) -> list[str]:
    """What the level missed of the SLO, in words ('p99 312 ms > 200 ms', 'failed or hung 100 % > 1 %'); empty
    when it met it. A level with no operations at all misses it."""
    if row.total == 0:
        return ["no operation ended"]
    out = []
    if slo.p99_ms is not None and row.succeeded == 0:
        out.append("no operation succeeded (no p99 of successes)")
    elif slo.p99_ms is not None and row.p99_ms > slo.p99_ms:
        out.append(f"p99 {fmt.ms(row.p99_ms)} > {fmt.ms(slo.p99_ms)}")
    if slo.failure_ratio is not None and row.failure_ratio > slo.failure_ratio:
        out.append(f"failed or hung {fmt.pct(row.failure_ratio)} > {fmt.pct(slo.failure_ratio)}")
    return out


def met_by(slo: Slo, row: LevelRow) -> bool:
    """The level met the SLO (a level with no operations at all fails it)."""
    return not missed(slo, row)


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
