"""Is the load side the bottleneck, and will the machine let knee do what a run needs?

- `CpuMeter`: knee's own CPU seconds over a step (`getrusage(RUSAGE_SELF)`), its child
  processes' (exec clients and worker programs: `RUSAGE_CHILDREN` for the ones reaped, the
  live ones' CPU times by psutil) and the machine's, as a GeneratorStats; the step is flagged
  saturated when knee and its children used ≥ 90 % of the cores they may run on, or when those cores
  were ≥ 90 % busy and knee and its children held at least half of them (other processes took the rest).
- `preflight_scenario`: before any load (every run and sweep), the target can be reached (or the
  command exists), then the machine (`Machine`) against the largest step (`Load`): the open-file limit
  (raised to what the step needs when the hard limit allows, else an error with the fix), the ephemeral
  ports left by TIME_WAIT for connections not kept alive (`net.ipv4.tcp_tw_reuse` included), the accept
  backlog (`net.core.somaxconn`) of a service on this machine, and memory. Each finding is one or two
  sentences: what, why it matters, the fix.
- `check_scenario(..., probe=True)` / `check_machine`: the same for `knee doctor`, which collects every
  finding instead of stopping at the first error and also runs each exec command once (`run_once`).
  docs/doctor.md states each rule and its numbers.
"""

from __future__ import annotations

import contextlib
import ipaddress
import os
import re
import resource
import shutil
import signal
import socket
import subprocess
import time
import urllib.parse
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import psutil

from knee import fmt
from knee.errors import UserError
from knee.model import GeneratorStats
from knee.scenario import ExecGroup, Group, HttpGroup, PythonGroup, Scenario, TcpGroup, WorkerGroup

SATURATED_SHARE = 0.9
BUSY_SHARE = 0.5  # of its cores, knee and its children's share when the cores were full: saturated too
# file descriptors one client may hold: a socket; exec: a pidfd and, when its output is checked,
# a pipe per stream (the engine's own check, crates/engine/src/clients/mod.rs, counts exactly)
_FDS_PER_CLIENT = {"http": 1, "tcp": 1, "exec": 3}
_FD_SLACK = 64


def cores_available() -> int:
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # pragma: no cover - not Linux
        return os.cpu_count() or 1


def _cpu_seconds(who: int = resource.RUSAGE_SELF) -> float:
    ru = resource.getrusage(who)
    return ru.ru_utime + ru.ru_stime


def _live_children_cpu() -> dict[int, float]:
    """CPU seconds of knee's live descendants (worker programs; exec clients still running), by pid."""
    try:
        kids = psutil.Process().children(recursive=True)
    except psutil.Error:
        return {}
    out = {}
    for p in kids:
        try:
            t = p.cpu_times()
        except psutil.Error:
            continue
        out[p.pid] = t.user + t.system
    return out


def _busy(t: Any) -> float:
    return t.user + t.nice + t.system + getattr(t, "irq", 0.0) + getattr(t, "softirq", 0.0) + getattr(t, "steal", 0.0)


def _machine_busy() -> tuple[float, float]:
    """Busy CPU seconds so far: the whole machine's, and those of the cores this process may run on."""
    per = psutil.cpu_times(percpu=True)
    try:
        mine = os.sched_getaffinity(0)
    except AttributeError:  # pragma: no cover - not Linux
        mine = set(range(len(per)))
    return sum(_busy(t) for t in per), sum(_busy(t) for i, t in enumerate(per) if i in mine)


@dataclass
class CpuMeter:
    """Measure the load side's CPU use between `start()` and `stop()`: knee's, its children's, the machine's."""

    _cpu0: float = 0.0
    _reaped0: float = 0.0
    _live0: dict[int, float] = field(default_factory=dict)
    _machine0: tuple[float, float] = (0.0, 0.0)
    _t0: float = 0.0

    def start(self) -> CpuMeter:
        self._cpu0 = _cpu_seconds()
        self._reaped0 = _cpu_seconds(resource.RUSAGE_CHILDREN)
        self._live0 = _live_children_cpu()
        self._machine0 = _machine_busy()
        self._t0 = time.monotonic()
        return self

    def stop(self) -> GeneratorStats:
        elapsed = max(1e-9, time.monotonic() - self._t0)
        cpu = max(0.0, _cpu_seconds() - self._cpu0)
        # Children reaped during the step count in RUSAGE_CHILDREN (less what live ones had used before the
        # step, which is now inside it too); those still running count by their own CPU times.
        live = _live_children_cpu()
        reaped = max(0.0, _cpu_seconds(resource.RUSAGE_CHILDREN) - self._reaped0)
        reaped -= sum(v for pid, v in self._live0.items() if pid not in live)
        children = max(0.0, reaped) + sum(max(0.0, v - self._live0.get(pid, 0.0)) for pid, v in live.items())
        machine, own = (max(0.0, b - a) / elapsed for a, b in zip(self._machine0, _machine_busy(), strict=True))
        cores = cores_available()
        used = cpu / elapsed
        kids = children / elapsed
        return GeneratorStats(
            cpu_s=round(cpu, 4),
            cpu_cores=round(used, 4),
            children_cpu_s=round(children, 4),
            children_cpu_cores=round(kids, 4),
            machine_cpu_cores=round(machine, 4),
            cores_busy=round(min(own, cores), 4),
            cores_available=cores,
            saturated=saturated(used + kids, own, cores),
        )


