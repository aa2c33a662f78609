"""knee's workers as Slurm jobs (docs/distributed.md): a real single-node Slurm (tests/slurm.py: munged, slurmctld
and slurmd of the test's own) runs `knee sweep` with `[cluster] jobqueue = "slurm"` and 2 jobs. A fixed-work sweep
against `knee target` counts exactly what the server counted, squeue shows the jobs while it runs and none after;
`scancel` of one job mid-step makes the step partial and names the job, the other's part kept; Ctrl-C releases the
jobs within 10 s; `kill -9` of the driver leaves no client process and no job behind."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterable, Iterator
from pathlib import Path

import pytest

from knee.demo_target import start_target
from knee.model import RunRecord
from knee.store import RunDir
from slurm import Slurm, job_processes, start_slurm

from conftest import knee_cli
from dask_cluster import need
from servers import kill_if_running, pids_alive, sent, settled

need("dask_jobqueue")


# One xdist worker for the module's tests: its fixture (munged, slurmctld, slurmd) runs once.
pytestmark = pytest.mark.xdist_group("slurm")


@pytest.fixture(scope="module")
def slurm() -> Iterator[Slurm]:
    if os.geteuid() != 0:
        pytest.skip(f"slurmd runs each job as its user and must be root for that (this is uid {os.geteuid()})")
    with start_slurm() as s:
        yield s


def scenario(tmp_path: Path, groups: str, sweep: str, jobs: str = 'jobs = 2\ncores = 1\nwait = "60s"') -> Path:
    """A scenario of `groups` and `sweep` whose steps run on Slurm `jobs` (2 jobs of 1 core each)."""
    path = tmp_path / "slurm.toml"
    path.write_text(
        f"{groups}\n[sweep]\n{sweep}\n[recovery]\nenabled = false\n"
        f'[cluster]\njobqueue = "slurm"\n{jobs}\nmemory = "1GB"\nwalltime = "10m"\nhost = "127.0.0.1"\n'
        f'logs = "{tmp_path / "jobs"}"\n'
    )
    return path


def start_driver(slurm: Slurm, tmp_path: Path, path: Path) -> subprocess.Popen[str]:
    """`knee sweep` of `path` in the background, with this Slurm's SLURM_CONF."""
    return subprocess.Popen(
        [sys.executable, "-m", "knee", "sweep", str(path), "--out", str(tmp_path / "runs")],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        stdin=subprocess.DEVNULL,
        text=True,
        cwd=tmp_path,
        env={**os.environ, **slurm.env},
    )


def running_jobs(slurm: Slurm, want: int, timeout_s: float = 60) -> list[str]:
    """The ids of knee's jobs once `want` of them are RUNNING."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        ids = [i for i, state, name in slurm.jobs() if state == "RUNNING" and name == "knee-worker"]
        if len(ids) >= want:
            return ids
        time.sleep(0.1)
    raise AssertionError(f"{want} knee jobs never ran: {slurm.jobs()}\n{slurm.log_tail()}")


def sleepers(job_ids: list[str], want: int, timeout_s: float = 30, but: Iterable[int] = ()) -> dict[str, list[int]]:
    """Each job's `sleep` client processes (`but` those), once `want` of them run in all."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        found = {j: sorted(set(job_processes(j, "sleep")) - set(but)) for j in job_ids}
        if sum(map(len, found.values())) >= want:
            return found
        time.sleep(0.1)
    raise AssertionError(f"the jobs {job_ids} never ran {want} client processes")


def queue_empty_within(slurm: Slurm, seconds: float) -> float:
    """How long until squeue shows no job; fails after `seconds`."""
    t0 = time.monotonic()
    while slurm.jobs() and time.monotonic() - t0 < seconds:
        time.sleep(0.1)
    assert slurm.jobs() == [], f"jobs left {seconds} s on: {slurm.jobs()}"
    return time.monotonic() - t0


def record_of(tmp_path: Path) -> RunRecord:
    (run_dir,) = [p for p in (tmp_path / "runs").iterdir() if p.is_dir()]
    return RunDir(run_dir).load()


