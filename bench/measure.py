"""Run one generator as a child pinned to one core; measure its CPU (user+sys of the whole tree) and peak RSS."""

from __future__ import annotations

import contextlib
import ctypes
import itertools
import os
import resource
import signal
import subprocess
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

PR_SET_PDEATHSIG = 1


@dataclass
class Measured:
    argv: list[str]
    returncode: int
    stdout: str
    stderr: str
    wall_s: float
    cpu_s: float  # user + sys of the child and every descendant it reaped
    user_s: float
    sys_s: float
    maxrss_mb: float  # peak resident set (VmHWM) of the largest process in the tree
    timed_out: bool
    tree_rss_mb: float = 0.0  # with `sum_rss`: the largest sum of the tree's resident sets (VmRSS) in one sample
    # (seconds since the start, the generator's child processes alive): with `count_children`, every ~0.02 s
    children: list[tuple[float, int]] = field(default_factory=list)


def raise_nofile_limit() -> None:
    """Children inherit it: 10 000 clients need more than the usual 1 024 descriptors."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft < hard:
        resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))


def die_with_parent(sig: int = signal.SIGKILL) -> None:
    """In a child before exec: the kernel sends `sig` to it when the benchmark driver dies, so nothing outlives it."""
    libc = ctypes.CDLL(None, use_errno=True)
    libc.prctl(PR_SET_PDEATHSIG, int(sig))


def _tree(pid: int) -> list[int]:
    pids, todo = [], [pid]
    while todo:
        p = todo.pop()
        pids.append(p)
        try:
            for task in os.listdir(f"/proc/{p}/task"):
                todo += [int(c) for c in Path(f"/proc/{p}/task/{task}/children").read_text().split()]
        except OSError:
            continue
    return pids


def _children(pid: int) -> int:
    """How many child processes `pid` has (each of its threads' children)."""
    n = 0
    try:
        for task in os.listdir(f"/proc/{pid}/task"):
            n += len(Path(f"/proc/{pid}/task/{task}/children").read_text().split())
    except OSError:
        pass
    return n


SPAWN_BINS = (100, 500, 1000, 2000, 3000, 4000, 5000)


def spawn_curve(children: list[tuple[float, int]], bins: tuple[int, ...] = SPAWN_BINS) -> list[list[float]]:
    """[lo, hi, ms]: wall-clock ms per new child while the generator went from lo to hi children alive
    (the time it first had hi less the time it first had lo, over hi - lo): how a spawn's cost grows with the
    children (and the descriptors they hold) already there."""

    def first(n: int) -> float | None:
        return next((t for t, c in children if c >= n), None)

    out = []
    for lo, hi in itertools.pairwise(bins):
        a, b = first(lo), first(hi)
        if a is not None and b is not None:
            out.append([float(lo), float(hi), (b - a) * 1000.0 / (hi - lo)])
    return out


def _status_kb(pid: int, field: str) -> int:
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith(field):
                return int(line.split()[1])
    except (OSError, ValueError):
        pass
    return 0


def _hwm_kb(pid: int) -> int:
    # VmHWM, not wait4's ru_maxrss: the latter keeps the forking parent's (Python's) RSS across exec.
    return _status_kb(pid, "VmHWM:")


def run_measured(
    argv: list[str],
    cpu: int | None,
    timeout_s: float,
    env: dict[str, str] | None = None,
    cwd: str | Path | None = None,
    *,
    count_children: bool = False,
    sum_rss: bool = False,
) -> Measured:
    """Start `argv` (under `taskset -c cpu`), wait for it with wait4, kill its process group past `timeout_s`.
    `count_children`: sample how many child processes the generator has, for its spawn rate; `sum_rss`: the
    largest sum of its processes' resident sets (a generator of several processes)."""
    full = ["taskset", "-c", str(cpu), *argv] if cpu is not None else list(argv)
    with tempfile.TemporaryFile() as out, tempfile.TemporaryFile() as err:
        start = time.monotonic()
        proc = subprocess.Popen(
            full,
            stdout=out,
            stderr=err,
            stdin=subprocess.DEVNULL,
            env=env,
            cwd=cwd,
            start_new_session=True,
            preexec_fn=die_with_parent,  # noqa: PLW1509 - one prctl, no locks; the driver has no threads
        )
        deadline = start + timeout_s
        timed_out = False
        hwm_kb = tree_kb = 0
        polls = 0
        children: list[tuple[float, int]] = []
        try:
            while True:
                pid, status, usage = os.wait4(proc.pid, os.WNOHANG)
                if pid == proc.pid:
                    break
                if count_children:  # taskset exec'd into the generator: its children are the clients'
                    children.append((time.monotonic() - start, _children(proc.pid)))
                if polls % 5 == 0:  # every ~0.1 s; the generator is on another core than this loop
                    tree = _tree(proc.pid)
                    hwm_kb = max([hwm_kb, *(_hwm_kb(p) for p in tree)])
                    if sum_rss:
                        tree_kb = max(tree_kb, sum(_status_kb(p, "VmRSS:") for p in tree))
                polls += 1
                if time.monotonic() > deadline and not timed_out:
                    timed_out = True
                    os.killpg(proc.pid, signal.SIGKILL)
                    deadline += 10
                time.sleep(0.02)
        except BaseException:  # Ctrl-C or a bug here: the generator does not outlive the driver
            os.killpg(proc.pid, signal.SIGKILL)
            os.waitpid(proc.pid, 0)
            raise
        wall = time.monotonic() - start
        proc.returncode = os.waitstatus_to_exitcode(status)
        # Descendants left in the child's group (e.g. a pipeline's orphan) are ours to end; a group
        # outlives its leader, so its id cannot have been reused while members remain.
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGKILL)
        out.seek(0)
        err.seek(0)
        return Measured(
            argv=full,
            returncode=proc.returncode,
            stdout=out.read().decode(errors="replace"),
            stderr=err.read().decode(errors="replace"),
            wall_s=wall,
            cpu_s=usage.ru_utime + usage.ru_stime,
            user_s=usage.ru_utime,
            sys_s=usage.ru_stime,
            maxrss_mb=hwm_kb / 1024.0,
            tree_rss_mb=max(tree_kb, hwm_kb) / 1024.0,
            timed_out=timed_out,
            children=children,
        )
