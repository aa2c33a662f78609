"""Why it broke: rules that turn the machine's and the target's counters and the failure reasons into
findings, each one sentence with its evidence and its fix (docs/diagnosis.md).

The rules read the sweep's steps (counters, the target's process tree, the load side's CPU, the
failure reasons) in level order and report the lowest level where each condition appeared:

- listen_overflow: the kernel dropped connections because a listen queue was full;
- accept_queue: the monitored target's accept queue reached its limit;
- syn_retrans: connection attempts were sent again (SYNs dropped by a full queue or a firewall);
- ports: sockets in TIME_WAIT took most of the ephemeral port range;
- refused: the reason the service gave for the first failures, with a fix where it is a known limit;
- resent: requests sent again after the service closed a kept connection before answering (it may have read them
  twice; a worker that died on one is hidden by the answer to the second);
- spinning: the failing clients spun (their operations failed at once and started again, side.spin);
- load_side / shared_machine: knee and its client processes, or the whole machine, ran out of CPU;
- target_cpu, target_fds, target_exit: the monitored target's CPU, open files, or its exit;
- target_core: a process of the monitored target wanted a whole core (a single-threaded limit), on a machine
  with more;
- target_memory: memory per concurrent client and CPU per operation of the monitored target;
- remote_cpu, remote_memory, remote_listen, remote_connections, remote_down: the target's machines, through the
  Prometheus exporters a run scraped (knee.analysis.remote);
- mix_failed, mix_slowed: the request of a mix that failed first while another held, or slowed most
  (knee.analysis.mix).

The rules are weighed together, so that a report tells one story: a busy load side where the failing clients
spun is told by `spinning` (the CPU went to re-running failures, the service's refusals were the limit), and
`load_side` / `shared_machine` then name only steps where the clients did not spin.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence

from knee import fmt
from knee.analysis.levels import sweep_steps
from knee.analysis.mix import mix_findings
from knee.analysis.remote import remote_findings
from knee.analysis.side import spin
from knee.errors import UserError
from knee.model import (
    BusiestProcess,
    Finding,
    GeneratorStats,
    Level,
    RunRecord,
    StepResult,
    TargetHost,
    TargetStats,
    Verdict,
)
from knee.scenario.address import host_port, named_loopback

PORTS_SHARE = 0.5  # TIME_WAIT sockets over this share of the ephemeral range: the client host is the limit
CPU_SHARE = 0.9  # of the cores: busy
ONE_CORE = 0.9  # a process that used (or ran or waited to run) this much of a core sits at one whole core
ONE_CORE_MOST = 1.1  # … and a process of several threads no more than this: one lock lets one thread run
FDS_SHARE = 0.9  # of the target's open-file limit
MIN_EVENTS = 1  # kernel events needed for a finding (they are 0 on a quiet machine)

# Known limits in failure messages -> the fix to suggest
_FIXES: list[tuple[re.Pattern[str], str]] = [
    (
        re.compile(r"too many (clients|connections)|max_connections|connection limit", re.I),
        "the service's connection limit was reached: raise it, or put a connection pool in front of it",
    ),
    (
        re.compile(r"connection refused|econnrefused", re.I),
        "nothing accepted the connection: the service was down, restarting, or its listen queue was full",
    ),
    (
        re.compile(r"cannot assign requested address|eaddrnotavail|address not available", re.I),
        "the load machine ran out of ephemeral ports: keep connections alive or spread clients over machines",
    ),
    (
        re.compile(r"too many open files|emfile", re.I),
        "a process ran out of file descriptors: raise its open-file limit (ulimit -n, LimitNOFILE=)",
    ),
    (
        re.compile(r"\b503\b|service unavailable|\b429\b|too many requests", re.I),
        "the service rejected work it had no room for (a full pool, queue or rate limit): raise the limit or "
        "add instances",
    ),
    (
        re.compile(r"\b504\b|gateway time", re.I),
        "a proxy gave up waiting for the service behind it: the backend is the bottleneck",
    ),
]


def _where(level: Level, unit: str) -> str:
    return fmt.load(level, unit)


def endpoint(record: RunRecord) -> TargetHost | None:
    """Where the measured group's service ran, when it is a network group with a literal address: as recorded
    when the run started (`record.targets`), so the findings do not depend on the machine that reports them.
    A run.json from before knee recorded it: the host and port the scenario names, on the load machine only
    when the host says so without a lookup (`localhost`, a loopback address)."""
    if record.targets is not None:
        return record.targets.get(record.measured_group)
    g = record.scenario.groups.get(record.measured_group)
    try:
        where = host_port(g) if g is not None else None
    except (UserError, ValueError):
        return None
    if where is None or "${" in where[0]:
        return None
    return TargetHost(host=where[0], port=where[1], local=named_loopback(where[0]))


def _target_port(record: RunRecord) -> int | None:
    where = endpoint(record)
    return where.port if where else None


def _local(record: RunRecord) -> bool:
    """The measured group's target ran on the load machine (a loopback or local address)."""
    where = endpoint(record)
    return where is not None and where.local


