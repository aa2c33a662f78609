"""The machine's and the target's counters over a step, sampled about once a second.

- `HostSampler`: the load machine's kernel counters (Linux `/proc`): listen overflows and drops,
  SYN retransmits, failed connects and resets (deltas over the step), TCP sockets in use and in
  TIME_WAIT, memory in use (peaks); and a census of every TCP socket by netlink sock_diag: sockets by
  state and the ephemeral ports held (peaks). `knee.diagnose.CpuMeter` measures the CPU beside it.
- `TargetMonitor`: the target's process tree on this machine (`--monitor-pid`, `--monitor-name`,
  `[monitor]`): CPU, RSS, threads, open files, TCP connections by state and how full the accept
  queue of each listening socket got (netlink sock_diag, as `ss`: a listening socket's receive queue
  is its accept queue, its send queue that queue's limit).

Each sample costs a few reads of `/proc` (measured in docs/diagnosis.md); a sampler that cannot read
a file records nothing for it and never fails a step.
"""

from __future__ import annotations

import contextlib
import os
import socket
import struct
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import psutil

from knee.diagnose import ephemeral_port_range, sysctl_int
from knee.errors import UserError
from knee.model import HostCounters, ListenSocket, TargetStats

SAMPLE_S = 1.0
CENSUS_SHARE = 0.01  # of a core, at most, for the socket census (the netlink dump of every TCP socket)
_PROC = Path("/proc")
# (file, section, field) -> HostCounters delta field
_EVENTS = {
    ("netstat", "TcpExt", "ListenOverflows"): "listen_overflows",
    ("netstat", "TcpExt", "ListenDrops"): "listen_drops",
    ("netstat", "TcpExt", "TCPSynRetrans"): "syn_retrans",
    ("snmp", "Tcp", "AttemptFails"): "attempt_fails",
    ("snmp", "Tcp", "EstabResets"): "estab_resets",
    ("snmp", "Tcp", "OutRsts"): "out_rsts",
    ("snmp", "Tcp", "RetransSegs"): "retrans_segs",
}
# the kernel's TCP state codes (include/net/tcp_states.h), as sock_diag reports them
_TCP_STATE_NAMES = {
    1: "ESTABLISHED",
    2: "SYN_SENT",
    3: "SYN_RECV",
    4: "FIN_WAIT1",
    5: "FIN_WAIT2",
    6: "TIME_WAIT",
    7: "CLOSE",
    8: "CLOSE_WAIT",
    9: "LAST_ACK",
    10: "LISTEN",
    11: "CLOSING",
}


def read_snmp(name: str, net: Path = _PROC / "net") -> dict[tuple[str, str], int]:
    """`/proc/net/netstat` or `/proc/net/snmp` as {(section, field): value}: header and value lines alternate.
    `net` names another network namespace's tables (`/proc/PID/net`)."""
    out: dict[tuple[str, str], int] = {}
    try:
        lines = (net / name).read_text().splitlines()
    except OSError:
        return out
    for head, values in zip(lines[::2], lines[1::2], strict=False):
        section, _, keys = head.partition(":")
        _, _, nums = values.partition(":")
        for k, v in zip(keys.split(), nums.split(), strict=False):
            try:
                out[(section, k)] = int(v)
            except ValueError:
                continue
    return out


def events(net: Path = _PROC / "net") -> dict[str, int]:
    """The event counters HostCounters keeps, now (in the namespace of `net`, this process's by default)."""
    tables = {"netstat": read_snmp("netstat", net), "snmp": read_snmp("snmp", net)}
    return {field: tables[f].get((sec, key), 0) for (f, sec, key), field in _EVENTS.items()}


def sockstat() -> tuple[int, int]:
    """(TCP sockets in use, in TIME_WAIT) from /proc/net/sockstat and sockstat6."""
    inuse = tw = 0
    for name in ("sockstat", "sockstat6"):
        try:
            text = (_PROC / "net" / name).read_text()
        except OSError:
            continue
        for line in text.splitlines():
            head, _, rest = line.partition(":")
            if head not in ("TCP", "TCP6"):
                continue
            parts = rest.split()
            vals = dict(zip(parts[::2], parts[1::2], strict=False))
            inuse += int(vals.get("inuse", 0))
            tw += int(vals.get("tw", 0))
    return inuse, tw