SLEEP = '[groups.main]\nkind = "exec"\nargv = ["sleep", "30"]\n'


def test_slurm_sweep_on_two_jobs_counts_exactly_and_releases_the_jobs(slurm: Slurm, tmp_path: Path) -> None:
    with start_target("basic") as target:
        groups = f'[groups.main]\nkind = "http"\nurl = "{target.url}/"\nthink = "10ms"\n'
        driver = start_driver(slurm, tmp_path, scenario(tmp_path, groups, "levels = [2, 4]\nper_client = 60"))
        try:
            # squeue shows the two jobs running while the sweep runs
            assert len(running_jobs(slurm, 2)) == 2
            out, err = driver.communicate(timeout=120)
        finally:
            kill_if_running(driver)
        assert driver.returncode == 0, out + err
        # and none once it is over: knee released them before its report
        assert slurm.jobs() == []
        record = record_of(tmp_path)
        assert [s.groups["main"].succeeded for s in record.steps] == [120, 240]
        assert settled(lambda: target.stats()["requests"], sent(record)) == sent(record) == 360 + record.probes
    for step in record.steps:
        assert not step.partial and len(step.workers) == 2 and sum(w.clients for w in step.workers) == step.level
    assert "Slurm jobs: 2 running, 0 queued or starting" in out
    assert "cluster: 2 Slurm jobs (" in out and record.executor.startswith("dask Slurm jobs (tcp://127.0.0.1:")


def test_slurm_scancel_mid_step_is_a_lost_worker_named_and_ctrl_c_releases_the_jobs(
    slurm: Slurm, tmp_path: Path
) -> None:
    driver = start_driver(slurm, tmp_path, scenario(tmp_path, SLEEP, 'levels = [4, 6]\nduration = "4s"'))
    try:
        jobs = running_jobs(slurm, 2)
        first = sleepers(jobs, want=4)
        assert all(len(pids) == 2 for pids in first.values()), first
        # the batch system ends one job mid-step: its worker is lost, the other's clients go on
        cancelled, kept = jobs
        slurm.run("scancel", cancelled)
        # the next step runs on the job that is left; Ctrl-C in it ends the sweep and releases the jobs
        # the next step comes after its wait for rest (a probe of `sleep 30` hangs 5 s): up to a minute on a busy CI
        second = sleepers([kept], want=6, timeout_s=60, but=first[kept])[kept]
        driver.send_signal(signal.SIGINT)
        took = queue_empty_within(slurm, 10)
        print(f"squeue empty {took:.2f} s after Ctrl-C")
        out, err = driver.communicate(timeout=60)
    finally:
        kill_if_running(driver)
    assert driver.returncode == 130, out + err
    assert pids_alive([*first[cancelled], *first[kept], *second]) == []
    record = record_of(tmp_path)
    lost_step, stopped = record.steps
    assert lost_step.partial and len(lost_step.lost_workers) == 1, lost_step.lost_workers
    assert f"Slurm job {cancelled}" in lost_step.lost_workers[0]
    kept_share = [w for w in lost_step.workers if not w.lost]
    assert len(kept_share) == 1 and kept_share[0].clients == 2 and kept_share[0].abandoned == 2
    assert stopped.partial and [w.clients for w in stopped.workers] == [6]
    assert f"Slurm job {cancelled}" in out


def test_slurm_kill_9_of_the_driver_leaves_no_client_and_no_job(slurm: Slurm, tmp_path: Path) -> None:
    driver = start_driver(slurm, tmp_path, scenario(tmp_path, SLEEP, 'levels = [4]\nduration = "60s"'))
    try:
        jobs = running_jobs(slurm, 2)
        clients = [p for pids in sleepers(jobs, want=4).values() for p in pids]
        os.kill(driver.pid, signal.SIGKILL)
        driver.wait(5)
        t0 = time.monotonic()
        while pids_alive(clients) and time.monotonic() - t0 < 5:
            time.sleep(0.05)
        assert pids_alive(clients) == [], "client processes outlived the driver by 5 s"
        print(f"client processes gone {time.monotonic() - t0:.2f} s after kill -9 of the driver")
        # the scheduler went with the driver: the workers end, and with them their jobs
        print(f"squeue empty {queue_empty_within(slurm, 20):.2f} s after kill -9 of the driver")
    finally:
        kill_if_running(driver)


