"""Will this machine let knee do what the largest step needs? The rules, held against a `Load`.

The open-file limit (raised to what the step needs when the hard limit allows, else an error with the
fix), the ephemeral ports left by TIME_WAIT for connections not kept alive (`net.ipv4.tcp_tw_reuse`
included), the accept backlog (`net.core.somaxconn`) of a service on this machine, and memory. Each rule
reports a `Check`: one or two sentences, what, why it matters, the fix. docs/doctor.md states each rule and
its numbers.
"""

from __future__ import annotations

import resource
from dataclasses import dataclass, field

from knee import fmt
from knee.errors import UserError
from knee.machine.host import Machine
from knee.machine.network import Endpoint

TIME_WAIT_S = 60  # Linux keeps a closed connection's local port this long (TCP_TIMEWAIT_LEN, not a sysctl)
MEMORY_SHARE = 0.5  # a check when the memory estimate is above this share of MemAvailable
# memory of one client: knee's buffers and the socket's kernel buffers (TLS state included); one exec client is a
# process (its resident set, unless `knee doctor` measured the command); a worker or Python-flow process
_BYTES_PER_CLIENT = {
    "http": 32_000,
    "tcp": 8_000,
    "websocket": 32_000,
    "grpc": 32_000,
    "worker": 32_000,
    "python": 32_000,
}
_EXEC_PROCESS_BYTES = 4_000_000
_WORKER_PROCESS_BYTES = 50_000_000
_NO_PORT = "'Cannot assign requested address'"

# file descriptors one client may hold: a socket; exec: a pidfd and, when its output is checked,
# a pipe per stream (the engine's own check, crates/engine/src/clients/mod.rs, counts exactly)
_FDS_PER_CLIENT = {"http": 1, "tcp": 1, "websocket": 1, "grpc": 1, "exec": 3}
_FD_SLACK = 64


@dataclass(frozen=True)
class Connections:
    """One network group's connections in the largest step."""

    group: str
    endpoint: Endpoint
    clients: int  # connections open at once
    new_per_op: bool  # a new connection per operation (TCP groups; HTTP with new_connection)
    rate: float | None = None  # open loop: its arrivals per second at the top rate
    think_s: float = 0.0
    http: bool = True
    sources: int = 1  # local addresses it connects from (--source-addr); each has its own ports


@dataclass
class Load:
    """What the largest step asks of the machine the load comes from."""

    clients: dict[str, int]  # by kind
    processes: dict[str, int] = field(default_factory=dict)  # worker-program and Python-flow processes, by kind
    connections: list[Connections] = field(default_factory=list)
    exec_rss: int | None = None  # one exec command's resident memory, when `knee doctor` measured it
    assumed: str = ""  # `knee doctor` without a target: what it assumed
    streams: int = 0  # HTTP/2 and gRPC clients beyond their connections: streams, with no descriptor of their own

    @property
    def total(self) -> int:
        return sum(self.clients.values())


@dataclass(frozen=True)
class Check:
    """What a preflight rule or probe found would go wrong: what, why it matters and the fix, in a sentence or
    two."""

    check: str  # which: target, command, fd, ports, backlog, memory
    text: str
    error: bool = False  # every operation (or the run itself) would fail


@dataclass
class Preflight:
    """What the checks found about one planned load on this machine (`findings`, as `knee doctor` lists them).
    `strict` (a run): the first error raises UserError."""

    machine: Machine
    strict: bool = True
    findings: list[Check] = field(default_factory=list)
    fd_limit: int = 0
    load: Load | None = None

    @property
    def warnings(self) -> list[str]:
        return [f.text for f in self.findings if not f.error]

    @property
    def errors(self) -> list[str]:
        return [f.text for f in self.findings if f.error]

    def add(self, check: Check) -> None:
        if check.error and self.strict:
            raise UserError(check.text)
        self.findings.append(check)


def fds_needed(clients_by_kind: dict[str, int]) -> int:
    return _FD_SLACK + sum(_FDS_PER_CLIENT.get(k, 1) * n for k, n in clients_by_kind.items())


def preflight(load: Load, *, fix: bool = True, strict: bool = True, machine: Machine | None = None) -> Preflight:
    """Hold the machine's limits against `load`, the largest step. `fix`: raise the open-file limit where the
    hard limit allows (a run does; `knee doctor` only says so). `strict`: an error raises UserError."""
    out = Preflight(machine or Machine.read(), strict=strict, load=load)
    _check_fds(out, load, fix)
    _check_ports(out, load)
    _check_backlog(out, load)
    _check_memory(out, load)
    return out


