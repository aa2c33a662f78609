"""Before each step, wait until the service is back at rest (docs/analysis.md "Settling between steps").

A step measures the service as it is when the step begins. After an overload it is not at rest: abandoned
connections still queue at its door, its workers finish work nobody waits for, its connections close, or it stays
degraded (a metastable service, a JVM in a GC spiral). `Settler.wait` waits, at most `settle_wait`, until

- none of knee's connections to the service's port is still connecting or closing, and, where the service runs on
  this machine, its listen queue is empty and it holds no connection whose client has gone (knee.machine.sockets);
- a probe — single operations of the measured group, one after another — takes no more than the baseline latency
  (the first step's, at rest) within its noise. A failed probe is not at rest.

It returns what it waited for as a `Settle` (run.json, per step). The first step has no baseline yet: only the
connections are waited for. Probes are operations the service sees: their counts are kept in `Settle.probes`.
"""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable
from typing import TYPE_CHECKING

from knee import fmt
from knee.engine import Engine, group_stats
from knee.machine.exporters_rest import Exporters
from knee.machine.sockets import Pending, packed_addresses, pending
from knee.model import GroupStats, Settle, StepResult, TargetHost
from knee.plan import PlannedStep, data_sources, engine_spec
from knee.scenario import ProcessGroup, Scenario
from knee.scenario.model import DEFAULT_SETTLE_WAIT
from knee.spec import EngineSpec, GroupSpec, Total

if TYPE_CHECKING:
    from rich.console import Console

POLL_S = 0.05  # between looks at the sockets
# connections that have not moved for this long are kept by the service (it does not close an idle connection
# whose client went, or holds one forever): waiting longer changes nothing, and the probe judges the service
STALL_S = 2.0
EXPORTERS_S = 0.5  # between scrapes of the target's machines' exporters while waiting
PROBE_GAP_S = 0.1  # between probes that found the service not at rest yet
# a probe is at rest when its latency is within the baseline's noise: at most its p99, or twice its median, and
# never less than this much over the median (a loopback operation of 0.1 ms varies by more than its own size)
SLACK_MS = 2.0
BASELINE_PROBES = 5  # single operations before the first step: the latency at rest …
BASELINE_S = 2.0  # … fewer when they take longer than this together (a command of seconds: one is enough)
BASELINE_TIMEOUT_S = 5.0  # an operation longer than this alone is not probed: the connections alone decide
SAY_S = 0.5  # a wait this long is said on the terminal even when nothing was left behind


