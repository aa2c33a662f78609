"""Pool a sweep's steps into one row per level (and direction) for one group.

A level measured more than once in the same direction (a repeated step, a resumed
run) is pooled: counts and measured seconds add up, so its rate is still
successful operations ÷ measured seconds. Open-loop steps (a rate sweep's measured
group) also pool what was offered, late and dropped.

A step that ended with operations in flight is judged after its first operation latency (`window`,
docs/analysis.md "Operations long against the step"): until one latency has passed, operations have started but
few could end, so counting the step's first seconds would charge a slow service for work still in flight.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from knee import fmt
from knee.analysis.steady import intervals
from knee.model import DataUse, GroupStats, LevelUnit, Outcomes, StepResult

# DESIGN.md: collapse = past the peak, rate below half the peak's or failure ratio over 50 %.
COLLAPSE_RATE = 0.5
COLLAPSE_FAILURES = 0.5
# docs/analysis.md: an open loop is saturated when it fell this short of the offered rate, or started this share
# of its arrivals late, or dropped this share.
SATURATION_SHORTFALL = 0.05
SATURATION_LATE = 0.05  # above timer and scheduling jitter on a busy load machine
SATURATION_DROPPED = 0.01
# docs/analysis.md: the ramp of a step's first operation latency is cut from its rate, in whole intervals; a ramp
# under this share of an interval is left in (a 50 ms operation biases a 10 s step's rate by 0.5 %)
RAMP_SLACK = 0.05
# a step shorter than this many operation latencies gets a warning: its rate rests on few operations per client
FEW_LATENCIES = 5
# whole intervals a cut must leave: fewer, and an interval could not be told from the ones after it (`_queued`)
KEPT_INTERVALS = 2


@dataclass(frozen=True)
class Window:
    """What one step's rate is judged on: its measured seconds after `cut_s`, and what ended in them."""

    cut_s: float  # seconds cut from the start: the first operation latency (or a settled step's warm-up cut)
    seconds: float
    succeeded: float
    failed: float
    hung: float
    latency_s: float  # the operation latency the cut is made by (the mean time in the service)

    @property
    def rate(self) -> float:
        """Successful operations per judged second: the step's rate in the report, and on the progress line."""
        return self.succeeded / self.seconds if self.seconds > 0 else 0.0


def latency_s(g: GroupStats) -> float:
    """A group's operation latency: its mean time in the service (an open loop's counted from the actual start)."""
    o = g.open_loop
    lat = o.latency_uncorrected_ms if o is not None and o.latency_uncorrected_ms.count else g.latency_ms
    return lat.mean / 1000.0


def ran_out(s: StepResult, g: GroupStats) -> DataUse | None:
    """The data source whose running out ended group `g`'s part of step `s` (`on_exhausted = "stop"`), as the step
    recorded its use; None when none did (or the step did not record the source's use)."""
    if g.ran_out is None:
        return None
    recorded = next((d for d in s.data if d.name == g.ran_out), None)
    return recorded or DataUse(name=g.ran_out, rows=0, available=0, taken=0)


def measured_s(s: StepResult, g: GroupStats) -> float:
    """The seconds group `g` measured in step `s`: its elapsed seconds, or, when a data source ran out and ended it,
    the seconds until it ran out (after the warm-up). The engine counts a duration step's whole window as its
    elapsed time even when the group stopped early, and a rate over seconds in which nothing could start would call
    the step's end a collapse; its operations in flight when the rows ran out end after it, as many as were in
    flight at its start (none had ended), so successes over these seconds are the rate the service kept."""
    d = ran_out(s, g)
    if d is None or d.exhausted_after_s is None:
        return g.elapsed_s
    return max(0.0, min(g.elapsed_s, d.exhausted_after_s - _warmup_s(s, g.name)))


def ran_out_early(s: StepResult, group: str) -> bool:
    """Group `group`'s data ran out before any operation ended (none left: earlier steps used every row, and the
    first take ran out): its step has no rate to judge, and the analysis leaves it out."""
    g = s.groups.get(group)
    if g is None or g.ran_out is None:
        return False
    return g.total == 0 or measured_s(s, g) <= 0


