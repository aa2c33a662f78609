"""The driver's lease (docs/distributed.md, knee.executor.lease): a `knee sweep` driver killed with `kill -9` mid-step
leaves no load behind. A real `dask scheduler` and two `dask worker` processes run a step and a baseload of `sleep`
clients; once the driver is gone, every client process on every worker is gone within the lease (5 s, checked by
PID), and the same workers take the next run, its counts exact against `knee target`'s own. A scheduler that dies
is the same for the workers. Before each kill the clients are held alive past the lease: the driver renews it.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from knee.demo_target import start_target
from knee.store import RunDir

from conftest import knee_cli
from dask_cluster import Cluster, driving, need, start_cluster, wait_for_children
from servers import kill_if_running, pids_alive, sent

need("distributed")

LEASE_S = 5.0

SLEEPERS = """\
[groups.base]
kind = "exec"
argv = ["sleep", "60"]
clients = 2
background = true

[groups.load]
kind = "exec"
argv = ["sleep", "60"]

[sweep]
levels = [4]
duration = "60s"
settle_wait = "0s"  # no probe before the step: a probe of `sleep 60` would take a minute

[recovery]
enabled = false

[cluster]
address = "{address}"
"""


@dataclass
class Sleepers:
    """A cluster of two `dask worker` processes, and a `knee sweep` driver on it whose clients are all running."""

    cluster: Cluster
    driver: subprocess.Popen[bytes]
    clients: list[int]  # the PIDs of every client process on every worker


@contextlib.contextmanager
def sleepers(tmp_path: Path) -> Iterator[Sleepers]:
    """Two workers, and `knee sweep` in the background on them: a baseload of 2 and a step of 4 clients, each
    running one `sleep 60`; yielded once all 6 run. Everything is ended by PID at the end."""
    c = start_cluster(tmp_path / "dask", 2)
    driver = None
    try:
        workers = list(c.worker_pids().values())
        scenario = tmp_path / "sleepers.toml"
        scenario.write_text(SLEEPERS.format(address=c.address))
        driver = subprocess.Popen(
            [sys.executable, "-m", "knee", "sweep", str(scenario), "--out", str(tmp_path / "runs")],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
            stdin=subprocess.DEVNULL,
        )
        children = wait_for_children(workers, want=2)
        deadline = time.monotonic() + 20
        while len(children) < 6 and time.monotonic() < deadline:
            time.sleep(0.1)
            children = wait_for_children(workers, want=2)
        assert len(children) == 6, children
        held(children, LEASE_S)
        yield Sleepers(c, driver, children)
    finally:
        if driver is not None:
            kill_if_running(driver)
        c.stop()


def held(pids: list[int], seconds: float) -> None:
    """All of `pids` stay alive for `seconds`: with the driver alive, its renewals keep the load going past the
    lease (a driver that stopped renewing would have lost its clients about 4 s after its last renewal)."""
    t0 = time.monotonic()
    while time.monotonic() - t0 < seconds:
        gone = sorted(set(pids) - set(pids_alive(pids)))
        assert not gone, f"client processes {gone} died {time.monotonic() - t0:.1f} s in, with the driver alive"
        time.sleep(0.1)


def gone_within(pids: list[int], seconds: float) -> float:
    """How long until none of `pids` is alive; fails if some outlive `seconds`."""
    t0 = time.monotonic()
    while pids_alive(pids) and time.monotonic() - t0 < seconds:
        time.sleep(0.05)
    left = pids_alive(pids)
    assert left == [], f"client processes {left} outlived the driver by {seconds} s"
    return time.monotonic() - t0


def test_driver_lease_kill_9_of_the_driver_stops_every_workers_clients_and_the_workers_take_the_next_run(
    tmp_path: Path,
) -> None:
    with sleepers(tmp_path) as run:
        os.kill(run.driver.pid, signal.SIGKILL)
        run.driver.wait(5)
        took = gone_within(run.clients, LEASE_S)
        print(f"client processes gone {took:.2f} s after kill -9 of the driver")
        # the same workers take the next run, all of them, and the server saw exactly what knee counted
        with start_target("basic") as target:
            out = tmp_path / "next"
            proc = knee_cli(
                "sweep", target.url + "/", "--levels", "4", "--iterations", "25", "--no-recovery",
                "--out", str(out), "--cluster", run.cluster.address,
            )  # fmt: skip
            assert proc.returncode == 0, proc.stdout + proc.stderr
            (run_dir,) = [p for p in out.iterdir() if p.is_dir()]
            record = RunDir(run_dir).load()
            (step,) = record.steps
            assert not step.partial and [w.clients for w in step.workers] == [2, 2]
            assert step.groups["main"].succeeded == 100
            assert target.stats()["requests"] == sent(record)  # the 100, and the probes at rest before the step


def test_driver_lease_a_scheduler_that_dies_stops_the_workers_clients(tmp_path: Path) -> None:
    with sleepers(tmp_path) as run:
        run.cluster.scheduler.kill()
        run.cluster.scheduler.wait(5)
        took = gone_within(run.clients, LEASE_S)
        print(f"client processes gone {took:.2f} s after kill -9 of the scheduler")
        # the driver says so in one sentence
        _, err = run.driver.communicate(timeout=60)
        assert run.driver.returncode == 2, err.decode()
        assert err.decode().strip().endswith("continue with knee sweep --resume"), err.decode()
        assert "Traceback" not in err.decode(), err.decode()


def test_driver_lease_workers_that_stopped_by_themselves_are_named_lost(tmp_path: Path) -> None:
    # A driver that stops renewing for longer than the lease (here frozen by SIGSTOP; in the field a busy
    # scheduler or a network hiccup) finds its workers stopped by themselves: that step was kept as whole, or
    # taken for a Ctrl-C (the sweep ended "complete" after it). It is partial, each worker named, and left out.
    c = start_cluster(tmp_path / "dask", 2)
    out = tmp_path / "runs"

    def freeze(driver: subprocess.Popen[str]) -> None:
        os.kill(driver.pid, signal.SIGSTOP)
        time.sleep(LEASE_S + 1)
        os.kill(driver.pid, signal.SIGCONT)

    try:
        with start_target("basic") as target:
            code, stdout, stderr = driving(c.address, target, out, ("2,4", "12s"), freeze)
    finally:
        c.stop()
    assert code == 0, stdout + stderr
    (run_dir,) = [p for p in out.iterdir() if p.is_dir()]
    record = RunDir(run_dir).load()
    first = record.steps[0]
    assert first.partial and len(first.lost_workers) == 2, first
    assert all("stopped by itself: no renewal of the driver's lease" in w for w in first.lost_workers)
    assert record.status == "complete" and [s.level for s in record.steps] == [2, 4]
    assert not record.steps[1].partial
    (v,) = [v for v in record.verdicts if v.group == "main"]
    assert any("the step at level 2 lost" in w and "left out" in w for w in v.warnings), v.warnings
