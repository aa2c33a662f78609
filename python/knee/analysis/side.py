"""Which side held the clients at each level: the load side, or the service's door — by the evidence only.

A rule that names a limit (the curve's shape, Little's-law gaps, the findings) reads it here, so that they
all tell one story (docs/analysis.md, "Which side held the clients"):

- the load side, only with load-side evidence: knee and its child processes saturated the cores they may
  run on (`StepResult.generator.saturated`), the load machine's ephemeral ports ran out, or connects were
  never sent (the client could not open a socket or bind a port: too many open files, no address);
- the service's door (its connection limit or accept queue), when clients waited in connect: operations
  hung or connects timed out or were slow (a SYN sent again waits a second), with the connect phase
  visible: connects unanswered (sockets in SYN_SENT on the load machine), SYNs sent again, and on a target
  that runs on the load machine SYNs dropped by its full listen queue or connections waiting in its accept
  queue (the socket census), or the monitored target's full accept queue.
A level with neither names no side.

Clients whose operations fail at once and start again without a pause spin (`spin`): they keep the load side
busy re-running failures, and that busy CPU is no limit of the load side's own; the service's refusals are
the limit. A level where the group spun counts knee's saturated CPU as the spinning's, not as load-side evidence.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass, field

from knee import fmt
from knee.analysis.levels import sweep_steps
from knee.model import GeneratorStats, Level, StepResult, TargetHost

PORTS_SHARE = 0.5  # ports held over this share of the ephemeral range: the client host is the limit
SLOW_CONNECT_MS = 900.0  # a connect this slow waited for a SYN sent again (the first retransmit is after 1 s)
# What a client says when its connect was never sent: no descriptor, no local address or port
NEVER_SENT = re.compile(
    r"too many open files|emfile|enfile|cannot assign requested address|eaddrnotavail|address not available", re.I
)
NEVER_SENT_CLASSES = ("connect_error", "spawn")
SPIN_RATIO = 10.0  # failing clients spin: failures came at least 10 times as fast as successes …
SPIN_MS = 100.0  # … and each took at most 100 ms on average (a failing client went round 10 times a second or more)


@dataclass(frozen=True)
class Spin:
    """A closed-loop group whose failing clients spun over a step: their operations failed at once and started
    again without a pause."""

    failed_hz: float  # failures per measured second
    succeeded_hz: float
    each_ms: float  # the most a failure (with any pause after it) can have taken on average

    def words(self) -> str:
        """'failures at 1,234 Hz against successes at 4.00 Hz, each failure 2.10 ms at most on average'."""
        return (
            f"failures at {fmt.rate(self.failed_hz)} against successes at {fmt.rate(self.succeeded_hz)}, each failure "
            f"{fmt.ms(self.each_ms)} at most on average"
        )


def spin(s: StepResult, group: str) -> Spin | None:
    """Group `group`'s failing clients spun over step `s`: its failures came SPIN_RATIO times as fast as its
    successes, each took at most SPIN_MS on average, and less than half of that was the pause the clients were
    given after a failure (think time and think time on failure, from the engine spec the step ran). What a
    failure took is bounded by the clients' time (clients × measured seconds) less the successes' (their count ×
    the mean latency and think time), shared among the failures, its pause included: clients that spend most of
    a round in their pause are paced by it, not spinning (3 clients failing at 52 Hz with think = "50ms" take 57
    ms a failure, 50 of them paused). An open loop does not spin: its arrivals are paced."""
    g = s.groups[group]
    if g.open_loop is not None or g.failed <= 0 or g.elapsed_s <= 0 or g.clients <= 0:
        return None
    think_ms, pause_ms = _pauses(s, group)
    failed_hz = g.failed / g.elapsed_s
    clients_ms = g.clients * g.elapsed_s * 1000.0
    each_ms = max(0.0, clients_ms - g.succeeded * (g.latency_ms.mean + think_ms)) / g.failed
    if failed_hz < SPIN_RATIO * g.rate_hz or each_ms > SPIN_MS or 2 * pause_ms >= each_ms:
        return None
    return Spin(failed_hz=failed_hz, succeeded_hz=g.rate_hz, each_ms=each_ms)


def _pauses(s: StepResult, group: str) -> tuple[float, float]:
    """The group's pause after a success and after a failure (ms), from the engine spec step `s` ran (0 when
    unknown: a run.json written before steps kept their spec)."""
    g = next((x for x in (s.spec or {}).get("groups", []) if isinstance(x, dict) and x.get("name") == group), {})
    think = float(g.get("think_ms") or 0)
    return think, think + float(g.get("think_on_failure_ms") or 0)


@dataclass
class Side:
    """The evidence of one level (its sweep steps pooled): what the load side and the service's door showed."""

    level: Level
    clients: int = 0
    hung: int = 0
    in_connect: int = 0  # hung operations whose connects were never answered (at most the SYN_SENT sockets seen)
    load: list[str] = field(default_factory=list)  # load-side evidence, each with its figures
    door: list[str] = field(default_factory=list)  # connects that waited at the service's door, with figures
    cpu: str = ""  # "knee and its child processes used 0.07 of 2 cores": the load side's CPU, always said
    spun: Spin | None = None  # the failing clients spun (their busy CPU is not load-side evidence)

    @property
    def held(self) -> str | None:
        """'service' when clients waited at the service's door, else 'load' with load-side evidence, else None.
        The door wins over a busy load side: a connect the service left unanswered was not knee's doing."""
        if self.door:
            return "service"
        return "load" if self.load else None

    def hung_words(self) -> str:
        """'36 hung in connect', '36 hung', or '' when none hung."""
        if not self.hung:
            return ""
        return f"{self.hung:,} hung in connect" if self.in_connect >= self.hung else f"{self.hung:,} hung"


