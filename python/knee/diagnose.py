"""Is knee itself the bottleneck, and will the machine let it open what a step needs?

- `CpuMeter`: knee's own CPU seconds over a step (`getrusage(RUSAGE_SELF)`), as a
  GeneratorStats; the step is flagged saturated when knee used ≥ 90 % of the cores
  it may run on.
- `preflight`: the open-file limit (raised to what the largest step needs when the
  hard limit allows, else one sentence with the fix) and the ephemeral port range
  for groups that open a new connection per operation (a warning).
"""

from __future__ import annotations

import os
import resource
import time
from dataclasses import dataclass, field
from pathlib import Path

from knee.errors import UserError
from knee.model import GeneratorStats

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


def _cpu_seconds() -> float:
    ru = resource.getrusage(resource.RUSAGE_SELF)
    return ru.ru_utime + ru.ru_stime


@dataclass
class CpuMeter:
    """Measure knee's CPU use between `start()` and `stop()`."""

    _cpu0: float = 0.0
    _t0: float = 0.0

    def start(self) -> CpuMeter:
        self._cpu0 = _cpu_seconds()
        self._t0 = time.monotonic()
        return self

    def stop(self) -> GeneratorStats:
        cpu = max(0.0, _cpu_seconds() - self._cpu0)
        elapsed = max(1e-9, time.monotonic() - self._t0)
        cores = cores_available()
        used = cpu / elapsed
        return GeneratorStats(
            cpu_s=round(cpu, 4),
            cpu_cores=round(used, 4),
            cores_available=cores,
            saturated=used >= SATURATED_SHARE * cores,
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
            soft = need
        else:
            total = sum(clients_by_kind.values())
            raise UserError(
                f"the open-file limit (ulimit -n) is {hard} but {total} clients need about {need} file descriptors; "
                f"raise it (ulimit -n {need}) or lower the largest level in sweep.levels"
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
