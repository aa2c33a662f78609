"""Run one generator as a child pinned to one core; measure its CPU (user+sys of the whole tree) and peak RSS."""

from __future__ import annotations

import contextlib
import ctypes
import os
import resource
import signal
import subprocess
import tempfile
import time
from dataclasses import dataclass
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


def _hwm_kb(pid: int) -> int:
    # VmHWM, not wait4's ru_maxrss: the latter keeps the forking parent's (Python's) RSS across exec.
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmHWM:"):
                return int(line.split()[1])
    except (OSError, ValueError):
        pass
    return 0


def run_measured(
    argv: list[str],
    cpu: int | None,
    timeout_s: float,
    env: dict[str, str] | None = None,
    cwd: str | Path | None = None,
) -> Measured:
    """Start `argv` (under `taskset -c cpu`), wait for it with wait4, kill its process group past `timeout_s`."""
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
        hwm_kb = 0
        polls = 0
        try:
            while True:
                pid, status, usage = os.wait4(proc.pid, os.WNOHANG)
                if pid == proc.pid:
                    break
                if polls % 5 == 0:  # every ~0.1 s; the generator is on another core than this loop
                    hwm_kb = max([hwm_kb, *(_hwm_kb(p) for p in _tree(proc.pid))])
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
            timed_out=timed_out,
        )
