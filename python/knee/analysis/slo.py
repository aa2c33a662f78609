"""Service-level objectives: the capacity under an SLO and whether the run met it.

Capacity under the SLO is the highest level L such that L *and every lower
measured level* have p99 ≤ the limit and failure ratio ≤ the limit (a level that
only passes above a failing one does not count: the service would have to go
through the failing level to get there). A level with no operations at all fails.
`slo_passed` is True when every measured level met the SLO.
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

    def __post_init__(self) -> None:
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
        unknown = set(d) - {"p99_ms", "failure_ratio"}
        if unknown:
            raise UserError(f"slo: unknown key {sorted(unknown)[0]!r}; use p99_ms and/or failure_ratio")
        slo = cls(p99_ms=d.get("p99_ms"), failure_ratio=d.get("failure_ratio"))
        return None if slo.p99_ms is None and slo.failure_ratio is None else slo

    def describe(self) -> str:
        """'p99 ≤ 500 ms, failures ≤ 1 %'."""
        parts = []
        if self.p99_ms is not None:
            parts.append(f"p99 ≤ {self.p99_ms:g} ms")
        if self.failure_ratio is not None:
            parts.append(f"failures ≤ {words.pct(self.failure_ratio)}")
        return ", ".join(parts) or "no limits"

    def met_by(self, row: LevelRow) -> bool:
        if row.total == 0:
            return False
        if self.p99_ms is not None and row.p99_ms > self.p99_ms:
            return False
        return not (self.failure_ratio is not None and row.failure_ratio > self.failure_ratio)


def capacity(rows: Sequence[LevelRow], slo: Slo) -> tuple[int | None, bool]:
    """(highest level that, with all lower levels, met the SLO; whether every level met it)."""
    cap: int | None = None
    for r in rows:  # ascending levels
        if not slo.met_by(r):
            return cap, False
        cap = r.level
    return cap, bool(rows)
