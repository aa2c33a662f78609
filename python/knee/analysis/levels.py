"""Pool a sweep's steps into one row per level (and direction) for one group.

A level measured more than once in the same direction (a repeated step, a resumed
run) is pooled: counts and measured seconds add up, so its rate is still
successful operations ÷ measured seconds.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from knee.model import StepResult


@dataclass
class LevelRow:
    """One group at one level in one direction, pooled over its steps."""

    level: int
    direction: str
    clients: int = 0
    succeeded: int = 0
    failed: int = 0
    hung: int = 0
    elapsed_s: float = 0.0
    latency_count: int = 0
    latency_sum_ms: float = 0.0  # mean × count, to pool means
    p99_ms: float = 0.0  # the worst p99 of the pooled steps (percentiles do not add up)
    partial: bool = False
    open_loop: bool = False
    steps: int = 0

    @property
    def total(self) -> int:
        return self.succeeded + self.failed + self.hung

    @property
    def rate(self) -> float:
        """Successful operations per measured second."""
        return self.succeeded / self.elapsed_s if self.elapsed_s > 0 else 0.0

    @property
    def completion_rate(self) -> float:
        """All completed operations (succeeded + failed) per measured second."""
        return (self.succeeded + self.failed) / self.elapsed_s if self.elapsed_s > 0 else 0.0

    @property
    def failure_ratio(self) -> float:
        """(failed + hung) / all operations; 0 when there were none."""
        n = self.total
        return (self.failed + self.hung) / n if n else 0.0

    @property
    def mean_latency_ms(self) -> float:
        return self.latency_sum_ms / self.latency_count if self.latency_count else 0.0


def sweep_steps(steps: Sequence[StepResult], group: str) -> list[StepResult]:
    """The sweep steps (not recovery probes) that measured `group`, in order."""
    return sorted((s for s in steps if s.phase == "sweep" and group in s.groups), key=lambda s: s.index)


def pool(steps: Sequence[StepResult], group: str, direction: str) -> list[LevelRow]:
    """One row per level (ascending) for the sweep steps of `direction` that measured `group`."""
    rows: dict[int, LevelRow] = {}
    for s in sweep_steps(steps, group):
        if s.direction != direction:
            continue
        g = s.groups[group]
        r = rows.setdefault(s.level, LevelRow(level=s.level, direction=direction))
        r.clients = max(r.clients, g.clients)
        r.succeeded += g.succeeded
        r.failed += g.failed
        r.hung += g.hung
        r.elapsed_s += g.elapsed_s
        r.latency_count += g.latency_ms.count
        r.latency_sum_ms += g.latency_ms.mean * g.latency_ms.count
        r.p99_ms = max(r.p99_ms, g.latency_ms.p99)
        r.partial = r.partial or s.partial
        r.open_loop = r.open_loop or s.rate_hz is not None
        r.steps += 1
    return [rows[k] for k in sorted(rows)]
