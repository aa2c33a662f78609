"""The load side's CPU over a step: knee's own, its child processes' and the machine's.

`CpuMeter` measures knee's own CPU seconds over a step (`getrusage(RUSAGE_SELF)`), its child processes'
(exec clients and worker programs: `RUSAGE_CHILDREN` for the ones reaped, the live ones' CPU times by
psutil) and the machine's, as a GeneratorStats; the step is flagged saturated when knee and its children
used ≥ 90 % of the cores they may run on (or of the CPUs a cgroup's quota allows them: a container's limit), or
when those cores were ≥ 90 % busy and knee and its children held at least half of them (other processes took the
rest).
"""

from __future__ import annotations

import math
import os
import resource
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import psutil

from knee.model import GeneratorStats

SATURATED_SHARE = 0.9
BUSY_SHARE = 0.5  # of its cores, knee and its children's share when the cores were full: saturated too


def _affinity() -> int:
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # pragma: no cover - not Linux
        return os.cpu_count() or 1


def cores_available() -> int:
    """The cores knee may run on: its affinity's, fewer when a cgroup's CPU quota (a container's limit) allows less
    (1.5 CPUs: 2)."""
    quota = cpu_quota()
    return max(1, min(_affinity(), math.ceil(quota))) if quota else _affinity()


def cpu_quota(proc: Path = Path("/proc/self")) -> float:
    """The CPUs a cgroup's CPU quota lets this process use (a container's CPU limit): the least along its cgroup's
    path up to the hierarchy's root, from cgroup v2's cpu.max or v1's cpu.cfs_quota_us over cpu.cfs_period_us; 0
    when there is none or it cannot be read. `proc`: /proc/PID of the process to ask about."""
    try:
        groups = (proc / "cgroup").read_text().splitlines()
        mounts = (proc / "mountinfo").read_text().splitlines()
    except OSError:
        return 0.0
    least = 0.0
    for line in groups:
        hierarchy, _, rest = line.partition(":")
        controllers, _, path = rest.partition(":")
        v2 = hierarchy == "0" and not controllers
        if not v2 and "cpu" not in controllers.split(","):
            continue
        for root, point in _cgroup_mounts(mounts, v2):
            if path != root and not path.startswith(root.rstrip("/") + "/"):
                continue
            here = Path(point + path[len(root.rstrip("/")) :])
            for d in (here, *here.parents):
                quota = _quota(d, v2)
                if quota and (not least or quota < least):
                    least = quota
                if d == Path(point):
                    break
    return least


def _cgroup_mounts(mountinfo: list[str], v2: bool) -> list[tuple[str, str]]:
    """(root within the hierarchy, mount point) of the mounted cgroup v2 hierarchy, or of v1's with the cpu
    controller (mountinfo: `ID PARENT DEV ROOT POINT OPTIONS ... - TYPE SOURCE SUPER_OPTIONS`)."""
    out = []
    for line in mountinfo:
        head, _, tail = line.partition(" - ")
        fields, kind = head.split(), tail.split()
        if len(fields) < 5 or len(kind) < 3:
            continue
        if (kind[0] == "cgroup2") if v2 else (kind[0] == "cgroup" and "cpu" in kind[2].split(",")):
            out.append((fields[3], fields[4]))
    return out


def _quota(d: Path, v2: bool) -> float:
    """The CPUs cgroup directory `d`'s own quota allows (0: none, or not readable)."""
    try:
        if v2:
            quota, period = (d / "cpu.max").read_text().split()[:2]
        else:
            quota, period = ((d / f"cpu.cfs_{k}_us").read_text().strip() for k in ("quota", "period"))
        return float(quota) / float(period) if quota not in ("max", "-1") and float(period) > 0 else 0.0
    except (OSError, ValueError):
        return 0.0


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
    _quota: float = 0.0

    def start(self) -> CpuMeter:
        self._cpu0 = _cpu_seconds()
        self._reaped0 = _cpu_seconds(resource.RUSAGE_CHILDREN)
        self._live0 = _live_children_cpu()
        self._machine0 = _machine_busy()
        self._quota = cpu_quota()
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
        cores = _affinity()
        quota = min(self._quota, cores)
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
            cpu_quota=round(quota, 4) if quota < cores else 0.0,
            machine_cores=os.cpu_count() or cores,
            saturated=saturated(used + kids, own, cores, quota),
        )


def saturated(load: float, busy: float, cores: int, quota: float = 0.0) -> bool:
    """The load side could not get more CPU: knee and its children (`load` cores) used nearly all of the `cores`
    they may run on (or of the CPUs a cgroup's `quota` allows, when it is set and less), or those cores were full
    (`busy`, every process's) and knee and its children held at least half of them: other processes took the
    rest."""
    limit = min(quota, cores) if quota else cores
    return load >= SATURATED_SHARE * limit or (busy >= SATURATED_SHARE * cores and load >= BUSY_SHARE * cores)