@dataclass
class _Pool:
    """One level's numbers, summed (events) or maxed (peaks) over its steps."""

    clients: int = 0
    # what the clients met: hung operations, connects that timed out, the slowest connect
    hung: int = 0
    timed_out: int = 0
    slow_ms: float = 0.0
    # connects never sent (the load side): how many, and what the first said
    never_sent: int = 0
    never_sample: str = ""
    # the load machine's counters: connects unanswered, SYNs dropped or sent again, connections not accepted
    syn_sent: int = 0
    drops: int = 0
    syn_retrans: int = 0
    waiting: int = 0
    # its ephemeral ports: the most held, of how many
    ports_held: int = 0
    ports: int = 0
    busy: GeneratorStats | None = None  # the first saturated step's where the clients did not spin
    spun: Spin | None = None  # the first step's where the failing clients spun
    cpu: GeneratorStats | None = None  # the step that used the most of the load side's CPU


def sides(steps: Sequence[StepResult], group: str, target: TargetHost | None = None) -> dict[Level, Side]:
    """The evidence at every level of the sweep (steps of phase "sweep" that measured `group`). `target`: where
    the group's service ran (`RunRecord.targets`); the load machine's listen queues and accept queues are the
    service's only when it ran there (`target.local`)."""
    pools: dict[Level, _Pool] = {}
    for s in sweep_steps(steps, group):
        _add(pools.setdefault(s.level, _Pool()), s, group, target)
    return {level: _side(level, p) for level, p in sorted(pools.items())}