def test_slurm_a_refused_submission_and_jobs_that_never_start_are_one_sentence_each(
    slurm: Slurm, tmp_path: Path
) -> None:
    def sweep(jobs: str) -> subprocess.CompletedProcess[str]:
        path = scenario(tmp_path, SLEEP, 'levels = [1]\nduration = "1s"', jobs)
        argv = ["sweep", str(path), "--out", str(tmp_path / "runs")]
        return knee_cli(*argv, timeout=60, cwd=tmp_path, env={**os.environ, **slurm.env})

    # a partition the cluster does not have: sbatch refuses the job
    proc = sweep('jobs = 1\ncores = 1\nqueue = "nope"\nwait = "5s"')
    assert proc.returncode == 2 and proc.stderr.count("\n") == 1, proc.stderr
    assert proc.stderr == (
        "knee: error: Slurm refused the jobs: sbatch: error: Batch job submission failed: Invalid partition name "
        "specified\n"
    )
    # a job held back an hour: its worker never joins within [cluster] wait; the job is released
    proc = sweep('jobs = 1\ncores = 1\ndirectives = ["--begin=now+1hour"]\nwait = "2s"')
    assert proc.returncode == 2 and proc.stderr.count("\n") == 1, proc.stderr
    assert "knee: error: 0 of 1 Slurm jobs' workers joined within 2.0 s (jobs " in proc.stderr, proc.stderr
    assert "Slurm jobs: 0 running, 1 queued or starting" in proc.stdout
    assert slurm.jobs() == []


def test_slurm_ship_runs_each_jobs_worker_from_a_venv_of_the_wheel_and_the_venv_goes_with_the_job(
    slurm: Slurm, knee_wheel: Path, tmp_path: Path
) -> None:
    # The jobs' Python is the bare interpreter (no knee, no dask): each job makes a venv of its own with Dask, and
    # knee sends its wheel through Dask (test_ship_parts: the jobs' script names no file of the driver's).
    bare = Path(sys.base_prefix) / "bin" / "python3"
    with start_target("basic") as target:
        groups = f'[groups.main]\nkind = "http"\nurl = "{target.url}/"\nthink = "10ms"\n'
        jobs = f'jobs = 2\ncores = 1\nwait = "400s"\nship = "{knee_wheel}"\npython = "{bare}"'
        driver = start_driver(slurm, tmp_path, scenario(tmp_path, groups, "levels = [2]\nper_client = 50", jobs))
        try:
            out, err = driver.communicate(timeout=600)
        finally:
            kill_if_running(driver)
        assert driver.returncode == 0, out + err
        record = record_of(tmp_path)
        (step,) = record.steps
        assert step.groups["main"].succeeded == 100 and not step.partial and len(step.workers) == 2
        assert settled(lambda: target.stats()["requests"], sent(record)) == sent(record) == 100 + record.probes
    # Each job's log names the venv its worker ran from: one a job, and none left once the jobs ended.
    said = [
        line
        for log in (tmp_path / "jobs").iterdir()
        for line in log.read_text().splitlines()
        if line.startswith("knee: this job runs its worker from ")
    ]
    venvs = {Path(line.removeprefix("knee: this job runs its worker from ").split(",")[0]) for line in said}
    assert len(venvs) == 2, said
    queue_empty_within(slurm, 30)
    deadline = time.monotonic() + 30
    while any(v.exists() for v in venvs) and time.monotonic() < deadline:
        time.sleep(0.2)
    assert not [v for v in venvs if v.exists()], "a job's venv outlived its job"