def findings(record: RunRecord, v: Verdict) -> list[Finding]:
    """The findings for group `v.group`'s sweep, lowest level first within each rule. The machine's and the
    target's counters belong to every group of a step: they are told once, in the measured group's verdict;
    every group gets the reason its own operations failed."""
    steps = [s for s in sweep_steps(record.steps, v.group) if s.direction == "up"]
    steps.sort(key=lambda s: (s.level, s.index))
    unit = record.level_unit
    rules = (_listen, _accept_queue, _syn, _ports, _refused, _resent, _spinning, _load_side, _target, mix_findings)
    out: list[Finding] = []
    for rule in rules if v.group == record.measured_group else (_refused, _resent, _spinning, mix_findings):
        out.extend(rule(steps, v, unit, record))
    if v.group == record.measured_group:
        out.extend(remote_findings(record, v))  # the target's machines, through their exporters
    return out


def _first(steps: Sequence[StepResult], ok: object) -> StepResult | None:
    return next((s for s in steps if ok(s)), None)  # type: ignore[operator]


def _listen(steps: Sequence[StepResult], v: Verdict, unit: str, record: RunRecord) -> list[Finding]:
    hit = [s for s in steps if s.counters is not None and s.counters.listen_overflows >= MIN_EVENTS]
    if not hit:
        return []
    first = hit[0]
    c = first.counters
    assert c is not None
    total = sum(s.counters.listen_overflows for s in hit if s.counters is not None)
    ports = ""
    if first.target is not None and first.target.listen:
        # the target's listening sockets that filled up, else the one the load went to, else all of them
        full = [ls for ls in first.target.listen if ls.backlog and ls.queue_peak >= ls.backlog]
        aimed = [ls for ls in first.target.listen if ls.port == _target_port(record)]
        named = full or aimed or first.target.listen
        ports = (" of port " if len(named) == 1 else " of ports ") + ", ".join(
            f"{ls.port} (backlog {ls.backlog})" if ls.backlog else str(ls.port) for ls in named
        )
    somax = f", somaxconn {c.somaxconn}" if c.somaxconn else ""
    where = (
        "" if _local(record) else " on the load machine (another service on it, not the target, which runs elsewhere)"
    )
    return [
        Finding(
            kind="listen_overflow",
            level=first.level,
            what=f"from {_where(first.level, unit)} the listen queue{ports} overflowed {c.listen_overflows:,} times"
            f"{where} ({total:,} over the sweep{somax}): the kernel dropped connections the server did not accept "
            "fast enough",
            fix="raise the server's accept backlog (listen(2) backlog: nginx `listen … backlog=`, Tomcat "
            "acceptCount) and net.core.somaxconn, or accept faster",
        )
    ]


def _accept_queue(steps: Sequence[StepResult], v: Verdict, unit: str, record: RunRecord) -> list[Finding]:
    for s in steps:
        t = s.target
        if t is None:
            continue
        for ls in t.listen:
            if ls.backlog and ls.queue_peak >= ls.backlog:
                return [
                    Finding(
                        kind="accept_queue",
                        level=s.level,
                        what=f"at {_where(s.level, unit)} the accept queue of port {ls.port} was full "
                        f"({ls.queue_peak} waiting, backlog {ls.backlog}): the server accepted connections slower "
                        "than they came",
                        fix="give the server more accepting threads or a larger backlog",
                    )
                ]
    return []