def _add(p: _Pool, s: StepResult, group: str, target: TargetHost | None) -> None:
    g = s.groups[group]
    p.clients = max(p.clients, g.clients)
    p.hung += g.hung
    p.timed_out += g.failures.get("connect_timeout", 0)
    p.slow_ms = max(p.slow_ms, g.connect_ms.max)
    for r in g.reasons:
        if r.class_ in NEVER_SENT_CLASSES and NEVER_SENT.search(r.sample):
            p.never_sent += r.count
            p.never_sample = p.never_sample or r.sample
    gen = s.generator
    spun = spin(s, group)
    if spun is not None and p.spun is None:
        p.spun = spun
    if gen.saturated and spun is None and p.busy is None:
        p.busy = gen
    if p.cpu is None or gen.load_cores > p.cpu.load_cores:
        p.cpu = gen
    local = target is not None and target.local
    c = s.counters
    if c is not None:
        p.syn_sent = max(p.syn_sent, c.tcp_states_peak.get("SYN_SENT", 0))
        p.syn_retrans += c.syn_retrans
        if local:
            p.drops += max(c.listen_drops, c.listen_overflows)
            p.waiting = max(p.waiting, c.accept_queue_peak.get(target.port, 0) if target else 0)
        if c.ephemeral_ports:
            p.ports = c.ephemeral_ports
            # the census's count toward one destination only: the machine's TIME_WAIT sockets (sockstat) go to every
            # destination (other services, earlier runs) and take none of the target's supply
            p.ports_held = max(p.ports_held, c.ephemeral_in_use_peak)
    if s.target is not None:  # the monitored target's own listening sockets
        for ls in s.target.listen:
            if (target is not None and ls.port == target.port) or (ls.backlog and ls.queue_peak >= ls.backlog):
                p.waiting = max(p.waiting, ls.queue_peak)


def _side(level: Level, p: _Pool) -> Side:
    at = fmt.load(level)
    side = Side(level=level, clients=p.clients, hung=p.hung, in_connect=min(p.hung, p.syn_sent), spun=p.spun)
    if p.cpu is not None:
        side.cpu = f"knee and its child processes used {p.cpu.load_cores:.2f} of {p.cpu.cores_words()}{p.cpu.others()}"
        if p.spun is not None:
            side.cpu += f", re-running failures as its failing clients spun ({p.spun.words()})"
    if p.busy is not None:
        g = p.busy
        side.load.append(
            f"knee and its child processes used {g.load_cores:.2f} of {g.cores_words()} at {at} (saturated)"
        )
    if p.ports and p.ports_held >= PORTS_SHARE * p.ports:
        side.load.append(f"{p.ports_held:,} of the {p.ports:,} ephemeral ports were in use at {at}")
    if p.never_sent:
        side.load.append(f"{p.never_sent:,} connects were never sent at {at} (“{p.never_sample}”)")
    slow = p.slow_ms >= SLOW_CONNECT_MS
    if p.hung or p.timed_out or slow:  # clients waited: was it in connect, at the service's door?
        door = [
            (p.syn_sent and p.hung, f"up to {p.syn_sent:,} connects unanswered (SYN_SENT)"),
            (p.drops, f"{p.drops:,} SYNs dropped by the full listen queue"),
            (p.syn_retrans, f"{p.syn_retrans:,} SYNs sent again"),
            (p.waiting and p.hung, f"up to {p.waiting:,} connections waiting to be accepted"),
            (p.timed_out, f"{p.timed_out:,} connects timed out"),
            (slow, f"connects took up to {fmt.ms(p.slow_ms)}"),
        ]
        side.door = [words for seen, words in door if seen]
    return side


def unreached(side: Side | None) -> str:
    """Why the clients a level did not have in the service were missing, by its evidence (Little's law)."""
    if side is None:
        return "no step recorded where they waited"
    if side.held == "service":
        hung = side.hung_words()
        return (
            f"the others waited at the service's door ({hung + ': ' if hung else ''}{', '.join(side.door)}), "
            f"and knee did not hold them ({side.cpu})"
        )
    if side.held == "load":
        return f"the load side held them back ({'; '.join(side.load)})"
    if side.hung:
        return f"{side.hung:,} operations hung waiting for the service; knee was not saturated ({side.cpu})"
    return (
        "the others were neither in the service nor hung, and knee was not saturated "
        f"({side.cpu or 'no CPU figures'}): check the think time given to the analysis and limits inside the clients"
    )
