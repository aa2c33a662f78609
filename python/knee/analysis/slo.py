"""Service-level objectives: the capacity under an SLO and whether the run met it.

Capacity under the SLO is the highest level L such that L *and every lower
measured level* have p99 ≤ the limit and failure ratio ≤ the limit (a level that
only passes above a failing one does not count: the service would have to go
through the failing level to get there). A level with no operations at all fails.
`slo_passed` is True when the capacity reaches `min_clients` (the capacity the
service must have; `min_rate` for a rate sweep, whose levels are offered rates), or,
without it, when every measured level met the SLO. A sweep that deliberately goes
past the knee wants `min_clients` / `min_rate`.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from knee.analysis import words
from knee.analysis.levels import LevelRow
from knee.errors import UserError


@dataclass(frozen=True)
class Slo:
    """Limits a level must stay within; None means no limit on that quantity."""

    p99_ms: float | None = None
    failure_ratio: float | None = None
    min_clients: int | None = None
    min_rate: float | None = None  # rate sweeps: the offered rate (/s) up to which the SLO must hold

    def __post_init__(self) -> None:
        if self.min_clients is not None and (
            isinstance(self.min_clients, bool) or not isinstance(self.min_clients, int) or self.min_clients < 1
        ):
            raise UserError(f"slo.min_clients must be a whole number of clients, 1 or more (got {self.min_clients!r})")
        if self.min_rate is not None and (
            isinstance(self.min_rate, bool) or not isinstance(self.min_rate, int | float) or not self.min_rate > 0
        ):
            raise UserError(f"slo.min_rate must be a positive rate in operations per second (got {self.min_rate!r})")
        for key, value, hi in (("p99_ms", self.p99_ms, math.inf), ("failure_ratio", self.failure_ratio, 1.0)):
            if value is None:
                continue
            if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value):
                raise UserError(f"slo.{key} must be a number (got {value!r})")
            if not 0 <= value <= hi:
                bound = "between 0 and 1 (0.01 = 1 %)" if hi == 1.0 else "0 or more"
                raise UserError(f"slo.{key} must be {bound} (got {value!r})")

    @classmethod
    def from_dict(cls, d: Mapping[str, Any] | None) -> Slo | None:
        """From the scenario's [slo] table: {"p99_ms": 500, "failure_ratio": 0.01}; None when absent or empty."""
        if not d:
            return None
        unknown = set(d) - {"p99_ms", "failure_ratio", "min_clients", "min_rate"}
        if unknown:
            raise UserError(
                f"slo: unknown key {sorted(unknown)[0]!r}; use p99_ms, failure_ratio and min_clients (or min_rate)"
            )
        slo = cls(
            p99_ms=d.get("p99_ms"),
            failure_ratio=d.get("failure_ratio"),
            min_clients=d.get("min_clients"),
            min_rate=d.get("min_rate"),
        )
        return None if slo.p99_ms is None and slo.failure_ratio is None else slo

    def describe(self) -> str:
        """'p99 ≤ 500 ms, failures ≤ 1 %'."""
        parts = []
        if self.p99_ms is not None:
            parts.append(f"p99 ≤ {self.p99_ms:g} ms")
        if self.failure_ratio is not None:
            parts.append(f"failures ≤ {words.pct(self.failure_ratio)}")
        if self.min_clients is not None:
            parts.append(f"up to {self.min_clients} clients")
        if self.min_rate is not None:
            parts.append(f"up to {words.load(self.min_rate, 'rate')}")
        return ", ".join(parts) or "no limits"

    def met_by(self, row: LevelRow) -> bool:
        if row.total == 0:
            return False
        if self.p99_ms is not None and row.p99_ms > self.p99_ms:
            return False
        return not (self.failure_ratio is not None and row.failure_ratio > self.failure_ratio)


def capacity(rows: Sequence[LevelRow], slo: Slo) -> tuple[int | float | None, bool]:
    """(highest level that, with all lower levels, met the SLO; whether the SLO was met)."""
    cap: int | float | None = None
    every = bool(rows)
    for r in rows:  # ascending levels
        if not slo.met_by(r):
            every = False
            break
        cap = r.level
    required = slo.min_rate if slo.min_rate is not None else slo.min_clients
    if required is not None:
        return cap, cap is not None and cap >= required
    return cap, every