def meminfo() -> tuple[float, float]:
    """(used, total) memory in MB: MemTotal − MemAvailable."""
    vm = psutil.virtual_memory()
    return (vm.total - vm.available) / 1e6, vm.total / 1e6


class _Ticker:
    """Call `sample` now, then every SAMPLE_S on a daemon thread, and once more at `finish()`."""

    def __init__(self, sample: Callable[[], None], every_s: float = SAMPLE_S) -> None:
        self._sample = sample
        self._every = every_s
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, name="knee-sampler", daemon=True)

    def start(self) -> None:
        self._sample()
        self._thread.start()

    def _loop(self) -> None:
        while not self._stop.wait(self._every):
            self._sample()

    def finish(self) -> None:
        self._stop.set()
        self._thread.join()
        self._sample()


class HostSampler:
    """This machine's kernel counters between `start()` and `stop()`."""

    def __init__(self, every_s: float = SAMPLE_S) -> None:
        self._first: dict[str, int] = {}
        self._last: dict[str, int] = {}
        self._ports = ephemeral_port_range()
        lo, hi = self._ports
        self._out = HostCounters(ephemeral_ports=hi - lo + 1, somaxconn=sysctl_int("net/core/somaxconn") or 0)
        self._lock = threading.Lock()
        self._census_due = 0.0
        self._ticker = _Ticker(self._sample, every_s)

    def _sample(self) -> None:
        now = events()
        inuse, tw = sockstat()
        states, held = self._census()
        used, total = meminfo()
        with self._lock:
            if not self._first:
                self._first = now
            self._last = now
            o = self._out
            o.samples += 1
            o.tcp_inuse_peak = max(o.tcp_inuse_peak, inuse)
            o.time_wait_peak = max(o.time_wait_peak, tw)
            o.ephemeral_in_use_peak = max(o.ephemeral_in_use_peak, held)
            for state, n in states.items():
                o.tcp_states_peak[state] = max(o.tcp_states_peak.get(state, 0), n)
            o.mem_used_mb_peak = round(max(o.mem_used_mb_peak, used), 1)
            o.mem_total_mb = round(total, 1)

    def _census(self) -> tuple[dict[str, int], int]:
        """tcp_census(), as often as it costs at most CENSUS_SHARE of a core (about 1.5 µs per socket: every
        sample up to some 6 000 sockets, less often above; docs/diagnosis.md); nothing new between."""
        if time.monotonic() < self._census_due:
            return {}, 0
        t0 = time.thread_time()
        out = tcp_census(self._ports)
        self._census_due = time.monotonic() + (time.thread_time() - t0) / CENSUS_SHARE
        return out

    def start(self) -> HostSampler:
        self._ticker.start()
        return self

    def stop(self) -> HostCounters:
        self._ticker.finish()
        with self._lock:
            for k, v in self._last.items():
                setattr(self._out, k, max(0, v - self._first.get(k, v)))
            return self._out.model_copy()


# ---- the target ------------------------------------------------------------------------------


def find_process(pid: int | None = None, name: str | None = None) -> psutil.Process:
    """The process to monitor, by pid or by name (its command's name or its executable's base name; the
    oldest match whose parent does not match too, i.e. the top of a server's process tree)."""
    if pid is not None:
        try:
            return psutil.Process(pid)
        except psutil.NoSuchProcess:
            raise UserError(f"--monitor-pid {pid}: no such process; give the pid of the running service") from None
        except psutil.Error as exc:
            raise UserError(f"--monitor-pid {pid}: cannot read it ({exc}); run knee as its user or as root") from None
    if not name:
        raise UserError("monitor needs a pid or a name: --monitor-pid PID or --monitor-name NAME")
    found: list[psutil.Process] = []
    for p in psutil.process_iter(["name", "exe", "cmdline"]):
        info = p.info
        argv0 = os.path.basename((info.get("cmdline") or [""])[0] or "")
        exe = os.path.basename(info.get("exe") or "")
        if name in (info.get("name"), argv0, exe) and p.pid != os.getpid():
            found.append(p)
    if not found:
        raise UserError(
            f"--monitor-name {name!r}: no running process has that name; check `pgrep -l {name}` or use --monitor-pid"
        )
    pids = {p.pid for p in found}
    tops = [p for p in found if p.ppid() not in pids]
    return min(tops or found, key=lambda p: p.create_time())


