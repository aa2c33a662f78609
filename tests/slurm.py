"""A real single-node Slurm for the tests: Debian's `slurm-wlm` and `munge`, everything under a private temporary
directory and started by the test: a munge key and `munged` on its own socket, a `slurm.conf` with one node of
this machine's cores (no cgroups, no accounting, free ports), `slurmctld -D` and `slurmd -D`. Stopped by PID, the
jobs cancelled first. `Slurm.env` is what `sbatch`, `squeue`, `scancel` (and dask-jobqueue, which runs them) need:
SLURM_CONF pointing at it."""

from __future__ import annotations

import os
import shutil
import signal
import socket
import subprocess
import tempfile
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

import psutil

from servers import free_ports

PROGRAMS = ("munged", "mungekey", "slurmctld", "slurmd", "sbatch", "squeue", "scancel", "sinfo")

SLURM_CONF = """\
ClusterName=knee-test
SlurmctldHost={host}(127.0.0.1)
SlurmctldPort={ctld_port}
SlurmdPort={d_port}
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
CredType=cred/munge
AuthInfo=socket={dir}/run/munge.socket
StateSaveLocation={dir}/state
SlurmdSpoolDir={dir}/spool
SlurmctldPidFile={dir}/run/slurmctld.pid
SlurmdPidFile={dir}/run/slurmd.pid
SlurmctldLogFile={dir}/log/slurmctld.log
SlurmdLogFile={dir}/log/slurmd.log
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
JobCompType=jobcomp/none
SchedulerType=sched/builtin
SelectType=select/cons_tres
SelectTypeParameters=CR_Core
SlurmdParameters=config_overrides
ReturnToService=2
MpiDefault=none
SwitchType=switch/none
MailProg=/bin/true
# SIGTERM to SIGKILL of a cancelled job: a shipped job's EXIT trap removes its venv then. Slurm's default, 30 s:
# with 10, a busy CI's removal was cut short (its venvs left half-removed in /tmp).
KillWait=30
MinJobAge=2
NodeName={host} NodeAddr=127.0.0.1 CPUs={cpus} RealMemory={memory_mb} State=UNKNOWN
PartitionName=debug Nodes={host} Default=YES MaxTime=INFINITE State=UP
"""


@dataclass
class Slurm:
    dir: Path
    env: dict[str, str]  # SLURM_CONF for sbatch, squeue, scancel
    procs: list[subprocess.Popen[bytes]] = field(default_factory=list)  # munged, slurmctld, slurmd

    def run(self, *argv: str) -> str:
        out = subprocess.run(argv, capture_output=True, text=True, timeout=30, env={**os.environ, **self.env})
        if out.returncode:
            raise RuntimeError(f"{' '.join(argv)} failed ({out.returncode}): {out.stderr.strip()}")
        return out.stdout

    def jobs(self) -> list[tuple[str, str, str]]:
        """(job id, state, name) of every job squeue shows (pending, running, completing)."""
        lines = self.run("squeue", "-h", "-o", "%i %T %j").splitlines()
        return [tuple(line.split(maxsplit=2)) for line in lines if line.strip()]  # type: ignore[misc]

    def log_tail(self, lines: int = 15) -> str:
        out = []
        for name in ("munged.log", "slurmctld.out", "slurmd.out", "slurmctld.log", "slurmd.log"):
            path = self.dir / "log" / name
            if path.exists():
                out.append(f"--- {name}\n" + "\n".join(path.read_text(errors="replace").splitlines()[-lines:]))
        return "\n".join(out)


def job_processes(job_id: str, name: str | None = None) -> list[int]:
    """PIDs of the processes running in Slurm job `job_id` (by their SLURM_JOB_ID), those named `name` only."""
    found = []
    for p in psutil.process_iter(["name"]):
        if name is not None and p.info["name"] != name:
            continue
        try:
            if p.environ().get("SLURM_JOB_ID") == job_id:
                found.append(p.pid)
        except (psutil.NoSuchProcess, psutil.AccessDenied, psutil.ZombieProcess):
            continue
    return found


