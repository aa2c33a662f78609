"""Run one step on this machine: start the engine, poll it, stop it early when asked."""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from knee.diagnose import CpuMeter
from knee.engine import Engine, ShardResult
from knee.errors import UserError
from knee.executor.interrupt import Interrupts
from knee.model import GeneratorStats

POLL_S = 0.2


@dataclass
class StepRun:
    result: ShardResult
    partial: bool
    started_unix: float
    generator: GeneratorStats


def run_step(
    spec: dict[str, Any],
    interrupts: Interrupts,
    on_snapshot: Callable[[dict[str, Any]], None] | None = None,
    every_s: float = 1.0,
) -> StepRun:
    """Run `spec` to its end, or until `interrupts.requested` (then the result is partial)."""
    try:
        engine = Engine(spec)
    except ValueError as exc:
        raise UserError(f"the engine refused this step: {exc}") from None
    meter = CpuMeter().start()
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
                on_snapshot(engine.snapshot())
    finally:
        interrupts.engine = None
    return StepRun(engine.result(), partial, started, meter.stop())
