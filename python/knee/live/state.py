"""What the live page, its event stream and `/metrics` read: one `LiveView`, replaced (never changed) about once a
second by the runner's thread and read by the server's.

The runner's thread only ever builds a small view and swaps it in (`Hub.publish`): no lock is held longer than
that swap, nothing it does waits for a reader, and a reader (a page's stream, a scrape) only reads the last view.
The finished steps are the run record's own `StepResult`s; the current step is its last engine snapshot.
"""

from __future__ import annotations

import resource
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace

from knee.engine import ShardNow
from knee.model import RunRecord, StepResult
from knee.model.measured import Level

# (t, per group in the step's order: (succeeded, failed, hung) so far): one point per snapshot
Point = tuple[float, tuple[tuple[int, int, int], ...]]


@dataclass(frozen=True)
class GroupNow:
    """One group of the current step, from its last snapshot."""

    name: str
    clients: int
    succeeded: int
    failed: int
    hung: int
    abandoned: int
    in_flight: int
    p50_ms: float  # over the last second
    p99_ms: float
    rate_hz: float  # successes per second over the last interval
    completed_hz: float  # operations that ended per second over the last interval: the achieved rate
    offered_hz: float | None  # an open loop's arrival rate
    failed_by_class: tuple[tuple[str, int], ...] = ()  # failures so far by class, most first
    late: int = 0  # an open loop's arrivals that started late, counted as their operations end
    lagged: int = 0  # of those, the ones a client was free for: knee's own lag, not the service's

    @property
    def started(self) -> int:
        """Operations that ended so far, succeeded + failed + hung + abandoned (what run.json's `started` is at
        the step's end; those in flight are `in_flight`)."""
        return self.succeeded + self.failed + self.hung + self.abandoned


@dataclass(frozen=True)
class StepNow:
    """The step running now."""

    index: int  # the index it gets in run.json
    number: int  # 1-based, of `total` (0: a level search, which does not know how many)
    total: int
    level: Level
    label: str
    phase: str
    direction: str
    reason: str  # levels = "auto": why the search chose this level
    planned_s: float | None  # its duration, when it has one
    elapsed_s: float = 0.0
    groups: tuple[GroupNow, ...] = ()
    workers: tuple[int, int] | None = None  # distributed: (workers reporting, workers running the step)
    shards: tuple[ShardNow, ...] = ()  # distributed: each reporting worker's part


@dataclass(frozen=True)
class Usage:
    """knee's CPU seconds so far: its own process's and its child processes' (reaped ones: exec clients)."""

    cpu_s: float = 0.0
    children_cpu_s: float = 0.0

    @classmethod
    def now(cls) -> Usage:
        me, kids = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
        return cls(me.ru_utime + me.ru_stime, kids.ru_utime + kids.ru_stime)


@dataclass(frozen=True)
class LiveView:
    """Everything served about the run at one moment."""

    seq: int
    record: RunRecord  # the run as of the last finished step (or the end): its steps are the finished ones
    version: int  # bumped with each finished step and at the end: the version of the record's report
    current: StepNow | None = None
    points: Sequence[Point] = ()  # the current step's counts, a point per snapshot (only ever appended to)
    usage: Usage = field(default_factory=Usage)
    remote: tuple[dict[str, object], ...] = ()  # the remote hosts' latest figures (knee.machine.remote)
    ended: bool = False
    unix: float = 0.0

    @property
    def steps(self) -> list[StepResult]:
        return self.record.steps

    def next_index(self) -> int:
        return max((s.index for s in self.record.steps), default=-1) + 1


class Hub:
    """The last `LiveView`, swapped in by the runner's thread, waited on by the server's threads; and the rendered
    report of each version (`knee.live.render`), kept once for every reader."""

    def __init__(self, record: RunRecord, ended: bool = False) -> None:
        self._cond = threading.Condition()
        self._view = LiveView(seq=1, record=record, version=1, ended=ended, usage=Usage.now(), unix=time.time())
        self._report: tuple[int, str] | None = None  # (version, the report's HTML body)
        self._histograms: dict[tuple[int, str], bytes] = {}
        self.histogram_source: Callable[[int, str], bytes | None] | None = None  # a kept run directory's files
        self.viewers = 0  # open event streams
        self.wanted = 0  # the latest version a reader asked for (a page, or a viewer's stream)
        self.scraped_after_end = False
        self.scraped = False

    # ---- the runner's side: quick swaps, never a wait ------------------------------------------

    @property
    def view(self) -> LiveView:
        return self._view

    def publish(self, **changes: object) -> LiveView:
        """A new view: the last one with `changes` (LiveView's fields), a new sequence number, the time and CPU."""
        with self._cond:
            v = self._view
            self._view = replace(v, seq=v.seq + 1, unix=time.time(), usage=Usage.now(), **changes)  # type: ignore[arg-type]
            self._cond.notify_all()
            return self._view

    def keep_histograms(self, index: int, histograms: dict[str, bytes]) -> None:
        """A finished step's latency histograms (HdrHistogram V2 deflate), by group: `/metrics` reads them."""
        for name, data in histograms.items():
            self._histograms[(index, name)] = data

    def histogram(self, index: int, group: str) -> bytes | None:
        data = self._histograms.get((index, group))
        if data is None and self.histogram_source is not None:
            data = self.histogram_source(index, group)
        return data

    # ---- the readers' side ---------------------------------------------------------------------

    def wait(self, seq: int, report: int, timeout_s: float) -> tuple[LiveView, tuple[int, str] | None]:
        """The view and the rendered report once either is newer than `seq` and `report` (a version), or as they are
        after `timeout_s`."""
        with self._cond:
            self._cond.wait_for(lambda: self._view.seq > seq or self.report_version() > report, timeout_s)
            return self._view, self._report

    def report_version(self) -> int:
        """The version of the last rendered report (0: none yet)."""
        return self._report[0] if self._report is not None else 0

    def wake(self) -> None:
        """Wake every waiting reader (a report rendered, the server closing)."""
        with self._cond:
            self._cond.notify_all()

    def report(self) -> tuple[int, str] | None:
        """The last rendered report: (its version, its HTML body)."""
        return self._report

    def set_report(self, version: int, body: str) -> None:
        with self._cond:
            self._report = (version, body)
            self._cond.notify_all()

    def want(self, version: int) -> None:
        """A reader wants the report of `version` rendered (the renderer waits for this)."""
        with self._cond:
            self.wanted = max(self.wanted, version)
            self._cond.notify_all()

    def wait_for(self, ready: Callable[[], bool], timeout_s: float) -> bool:
        with self._cond:
            return self._cond.wait_for(ready, timeout_s)

    def viewing(self, delta: int) -> None:
        with self._cond:
            self.viewers += delta
            self._cond.notify_all()

    def scrape(self) -> None:
        with self._cond:
            self.scraped = True
            if self._view.ended:
                self.scraped_after_end = True
            self._cond.notify_all()
