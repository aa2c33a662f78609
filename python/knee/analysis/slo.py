"""Service-level objectives: the capacity under an SLO and whether the run met it.

Capacity under the SLO is the highest level L such that L *and every lower
measured level* have p99 ≤ the limit and failure ratio ≤ the limit (a level that
only passes above a failing one does not count: the service would have to go
through the failing level to get there). A level with no operations at all fails. The p99 is the
succeeded operations' (failures are timed apart), so under a p99 limit a level where nothing
succeeded fails too: it has no latency to meet the limit with. In an open loop the arrivals dropped count against
the failure limit: (failed + hung + dropped) / (succeeded + failed + hung + dropped).
`slo_passed` is True when the capacity reaches `min_clients` (the capacity the
service must have; `min_rate` for a rate sweep, whose levels are offered rates), or,
without it, when every measured level met the SLO. A sweep that deliberately goes
past the knee wants `min_clients` / `min_rate`. A searched sweep (`levels = "auto"`,
`rates = "auto"`) always does: the search must go past the capacity to find it, so its
own overshoot fails nothing, and without `min_clients` / `min_rate` it passes when some
level met the SLO (a capacity was found).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol

from knee import fmt
from knee.analysis.levels import LevelRow
from knee.scenario import Slo


class Judged(Protocol):
    """What an SLO judges: a level (`LevelRow`), or one interval of a ramp (knee.analysis.ramp)."""

    @property
    def total(self) -> int: ...
    @property
    def succeeded(self) -> int: ...
    @property
    def p99_ms(self) -> float: ...
    @property
    def failure_ratio(self) -> float: ...


def missed(slo: Slo, row: Judged) -> list[str]:
    """What the level missed of the SLO, in words ('p99 312 ms > 200 ms', 'failed or hung 100 % > 1 %'); empty
    when it met it. A level with no operations at all misses it."""
    if row.total == 0:
        return ["no operation ended"]
    out = []
    if slo.p99_ms is not None and row.succeeded == 0:
        out.append("no operation succeeded (no p99 of successes)")
    elif slo.p99_ms is not None and row.p99_ms > slo.p99_ms:
        out.append(f"p99 {fmt.ms(row.p99_ms)} > {fmt.ms(slo.p99_ms)}")
    # an open loop's arrival dropped (over max_in_flight, or waiting past its timeout) was asked of the service and
    # not served: it counts against the failure limit (an 80 % drop met a 1 % limit)
    dropped = getattr(row, "dropped", 0)
    ratio = (row.failure_ratio * row.total + dropped) / (row.total + dropped)
    if slo.failure_ratio is not None and ratio > slo.failure_ratio:
        what = "failed, hung or dropped" if dropped else "failed or hung"
        out.append(f"{what} {fmt.pct(ratio)} > {fmt.pct(slo.failure_ratio)}")
    return out


def met_by(slo: Slo, row: LevelRow) -> bool:
    """The level met the SLO (a level with no operations at all fails it)."""
    return not missed(slo, row)


def capacity(rows: Sequence[LevelRow], slo: Slo, searched: bool = False) -> tuple[int | float | None, bool]:
    """(highest level that, with all lower levels, met the SLO; whether the SLO was met). `searched`: the levels
    were chosen by the search, which goes past the capacity to find it; then the SLO is met when a capacity was found
    (and reaches `required`, when set), not only when every level met it."""
    cap: int | float | None = None
    every = bool(rows)
    for r in rows:  # ascending levels
        if not met_by(slo, r):
            every = False
            break
        cap = r.level
    if slo.required is not None:
        return cap, cap is not None and cap >= slo.required
    return cap, cap is not None if searched else every


def not_met(slo: Slo, cap: int | float | None, searched: bool, unit: str, broken: bool = True) -> str:
    """Why the SLO was not met, in words ('no level met it', 'the capacity under it, 40 clients, is below
    min_clients = 64', 'not every level met it'). `broken`: some level broke it (else every level measured met it,
    and the capacity is that level or more)."""
    if cap is None:
        return "no level met it, not even the lowest"
    if slo.required is not None:
        key = "min_rate" if slo.min_rate is not None else "min_clients"
        if not broken:
            return (
                f"every level measured met it, up to {fmt.load(cap, unit)}, and {key} = {slo.required:g} was not "
                f"measured: measure up to it (the sweep's levels, or [search] max)"
            )
        return f"the capacity under it, {fmt.load(cap, unit)}, is below {key} = {slo.required:g}"
    return "not every level met it" + ("" if searched else " (a fixed sweep must hold at every level)")
