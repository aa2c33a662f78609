"""knee's workers as batch jobs (dask-jobqueue; docs/distributed.md): Slurm, HTCondor, PBS, SGE.

`JobQueueExecutor.start` asks the batch system for `[cluster] jobs` jobs (or `--cluster slurm:JOBS`), each one Dask
worker with `cores` threads, written by dask-jobqueue from knee's `[cluster]` keys (`job_arguments`). It waits
until `min_jobs` (default: all) of their workers have joined, with a live "jobs running / queued" line and a time
limit (`wait`), checks their knee version as for any Dask cluster, and runs the sweep on them as on any Dask
cluster. The jobs are released (`scancel`, `condor_rm`, `qdel`) when the steps are over, on Ctrl-C (a second one
too) and on error. The Dask scheduler runs in this process, so the jobs' workers connect to this machine
(`[cluster] host`, `port`); a driver killed with `kill -9` takes the scheduler with it, the workers end and so do
their jobs. A job the batch system ends mid-step (its wall time, `scancel`, pre-emption) is a lost worker, named
with its job id: the step is partial, the others' results are kept.
"""

from __future__ import annotations

import contextlib
import subprocess
import time
from typing import TYPE_CHECKING, Any

from knee import fmt
from knee.errors import UserError
from knee.executor.dask import DaskExecutor, _dask
from knee.executor.interrupt import on_hard_exit
from knee.scenario.cluster import DEFAULT_JOB, JOBQUEUE_NAMES, Cluster, jobqueue_problem

if TYPE_CHECKING:
    from rich.console import Console

# dask-jobqueue's class for each batch system, and the command that shows its queue.
_CLASSES = {"slurm": "SLURMCluster", "htcondor": "HTCondorCluster", "pbs": "PBSCluster", "sge": "SGECluster"}
_QUEUE_COMMAND = {"slurm": "squeue", "htcondor": "condor_q", "pbs": "qstat", "sge": "qstat"}
JOB_NAME = "knee-worker"
POLL_S = 0.5


def parse_cluster(where: str) -> tuple[str, int] | None:
    """`slurm:4` → ("slurm", 4); None when `where` names no batch system (an address, local:N)."""
    kind, sep, jobs = where.partition(":")
    if not sep or kind not in _CLASSES:
        return None
    if not jobs.isdigit() or int(jobs) < 1:
        raise UserError(f"--cluster {where!r}: {kind}:JOBS needs a number of jobs, like {kind}:4")
    return kind, int(jobs)


def job_arguments(kind: str, settings: Cluster) -> dict[str, Any]:
    """dask-jobqueue's arguments for `kind`'s cluster from knee's `[cluster]` keys: one worker a job (one load
    generator, one engine), named knee-worker; what a key does not say comes from the site's dask-jobqueue
    configuration (`~/.config/dask/jobqueue.yaml`), and cores, memory and disk from knee's defaults if that says
    nothing either."""
    import dask.config

    problem = jobqueue_problem(settings, kind)
    if problem:
        raise UserError(f"[cluster] {problem}")
    python, prologue = settings.python, settings.prologue
    if settings.ship:  # each job's worker runs from a venv of its own with Dask alone; the wheel comes through Dask
        from knee.executor.ship import checked_wheel, job_prologue

        checked_wheel(settings.ship)  # there is one to send, of this build: one sentence before any job is asked for
        lines, python = job_prologue(settings.python)
        prologue = [*prologue, *lines]
    given: dict[str, object] = {
        "cores": settings.cores,
        "memory": settings.memory,
        "disk": settings.disk if kind == "htcondor" else None,
        "walltime": settings.walltime,
        "queue": settings.queue,
        "project" if kind == "sge" else "account": settings.account,
        "python": python,
        "log_directory": settings.logs,
        "job_extra_directives": settings.directives or None,
        "job_script_prologue": prologue or None,
    }
    for key, default in DEFAULT_JOB.items():
        asked = key != "disk" or kind == "htcondor"  # only HTCondor jobs ask for disk
        if asked and given[key] is None and dask.config.get(f"jobqueue.{kind}.{key}", None) is None:
            given[key] = default
    # The scheduler runs in knee. dask-jobqueue binds a dashboard at 8787 even when told None, and a second run at
    # the same time then warns on stderr that 8787 is taken: a free port of the loopback instead, unless the site's
    # configuration asks for another.
    site = dask.config.get(f"jobqueue.{kind}.scheduler-options", None) or {}
    scheduler = {"dashboard_address": "127.0.0.1:0", **site}
    scheduler.update({k: v for k, v in (("host", settings.host), ("port", settings.port)) if v})
    return {
        "processes": 1,
        "job_name": JOB_NAME,
        "scheduler_options": scheduler,
        **{k: v for k, v in given.items() if v is not None},
    }