class Settler:
    """The settling of one run's steps: the latency of a single operation at rest, and the waits."""

    def __init__(
        self,
        scenario: Scenario,
        group: str,
        target: TargetHost | None,
        most_s: float,
        stop: Callable[[], bool],
    ) -> None:
        self.scenario = scenario
        self.group = group
        self.target = target
        self.most_s = most_s
        self.stop = stop  # True once the run is interrupted: stop waiting
        self.baseline_ms: float | None = None  # how long a single operation may take at rest
        self.rest_ms: float | None = None  # a single operation's latency at rest (median)
        self.probing = True  # probe the service (a run of one step has no step after it to probe for)
        self.baselined = False  # the latency at rest was measured (or tried: no probe ended in time)
        self._addresses: tuple[bytes, ...] | None = None  # the target's, packed (knee.machine.sockets.pending)
        urls = scenario.monitor.prometheus
        self.exporters = Exporters(urls) if urls else None  # the target's machines, where they have exporters

    def before(self, planned: PlannedStep, console: Console, again: bool = False) -> Settle | None:
        """Wait for the service to be at rest before a sweep step (none before a recovery probe: it measures the
        return itself); say so on `console` when the wait found something or ran out. A level measured `again` (it
        contradicted its neighbours) is measured at rest even with the wait turned off (`settle_wait = 0`): at most
        DEFAULT_SETTLE_WAIT."""
        most = max(self.most_s, DEFAULT_SETTLE_WAIT) if again else self.most_s  # a level measured again: at rest
        if planned.phase != "sweep" or most <= 0:
            return None
        settle = self.wait(planned, most)
        waited = fmt.duration(settle.seconds)
        if not settle.settled:
            console.print(
                f"[yellow]not at rest[/] after {waited}: {settle.reason}; the step runs unsettled",
                highlight=False,
                soft_wrap=True,
            )
        elif settle.seconds >= SAY_S or settle.queued:
            console.print(f"settled in {waited}: {settle.reason}", highlight=False, soft_wrap=True, markup=False)
        return settle

    def learn(self, step: StepResult) -> None:
        """Keep the baseline of a recorded step (a resumed run goes on with the one measured at its start)."""
        if self.baseline_ms is None and step.settle is not None and step.settle.baseline_ms is not None:
            self.baseline_ms, self.rest_ms = step.settle.baseline_ms, step.settle.rest_ms
        self.baselined = self.baselined or (step.settle is not None and step.settle.probes > 0)

    def wait(self, planned: PlannedStep, most_s: float) -> Settle:
        """Wait until the service is at rest, at most `most_s`; what was there and how long it took. Before the
        first step, once the connections are at rest, the baseline: BASELINE_PROBES single operations."""
        t0 = time.monotonic()
        deadline = t0 + most_s
        first = self._pending()
        now, changed = first, t0
        while not now.clear and time.monotonic() < deadline and not self.stop():
            if time.monotonic() - changed >= STALL_S:
                break  # nothing moves: waiting longer changes nothing
            time.sleep(POLL_S)
            seen, now = now, self._pending()
            if now != seen:
                changed = time.monotonic()
        stalled = not now.clear and time.monotonic() < deadline and not self.stop()
        # still connections the service keeps without closing are rest (the probe judges it); but connections queued
        # at it were never taken: a service that stopped accepting is not at rest, however still
        kept = stalled and not now.queued
        settle = Settle(seconds=0.0, settled=now.clear or kept, pending=first.connections, queued=first.queued)
        if not settle.settled:
            settle.seconds = time.monotonic() - t0
            settle.reason = _left(now)
            if stalled:
                settle.reason += f", unchanged for {STALL_S:g} s: the service is not taking them"
            return settle
        machines = self._machines(deadline)
        if machines:
            settle.settled = False
            settle.seconds = time.monotonic() - t0
            settle.reason = f"the target's machines: {machines}"
            return settle
        note = ""  # what the probes could not judge
        if self.probing and self._probed():
            if self.baseline_ms is not None:
                note = self._rest(planned, settle, deadline)
            elif not self.baselined:
                self._baseline(planned, settle, deadline)
        settle.seconds = time.monotonic() - t0
        if settle.settled:
            settle.reason = _found(first, settle)
            if note:
                settle.reason += f"; {note}"
            if stalled:
                settle.reason += f"; {_left(now)} unchanged for {STALL_S:g} s (the service keeps them open)"
        return settle

    def _baseline(self, planned: PlannedStep, settle: Settle, deadline: float) -> None:
        """A single operation's latency at rest, from BASELINE_PROBES of them one after another: a probe is at rest
        when it takes no more than twice their median, their slowest, or their median plus SLACK_MS, whichever is
        most."""
        took: list[float] = []
        self.baselined = True  # once: a service whose single operation never ended in time is not probed again
        t0 = time.monotonic()
        for _ in range(BASELINE_PROBES):
            if self.stop() or time.monotonic() >= deadline or (took and time.monotonic() - t0 >= BASELINE_S):
                break
            g = self._probe(planned, min(deadline - time.monotonic(), BASELINE_TIMEOUT_S))
            settle.probes += 1
            settle.probe_failed += g.failed + g.hung
            if g.succeeded:
                took.append(_service_ms(g))
            elif g.hung or _load_side(g):
                break  # longer than a quick look, or the load machine could not start it: no probing
        if took:
            rest = statistics.median(took)
            self.rest_ms, self.baseline_ms = rest, max(2 * rest, *took, rest + SLACK_MS)
            settle.rest_ms, settle.baseline_ms = self.rest_ms, self.baseline_ms

    def _rest(self, planned: PlannedStep, settle: Settle, deadline: float) -> str:
        """Probe until one operation alone takes no more than the baseline; not at rest when none did in time. The
        reason is the last probe given its whole timeout (one cut short by the wait's end proves nothing). Returns what
        it could not judge ("" normally)."""
        settle.rest_ms, settle.baseline_ms = self.rest_ms, self.baseline_ms
        said: tuple[GroupStats, float] | None = None
        while not self.stop():
            left = deadline - time.monotonic()
            g = self._probe(planned, left)
            settle.probes += 1
            settle.probe_failed += g.failed + g.hung
            took = _service_ms(g)
            if g.succeeded and took <= (self.baseline_ms or 0.0):
                settle.probe_ms = took
                return ""
            if _load_side(g):  # the load machine, not the service, stopped the probe (no port, no descriptor)
                return f"no probe could start on the load machine ({_why(g)}): the connections alone decided"
            # a probe the wait's end cut short before an operation at rest would have ended proves nothing
            cut = bool(g.hung) and left * 1000 < (self.baseline_ms or 0.0)
            if not cut and (said is None or not g.hung or left >= self._timeout_s()):
                said = (g, took)
            if time.monotonic() + PROBE_GAP_S >= deadline:
                if said is None:
                    return "the only probe was cut short by the wait's end: the connections alone decided"
                settle.settled = False
                settle.probe_ms = said[1]
                settle.reason = _slow(said[0], settle)
                return ""
            time.sleep(PROBE_GAP_S)
        return ""

    def _timeout_s(self) -> float:
        return self.scenario.groups[self.group].timeout

    def _machines(self, deadline: float) -> str:
        """Wait until the target's machines' exporters say they are at rest ([monitor] prometheus); what they still
        said when the wait ran out ("" when at rest). Before the first step: what at rest is."""
        if self.exporters is None:
            return ""
        if not self.exporters.rest:
            self.exporters.learn()
            return ""
        left = self.exporters.left()
        while left and time.monotonic() + EXPORTERS_S < deadline and not self.stop():
            time.sleep(EXPORTERS_S)
            left = self.exporters.left()
        return left

    def _pending(self) -> Pending:
        if self.target is None:
            return Pending(0, 0, 0)
        if self._addresses is None:  # resolved once: the census runs every 50 ms
            self._addresses = packed_addresses(self.target.host, self.target.port)
        return pending(self.target.port, self.target.local, self._addresses)

    def _probed(self) -> bool:
        """Probes run for the groups whose operation is cheap to start alone (not a worker program's processes), and
        not where rows are used once (a queue or shuffle of [[data]]): a probe would send a row the steps send too."""
        g = self.scenario.groups.get(self.group)
        once = any(d.runs_out for d in self.scenario.data)
        return g is not None and not isinstance(g, ProcessGroup) and not once

    def _probe(self, planned: PlannedStep, left_s: float) -> GroupStats:
        """One operation of the measured group as the step runs it (its stage filled in, its TLS files read), alone:
        one client, one operation, no think time; its outcome."""
        g = self.scenario.groups[self.group]
        timeout_s = max(0.05, min(g.timeout, left_s))
        measured = next(x for x in engine_spec(self.scenario, planned).groups if x.name == self.group)
        one = GroupSpec(
            name=self.group, clients=1, stop=Total(total=1), timeout_ms=max(1, round(timeout_s * 1000)),
            client=measured.client,
        )  # fmt: skip
        data = data_sources(self.scenario, {})
        spec = EngineSpec(threads=1, interval_ms=1000, seed=self.scenario.seed, data=data, groups=[one])
        engine = Engine(spec).start()
        while not engine.wait(0.1):
            if self.stop():
                engine.stop()
        return group_stats(engine.result())[self.group]


