"""This machine's limits, as preflight reads them: open files, ephemeral ports, TIME_WAIT reuse, accept
backlog, memory and cores (`Machine`), and the sysctl readers the kernel counters share."""

from __future__ import annotations

import os
import platform
import resource
import socket
from dataclasses import dataclass
from pathlib import Path

import psutil

from knee.machine.cpu import cores_available

_TW_REUSE = {0: "0: off", 1: "1: on", 2: "2: loopback only"}


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


def _platform() -> str:
    """platform.platform()'s text ("Linux-6.1.0-x86_64-with-glibc2.36") without the `uname -p` process it starts on
    Linux to learn a processor name it then drops: a fork and an exec of every run's fixed cost."""
    u = os.uname()
    if u.sysname != "Linux":
        return platform.platform()
    libc, version = platform.libc_ver()  # glibc answers os.confstr; others read the executable
    return f"{u.sysname}-{u.release}-{u.machine}" + (f"-with-{libc}{version}" if libc else "")


def identity() -> dict[str, object]:
    """Which machine a run was made on, as its record keeps it."""
    return {
        "hostname": socket.gethostname(),
        "platform": _platform(),
        "python": platform.python_version(),
        "cpus": os.cpu_count(),
        "cores_available": len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count(),
    }