def cut_short(s: StepResult, group: str) -> bool:
    """Step `s` ended early (Ctrl-C, a search's abort) before group `group` measured past its first operation
    latency and KEPT_INTERVALS intervals (none of its operations ended, or its window could not cut its empty
    start): its rate is its start's, not the service's (0 Hz, "a collapse"), and the analysis leaves it out."""
    g = s.groups.get(group)
    if g is None or not s.partial or g.ran_out is not None:
        return False
    if g.total == 0:
        return g.abandoned > 0
    return g.interval_s > 0 and g.elapsed_s < latency_s(g) + KEPT_INTERVALS * g.interval_s


def window(s: StepResult, g: GroupStats) -> Window:
    """The part of step `s` that group `g`'s rate is judged on (docs/analysis.md).

    A step that ended with operations in flight (abandoned) is cut by its first operation latency, less the
    warm-up already run, rounded up to whole intervals of its series: in a window that starts empty, arrivals (or
    clients) begin at once but nothing can end before one latency has passed, so the completions of the whole
    window fall short of the rate the service kept by latency ÷ step, and the operations in flight at the end
    are the ones whose completions are missing. After the cut, completions come at the service's rate, and the
    operations in flight at the window's two ends balance. The cut must leave KEPT_INTERVALS whole intervals
    (else the whole step: too short to judge); what ended after it, the last partial interval included, over the
    seconds after it. A step run until settled (duration = "auto") is cut at least by its warm-up cut
    (StepResult.steady), over whole intervals. A step whose data ran out is judged whole, over the seconds until it
    ran out (`measured_s`). Otherwise: the whole step."""
    lat = latency_s(g)
    if g.ran_out is not None:
        return Window(0.0, measured_s(s, g), g.succeeded, g.failed, g.hung, lat)
    st = s.steady if s.steady is not None and s.steady.group == g.name and s.steady.auto else None
    whole = Window(0.0, g.elapsed_s, g.succeeded, g.failed, g.hung, lat)
    dt = g.interval_s
    ok = intervals(g)
    if dt <= 0 or not ok:
        return whole
    ramp = max(0.0, lat - _warmup_s(s, g.name)) if g.abandoned else 0.0
    cut = max(0, math.ceil(ramp / dt - RAMP_SLACK))
    failed = intervals(g, lambda p: p.failed)
    hung = intervals(g, lambda p: p.hung)
    if st is not None:  # its rate is the one after the warm-up cut, over whole intervals (StepResult.steady)
        cut = min(max(cut, round(st.cut_s / dt)), len(ok) - 1)
        kept = len(ok) - cut
        return Window(cut * dt, kept * dt, sum(ok[cut:]), sum(failed[cut:]), sum(hung[cut:]), lat)
    if cut == 0 or cut + KEPT_INTERVALS > len(ok):
        return whole  # nothing to cut, or too short to judge after the cut (a short step is warned of)
    cut = _queued(cut, [a + b + c for a, b, c in zip(ok, failed, hung, strict=True)])
    after = [p for p in g.series if round(p.t / dt) >= cut]  # the last, partial interval included
    return Window(
        cut * dt,
        g.elapsed_s - cut * dt,
        sum(p.succeeded for p in after),
        sum(p.failed for p in after),
        sum(p.hung for p in after),
        lat,
    )


def _queued(cut: int, ended: list[float]) -> int:
    """The cut, moved earlier to the first interval whose completions already reach the mean of the intervals
    after it: in a queue (a saturated service, a closed loop past its pool) the mean latency includes the wait, but
    completions come at the service's rate from the first service time on."""
    for i in range(min(cut, len(ended) - 1)):
        if ended[i] > 0 and ended[i] >= sum(ended[i + 1 :]) / len(ended[i + 1 :]):
            return i
    return cut


