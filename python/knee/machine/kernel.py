"""The load machine's kernel counters over a step, sampled about once a second (`HostSampler`).

Linux `/proc`: listen overflows and drops, SYN retransmits, failed connects and resets (deltas over the
step), TCP sockets in use and in TIME_WAIT, memory in use (peaks); and a census of every TCP socket by
netlink sock_diag (`knee.machine.sockets`): sockets by state and the ephemeral ports held (peaks).
`knee.machine.cpu.CpuMeter` measures the CPU beside it.

Each sample costs a few reads of `/proc` (measured in docs/diagnosis.md); a sampler that cannot read
a file records nothing for it and never fails a step.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from pathlib import Path

import psutil

from knee.machine.host import ephemeral_port_range, sysctl_int
from knee.machine.sockets import Census, accept_queues, tcp_census
from knee.model import HostCounters

SAMPLE_S = 1.0
CENSUS_SHARE = 0.01  # of a core, at most, for the socket census (the netlink dump of every TCP socket)
PROC = Path("/proc")
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


def read_snmp(name: str, net: Path = PROC / "net") -> dict[tuple[str, str], int]:
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


def events(net: Path = PROC / "net") -> dict[str, int]:
    """The event counters HostCounters keeps, now (in the namespace of `net`, this process's by default)."""
    tables = {"netstat": read_snmp("netstat", net), "snmp": read_snmp("snmp", net)}
    return {field: tables[f].get((sec, key), 0) for (f, sec, key), field in _EVENTS.items()}


def sockstat() -> tuple[int, int]:
    """(TCP sockets in use, in TIME_WAIT) from /proc/net/sockstat and sockstat6."""
    inuse = tw = 0
    for name in ("sockstat", "sockstat6"):
        try:
            text = (PROC / "net" / name).read_text()
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


class Ticker:
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
        self._ticker = Ticker(self._sample, every_s)

    def _sample(self) -> None:
        now = events()
        inuse, tw = sockstat()
        states, held, waiting = self._census()
        if not states:  # no census this sample (its CPU budget): the accept queues alone, a dump of the listeners
            waiting = accept_queues()
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
            if states and tw:  # a census: TIME_WAIT's count is sockstat's (the census asks only for a client's)
                states["TIME_WAIT"] = tw
            for state, n in states.items():
                o.tcp_states_peak[state] = max(o.tcp_states_peak.get(state, 0), n)
            for port, n in waiting.items():
                o.accept_queue_peak[port] = max(o.accept_queue_peak.get(port, 0), n)
            o.mem_used_mb_peak = round(max(o.mem_used_mb_peak, used), 1)
            o.mem_total_mb = round(total, 1)

    def _census(self) -> Census:
        """tcp_census(), as often as it costs at most CENSUS_SHARE of a core (some 3 ms for the kernel's walk of
        its tables, then about 0.35 µs a socket: every sample up to some 20 000 sockets in TIME_WAIT, less often
        above; docs/diagnosis.md); nothing new between."""
        if time.monotonic() < self._census_due:
            return Census({}, 0, {})
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
