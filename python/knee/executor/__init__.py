"""Executors run one step's engine spec and hand back its result: this machine (`LocalExecutor`, the
default) or a Dask cluster (`knee.executor.dask`, with the `knee[dask]` extra)."""

from knee.executor.interrupt import Interrupts, on_hard_exit
from knee.executor.local import Background, LocalExecutor, StepRun, run_step

__all__ = ["Background", "Interrupts", "LocalExecutor", "StepRun", "on_hard_exit", "run_step"]
