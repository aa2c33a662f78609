"""Real Dask clusters for the tests: a `dask scheduler` and `dask worker` processes on 127.0.0.1, started and
stopped by PID (tests/integration/test_distributed.py, test_driver_lease.py)."""

from __future__ import annotations

import importlib.util
import os
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import psutil
import pytest

from servers import free_port

DASK = str(Path(sys.executable).parent / "dask")


def need(module: str) -> None:
    """Skip the calling test module when `module` (distributed, dask_jobqueue) is not installed, without importing
    it: every pytest process collects these modules, and pytest.importorskip paid dask's import (about 0.4 s) in
    each of them."""
    if importlib.util.find_spec(module) is None:
        pytest.skip(f"{module} is not installed: make install installs knee[dask]", allow_module_level=True)


# Dask's housekeeping, quieter in the tests' clusters (none has a dashboard to show it): no statistical profiler
# sampling every thread's stack each 10 ms, the event loop's tick, the system monitor and the memory monitor once a
# second or two rather than each 20, 500 and 100 ms. Knee reads none of them. A scheduler and three idle workers took
# 1.87 CPU-s in 20 s with Dask's defaults and 0.27 with these, and the parallel pass of make test runs its Dask
# tests beside others on two cores.
QUIET = {
    "DASK_DISTRIBUTED__WORKER__PROFILE__ENABLED": "False",
    "DASK_DISTRIBUTED__ADMIN__TICK__INTERVAL": "1s",
    "DASK_DISTRIBUTED__ADMIN__SYSTEM_MONITOR__INTERVAL": "2s",
    "DASK_DISTRIBUTED__WORKER__MEMORY__MONITOR_INTERVAL": "1s",
}


def quiet_env() -> dict[str, str]:
    """The environment of a Dask process the tests start: this one's, with Dask's housekeeping quieter (QUIET)."""
    return {**os.environ, **QUIET}


@dataclass
class Cluster:
    """A `dask scheduler` and its `dask worker` processes (no nanny: a killed worker stays dead)."""

    address: str
    scheduler: subprocess.Popen[bytes]
    workers: list[subprocess.Popen[bytes]] = field(default_factory=list)
    logs: Path | None = None
    dask: str = DASK  # the `dask` command that starts the workers (a venv's)

    def add_worker(
        self, name: str, prefix: list[str] | None = None, host: str = "127.0.0.1", scheduler: str | None = None
    ) -> None:
        """A worker named `name` listening on `host`, started behind `prefix` (`ip netns exec NS`), reaching the
        scheduler at `scheduler` (default: the cluster's address)."""
        log = open(self.logs / f"{name}.log", "wb") if self.logs else subprocess.DEVNULL  # noqa: SIM115
        self.workers.append(
            subprocess.Popen(
                [
                    *(prefix or []),
                    self.dask,
                    "worker",
                    scheduler or self.address,
                    "--nthreads",
                    "1",
                    "--no-nanny",
                    "--no-dashboard",
                    "--name",
                    name,
                    "--host",
                    host,
                ],
                stdout=log,
                stderr=log,
                stdin=subprocess.DEVNULL,
                env=quiet_env(),
            )
        )

    def wait_for(self, n: int, timeout_s: float = 60) -> None:
        import distributed

        with distributed.Client(self.address, timeout=30) as c:  # connecting waits for the scheduler
            if n:
                c.wait_for_workers(n, timeout=timeout_s)

    def worker_pids(self) -> dict[str, int]:
        """Each worker's name → the PID of the process running it (under `ip netns exec` too)."""
        import distributed

        with distributed.Client(self.address, timeout=10) as c:
            pids = c.run(os.getpid)
            return {str(w["name"]): pids[a] for a, w in c.scheduler_info(n_workers=-1)["workers"].items()}

    def stop(self) -> None:
        for p in [*self.workers, self.scheduler]:
            if p.poll() is None:
                p.terminate()
        for p in [*self.workers, self.scheduler]:
            try:
                p.wait(10)
            except subprocess.TimeoutExpired:
                p.kill()
                p.wait(5)


def start_cluster(tmp: Path, workers: int, host: str = "127.0.0.1", dask: str = DASK) -> Cluster:
    """A scheduler and `workers` workers, all run by `dask` (default: this venv's)."""
    port = free_port()
    logs = tmp / "dask-logs"
    logs.mkdir(parents=True, exist_ok=True)
    log = open(logs / "scheduler.log", "wb")  # noqa: SIM115
    scheduler = subprocess.Popen(
        [dask, "scheduler", "--host", host, "--port", str(port), "--no-dashboard"],
        stdout=log,
        stderr=log,
        stdin=subprocess.DEVNULL,
        env=quiet_env(),
    )
    cluster = Cluster(f"tcp://{host}:{port}", scheduler, logs=logs, dask=dask)
    for i in range(workers):
        cluster.add_worker(f"w{i}")
    try:
        cluster.wait_for(workers)
    except Exception:
        cluster.stop()
        raise
    return cluster


def wait_for_children(parents: list[int], want: int, timeout_s: float = 30) -> list[int]:
    """PIDs of the client processes under `parents`, once `want` of the parents have some."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        found: dict[int, list[int]] = {}
        for p in parents:
            try:
                found[p] = [k.pid for k in psutil.Process(p).children(recursive=True)]
            except psutil.NoSuchProcess:
                continue
        if sum(1 for v in found.values() if v) >= want:
            return [k for v in found.values() for k in v]
        time.sleep(0.05)
    raise AssertionError(f"the workers {parents} never ran client processes")


def driving(
    cluster: str, target: Any, out: Path, steps: tuple[str, str], during: Callable[[subprocess.Popen[str]], None]
) -> tuple[int, str, str]:
    """`knee sweep` of `target` (a TargetProcess) on `cluster`, `steps` (levels, duration), 10 ms of think time,
    no settling or recovery, into `out`; once its first step has made 20 requests, `during(driver)` runs. Its exit
    status, stdout and stderr; the driver is ended by PID if still running."""
    argv = ["sweep", target.url + "/", "--levels", steps[0], "-d", steps[1], "--think", "10ms", "--no-recovery",
            "--settle", "0s", "--out", str(out), "--cluster", cluster]  # fmt: skip
    before = target.stats()["requests"]  # a module's target has served its other tests
    driver = subprocess.Popen(
        [sys.executable, "-m", "knee", *argv], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        stdin=subprocess.DEVNULL,
    )  # fmt: skip
    try:
        deadline = time.monotonic() + 60
        while target.stats()["requests"] < before + 20 and time.monotonic() < deadline:
            time.sleep(0.1)
        during(driver)
        stdout, stderr = driver.communicate(timeout=120)
    finally:
        if driver.poll() is None:
            driver.kill()
            driver.wait()
    return driver.returncode, stdout, stderr
