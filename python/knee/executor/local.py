"""Run steps on this machine: start the engine, poll it, stop it early when asked.

`LocalExecutor` is the default executor. `run_step` is the one loop over the engine that every way
of running knee goes through (`knee run`, sweeps, the demo, the Python API); `start_background`
starts a baseload that runs across a sweep's steps and is cut into per-step windows.
"""

from __future__ import annotations

import time

from knee.engine import Engine, ShardResult
from knee.executor.base import Executor, OnSnapshot, StepRun
from knee.executor.interrupt import Interrupts
from knee.machine.cpu import CpuMeter
from knee.machine.kernel import HostSampler
from knee.spec import EngineSpec

POLL_S = 0.2


def run_step(
    spec: EngineSpec,
    interrupts: Interrupts,
    on_snapshot: OnSnapshot | None = None,
    every_s: float = 1.0,
) -> StepRun:
    """Run `spec` to its end, until `on_snapshot` returns True (the step has measured enough: it ends whole, its
    operations in flight abandoned as at a duration's end), or until `interrupts.requested` (then the result is
    partial)."""
    engine = Engine(spec)
    meter = CpuMeter().start()
    host = HostSampler().start()
    started = time.time()
    interrupts.engine = engine
    partial = False
    try:
        engine.start()
        next_snapshot = time.monotonic() + every_s
        while not engine.wait(POLL_S):
            if interrupts.requested:
                partial = True
                engine.stop()
                while not engine.wait(POLL_S):
                    pass
                break
            if on_snapshot is not None and time.monotonic() >= next_snapshot:
                next_snapshot += every_s
                if on_snapshot(engine.snapshot()):  # measured enough (duration = "auto"): end the step, whole
                    engine.stop()
                    while not engine.wait(POLL_S):
                        pass
                    break
    finally:
        interrupts.engine = None
        counters = host.stop()
    return StepRun(engine.result(), partial, started, meter.stop(), counters=counters)


class Background:
    """A shard of background groups running across steps: `cut()` takes the window since the last
    cut, `stop()` ends it and returns the last window."""

    def __init__(self, spec: EngineSpec) -> None:
        self._engine = Engine(spec).start()

    def cut(self) -> ShardResult:
        return self._engine.cut()

    def stop(self) -> ShardResult:
        self._engine.stop()
        self._engine.wait(None)
        return self._engine.result()


class LocalExecutor(Executor):
    """Every step on this machine, one engine at a time (nothing to `describe`; the preflight runs here)."""

    name = "local"

    def run_step(self, spec: EngineSpec, interrupts: Interrupts, on_snapshot: OnSnapshot | None = None) -> StepRun:
        return run_step(spec, interrupts, on_snapshot)

    def start_background(self, spec: EngineSpec) -> Background:
        return Background(spec)

    def close(self) -> None:
        pass