def saturated(load: float, busy: float, cores: int) -> bool:
    """The load side could not get more CPU: knee and its children (`load` cores) used nearly all of the `cores`
    they may run on, or those cores were full (`busy`, every process's) and knee and its children held at least
    half of them: other processes took the rest."""
    return load >= SATURATED_SHARE * cores or (busy >= SATURATED_SHARE * cores and load >= BUSY_SHARE * cores)


# ---- preflight: will this machine let knee do what the largest step needs? -------------------------------------

TIME_WAIT_S = 60  # Linux keeps a closed connection's local port this long (TCP_TIMEWAIT_LEN, not a sysctl)
MEMORY_SHARE = 0.5  # a finding when the memory estimate is above this share of MemAvailable
PROBE_CAP_S = 10.0  # the longest `knee doctor` lets an exec command run once
DOCTOR_CLIENTS = 1000  # `knee doctor` without a target: a step of this many clients
# memory of one client: knee's buffers and the socket's kernel buffers (TLS state included); one exec client is a
# process (its resident set, unless `knee doctor` measured the command); a worker or Python-flow process
_BYTES_PER_CLIENT = {"http": 32_000, "tcp": 8_000, "worker": 32_000, "python": 32_000}
_EXEC_PROCESS_BYTES = 4_000_000
_WORKER_PROCESS_BYTES = 50_000_000
_TW_REUSE = {0: "0: off", 1: "1: on", 2: "2: loopback only"}
_NO_PORT = "'Cannot assign requested address'"


@dataclass(frozen=True)
class Machine:
    """The limits preflight reads: open files, ephemeral ports, TIME_WAIT reuse, accept backlog, memory."""

    fd_soft: int | None  # None: unlimited
    fd_hard: int | None
    port_range: tuple[int, int]
    tw_reuse: int | None  # net.ipv4.tcp_tw_reuse: 0 off, 1 on, 2 loopback only (Linux's default); None: unknown
    somaxconn: int | None  # net.core.somaxconn, the cap on every listen backlog; None: unknown
    mem_available: int  # bytes (MemAvailable)
    cores: int

    @property
    def ports(self) -> int:
        lo, hi = self.port_range
        return hi - lo + 1

    @property
    def tw_reuse_text(self) -> str:
        return "unknown" if self.tw_reuse is None else _TW_REUSE.get(self.tw_reuse, str(self.tw_reuse))

    @classmethod
    def read(cls) -> Machine:
        soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
        return cls(
            fd_soft=None if soft == resource.RLIM_INFINITY else int(soft),
            fd_hard=None if hard == resource.RLIM_INFINITY else int(hard),
            port_range=ephemeral_port_range(),
            tw_reuse=sysctl_int("net/ipv4/tcp_tw_reuse"),
            somaxconn=sysctl_int("net/core/somaxconn"),
            mem_available=int(psutil.virtual_memory().available),  # Linux: MemAvailable in /proc/meminfo
            cores=cores_available(),
        )

    def to_dict(self) -> dict[str, object]:
        return {
            "fd_soft": self.fd_soft,
            "fd_hard": self.fd_hard,
            "port_range": list(self.port_range),
            "ports": self.ports,
            "tcp_tw_reuse": self.tw_reuse,
            "somaxconn": self.somaxconn,
            "mem_available": self.mem_available,
            "cores": self.cores,
        }


def sysctl_int(name: str, root: Path = Path("/proc/sys")) -> int | None:
    try:
        return int((root / name).read_text().split()[0])
    except (OSError, ValueError, IndexError):
        return None