def make_cluster(kind: str, settings: Cluster) -> Any:
    """dask-jobqueue's cluster for `kind` (its scheduler started here), no job asked for yet."""
    name = JOBQUEUE_NAMES[kind]
    try:
        import dask_jobqueue
    except ImportError:
        raise UserError(f"{name} jobs need dask-jobqueue: pip install 'knee[dask]' (on this machine)") from None
    try:
        return getattr(dask_jobqueue, _CLASSES[kind])(**job_arguments(kind, settings))
    except ValueError as exc:
        raise UserError(f"[cluster]: dask-jobqueue refused the {name} jobs' settings: {exc}") from None


class JobQueueExecutor(DaskExecutor):
    """Every step on the workers of batch jobs knee asked for, released when it is done."""

    kind = "slurm"

    @classmethod
    def start(cls, kind: str, jobs: int, settings: Cluster, console: Console | None = None) -> JobQueueExecutor:
        """Ask for `jobs` jobs, wait for their workers (`settings.min_jobs` of them, within `settings.wait`), check
        them; the jobs are released if anything goes wrong on the way (Ctrl-C too)."""
        cluster = make_cluster(kind, settings)
        forget = on_hard_exit(lambda: _cancel(cluster))  # a second Ctrl-C leaves at once: release the jobs first
        client = None
        try:
            _submit(cluster, kind, jobs)
            client = _dask().Client(cluster)
            _wait_for_workers(client, cluster, kind=kind, asked=jobs, settings=settings, console=console)
            executor = cls(
                client,
                settings.weights,
                owns_client=True,
                cluster=cluster,
                lease_s=settings.lease,
                kind=kind,
                ship=settings.ship,
            )
        except BaseException:
            forget()
            if client is not None:
                client.close()
            cluster.close()
            raise
        executor._forget = forget
        return executor

    def __init__(self, client: Any, *args: Any, kind: str = "slurm", **kwargs: Any) -> None:
        self.kind = kind
        self._forget: Any = None
        super().__init__(client, *args, **kwargs)
        self.where = str(client.scheduler.address)  # the scheduler runs here, in the driver
        self.name = f"dask {JOBQUEUE_NAMES[kind]} jobs ({self.where})"

    def job_of(self, worker_name: str) -> str:
        """'Slurm job 17' for the worker of that job."""
        job = getattr(self._cluster, "workers", {}).get(worker_name)
        job_id = getattr(job, "job_id", None)
        return f"{JOBQUEUE_NAMES[self.kind]} job {job_id}" if job_id else ""

    def describe(self) -> str:
        """'2 Slurm jobs (17, 18): 2 Dask workers on 1 host (tcp://…)'."""
        ids = _job_ids(self._cluster)
        return f"{len(ids)} {JOBQUEUE_NAMES[self.kind]} jobs ({', '.join(ids)}): {super().describe()}"

    def close(self) -> None:
        """Let the jobs go (the cluster's close cancels them), then forget the second Ctrl-C's hook."""
        super().close()
        if self._forget is not None:
            self._forget()
            self._forget = None


