"""Executors run one step's engine spec and hand back its result (local now; dask later)."""

from knee.executor.interrupt import Interrupts, on_hard_exit
from knee.executor.local import StepRun, run_step

__all__ = ["Interrupts", "StepRun", "on_hard_exit", "run_step"]