def _syn(steps: Sequence[StepResult], v: Verdict, unit: str, record: RunRecord) -> list[Finding]:
    s = _first(steps, lambda s: s.counters is not None and s.counters.syn_retrans >= MIN_EVENTS)
    if s is None or s.counters is None:
        return []
    return [
        Finding(
            kind="syn_retrans",
            level=s.level,
            what=f"from {_where(s.level, unit)} {s.counters.syn_retrans:,} connection attempts were sent again "
            f"(SYN retransmits; {s.counters.attempt_fails:,} connects failed): the server's listen queue was full "
            "or something dropped SYNs, and each retry costs a second or more",
            fix="raise the server's accept backlog and somaxconn on the server; check firewalls and conntrack limits",
        )
    ]


def _ports(steps: Sequence[StepResult], v: Verdict, unit: str, record: RunRecord) -> list[Finding]:
    """The ephemeral ports the client host held (counted by the socket census; TIME_WAIT sockets from
    sockstat where no census ran) against its range."""
    for s in steps:
        c = s.counters
        if c is None or not c.ephemeral_ports:
            continue
        # sockstat's TIME_WAIT (toward every destination) stands in only where no census ran at all (no sock_diag)
        held = c.ephemeral_in_use_peak or (0 if c.tcp_states_peak else c.time_wait_peak)
        if held >= PORTS_SHARE * c.ephemeral_ports:
            what = (
                f"{held:,} of the {c.ephemeral_ports:,} ephemeral ports were in use ({c.time_wait_peak:,} sockets "
                "in TIME_WAIT)"
                if c.ephemeral_in_use_peak
                else f"TIME_WAIT reached {c.time_wait_peak:,} sockets against {c.ephemeral_ports:,} ephemeral ports"
            )
            return [
                Finding(
                    kind="ports",
                    level=s.level,
                    what=f"{what} at {_where(s.level, unit)}: above this level the results measure the client "
                    "host's port supply, not the service",
                    fix="keep connections alive, or spread clients over more machines (--cluster); widen "
                    "net.ipv4.ip_local_port_range and set net.ipv4.tcp_tw_reuse=1",
                )
            ]
    return []


def _fix_for(text: str) -> str:
    return next((fix for pat, fix in _FIXES if pat.search(text)), "")


def _refused(steps: Sequence[StepResult], v: Verdict, unit: str, record: RunRecord) -> list[Finding]:
    """The reason of the first failures: what the service said at the error onset."""
    for s in steps:
        g = s.groups.get(v.group)
        if g is None or not g.reasons:
            continue
        if v.error_onset_level is not None and s.level < v.error_onset_level:
            continue
        top = max(g.reasons, key=lambda r: r.count)
        total = g.failed + g.hung
        others = f" of {total:,} failed or hung" if total > top.count else ""
        fix = _fix_for(f"{top.class_} {top.sample}")
        return [
            Finding(
                kind="refused",
                level=s.level,
                what=f"from {_where(s.level, unit)} the service answered {top.count:,}{others} operations with "
                f"“{top.sample}” ({top.class_})",
                fix=fix,
            )
        ]
    return []


def _resent(steps: Sequence[StepResult], v: Verdict, unit: str, record: RunRecord) -> list[Finding]:
    """Requests sent again after the service closed a kept connection before answering: it may have read them
    twice, and a worker that died on one is hidden by the answer to the second."""
    hit = [(s, g) for s in steps if (g := s.groups.get(v.group)) is not None and g.resent]
    if not hit:
        return []
    first, g = hit[0]
    total = sum(g.resent for _, g in hit)
    return [
        Finding(
            kind="resent",
            level=first.level,
            what=f"from {_where(first.level, unit)} the service closed kept connections before answering: knee sent "
            f"{g.resent:,} requests of that level again on a new connection ({total:,} over the sweep), and the "
            "service may have read each of them twice",
            fix="if the service's log shows workers that died or restarted on those requests (a worker timeout, an "
            "out-of-memory kill), that is a failure knee's retry hid; if not, its keep-alive timeout is shorter than "
            "the clients' think time: raise it, or give the clients a shorter --think",
        )
    ]