def _missing() -> list[str]:
    return [p for p in PROGRAMS if shutil.which(p) is None and not Path("/usr/sbin", p).exists()]


@contextmanager
def start_slurm() -> Iterator[Slurm]:
    """munged, slurmctld and slurmd of this test's own, in a private directory (removed afterwards)."""
    missing = _missing()
    if missing:
        raise RuntimeError(f"Slurm is not installed ({', '.join(missing)}): run `make ci-deps`")
    # A private directory under the system's temporary one: munged wants its socket's directory reachable by all.
    tmp = Path(tempfile.mkdtemp(prefix="knee-slurm-"))
    tmp.chmod(0o755)
    for sub, mode in (("munge", 0o700), ("run", 0o755), ("log", 0o755), ("state", 0o755), ("spool", 0o755)):
        (tmp / sub).mkdir()
        (tmp / sub).chmod(mode)
    host = socket.gethostname().split(".")[0]
    conf, ports = tmp / "slurm.conf", free_ports(2)
    conf.write_text(
        SLURM_CONF.format(
            dir=tmp, host=host, ctld_port=ports[0], d_port=ports[1], cpus=os.cpu_count() or 1,
            memory_mb=psutil.virtual_memory().total // 2**20 // 2,
        )
    )  # fmt: skip
    slurm = Slurm(tmp, {"SLURM_CONF": str(conf)})
    env = {**os.environ, **slurm.env}
    try:
        subprocess.run(["mungekey", "--create", f"--keyfile={tmp}/munge/munge.key"], check=True, capture_output=True)
        daemons = [
            ["munged", "-F", f"--socket={tmp}/run/munge.socket", f"--key-file={tmp}/munge/munge.key",
             f"--log-file={tmp}/log/munged.log", f"--pid-file={tmp}/run/munged.pid",
             f"--seed-file={tmp}/munge/munged.seed"],
            ["slurmctld", "-D", "-f", str(conf)],
            ["slurmd", "-D", "-f", str(conf)],
        ]  # fmt: skip
        for argv in daemons:
            log = open(tmp / "log" / f"{argv[0]}.out", "wb")  # noqa: SIM115
            slurm.procs.append(subprocess.Popen(argv, stdout=log, stderr=log, stdin=subprocess.DEVNULL, env=env))
            if argv[0] == "munged":
                _wait_for((tmp / "run" / "munge.socket").exists, "munged's socket", slurm)
        _wait_for(lambda: _node_state(slurm) == "idle", "the node to be idle (sinfo)", slurm)
        yield slurm
    finally:
        _stop(slurm)
        shutil.rmtree(tmp, ignore_errors=True)


def _node_state(slurm: Slurm) -> str:
    try:
        return slurm.run("sinfo", "-h", "-o", "%T").strip()
    except RuntimeError:
        return ""


def _wait_for(ready: Callable[[], bool], what: str, slurm: Slurm, timeout_s: float = 30) -> None:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if ready():
            return
        dead = [p.args[0] for p in slurm.procs if p.poll() is not None]
        if dead:
            raise RuntimeError(f"{', '.join(map(str, dead))} ended while waiting for {what}:\n{slurm.log_tail()}")
        time.sleep(0.1)
    raise RuntimeError(f"no sign of {what} after {timeout_s:.0f} s:\n{slurm.log_tail()}")


def _stop(slurm: Slurm) -> None:
    """Cancel what is left in the queue, then end slurmd, slurmctld and munged, by PID."""
    if all(p.poll() is None for p in slurm.procs) and len(slurm.procs) == 3:
        try:
            ids = [job_id for job_id, _, _ in slurm.jobs()]
            if ids:
                slurm.run("scancel", *ids)
                deadline = time.monotonic() + 15
                while slurm.jobs() and time.monotonic() < deadline:
                    time.sleep(0.2)
        except (RuntimeError, subprocess.TimeoutExpired):
            pass
    for p in reversed(slurm.procs):
        if p.poll() is None:
            p.send_signal(signal.SIGTERM)
    for p in reversed(slurm.procs):
        try:
            p.wait(10)
        except subprocess.TimeoutExpired:
            p.kill()
            p.wait(5)