def _warmup_s(s: StepResult, group: str) -> float:
    """The warm-up group `group` ran before step `s`'s window (from the engine spec it ran; 0 when unknown)."""
    for g in (s.spec or {}).get("groups", []):
        if isinstance(g, dict) and g.get("name") == group:
            return float(g.get("warmup_ms") or 0) / 1000.0
    return 0.0


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
    ran_out: str = ""  # the data source whose running out ended a pooled step ("": none did)
    open_loop: bool = False  # the group was paced by an arrival rate
    offered: int = 0
    late: int = 0
    lagged: int = 0  # of the late, those issued with a client free: the load side lagged
    dropped: int = 0
    uncorrected_count: int = 0
    uncorrected_sum_ms: float = 0.0  # latency from the actual start (time in the service), mean × count
    p99_uncorrected_ms: float = 0.0
    steps: int = 0
    # what the rates are judged on (`window`): every measured second, except a step's first operation latency when
    # it ended with operations in flight, and a step run until settled (duration = "auto") after its warm-up cut
    rate_succeeded: float = 0.0
    rate_failed: float = 0.0
    rate_hung: float = 0.0
    rate_s: float = 0.0
    # of the pooled steps that ended with operations in flight: the longest operation latency (`window`) and the
    # shortest step's measured seconds
    latency_s: float = 0.0
    step_s: float = 0.0
    half_width_hz: float | None = None  # the rate's 95 % interval half-width (the steps' best), when known
    cut_s: float = 0.0  # warm-up cut from the rate, over the pooled steps
    # open loop: the operations still in service when a window judged from the step's start closed, beyond those at
    # its start (`in_flight`: Little's law), summed over the pooled steps
    in_flight: float = 0.0

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
        counting = 1.96 * math.sqrt(self.rate_succeeded) / self.rate_s if self.rate_s > 0 else 0.0
        if self.half_width_hz is not None:
            return min(self.half_width_hz, counting)
        return counting

    @property
    def completion_rate(self) -> float:
        """All completed operations (succeeded + failed) per judged second (`window`)."""
        return (self.rate_succeeded + self.rate_failed) / self.rate_s if self.rate_s > 0 else 0.0

    @property
    def short(self) -> bool:
        """A step shorter than FEW_LATENCIES operation latencies: its rate rests on few operations per client."""
        return self.latency_s > 0 and self.step_s < FEW_LATENCIES * self.latency_s

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
        """Every completed operation (succeeded, failed, hung) per judged second (`window`: after the first
        operation latency when operations were in flight at the end)."""
        return (self.rate_succeeded + self.rate_failed + self.rate_hung) / self.rate_s if self.rate_s > 0 else 0.0

    @property
    def short_hz(self) -> float:
        """Open loop: how far the achieved rate fell short of the offered one (per judged second), beyond the
        operations still in flight at the end of a window judged from the step's start (`in_flight`): a window cut
        after its first operation latency has as many in flight at both ends (`window`); one judged whole started
        empty and ended holding about achieved × latency of them (Little's law), as a service that keeps up does."""
        if self.rate_s <= 0 or self.offered <= 0:
            return 0.0
        return max(0.0, self.offered_rate - self.achieved_rate - self.in_flight / self.rate_s)

    @property
    def shortfall(self) -> float:
        """Open loop: `short_hz` as a share of the offered rate (0 when nothing was offered)."""
        offered = self.offered_rate
        return self.short_hz / offered if offered > 0 else 0.0

    @property
    def achieved_noise_hz(self) -> float:
        """Open loop: the achieved rate's 95 % half-width, as `noise_hz` is the rate's: the counting noise of the
        completions judged (1.96 √n over their seconds), or the steps' batch-means interval when narrower."""
        if self.rate_s <= 0:
            return 0.0
        counting = 1.96 * math.sqrt(self.rate_succeeded + self.rate_failed + self.rate_hung) / self.rate_s
        return min(self.half_width_hz, counting) if self.half_width_hz is not None else counting

    @property
    def concurrency(self) -> float:
        """Open loop: the mean number of operations in the service, by Little's law (achieved × time in service)."""
        mean_s = self.uncorrected_sum_ms / self.uncorrected_count / 1000.0 if self.uncorrected_count else 0.0
        return self.achieved_rate * mean_s