def _spinning(steps: Sequence[StepResult], v: Verdict, unit: str, record: RunRecord) -> list[Finding]:
    """The failing clients spun: the load they made was failures re-run at once, not work the service did."""
    for s in steps:
        spun = spin(s, v.group)
        if spun is None:
            continue
        g = s.generator
        busy = (
            f"; knee and its client processes used {g.load_cores:.2f} of {g.cores_words()} re-running them, "
            "so the busy load side is the spinning's doing, not a limit of its own"
            if g.saturated
            else ""
        )
        return [
            Finding(
                kind="spinning",
                level=s.level,
                what=f"from {_where(s.level, unit)} the failing clients spun: their operations failed at once and "
                f"started again without a pause ({spun.words()}){busy}",
                fix="pause after a failed operation, as a retrying client would: --think-on-failure DURATION (e.g. "
                "--think-on-failure 100ms); the service's refusals are its limit",
            )
        ]
    return []


def _calm(s: StepResult, v: Verdict) -> bool:
    """The group's failing clients did not spin over step `s` (its busy CPU, if any, is the load side's own)."""
    return spin(s, v.group) is None


def _load_side(steps: Sequence[StepResult], v: Verdict, unit: str, record: RunRecord) -> list[Finding]:
    out: list[Finding] = []
    s = _first(steps, lambda s: s.generator.saturated and _calm(s, v))
    if s is not None:
        g = s.generator
        what = (
            f"at {_where(s.level, unit)} knee used {g.cpu_cores:.2f} and its client processes "
            f"{g.children_cpu_cores:.2f} of {g.cores_words()}{g.others()}: the load side, not the service, "
            "was the limit"
        )
        if _local(record):
            what += "; the service shared the machine with its clients"
        out.append(Finding(kind="load_side", level=s.level, what=what, fix="measure from other machines (--cluster)"))
        return out
    if not _local(record):
        return out
    # the whole machine's busy cores against the whole machine's (knee's own cores are those it may run on: with
    # the service on core 0 and knee on core 1, 1.8 busy of "1" said the machine was the limit)
    s = _first(
        steps,
        lambda s: s.generator.machine_cpu_cores >= CPU_SHARE * _machine_cores(s.generator) and _calm(s, v),
    )
    if s is not None:
        g = s.generator
        # When the verdict found the clients waiting at the service's door, that is the limit: busy CPUs do not
        # hold a connection in the accept queue, so this finding then states the fact and names no limit.
        door = v.shape is not None and v.shape.connections is not None
        out.append(
            Finding(
                kind="shared_machine",
                level=s.level,
                what=f"at {_where(s.level, unit)} the machine's CPUs were busy ({g.machine_cpu_cores:.2f} of "
                f"{_machine_cores(g)} cores; knee and its clients {g.load_cores:.2f}): the service shared the "
                "machine with its clients" + ("" if door else ", so the machine, not the service alone, was the limit"),
                fix="run knee on other machines than the service (--cluster)",
            )
        )
    return out


def _machine_cores(g: GeneratorStats) -> int:
    """The machine's CPUs (a run recorded before they were: knee's own)."""
    return g.machine_cores or max(1, g.cores_available)


def _target(steps: Sequence[StepResult], v: Verdict, unit: str, record: RunRecord) -> list[Finding]:
    mon = [s for s in steps if s.target is not None and s.target.samples]
    if not mon:
        return []
    out: list[Finding] = []
    name = mon[0].target.name if mon[0].target else "the target"
    gone = _first(mon, lambda s: s.target is not None and not s.target.alive)
    if gone is not None:
        out.append(
            Finding(
                kind="target_exit",
                level=gone.level,
                what=f"the monitored process {name} (pid {gone.target.pid if gone.target else '?'}) exited during "
                f"the step at {_where(gone.level, unit)}",
                fix="look at the service's log for why it stopped (out of memory, a crash, a restart)",
            )
        )
    cores = max((s.generator.cores_available for s in mon), default=1)
    rules: list[tuple[str, Callable[[TargetStats], bool], Callable[[TargetStats], str], str]] = [
        (
            "target_cpu",
            lambda t: t.cpu_cores_mean >= CPU_SHARE * cores,
            lambda t: f"{name} used {t.cpu_cores_mean:.2f} of {cores} cores: the service was CPU-bound",
            "profile the service, or give it more cores",
        ),
        (
            "target_fds",
            lambda t: 0 < t.fd_limit * FDS_SHARE <= t.fds_peak,
            lambda t: f"{name} held {t.fds_peak:,} open files of its limit {t.fd_limit:,}",
            "raise the service's open-file limit (ulimit -n, LimitNOFILE=)",
        ),
    ]
    for kind, hit, say, fix in rules:
        at = next((s for s in mon if s.target is not None and hit(s.target)), None)
        if at is not None and at.target is not None:
            what = f"at {_where(at.level, unit)} {say(at.target)}"
            out.append(Finding(kind=kind, level=at.level, what=what, fix=fix))
    core = _one_core(mon, unit, name, cores)
    if core is not None:
        out.append(core)
    usage = _usage(mon, v, unit, name)
    if usage is not None:
        out.append(usage)
    return out