def ephemeral_port_range(path: Path = Path("/proc/sys/net/ipv4/ip_local_port_range")) -> tuple[int, int]:
    try:
        lo, hi = (int(x) for x in path.read_text().split())
    except (OSError, ValueError):
        return 32768, 60999  # the Linux default
    return lo, hi


@dataclass(frozen=True)
class Endpoint:
    """Where a network group connects, as the reachability check found it."""

    host: str
    port: int
    ip: str
    connect_s: float | None = None  # how long one connect took

    @property
    def label(self) -> str:
        return f"[{self.host}]:{self.port}" if ":" in self.host else f"{self.host}:{self.port}"

    @property
    def loopback(self) -> bool:
        addr = ipaddress.ip_address(self.ip.split("%")[0])
        mapped = getattr(addr, "ipv4_mapped", None)
        return addr.is_loopback or bool(mapped and mapped.is_loopback)

    @property
    def local(self) -> bool:
        """The service runs on this machine: a loopback address, or one of this machine's own."""
        return self.loopback or self.ip.split("%")[0] in _local_addresses()


def host_is_local(host: str) -> bool:
    """`host` (a name or an address) resolves to this machine: loopback, or one of its own addresses."""
    try:
        infos = socket.getaddrinfo(host, None)
    except OSError:
        return False
    return any(Endpoint(host, 0, str(info[4][0])).local for info in infos)


def _local_addresses() -> set[str]:
    try:
        nics = psutil.net_if_addrs()
    except (OSError, psutil.Error):  # pragma: no cover - no /sys
        return set()
    inet = (socket.AF_INET, socket.AF_INET6)
    return {a.address.split("%")[0] for addrs in nics.values() for a in addrs if a.family in inet}


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


@dataclass
class Load:
    """What the largest step asks of the machine the load comes from."""

    clients: dict[str, int]  # by kind
    processes: dict[str, int] = field(default_factory=dict)  # worker-program and Python-flow processes, by kind
    connections: list[Connections] = field(default_factory=list)
    exec_rss: int | None = None  # one exec command's resident memory, when `knee doctor` measured it
    assumed: str = ""  # `knee doctor` without a target: what it assumed

    @property
    def total(self) -> int:
        return sum(self.clients.values())


@dataclass(frozen=True)
class Finding:
    """One thing that would go wrong: what, why it matters and the fix, in a sentence or two."""

    check: str  # target, command, fd, ports, backlog, memory
    text: str
    error: bool = False  # every operation (or the run itself) would fail