def _check_fds(out: Preflight, load: Load, fix: bool) -> None:
    need, total = fds_needed(load.clients) - load.streams, load.total
    soft, hard = out.machine.fd_soft, out.machine.fd_hard
    out.fd_limit = soft if soft is not None else resource.RLIM_INFINITY
    if soft is None or soft >= need:
        return
    if hard is not None and hard < need:
        out.add(
            Check(
                "fd",
                f"the open-file limit is {hard} (ulimit -n) but {total} clients need about {need} file descriptors; "
                f"raise it with `ulimit -n {need}` or run fewer clients per machine",
                error=True,
            )
        )
    elif fix:
        resource.setrlimit(resource.RLIMIT_NOFILE, (need, resource.RLIM_INFINITY if hard is None else hard))
        out.fd_limit = need
        out.add(
            Check(
                "fd",
                f"the open-file limit (ulimit -n) was {soft}, too low for {total} clients: knee raised it to {need} "
                "for this run",
            )
        )
    else:
        out.add(
            Check(
                "fd",
                f"the open-file limit (ulimit -n) is {soft}, too low for {total} clients (about {need} file "
                f"descriptors, one a connection, three an exec client): a run raises it to {need} itself, as the hard "
                f"limit ({hard or 'unlimited'}) allows; other tools need `ulimit -n {need}` first",
            )
        )


def _by_destination(conns: list[Connections]) -> list[list[Connections]]:
    out: dict[tuple[str, int], list[Connections]] = {}
    for c in conns:
        out.setdefault((c.endpoint.ip, c.endpoint.port), []).append(c)
    return list(out.values())


def _check_open(out: Preflight, conns: list[Connections], ports: int, sources: int, widen: str) -> None:
    """Connections open at once to one destination: each holds a local port of its source address."""
    n = sum(c.clients for c in conns)
    if n <= ports:
        return
    ep = conns[0].endpoint
    (lo, hi) = out.machine.port_range
    of = f"{sources} source addresses" if sources > 1 else "one source address"
    more = "127.0.0.2-127.0.0.9" if ep.loopback else "the addresses of this machine's network interfaces"
    out.add(
        Check(
            "ports",
            f"{n} connections open at once to {ep.label} need more local ports than the {ports} that {of} has "
            f"({lo}-{hi} each): connects past that fail with {_NO_PORT}. Fix: connect from more local addresses "
            f"(--source-addr {more}), {widen}, or send from more machines (--cluster).",
        )
    )


def _check_ports(out: Preflight, load: Load) -> None:
    """Connections not kept alive: each one this side closes first keeps its local port TIME_WAIT_S in
    TIME_WAIT, so one destination gets about ports / TIME_WAIT_S new connections per second before connect()
    fails. With tcp_tw_reuse on for the destination (1; 2: loopback only) a port comes back after about a
    second. (An HTTP server that closes first after `Connection: close` keeps most of them on its side.)"""
    m = out.machine
    (lo, hi), one_source = m.port_range, m.ports
    widen = '`sysctl -w net.ipv4.ip_local_port_range="1024 65535"`'
    for conns in _by_destination(load.connections):
        sources = min(c.sources for c in conns)
        ports = one_source * sources
        _check_open(out, conns, ports, sources, widen)
        churn = [c for c in conns if c.new_per_op]
        if not churn:
            continue
        ep = churn[0].endpoint
        rate = sum(c.rate for c in churn if c.rate is not None)
        closed = [c for c in churn if c.rate is None]
        n = sum(c.clients for c in closed)
        http = any(c.http for c in churn)
        keep = ", or keep connections alive (drop new_connection / --new-connection)" if http else ""
        if m.tw_reuse == 1 or (m.tw_reuse == 2 and ep.loopback):
            if rate > ports:
                out.add(
                    Check(
                        "ports",
                        f"a new connection per operation at {fmt.sig3(rate)}/s to {ep.label} needs more than the "
                        f"{ports} ephemeral ports ({lo}-{hi}) even with tcp_tw_reuse = {m.tw_reuse_text}, which "
                        f"gives a closed port back after about a second: connects will fail with {_NO_PORT}. "
                        f"Fix: {widen}{keep}, or send from more machines (--cluster).",
                    )
                )
            continue
        limit = ports / TIME_WAIT_S
        server = " (an HTTP server that closes first after Connection: close keeps most)" if http else ""
        why = (
            f"each connection this side closes first keeps its local port {TIME_WAIT_S} s in TIME_WAIT{server}, so "
            f"the {ports} ephemeral ports ({lo}-{hi}) allow about {fmt.sig3(limit)} new connections/s to one address "
            f"before connects fail with {_NO_PORT}"
        )
        fix = f"Fix: {widen} and `sysctl -w net.ipv4.tcp_tw_reuse=1` (now {m.tw_reuse_text}){keep}."
        if rate > limit:
            what = (
                f"a new connection per operation at {fmt.sig3(rate)}/s (the top rate) to {ep.label} can run out of "
                "local ports"
            )
            out.add(Check("ports", f"{what}: {why}. {fix}"))
            continue
        if not closed:
            continue
        # A closed loop opens clients / (operation + think) connections per second; an operation on a new
        # connection takes at least two round trips (connect, then request and reply), one connect at least one.
        think = min(c.think_s for c in closed)
        floor = 2 * ep.connect_s + think if ep.connect_s is not None else think
        if floor > 0 and rate + n / floor <= limit:
            continue
        under = n / (limit - rate) - think  # the operation time below which the limit is passed
        took = f" (one connect took {fmt.ms(ep.connect_s * 1e3)})" if ep.connect_s is not None else ""
        what = (
            f"{n} clients opening a new connection per operation to {ep.label} can run out of local ports when an "
            f"operation takes under {fmt.ms(under * 1e3)}{took}"
        )
        out.add(Check("ports", f"{what}: {why}. {fix}"))


