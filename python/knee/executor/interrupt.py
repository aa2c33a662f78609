"""Ctrl-C during a sweep: the first ends the current step cleanly, the second exits at once.

The first SIGINT only sets a flag; the executor sees it within 0.2 s, stops the
engine (which kills every exec client's process group), keeps the step as partial,
and the sweep still writes its report. A second SIGINT stops the running engine
(if any) and leaves the process immediately with status 130.
"""

from __future__ import annotations

import contextlib
import os
import signal
import sys
import threading
from collections.abc import Callable
from types import FrameType
from typing import Any, Protocol

# Run (in order) before a second Ctrl-C leaves the process, e.g. to stop a demo service we started.
_HARD_EXIT_HOOKS: list[Callable[[], object]] = []


def on_hard_exit(hook: Callable[[], object]) -> Callable[[], object]:
    """Register `hook` for the second-Ctrl-C exit; returns a function that unregisters it."""
    _HARD_EXIT_HOOKS.append(hook)
    return lambda: _HARD_EXIT_HOOKS.remove(hook) if hook in _HARD_EXIT_HOOKS else None


class _Stoppable(Protocol):
    def stop(self) -> None: ...


class Interrupts:
    """Install with `with Interrupts() as intr:`; check `intr.requested`."""

    def __init__(self) -> None:
        self.requested = False
        self.engine: _Stoppable | None = None
        self._previous: Any = None

    def __enter__(self) -> Interrupts:
        # Only the main thread may handle signals (knee.run() from another thread runs without Ctrl-C handling).
        if threading.current_thread() is threading.main_thread():
            self._previous = signal.signal(signal.SIGINT, self._handle)
        return self

    def __exit__(self, *exc: object) -> None:
        if self._previous is not None:
            signal.signal(signal.SIGINT, self._previous)
            self._previous = None

    def _handle(self, signum: int, frame: FrameType | None) -> None:
        if not self.requested:
            self.requested = True
            sys.stderr.write(
                "\nknee: interrupted: ending this step and writing the report (Ctrl-C again to quit now)\n"
            )
            sys.stderr.flush()
            return
        engine = self.engine
        if engine is not None:
            engine.stop()  # kills exec process groups before we go
        for hook in list(_HARD_EXIT_HOOKS):
            with contextlib.suppress(Exception):  # leaving anyway: one failing hook must not stop the others
                hook()
        sys.stderr.write("knee: interrupted twice: stopped\n")
        sys.stderr.flush()
        os._exit(130)