def _socket_inodes(pids: list[int]) -> set[int]:
    out: set[int] = set()
    for pid in pids:
        fd_dir = _PROC / str(pid) / "fd"
        try:
            names = os.listdir(fd_dir)
        except OSError:
            continue
        for fd in names:
            try:
                link = os.readlink(fd_dir / fd)
            except OSError:
                continue
            if link.startswith("socket:["):
                out.add(int(link[8:-1]))
    return out


_SOCK_DIAG_BY_FAMILY = 20
_NLM_F_DUMP_REQUEST = 0x1 | 0x300
_NLMSG_ERROR, _NLMSG_DONE = 2, 3
_NETLINK_SOCK_DIAG = 4  # NETLINK_INET_DIAG
_ALL_STATES = 0xFFF
_NOT_TIME_WAIT = _ALL_STATES & ~(1 << 6)
_LISTEN = 10
_DIAG_MSG = struct.Struct("=BBBBHH16s16sIQIIIII")  # inet_diag_msg: its sockid, then expires … inode


def _diag(states: int) -> Iterator[tuple[int, int, int, int, int]]:
    """(state, local port, receive queue, send queue, inode) of every TCP socket of this network namespace
    in `states` (a bit mask of state codes), by one netlink sock_diag dump per address family, as `ss`
    does (reading /proc/net/tcp walks the whole hash table for every page it returns)."""
    for family in (socket.AF_INET, socket.AF_INET6):
        req = struct.pack("=BBBBI48x", family, socket.IPPROTO_TCP, 0, 0, states)
        head = struct.pack("=IHHII", 16 + len(req), _SOCK_DIAG_BY_FAMILY, _NLM_F_DUMP_REQUEST, 1, 0)
        try:
            with socket.socket(socket.AF_NETLINK, socket.SOCK_RAW, _NETLINK_SOCK_DIAG) as nl:
                nl.sendall(head + req)
                done = False
                while not done:
                    data = nl.recv(1 << 16)
                    if not data:
                        break
                    at = 0
                    while at + 16 <= len(data):
                        length, kind = struct.unpack_from("=IH", data, at)
                        if kind in (_NLMSG_DONE, _NLMSG_ERROR) or length < 16:
                            done = True
                            break
                        if length >= 16 + _DIAG_MSG.size:
                            f = _DIAG_MSG.unpack_from(data, at + 16)
                            yield f[1], socket.ntohs(f[4]), f[11], f[12], f[14]
                        at += (length + 3) & ~3
        except OSError:
            continue


def tcp_sockets() -> dict[int, tuple[str, int, int, int]]:
    """Every TCP socket of this network namespace but those in TIME_WAIT (they belong to no process):
    inode -> (state, local port, receive queue, send queue). For a listening socket the receive queue is
    its accept queue and the send queue that queue's limit."""
    return {
        inode: (_TCP_STATE_NAMES.get(state, str(state)), port, rq, wq)
        for state, port, rq, wq, inode in _diag(_NOT_TIME_WAIT)
    }


def tcp_census(ports: tuple[int, int]) -> tuple[dict[str, int], int]:
    """This namespace's TCP sockets by state, and how many local ports of the ephemeral range `ports`
    (lo, hi) a socket that is not listening holds (TIME_WAIT included): what a client machine runs out of."""
    lo, hi = ports
    states: dict[int, int] = {}
    held: set[int] = set()
    for state, port, _, _, _ in _diag(_ALL_STATES):
        states[state] = states.get(state, 0) + 1
        if lo <= port <= hi and state != _LISTEN:
            held.add(port)
    return {_TCP_STATE_NAMES.get(k, str(k)): n for k, n in states.items()}, len(held)