def _check_backlog(out: Preflight, load: Load) -> None:
    """A service on this machine: its accept queue holds at most net.core.somaxconn connections."""
    most = out.machine.somaxconn
    if most is None:
        return
    for conns in _by_destination(load.connections):
        ep, n = conns[0].endpoint, sum(c.clients for c in conns)
        if n <= most or not ep.local:
            continue
        out.add(
            Check(
                "backlog",
                f"{n} connections to {ep.label} on this machine can arrive at once, but net.core.somaxconn = {most} "
                f"caps the server's accept queue at {most}: while the server is slow to accept, connections beyond "
                "it wait for a SYN retry (1 s, then 3 s) or fail, latency and errors that come from this setting, "
                f"not the service. Fix: `sysctl -w net.core.somaxconn={n}` and a listen backlog of at least {n} in the "
                f"server (nginx: `listen … backlog={n}`).",
            )
        )


def memory_needed(load: Load) -> list[tuple[str, int]]:
    """The largest step's memory on the load side, part by part: (what, bytes)."""
    parts = []
    for kind, n in load.clients.items():
        if kind == "exec":  # a measured command counts when it is the larger (a sample can come early)
            each = max(load.exec_rss or 0, _EXEC_PROCESS_BYTES)
            how = "measured" if each == load.exec_rss else "assumed"
            parts.append((f"{n} command processes × {fmt.size(each)} ({how})", n * each))
        else:
            each = _BYTES_PER_CLIENT.get(kind, _BYTES_PER_CLIENT["http"])
            parts.append((f"{n} {kind} clients × {fmt.size(each)}", n * each))
    for kind, p in load.processes.items():
        what = "Python-flow" if kind == "python" else "worker-program"
        parts.append((f"{p} {what} processes × {fmt.size(_WORKER_PROCESS_BYTES)}", p * _WORKER_PROCESS_BYTES))
    return parts


def _check_memory(out: Preflight, load: Load) -> None:
    """An estimate, so never an error: resident sets count shared pages (libraries) once per process."""
    parts = memory_needed(load)
    need, avail = sum(b for _, b in parts), out.machine.mem_available
    if need <= MEMORY_SHARE * avail:
        return
    share = "more than" if need > avail else f"{fmt.pct(need / avail)} of"
    out.add(
        Check(
            "memory",
            f"the largest step needs about {fmt.size(need)} ({', '.join(d for d, b in parts if b)}), {share} the "
            f"{fmt.size(avail)} available (MemAvailable): under memory pressure the kernel drops caches, swaps or "
            "kills processes (knee's, the service's), and the latency measures that instead of the service. "
            "Fix: fewer clients per machine (a lower top level, or --cluster to spread them), or free memory first.",
        )
    )
