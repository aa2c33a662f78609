"""Executors run one step's engine spec and hand back its result: this machine (`LocalExecutor`, the
default) or a Dask cluster (`knee.executor.dask`, with the `knee[dask]` extra), whose workers may be batch jobs
knee asks for (`knee.executor.jobqueue`). The contract is in `knee.executor.base`; splitting a step over load
generators and merging it back, in `knee.executor.shards`; a step's data sources over them, in
`knee.executor.dataparts`; the driver's lease, which stops the load when the driver is gone, in
`knee.executor.lease`."""

from __future__ import annotations

from typing import TYPE_CHECKING

from knee.errors import UserError
from knee.executor.base import BackgroundShard, Executor, StepRun
from knee.executor.interrupt import Interrupts, on_hard_exit
from knee.executor.local import Background, LocalExecutor, run_step

if TYPE_CHECKING:
    from rich.console import Console

    from knee.executor.dask import DaskExecutor
    from knee.scenario.cluster import Cluster

__all__ = [
    "Background",
    "BackgroundShard",
    "Executor",
    "Interrupts",
    "LocalExecutor",
    "StepRun",
    "connect",
    "on_hard_exit",
    "run_step",
]


def connect(where: str | None, settings: Cluster, console: Console | None = None) -> DaskExecutor:
    """The Dask executor for `--cluster` (`where`, which wins) or the scenario's `[cluster]`: a scheduler
    (`tcp://host:8786`), `local:N`, or batch jobs knee asks for (`slurm:JOBS`, `[cluster] jobqueue`; the live
    line while they start goes to `console`). `settings` also gives the weights, the lease, the jobs' keys and
    whether to ship the driver's knee to the workers (`ship`)."""
    from knee.executor.jobqueue import JobQueueExecutor, parse_cluster

    jobs = parse_cluster(where) if where else (settings.jobqueue, settings.jobs) if settings.jobqueue else None
    if jobs is not None:
        return JobQueueExecutor.start(jobs[0], jobs[1], settings, console)
    from knee.executor.dask import DaskExecutor

    address = where or settings.address
    if address is None:
        raise UserError("[cluster]: give an address (tcp://host:8786, local:N) or a jobqueue (slurm, htcondor …)")
    return DaskExecutor.connect(address, settings.weights, lease_s=settings.lease, ship=settings.ship)