def sweep_steps(steps: Sequence[StepResult], group: str, every: bool = False) -> list[StepResult]:
    """The sweep steps (not recovery probes) that measured `group`, in order: those the analysis believes (not
    superseded by a measurement again, not run on a service that had not come back to rest or with a worker lost,
    not ended by data that ran out before a whole interval: `ran_out_early`, not cut short before its first
    operations ended: `cut_short`), or `every` one."""
    return sorted(
        (
            s
            for s in steps
            if s.phase == "sweep"
            and group in s.groups
            and (every or (s.believed and not ran_out_early(s, group) and not cut_short(s, group)))
        ),
        key=lambda s: s.index,
    )


def pool(steps: Sequence[StepResult], group: str, direction: str, every: bool = False) -> list[LevelRow]:
    """One row per level (ascending) for the sweep steps of `direction` that measured `group` (`sweep_steps`)."""
    rows: dict[int | float, LevelRow] = {}
    for s in sweep_steps(steps, group, every):
        if s.direction != direction:
            continue
        g = s.groups[group]
        r = rows.setdefault(s.level, LevelRow(level=s.level, direction=direction))
        r.clients = max(r.clients, g.clients)
        r.add(g)
        r.elapsed_s += measured_s(s, g)
        r.latency_count += g.latency_ms.count
        r.latency_sum_ms += g.latency_ms.mean * g.latency_ms.count
        r.p99_ms = max(r.p99_ms, g.latency_ms.p99)
        r.failed_latency_count += g.failed_latency_ms.count
        r.failed_latency_sum_ms += g.failed_latency_ms.mean * g.failed_latency_ms.count
        r.partial = r.partial or s.partial
        r.ran_out = r.ran_out or (g.ran_out or "")
        w = window(s, g)
        r.rate_succeeded += w.succeeded
        r.rate_failed += w.failed
        r.rate_hung += w.hung
        r.rate_s += w.seconds
        r.cut_s += w.cut_s
        if g.abandoned and w.latency_s > 0:  # a step that ended with operations in flight: is it long against them?
            r.step_s = min(r.step_s, g.elapsed_s) if r.latency_s else g.elapsed_s
            r.latency_s = max(r.latency_s, w.latency_s)
        st = s.steady if s.steady is not None and s.steady.group == group else None
        if st is not None and st.half_width_hz is not None:
            r.half_width_hz = min(r.half_width_hz or st.half_width_hz, st.half_width_hz)
        if g.open_loop is not None:
            o = g.open_loop
            r.open_loop = True
            r.offered += o.offered
            r.late += o.late
            r.lagged += o.lagged
            r.dropped += o.dropped
            r.uncorrected_count += o.latency_uncorrected_ms.count
            r.uncorrected_sum_ms += o.latency_uncorrected_ms.mean * o.latency_uncorrected_ms.count
            r.p99_uncorrected_ms = max(r.p99_uncorrected_ms, o.latency_uncorrected_ms.p99)
            r.in_flight += in_flight(s, g, w)
        r.steps += 1
    return [rows[k] for k in sorted(rows)]


def failed_or_hung(row: LevelRow, pct: Callable[[float], str]) -> str:
    """The failure ratio in words, never calling a hung operation failed: '3.1 % failed or hung: 120 failed,
    4 hung', with `pct` the formatter of a share."""
    return f"{pct(row.failure_ratio)} failed or hung: {row.failed:,} failed, {row.hung:,} hung"


def collapse(
    row: LevelRow, peak: LevelRow, say: Callable[[float], str], pct: Callable[[float], str], peak_name: str = "the peak"
) -> str | None:
    """Why `row` is a collapse past `peak` (the reason in words, via the formatters `say` for a rate and
    `pct` for a share, `peak_name` what the words call `peak`), or None when it is not one. The one definition the
    sweep's stop rule and the verdict share."""
    if row.level <= peak.level:
        return None
    if row.failure_ratio > COLLAPSE_FAILURES:
        return failed_or_hung(row, pct)
    if peak.rate > 0 and row.rate < COLLAPSE_RATE * peak.rate:
        return f"{say(row.rate)}, {pct(row.rate / peak.rate)} of {peak_name}"
    return None


