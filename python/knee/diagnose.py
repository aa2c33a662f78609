"""Is the load side the bottleneck, and will the machine let knee do what a run needs?

- `CpuMeter`: knee's own CPU seconds over a step (`getrusage(RUSAGE_SELF)`), its child
  processes' (exec clients and worker programs: `RUSAGE_CHILDREN` for the ones reaped, the
  live ones' CPU times by psutil) and the machine's, as a GeneratorStats; the step is flagged
  saturated when knee and its children used ≥ 90 % of the cores they may run on.
- `preflight_scenario`: before any load, the target can be reached (or the command exists),
  the open-file limit (raised to what the largest step needs when the hard limit allows, else
  one sentence with the fix) and the ephemeral port range for groups that open a new
  connection per operation (a warning).
"""

from __future__ import annotations

import os
import resource
import shutil
import socket
import time
import urllib.parse
from dataclasses import dataclass, field
from pathlib import Path

import psutil

from knee.errors import UserError
from knee.model import GeneratorStats
from knee.scenario import ExecGroup, Group, HttpGroup, PythonGroup, Scenario, TcpGroup, WorkerGroup

SATURATED_SHARE = 0.9
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


def _machine_busy() -> float:
    t = psutil.cpu_times()
    return t.user + t.nice + t.system + getattr(t, "irq", 0.0) + getattr(t, "softirq", 0.0) + getattr(t, "steal", 0.0)


@dataclass
class CpuMeter:
    """Measure the load side's CPU use between `start()` and `stop()`: knee's, its children's, the machine's."""

    _cpu0: float = 0.0
    _reaped0: float = 0.0
    _live0: dict[int, float] = field(default_factory=dict)
    _machine0: float = 0.0
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
        machine = max(0.0, _machine_busy() - self._machine0)
        cores = cores_available()
        used = cpu / elapsed
        kids = children / elapsed
        return GeneratorStats(
            cpu_s=round(cpu, 4),
            cpu_cores=round(used, 4),
            children_cpu_s=round(children, 4),
            children_cpu_cores=round(kids, 4),
            machine_cpu_cores=round(machine / elapsed, 4),
            cores_available=cores,
            saturated=used + kids >= SATURATED_SHARE * cores,
        )


@dataclass
class Preflight:
    warnings: list[str] = field(default_factory=list)
    fd_limit: int = 0


def fds_needed(clients_by_kind: dict[str, int]) -> int:
    return _FD_SLACK + sum(_FDS_PER_CLIENT.get(k, 1) * n for k, n in clients_by_kind.items())


def preflight(clients_by_kind: dict[str, int], new_connections: bool) -> Preflight:
    """Check (and where possible fix) machine limits before a sweep whose largest step is `clients_by_kind`."""
    out = Preflight()
    need = fds_needed(clients_by_kind)
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft != resource.RLIM_INFINITY and soft < need:
        if hard == resource.RLIM_INFINITY or hard >= need:
            resource.setrlimit(resource.RLIMIT_NOFILE, (need, hard))
            total = sum(clients_by_kind.values())
            out.warnings.append(
                f"the open-file limit (ulimit -n) was {soft}, too low for {total} clients: knee raised it to {need} "
                "for this run"
            )
            soft = need
        else:
            total = sum(clients_by_kind.values())
            raise UserError(
                f"the open-file limit is {hard} (ulimit -n) but {total} clients need about {need} file descriptors; "
                f"raise it with `ulimit -n {need}` or run fewer clients per machine"
            )
    out.fd_limit = int(soft)
    if new_connections:
        lo, hi = ephemeral_port_range()
        ports = hi - lo + 1
        out.warnings.append(
            f"a new connection per operation leaves each closed socket in TIME_WAIT for about 60 s: the ephemeral "
            f"port range {lo}-{hi} allows about {ports // 60} new connections/s to one address before connects fail"
        )
    return out


def ephemeral_port_range(path: Path = Path("/proc/sys/net/ipv4/ip_local_port_range")) -> tuple[int, int]:
    try:
        lo, hi = (int(x) for x in path.read_text().split())
    except (OSError, ValueError):
        return 32768, 60999  # the Linux default
    return lo, hi


def preflight_scenario(scenario: Scenario, connect_timeout_s: float = 3.0) -> list[str]:
    """Before any load: every target reachable (every command found), the machine's limits fit the largest
    step. Raises UserError (one sentence) for what would make every operation fail; returns warnings."""
    for g in scenario.groups.values():
        reachable(g, connect_timeout_s)
    top = max(scenario.levels())
    clients: dict[str, int] = {}
    for g in scenario.groups.values():
        clients[g.kind] = clients.get(g.kind, 0) + g.client_count(top)
    new_connections = any(
        isinstance(g, TcpGroup) or getattr(g, "new_connection", False) for g in scenario.groups.values()
    )
    return preflight(clients, new_connections).warnings


def reachable(g: Group, connect_timeout_s: float = 3.0) -> None:
    """Catch what would make every operation fail before any load starts: one sentence each."""
    if isinstance(g, PythonGroup):
        return  # the worker's start message says whether the flow can be imported
    if isinstance(g, ExecGroup | WorkerGroup):
        prog = g.argv[0]
        if "${" in prog:
            return
        found = shutil.which(prog) if os.sep not in prog else (prog if os.access(prog, os.X_OK) else None)
        if found is None:
            raise UserError(f"command not found or not executable: {prog!r} (check the name and your PATH)")
        return
    if isinstance(g, HttpGroup):
        parts = urllib.parse.urlsplit(g.url)
        if not parts.hostname:
            raise UserError(f"bad URL {g.url!r}: it has no host")
        try:
            port = parts.port or (443 if parts.scheme == "https" else 80)
        except ValueError:
            raise UserError(f"bad URL {g.url!r}: the port is not a number from 1 to 65535") from None
        host = parts.hostname
        if g.body_file is not None and not os.access(g.body_file, os.R_OK):
            raise UserError(f"body_file {g.body_file!r} cannot be read (does it exist?)")
    else:
        host_s, _, port_s = g.addr.rpartition(":")
        host, port = host_s.strip("[]"), int(port_s)
    try:
        infos = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)
    except socket.gaierror as exc:
        raise UserError(f"cannot resolve host {host!r}: {exc.strerror} (check the name)") from None
    family, socktype, proto, _, addr = infos[0]
    with socket.socket(family, socktype, proto) as s:
        s.settimeout(connect_timeout_s)
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
