"""Pool a sweep's steps into one row per level (and direction) for one group.

A level measured more than once in the same direction (a repeated step, a resumed
run) is pooled: counts and measured seconds add up, so its rate is still
successful operations ÷ measured seconds. Open-loop steps (a rate sweep's measured
group) also pool what was offered, late and dropped.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence

from knee.model import Outcomes, StepResult

# DESIGN.md: collapse = past the peak, rate below half the peak's or failure ratio over 50 %.
COLLAPSE_RATE = 0.5
COLLAPSE_FAILURES = 0.5
# docs/analysis.md: an open loop is saturated when it fell this short of the offered rate, or started this share
# of its arrivals late, or dropped this share.
SATURATION_SHORTFALL = 0.05
SATURATION_LATE = 0.05  # above timer and scheduling jitter on a busy load machine
SATURATION_DROPPED = 0.01


class LevelRow(Outcomes):
    """One group at one level in one direction, pooled over its steps (counts from `Outcomes`)."""

    level: int | float  # clients, or the offered rate of a rate sweep
    direction: str
    clients: int = 0
    elapsed_s: float = 0.0
    latency_count: int = 0  # succeeded operations' latency (a report's latency)
    latency_sum_ms: float = 0.0  # mean × count, to pool means
    failed_latency_count: int = 0  # failed operations' latency, apart (Little's law counts both)
    failed_latency_sum_ms: float = 0.0
    p99_ms: float = 0.0  # the worst p99 of the pooled steps (percentiles do not add up)
    partial: bool = False
    open_loop: bool = False  # the group was paced by an arrival rate
    offered: int = 0
    late: int = 0
    dropped: int = 0
    in_service_end: float = 0.0  # operations in service when the windows closed, by Little's law (achieved × W)
    uncorrected_count: int = 0
    uncorrected_sum_ms: float = 0.0  # latency from the actual start (time in the service), mean × count
    p99_uncorrected_ms: float = 0.0
    steps: int = 0
    # what the rate is judged on: every measured second, except that a step run until settled (duration = "auto")
    # counts only its seconds after the warm-up cut (StepResult.steady)
    rate_succeeded: float = 0.0
    rate_s: float = 0.0
    half_width_hz: float | None = None  # the rate's 95 % interval half-width (the steps' best), when known
    cut_s: float = 0.0  # warm-up cut from the rate, over the pooled steps

    @property
    def rate(self) -> float:
        """Successful operations per measured second (after the warm-up cut of a level run until settled)."""
        if self.rate_s > 0:
            return self.rate_succeeded / self.rate_s
        return self.succeeded / self.elapsed_s if self.elapsed_s > 0 else 0.0

    @property
    def noise_hz(self) -> float:
        """The rate's 95 % half-width: the counting noise of its successes (1.96 √n over the measured seconds, as
        for a Poisson count), or its batch-means interval over the steps' intervals when that is narrower (a
        closed loop is steadier than a Poisson count; a few lumpy intervals are noisier than it)."""
        counting = 1.96 * math.sqrt(self.succeeded) / self.elapsed_s if self.elapsed_s > 0 else 0.0
        if self.half_width_hz is not None:
            return min(self.half_width_hz, counting)
        return counting

    @property
    def completion_rate(self) -> float:
        """All completed operations (succeeded + failed) per measured second."""
        return (self.succeeded + self.failed) / self.elapsed_s if self.elapsed_s > 0 else 0.0

    @property
    def mean_latency_ms(self) -> float:
        """The succeeded operations' mean latency."""
        return self.latency_sum_ms / self.latency_count if self.latency_count else 0.0

    @property
    def mean_completed_latency_ms(self) -> float:
        """Every completed operation's mean latency, succeeded and failed (what Little's law holds)."""
        n = self.latency_count + self.failed_latency_count
        return (self.latency_sum_ms + self.failed_latency_sum_ms) / n if n else 0.0

    @property
    def offered_rate(self) -> float:
        return self.offered / self.elapsed_s if self.elapsed_s > 0 else 0.0

    @property
    def achieved_rate(self) -> float:
        """Every completed operation (succeeded, failed, hung) per measured second."""
        return self.total / self.elapsed_s if self.elapsed_s > 0 else 0.0

    @property
    def shortfall(self) -> float:
        """Open loop: the share of arrivals that neither completed nor were still in service when the window
        closed (queued, dropped or lost); 0 when nothing was offered. Arrivals in service at the close are
        abandoned by the engine, so Little's law (achieved × time in service) allows for them."""
        if self.offered <= 0:
            return 0.0
        return max(0.0, 1.0 - (self.total + self.in_service_end) / self.offered)

    @property
    def concurrency(self) -> float:
        """Open loop: the mean number of operations in the service, by Little's law (achieved × time in service)."""
        mean_s = self.uncorrected_sum_ms / self.uncorrected_count / 1000.0 if self.uncorrected_count else 0.0
        return self.achieved_rate * mean_s