def _submit(cluster: Any, kind: str, jobs: int) -> None:
    """Ask for the jobs and wait until the batch system has taken them (not until they run); its refusal (a queue
    that does not exist, a wall time over its limit) as one sentence."""

    async def submit() -> None:
        # What cluster.scale(jobs=…) does, but awaited here (scale() submits in the background, and a refusal is
        # then only logged): one worker spec a job (processes = 1), then the submission.
        while len(cluster.worker_spec) < jobs:
            cluster.worker_spec.update(cluster.new_worker_spec())
        await cluster._correct_state()

    try:
        cluster.sync(submit)
    except Exception as exc:
        from distributed.core import Status

        for job in cluster.workers.values():
            if getattr(job, "job_id", None) is None:
                job.status = Status.failed  # never submitted: nothing to cancel (the cluster's close expects this)
        said = [line.strip() for line in str(exc).splitlines() if line.strip()]
        raise UserError(
            f"{JOBQUEUE_NAMES[kind]} refused the jobs: {said[-1] if said else type(exc).__name__}"
        ) from None


def _job_ids(cluster: Any) -> list[str]:
    return [str(j.job_id) for j in getattr(cluster, "workers", {}).values() if getattr(j, "job_id", None)]


def _cancel(cluster: Any) -> None:
    """Cancel every job at once, from a second Ctrl-C's exit (no event loop to wait for there)."""
    ids = _job_ids(cluster)
    command = getattr(getattr(cluster, "job_cls", None), "cancel_command", None)
    if ids and command:
        with contextlib.suppress(OSError, subprocess.SubprocessError):
            subprocess.run([*command.split(), *ids], capture_output=True, timeout=10, check=False)


def _wait_for_workers(
    client: Any, cluster: Any, *, kind: str, asked: int, settings: Cluster, console: Console | None
) -> None:
    """Until `settings.min_jobs` (default: all `asked`) of the jobs' workers have joined: a live line on a terminal,
    a line at each change elsewhere; a UserError after `settings.wait`."""
    name = JOBQUEUE_NAMES[kind]
    want, wait_s = min(settings.started_with(), asked), settings.wait
    t0 = time.monotonic()
    with _Line(console) as line:
        while True:
            joined = len(client.scheduler_info(n_workers=-1)["workers"])
            elapsed = time.monotonic() - t0
            line.show(
                f"{name} jobs: {joined} running, {asked - joined} queued or starting "
                f"({fmt.duration(elapsed)}, waiting up to {fmt.duration(wait_s)})",
                key=joined,
            )
            if joined >= want:
                return
            if elapsed > wait_s:
                raise UserError(
                    f"{joined} of {asked} {name} jobs' workers joined within {fmt.duration(wait_s)} (jobs "
                    f"{', '.join(_job_ids(cluster))}): wait longer ([cluster] wait), start with fewer ([cluster] "
                    f"min_jobs), or see why with {_QUEUE_COMMAND[kind]} and the jobs' output"
                )
            time.sleep(POLL_S)


class _Line:
    """One status line: redrawn in place on a terminal, printed again only when `key` changes elsewhere."""

    def __init__(self, console: Console | None) -> None:
        self.console = console
        self._live: Any = None
        self._key: object = object()

    def __enter__(self) -> _Line:
        if self.console is not None and self.console.is_terminal:
            from rich.live import Live

            self._live = Live(console=self.console, transient=True, auto_refresh=False)
            self._live.__enter__()
        return self

    def __exit__(self, *exc: object) -> None:
        if self._live is not None:
            self._live.__exit__(None, None, None)

    def show(self, text: str, key: object) -> None:
        if self._live is not None:
            from rich.text import Text

            self._live.update(Text(text), refresh=True)
        elif self.console is not None and key != self._key:
            self.console.print(text, highlight=False, soft_wrap=True, markup=False)
        self._key = key