@dataclass
class Preflight:
    """The findings about one planned load on this machine. `strict` (a run): the first error raises UserError."""

    machine: Machine
    strict: bool = True
    findings: list[Finding] = field(default_factory=list)
    fd_limit: int = 0
    load: Load | None = None

    @property
    def warnings(self) -> list[str]:
        return [f.text for f in self.findings if not f.error]

    @property
    def errors(self) -> list[str]:
        return [f.text for f in self.findings if f.error]

    def add(self, finding: Finding) -> None:
        if finding.error and self.strict:
            raise UserError(finding.text)
        self.findings.append(finding)


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
    need, total = fds_needed(load.clients), load.total
    soft, hard = out.machine.fd_soft, out.machine.fd_hard
    out.fd_limit = soft if soft is not None else resource.RLIM_INFINITY
    if soft is None or soft >= need:
        return
    if hard is not None and hard < need:
        out.add(
            Finding(
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
            Finding(
                "fd",
                f"the open-file limit (ulimit -n) was {soft}, too low for {total} clients: knee raised it to {need} "
                "for this run",
            )
        )
    else:
        out.add(
            Finding(
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


def _check_ports(out: Preflight, load: Load) -> None:
    """Connections not kept alive: each one this side closes first keeps its local port TIME_WAIT_S in
    TIME_WAIT, so one destination gets about ports / TIME_WAIT_S new connections per second before connect()
    fails. With tcp_tw_reuse on for the destination (1; 2: loopback only) a port comes back after about a
    second. (An HTTP server that closes first after `Connection: close` keeps most of them on its side.)"""
    m = out.machine
    (lo, hi), ports = m.port_range, m.ports
    widen = '`sysctl -w net.ipv4.ip_local_port_range="1024 65535"`'
    for conns in _by_destination(load.connections):
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
                    Finding(
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
            out.add(Finding("ports", f"{what}: {why}. {fix}"))
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
        out.add(Finding("ports", f"{what}: {why}. {fix}"))


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
            Finding(
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
        Finding(
            "memory",
            f"the largest step needs about {fmt.size(need)} ({', '.join(d for d, b in parts if b)}), {share} the "
            f"{fmt.size(avail)} available (MemAvailable): under memory pressure the kernel drops caches, swaps or "
            "kills processes (knee's, the service's), and the latency measures that instead of the service. "
            "Fix: fewer clients per machine (a lower top level, or --cluster to spread them), or free memory first.",
        )
    )


# ---- the scenario's targets and commands ----------------------------------------------------------------------


def preflight_scenario(scenario: Scenario, connect_timeout_s: float = 3.0) -> list[str]:
    """Before any load: every target reachable (every command found), the machine's limits fit the largest
    step. Raises UserError (one sentence) for what would make every operation fail; returns warnings."""
    return check_scenario(scenario, connect_timeout_s).warnings


def check_scenario(
    scenario: Scenario, connect_timeout_s: float = 3.0, *, fix: bool = True, strict: bool = True, probe: bool = False
) -> Preflight:
    """The preflight of a scenario's largest step. A run: `fix` (raise the open-file limit) and `strict` (raise
    the first error). `knee doctor`: neither, and `probe`: run each exec command once."""
    early: list[Finding] = []
    endpoints: dict[str, Endpoint] = {}
    found: set[str] = set()
    for name, g in scenario.groups.items():
        try:
            ep = reachable(g, connect_timeout_s)
        except UserError as exc:
            if strict:
                raise
            early.append(Finding("command" if isinstance(g, ExecGroup | WorkerGroup) else "target", str(exc), True))
            continue
        found.add(name)
        if ep is not None:
            endpoints[name] = ep
    rss: int | None = None
    for name, g in scenario.groups.items() if probe else ():
        if not isinstance(g, ExecGroup) or name not in found:
            continue
        result = run_once(g)
        if result is None:
            continue
        if result.rss:
            rss = max(rss or 0, result.rss)
        said = probe_finding(g, result)
        if said is not None:
            if said.error and strict:
                raise UserError(said.text)
            early.append(said)
    out = preflight(load_of(scenario, endpoints, rss), fix=fix, strict=strict)
    out.findings[:0] = early
    return out


def check_machine(clients: int = DOCTOR_CLIENTS) -> Preflight:
    """`knee doctor` without a target: a step of `clients` HTTP clients opening a new connection per request to
    a service on this machine, latency unknown."""
    ep = Endpoint("127.0.0.1", 80, "127.0.0.1")
    load = Load(
        {"http": clients},
        connections=[Connections("", ep, clients, new_per_op=True)],
        assumed=f"{clients} HTTP clients, a new connection per request, to a service on this machine ({ep.label})",
    )
    return preflight(load, fix=False, strict=False)


def load_of(scenario: Scenario, endpoints: dict[str, Endpoint] | None = None, exec_rss: int | None = None) -> Load:
    """The largest step of `scenario` as a Load (`endpoints`: where its network groups connect, by group)."""
    top = max(scenario.levels())
    threads = scenario.sweep.threads or cores_available()
    load = Load({}, exec_rss=exec_rss)
    for name, g in scenario.groups.items():
        n = g.client_count(top)
        load.clients[g.kind] = load.clients.get(g.kind, 0) + n
        if isinstance(g, WorkerGroup | PythonGroup):
            load.processes[g.kind] = load.processes.get(g.kind, 0) + (g.processes or threads)
        ep = (endpoints or {}).get(name)
        if ep is not None and isinstance(g, HttpGroup | TcpGroup):
            load.connections.append(
                Connections(
                    name,
                    ep,
                    n,
                    new_per_op=isinstance(g, TcpGroup) or g.new_connection,
                    rate=float(top) if g.rate == "level" else None,
                    think_s=g.think,
                    http=isinstance(g, HttpGroup),
                )
            )
    return load


def host_port(g: Group) -> tuple[str, int] | None:
    """A network group's (host, port), the URL's default port when it names none; None for commands and flows.
    A URL without a host or with a bad port: UserError."""
    if isinstance(g, HttpGroup):
        parts = urllib.parse.urlsplit(g.url)
        if not parts.hostname:
            raise UserError(f"bad URL {g.url!r}: it has no host")
        try:
            return parts.hostname, parts.port or (443 if parts.scheme == "https" else 80)
        except ValueError:
            raise UserError(f"bad URL {g.url!r}: the port is not a number from 1 to 65535") from None
    if isinstance(g, TcpGroup):
        host, _, port = g.addr.rpartition(":")
        return host.strip("[]"), int(port)
    return None


def reachable(g: Group, connect_timeout_s: float = 3.0) -> Endpoint | None:
    """Catch what would make every operation fail before any load starts: one sentence each. A network group's
    endpoint (with one connect's time) comes back."""
    if isinstance(g, PythonGroup):
        return None  # the worker's start message says whether the flow can be imported
    if isinstance(g, ExecGroup | WorkerGroup):
        prog = g.argv[0]
        if "${" in prog:
            return None
        found = shutil.which(prog) if os.sep not in prog else (prog if os.access(prog, os.X_OK) else None)
        if found is None:
            raise UserError(f"command not found or not executable: {prog!r} (check the name and your PATH)")
        return None
    if isinstance(g, HttpGroup) and g.body_file is not None and not os.access(g.body_file, os.R_OK):
        raise UserError(f"body_file {g.body_file!r} cannot be read (does it exist?)")
    where = host_port(g)
    if where is None:
        return None
    host, port = where
    try:
        infos = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)
    except socket.gaierror as exc:
        raise UserError(f"cannot resolve host {host!r}: {exc.strerror} (check the name)") from None
    family, socktype, proto, _, addr = infos[0]
    with socket.socket(family, socktype, proto) as s:
        s.settimeout(connect_timeout_s)
        t0 = time.perf_counter()
        try:
            s.connect(addr)
        except ConnectionRefusedError:
            raise UserError(f"connection refused by {host}:{port}: is the service running on that port?") from None
        except TimeoutError:
            raise UserError(
                f"no answer from {host}:{port} within {connect_timeout_s:g} s: is the host reachable?"
            ) from None
        except OSError as exc:
            raise UserError(f"cannot connect to {host}:{port}: {exc.strerror or exc}") from None
        took = time.perf_counter() - t0
    return Endpoint(host, port, str(addr[0]), took)


# ---- an exec command, run once (knee doctor) ------------------------------------------------------------------


@dataclass(frozen=True)
class Probe:
    """An exec group's command run once, as the engine would run client 0's first operation."""

    program: str
    timeout_s: float
    code: int | None = None  # its exit status; None: killed by a signal, or stopped
    signal: int | None = None
    timed_out: bool = False
    stdout: str = ""
    stderr: str = ""
    error: str = ""  # it could not start
    rss: int | None = None  # its peak resident memory (bytes), sampled while it ran; None: too quick to sample


def _fill(text: str) -> str:
    return text.replace("${client}", "0").replace("${iteration}", "0")


def _kill_group(pgid: int) -> None:
    with contextlib.suppress(OSError):
        os.killpg(pgid, signal.SIGKILL)


def run_once(g: ExecGroup, cap_s: float = PROBE_CAP_S) -> Probe | None:
    """Run the command once with ${client} and ${iteration} as 0, its env and cwd, stdin empty, for its timeout
    (at most `cap_s`); its process group is killed afterwards, as the engine does. None: a placeholder it cannot
    fill (${stage})."""
    argv = [_fill(a) for a in g.argv]
    env = {k: _fill(v) for k, v in g.env.items()}
    if any("${" in s for s in (*argv, *env.values())):
        return None
    timeout = min(g.timeout, cap_s)
    try:
        proc = subprocess.Popen(
            argv,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            env={**os.environ, **env},
            cwd=g.cwd,
            process_group=0,
        )
    except OSError as exc:
        where = f" (cwd {g.cwd!r})" if g.cwd is not None and not os.path.isdir(g.cwd) else ""
        return Probe(argv[0], timeout, error=f"{exc.strerror or exc}{where}")
    deadline = time.monotonic() + timeout
    timed_out, peak, pause = False, 0, 0.002
    try:
        while True:
            try:
                out, err = proc.communicate(timeout=max(0.0, min(pause, deadline - time.monotonic())))
                break
            except subprocess.TimeoutExpired:
                if time.monotonic() >= deadline:
                    timed_out = True
                    _kill_group(proc.pid)
                    out, err = _drain(proc)
                    break
                # its resident memory, sampled while it runs (the exit status's ru_maxrss would count the
                # Python process it was forked from)
                peak = max(peak, _tree_peak_rss(proc.pid))
                pause = min(2 * pause, 0.1)
    finally:
        _kill_group(proc.pid)  # after an exit, whatever it left running
        proc.wait()
    rc = proc.returncode
    return Probe(
        argv[0],
        timeout,
        code=rc if rc >= 0 and not timed_out else None,
        signal=-rc if rc < 0 and not timed_out else None,
        timed_out=timed_out,
        stdout=out.decode(errors="replace"),
        stderr=err.decode(errors="replace"),
        rss=peak or None,
    )


def _tree_peak_rss(pid: int) -> int:
    """The peak resident memory (VmHWM) of a process and its descendants so far, in bytes (0: not known)."""
    try:
        tree = [pid, *(p.pid for p in psutil.Process(pid).children(recursive=True))]
    except psutil.Error:
        return 0
    total = 0
    for p in tree:
        with contextlib.suppress(OSError, ValueError):
            status = Path(f"/proc/{p}/status").read_text()
            total += next((int(ln.split()[1]) * 1024 for ln in status.splitlines() if ln.startswith("VmHWM:")), 0)
    return total


def _drain(proc: subprocess.Popen[bytes]) -> tuple[bytes, bytes]:
    try:
        return proc.communicate(timeout=2)
    except subprocess.TimeoutExpired:  # a process that left the group still holds its output open
        for f in (proc.stdout, proc.stderr):
            if f is not None:
                f.close()
        return b"", b""


def _last_line(text: str, width: int = 200) -> str:
    lines = [ln.strip() for ln in text.splitlines() if ln.strip()]
    return lines[-1][:width] if lines else ""


def _matches(pattern: str, text: str) -> bool:
    try:
        return re.search(pattern, text) is not None
    except re.error:  # a pattern only Rust's regex reads: the run checks it
        return True


def probe_finding(g: ExecGroup, p: Probe) -> Finding | None:
    """What running the command once says about every operation of the run (None: it succeeded)."""
    who = f"the command {p.program!r}, run once as client 0's first operation,"
    if p.error:
        return Finding("command", f"{who} could not start: {p.error}. Fix the command or its cwd.", True)
    if p.timed_out:
        if p.timeout_s < g.timeout:
            return Finding(
                "command",
                f"{who} was still running after {p.timeout_s:g} s, when knee doctor stopped it (a run allows "
                f"{g.timeout:g} s): fine if it is that slow; otherwise check that it does not wait for input "
                "(its stdin is empty).",
            )
        return Finding(
            "command",
            f"{who} did not finish within its timeout ({g.timeout:g} s) and was killed: a run counts every such "
            "operation as hung. Fix: a longer timeout (--timeout, or timeout in the scenario), or check that it "
            "does not wait for input (its stdin is empty).",
            True,
        )
    said = _last_line(p.stderr) or _last_line(p.stdout)
    quote = f', saying "{said}"' if said else ""
    rerun = "run it by hand to see why, fix that, then run knee doctor again"
    if p.signal is not None:
        name = signal.Signals(p.signal).name if p.signal in signal.valid_signals() else str(p.signal)
        return Finding(
            "command",
            f"{who} was killed by signal {p.signal} ({name}){quote}: a run counts that as a failure; {rerun}.",
            True,
        )
    if p.code:
        return Finding(
            "command",
            f"{who} exited with code {p.code}{quote}: a run counts every operation that ends like this as failed; "
            f"{rerun}.",
            True,
        )
    for stream, pattern, text in (("stdout", g.expect_stdout, p.stdout), ("stderr", g.expect_stderr, p.stderr)):
        if pattern is not None and not _matches(pattern, text):
            last = _last_line(text)
            got = f'its last line is "{last}"' if last else "it wrote nothing there"
            return Finding(
                "command",
                f"{who} succeeded, but its {stream} does not match expect_{stream} {pattern!r} ({got}): a run counts "
                f"every such operation as failed. Fix the pattern (--expect-{stream}) or the command.",
                True,
            )
    if g.expect_file is not None and "${" not in (path := _fill(g.expect_file.path)):
        try:
            size: int | None = os.stat(path).st_size
        except OSError:
            size = None
        if size is None or size < g.expect_file.min_size:
            left = f"left no file {path}" if size is None else f"left {path} with {size} bytes"
            return Finding(
                "command",
                f"{who} succeeded but {left} (expect_file wants at least {g.expect_file.min_size} bytes): a run "
                "counts every such operation as failed. Fix the path (--expect-file) or the command.",
                True,
            )
    return None