def sweep_steps(steps: Sequence[StepResult], group: str) -> list[StepResult]:
    """The sweep steps (not recovery probes) that measured `group`, in order."""
    return sorted((s for s in steps if s.phase == "sweep" and group in s.groups), key=lambda s: s.index)


def pool(steps: Sequence[StepResult], group: str, direction: str) -> list[LevelRow]:
    """One row per level (ascending) for the sweep steps of `direction` that measured `group`."""
    rows: dict[int | float, LevelRow] = {}
    for s in sweep_steps(steps, group):
        if s.direction != direction:
            continue
        g = s.groups[group]
        r = rows.setdefault(s.level, LevelRow(level=s.level, direction=direction))
        r.clients = max(r.clients, g.clients)
        r.add(g)
        r.elapsed_s += g.elapsed_s
        r.latency_count += g.latency_ms.count
        r.latency_sum_ms += g.latency_ms.mean * g.latency_ms.count
        r.p99_ms = max(r.p99_ms, g.latency_ms.p99)
        r.failed_latency_count += g.failed_latency_ms.count
        r.failed_latency_sum_ms += g.failed_latency_ms.mean * g.failed_latency_ms.count
        r.partial = r.partial or s.partial
        st = s.steady if s.steady is not None and s.steady.group == group else None
        if st is not None and st.auto and st.kept_s > 0:
            r.rate_succeeded += st.rate_hz * st.kept_s
            r.rate_s += st.kept_s
            r.cut_s += st.cut_s
        else:
            r.rate_succeeded += g.succeeded
            r.rate_s += g.elapsed_s
        if st is not None and st.half_width_hz is not None:
            r.half_width_hz = min(r.half_width_hz or st.half_width_hz, st.half_width_hz)
        if g.open_loop is not None:
            o = g.open_loop
            r.open_loop = True
            r.offered += o.offered
            r.late += o.late
            r.dropped += o.dropped
            # by Little's law per outcome: the successes' time in service (hung ones' taken as theirs), the failures'
            in_service_ms = (g.succeeded + g.hung) * o.latency_uncorrected_ms.mean + g.failed * g.failed_latency_ms.mean
            r.in_service_end += in_service_ms / g.elapsed_s / 1000.0 if g.elapsed_s > 0 else 0.0
            r.uncorrected_count += o.latency_uncorrected_ms.count
            r.uncorrected_sum_ms += o.latency_uncorrected_ms.mean * o.latency_uncorrected_ms.count
            r.p99_uncorrected_ms = max(r.p99_uncorrected_ms, o.latency_uncorrected_ms.p99)
        r.steps += 1
    return [rows[k] for k in sorted(rows)]


def failed_or_hung(row: LevelRow, pct: Callable[[float], str]) -> str:
    """The failure ratio in words, never calling a hung operation failed: '3.1 % failed or hung: 120 failed,
    4 hung', with `pct` the formatter of a share."""
    return f"{pct(row.failure_ratio)} failed or hung: {row.failed:,} failed, {row.hung:,} hung"


def collapse(row: LevelRow, peak: LevelRow, say: Callable[[float], str], pct: Callable[[float], str]) -> str | None:
    """Why `row` is a collapse past `peak` (the reason in words, via the formatters `say` for a rate and
    `pct` for a share), or None when it is not one. The one definition the sweep's stop rule and the
    verdict share."""
    if row.level <= peak.level:
        return None
    if row.failure_ratio > COLLAPSE_FAILURES:
        return failed_or_hung(row, pct)
    if peak.rate > 0 and row.rate < COLLAPSE_RATE * peak.rate:
        return f"{say(row.rate)}, {pct(row.rate / peak.rate)} of the peak"
    return None


def saturated(row: LevelRow) -> bool:
    """An open loop that did not keep up with what it offered (docs/analysis.md: the saturation definition)."""
    if not row.open_loop or row.offered <= 0:
        return False
    return (
        row.shortfall > SATURATION_SHORTFALL
        or row.late / row.offered > SATURATION_LATE
        or row.dropped / row.offered > SATURATION_DROPPED
    )