class TargetMonitor:
    """The target's process tree between `start()` and `stop()`."""

    def __init__(self, pid: int | None = None, name: str | None = None, every_s: float = SAMPLE_S) -> None:
        self.proc = find_process(pid, name)
        self._name = name or self.proc.name()
        self._lock = threading.Lock()
        self._every = every_s
        self._reset()

    def _reset(self) -> None:
        self._out = TargetStats(pid=self.proc.pid, name=self._name)
        with contextlib.suppress(psutil.Error, OSError, AttributeError):
            self._out.fd_limit = int(self.proc.rlimit(psutil.RLIMIT_NOFILE)[0])
        self._cpu: dict[int, float] = {}  # pid -> CPU seconds at its first sample in this step
        self._cpu_last: dict[int, float] = {}
        self._rss_sum = 0.0
        self._t_prev: float | None = None
        self._cpu_prev = 0.0
        self._listen: dict[int, ListenSocket] = {}
        self._t0 = time.monotonic()

    def _tree(self) -> list[psutil.Process]:
        try:
            return [self.proc, *self.proc.children(recursive=True)]
        except psutil.Error:
            return []

    def _sample(self) -> None:
        tree = self._tree()
        now = time.monotonic()
        rss = 0
        threads = fds = 0
        pids = []
        for p in tree:
            try:
                with p.oneshot():
                    t = p.cpu_times()
                    rss += p.memory_info().rss
                    threads += p.num_threads()
                    fds += p.num_fds()
            except psutil.Error:
                continue
            pids.append(p.pid)
            cpu = t.user + t.system
            self._cpu.setdefault(p.pid, cpu)
            self._cpu_last[p.pid] = cpu
        states: dict[str, int] = {}
        listen: dict[int, tuple[int, int]] = {}  # port -> (accept queue, its limit)
        if pids:
            mine = _socket_inodes(pids)
            for inode, (state, port, rq, wq) in tcp_sockets().items():
                if inode in mine:
                    states[state] = states.get(state, 0) + 1
                    if state == "LISTEN":
                        listen[port] = (max(listen.get(port, (0, 0))[0], rq), wq)
        with self._lock:
            o = self._out
            if not pids:
                o.alive = False
                return
            o.samples += 1
            o.processes_peak = max(o.processes_peak, len(pids))
            o.rss_mb_peak = round(max(o.rss_mb_peak, rss / 1e6), 2)
            self._rss_sum += rss / 1e6
            o.threads_peak = max(o.threads_peak, threads)
            o.fds_peak = max(o.fds_peak, fds)
            for state, n in states.items():
                o.connections_peak[state] = max(o.connections_peak.get(state, 0), n)
            for port, (q, limit) in listen.items():
                ls = self._listen.setdefault(port, ListenSocket(port=port))
                ls.queue_peak = max(ls.queue_peak, q)
                ls.backlog = limit
            cpu = sum(self._cpu_last[p] - self._cpu[p] for p in self._cpu_last)
            if self._t_prev is not None and now > self._t_prev:
                o.cpu_cores_peak = round(max(o.cpu_cores_peak, (cpu - self._cpu_prev) / (now - self._t_prev)), 3)
            self._t_prev, self._cpu_prev = now, cpu

    def start(self) -> TargetMonitor:
        with self._lock:
            self._reset()
        self._ticker = _Ticker(self._sample, self._every)
        self._ticker.start()
        return self

    def stop(self) -> TargetStats:
        self._ticker.finish()
        with self._lock:
            o = self._out
            elapsed = max(1e-9, time.monotonic() - self._t0)
            o.cpu_s = round(sum(self._cpu_last[p] - self._cpu[p] for p in self._cpu_last), 3)
            o.cpu_cores_mean = round(o.cpu_s / elapsed, 3)
            o.rss_mb_mean = round(self._rss_sum / o.samples, 2) if o.samples else 0.0
            o.listen = sorted(self._listen.values(), key=lambda s: s.port)
            return o.model_copy(deep=True)