def _service_ms(g: GroupStats) -> float:
    """A probe's time in the service: its latency less the connection's opening (the steps' clients keep theirs)."""
    lat = g.latency_ms if g.latency_ms.count else g.failed_latency_ms
    return max(0.0, lat.mean - g.connect_ms.mean - g.tls_ms.mean)


def _left(p: Pending) -> str:
    """What was still there, in words: '61 connections were still queued at the service'."""
    parts = []
    if p.queued:
        parts.append(f"{p.queued:,} {_were(p.queued, 'connection')} still queued at the service")
    held = max(0, p.held - p.queued)
    if held:
        parts.append(f"{held:,} {_were(held, 'connection')} still held by the service after their clients went")
    if p.connections:
        parts.append(f"{p.connections:,} of knee's {_were(p.connections, 'connection')} still closing or connecting")
    return ", ".join(parts) or "nothing left"


def _were(n: int, noun: str) -> str:
    return f"{noun}s were" if n != 1 else f"{noun} was"


# a probe that failed for these reasons failed on the load machine: it says nothing of the service
_LOAD_SIDE = ("Cannot assign requested address", "Too many open files", "Address already in use")


def _why(g: GroupStats) -> str:
    return g.reasons[0].sample if g.reasons else ("no answer in time: hung" if g.hung else "failed")


def _load_side(g: GroupStats) -> bool:
    return not g.succeeded and any(m in r.sample for r in g.reasons for m in _LOAD_SIDE)


def _slow(g: GroupStats, s: Settle) -> str:
    if not g.succeeded:
        return f"a single operation still failed ({_why(g)})"
    return f"a single operation still took {fmt.ms(s.probe_ms or 0.0)}, against {fmt.ms(s.rest_ms or 0.0)} at rest"


def _found(first: Pending, s: Settle) -> str:
    """What the wait found before the service was at rest: what the last step left, slow probes, or nothing."""
    if not first.clear:
        return _left(first)
    if s.probe_ms is not None and s.probes > 1:
        slow = s.probes - 1
        return f"{slow} single operation{'s' * (slow > 1)} slower than at rest ({fmt.ms(s.rest_ms or 0.0)}) first"
    return "at rest"
