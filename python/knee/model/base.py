"""The shapes the record's models derive from, each defined once.

- `Outcomes`: how operations ended. Every operation that started ended as exactly one of succeeded,
  failed, hung or abandoned (in flight when its step ended or was stopped), so `started` is their sum
  (DESIGN.md's accounting identity). Every shape that carries these counts (the engine's summary and
  live snapshot, a step's group, a load machine's share, the baseload between steps, a level pooled over
  its steps) derives from `Outcomes`, or from `Counts`, which adds the warm-up's operations, instead of
  declaring them again.
- `GroupIdentity`: which client group (name, kind, clients), shared by the engine's summary of a group
  and the record's.

Field order: pydantic lists a model's fields base by base, from the last base to the first, so a model
written `class GroupStats(Counts, GroupIdentity)` keeps run.json's keys in their order: name, kind and
clients, then the counts, then its own.
"""

from pydantic import BaseModel, Field


class Outcomes(BaseModel):
    """How many operations ended which way."""

    succeeded: int = 0
    failed: int = 0
    hung: int = 0  # exceeded their timeout and were abandoned or killed (not counted as failed)
    abandoned: int = 0  # in flight when the step ended or was stopped

    @property
    def total(self) -> int:
        """Operations that ended: succeeded + failed + hung."""
        return self.succeeded + self.failed + self.hung

    @property
    def started(self) -> int:
        """succeeded + failed + hung + abandoned."""
        return self.total + self.abandoned

    @property
    def failure_ratio(self) -> float:
        """(failed + hung) / all operations; 0 when there were none."""
        n = self.total
        return (self.failed + self.hung) / n if n else 0.0

    def add(self, other: "Outcomes") -> None:
        """Pool another's counts into these."""
        self.succeeded += other.succeeded
        self.failed += other.failed
        self.hung += other.hung
        self.abandoned += other.abandoned


class Counts(Outcomes):
    """How operations ended, and how many ended during warm-up (not measured): one group's over a step,
    or a continuous baseload's outside the steps (pauses, before the first and after the last)."""

    warmup_ops: int = 0
    resent: int = Field(
        default=0,
        description="HTTP/1.1 requests written (whole or in part) on a kept connection the service closed before "
        "answering, sent again on a new one (warm-up included): the service saw up to this many more than started + "
        "warmup_ops",
    )

    def add(self, other: Outcomes) -> None:
        super().add(other)
        if isinstance(other, Counts):
            self.warmup_ops += other.warmup_ops
            self.resent += other.resent


class GroupIdentity(BaseModel):
    """Which client group: its name, the kind of its clients (http, tcp, exec, worker) and how many."""

    name: str
    kind: str = ""
    clients: int
