"""Executors run one step's engine spec and hand back its result: this machine (`LocalExecutor`, the
default) or a Dask cluster (`knee.executor.dask`, with the `knee[dask]` extra). The contract is in
`knee.executor.base`; splitting a step over load generators and merging it back, in `knee.executor.shards`."""

from __future__ import annotations

from typing import TYPE_CHECKING

from knee.executor.base import BackgroundShard, Executor, StepRun
from knee.executor.interrupt import Interrupts, on_hard_exit
from knee.executor.local import Background, LocalExecutor, run_step

if TYPE_CHECKING:
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


def connect(cluster: str, settings: Cluster) -> DaskExecutor:
    """The Dask executor for `--cluster` / `[cluster] address`: `tcp://host:8786` or `local:N`; the scenario's
    `[cluster]` table gives the weights and the driver's lease."""
    from knee.executor.dask import DaskExecutor

    return DaskExecutor.connect(cluster, settings.weights, lease_s=settings.lease)