def in_flight(s: StepResult, g: GroupStats, w: Window) -> float:
    """Open loop: the operations window `w` of group `g` still held when it closed, beyond those it held when it
    opened, for a window judged from the step's start (it started empty, less the warm-up run before it): by
    Little's law, the achieved rate × the operation latency not covered by the warm-up, never more than were in
    flight (abandoned). 0 for a window cut after its first latency, whose in-flight operations balance at its
    ends."""
    if g.open_loop is None or w.cut_s > 0 or w.seconds <= 0:
        return 0.0
    ramp = max(0.0, w.latency_s - _warmup_s(s, g.name))
    return min(float(g.abandoned), (w.succeeded + w.failed + w.hung) / w.seconds * ramp)


def _short_beyond_noise(row: LevelRow) -> bool:
    """The shortfall (beyond the operations in flight) is larger than the achieved count's noise."""
    return row.short_hz > row.achieved_noise_hz


def saturated(row: LevelRow) -> bool:
    """An open loop that did not keep up with what it offered (docs/analysis.md: the saturation definition): the
    achieved rate fell more than SATURATION_SHORTFALL short of the offered one beyond the operations in flight and
    beyond its count's noise, or too many arrivals started late or were dropped. The one definition the search and
    the verdict share."""
    if not row.open_loop or row.offered <= 0:
        return False
    return (
        (row.shortfall > SATURATION_SHORTFALL and _short_beyond_noise(row))
        or (row.late - row.lagged) / row.offered > SATURATION_LATE
        or row.dropped / row.offered > SATURATION_DROPPED
    )


def lag_warnings(rows: Sequence[LevelRow]) -> list[str]:
    """Open-loop levels where more than SATURATION_LATE of the arrivals started late while a client was free for them:
    knee's own scheduling lagged (its CPU, its timer), which the saturation does not count against the service."""
    lagged = [r for r in rows if r.open_loop and r.offered and r.lagged / r.offered > SATURATION_LATE]
    return [
        f"at {fmt.load(r.level, 'rate')} {fmt.pct(r.lagged / r.offered)} of the arrivals started more than 10 ms late "
        "while a client was free for them: knee's own scheduling lagged (its CPU or its timer), not the service; "
        "they do not count towards its saturation, but its latency at this level includes the lag (a busy load "
        "machine: give knee a core of its own, or spread the load)"
        for r in lagged[:1]
    ]


def too_short_to_tell(row: LevelRow) -> bool:
    """An open loop that fell more than SATURATION_SHORTFALL short (beyond the operations in flight), but within
    its count's noise: not called saturated, and its step was too short to tell (the verdict warns of it)."""
    return row.open_loop and not saturated(row) and row.shortfall > SATURATION_SHORTFALL


def seconds_to_tell(row: LevelRow) -> float:
    """How long a step at `row`'s level would have to count for a shortfall as large as `row`'s to exceed the
    counting noise of its completions (1.96 √(achieved × T) < short × T)."""
    short = row.short_hz
    return 1.96**2 * row.achieved_rate / short**2 if short > 0 else math.inf


def partial_warnings(steps: Sequence[StepResult], group: str, unit: LevelUnit) -> list[str]:
    """One sentence per sweep step of `group` that ended early (partial): a lost worker's and one `cut_short` are
    left out, another covers fewer seconds than planned."""
    out = []
    for s in sweep_steps(steps, group, every=True):
        if not s.partial or s.superseded or s.unsettled:
            continue
        at = f"the step at {fmt.load(s.level, 'rate') if unit == 'rate' else f'level {s.level}'}"
        seconds = s.groups[group].elapsed_s
        if s.lost_workers:
            out.append(f"{at} lost {', '.join(s.lost_workers)} (partial): fewer clients than its level, left out")
        elif cut_short(s, group):
            out.append(
                f"{at} was cut short (partial) after {seconds:.1f} s, before its first operations ended: left out"
            )
        else:
            out.append(f"{at} was cut short (partial): its numbers cover only {seconds:.1f} s")
    return out