def _sits_at_one_core(b: BusiestProcess) -> bool:
    """One thread that ran (or waited for a CPU to run) a whole core, or several threads that together used one
    whole core and no more."""
    if b.threads <= 1:
        return max(b.cpu_cores, b.runnable_cores) >= ONE_CORE
    return ONE_CORE <= b.cpu_cores <= ONE_CORE_MOST


def _one_core(mon: Sequence[StepResult], unit: str, name: str, cores: int) -> Finding | None:
    """The lowest level where a process of the target sat at one whole core, on a machine with more: its own
    limit, which the target_cpu rule (all the cores) does not see."""
    if cores <= 1:
        return None
    at = next((s for s in mon if s.target and s.target.busiest and _sits_at_one_core(s.target.busiest)), None)
    if at is None or at.target is None or at.target.busiest is None:
        return None
    b = at.target.busiest
    who = f"{name} (pid {b.pid})" if b.pid == at.target.pid else f"{name}'s process {b.pid}"
    if b.command and b.command != name:
        who += f" “{b.command}”"
    verb = "used a whole core" if b.cpu_cores >= ONE_CORE else "wanted a whole core"
    used = f"{b.cpu_cores:.2f} cores, peak {b.cpu_cores_peak:.2f}"
    if b.runnable_cores > b.cpu_cores + 0.05:
        used += f"; it ran or waited for a CPU {fmt.pct(min(b.runnable_cores, 1.0))} of the time"
    if b.threads <= 1:
        return Finding(
            kind="target_core",
            level=at.level,
            what=f"from {_where(at.level, unit)} {who} {verb} ({used}): a single-threaded limit, one thread "
            f"cannot go faster than one core of the {cores}",
            fix="run more workers of it (nginx: worker_processes auto; one process per core behind a balancer), "
            "or make each operation cost less CPU",
        )
    return Finding(
        kind="target_core",
        level=at.level,
        what=f"from {_where(at.level, unit)} {who} {verb} with its {b.threads} threads together ({used}): a "
        f"single-core limit of the {cores}, something lets one thread run at a time",
        fix="find what serialises it (a global lock, Python's GIL, a single event loop) and spread that work over "
        "cores or processes",
    )


def _usage(mon: Sequence[StepResult], v: Verdict, unit: str, name: str) -> Finding | None:
    """Memory per concurrent client (between the lowest and highest monitored level) and CPU per operation."""
    lo, hi = mon[0], mon[-1]
    if lo.target is None or hi.target is None:
        return None
    parts = []
    clients_lo = lo.groups[v.group].clients
    clients_hi = hi.groups[v.group].clients
    if unit == "clients" and clients_hi > clients_lo:
        per = (hi.target.rss_mb_peak - lo.target.rss_mb_peak) / (clients_hi - clients_lo)
        parts.append(
            f"its memory went from {lo.target.rss_mb_peak:.1f} MB at {clients_lo} to {hi.target.rss_mb_peak:.1f} MB "
            f"at {clients_hi} clients ({per * 1000:.0f} kB per concurrent client), threads from "
            f"{lo.target.threads_peak} to {hi.target.threads_peak}"
        )
    ops = sum(s.groups[v.group].total for s in mon)
    cpu = sum(s.target.cpu_s for s in mon if s.target is not None)
    if ops:
        parts.append(f"it used {cpu / ops * 1e6:.0f} µs of CPU per operation")
    if not parts:
        return None
    return Finding(kind="target_usage", level=None, what=f"{name}: " + "; ".join(parts))
