"""Ctrl-C during a sweep: the first ends the current step cleanly, the second exits at once.

The first SIGINT only sets a flag; the executor sees it within 0.2 s, stops the
engine (which kills every exec client's process group), keeps the step as partial,
and the sweep still writes its report. A second SIGINT stops the running engine
(if any) and leaves the process immediately with status 130. SIGTERM (`kill`, a batch
system's time limit, a CI job cancelled) and SIGHUP (the terminal or SSH session gone)
are taken as Ctrl-C is: without them Python died at once, the step and the report lost,
the run left "running" and the exec clients' process groups running on. In knee's Python API
(`in_callers_process`) the second raises KeyboardInterrupt instead: the caller's process (a
notebook's kernel) goes on.
"""

from __future__ import annotations

import contextlib
import os
import signal
import sys
import threading
from collections.abc import Callable, Iterator
from types import FrameType
from typing import Any, Protocol

# Run (in order) before a second Ctrl-C leaves the process, e.g. to stop a demo service we started.
_HARD_EXIT_HOOKS: list[Callable[[], object]] = []


def on_hard_exit(hook: Callable[[], object]) -> Callable[[], object]:
    """Register `hook` for the second-Ctrl-C exit; returns a function that unregisters it."""
    _HARD_EXIT_HOOKS.append(hook)
    return lambda: _HARD_EXIT_HOOKS.remove(hook) if hook in _HARD_EXIT_HOOKS else None


# The signals that end a step as Ctrl-C does.
SIGNALS = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)

# Inside the caller's process (knee's Python API, in a notebook or a script): a second Ctrl-C stops at once by raising
# KeyboardInterrupt, not by leaving the process (a notebook's kernel, and all it held, went with it).
_IN_CALLER = [False]


@contextlib.contextmanager
def in_callers_process() -> Iterator[None]:
    """While knee runs for the Python API: a second Ctrl-C raises KeyboardInterrupt instead of exiting."""
    before, _IN_CALLER[0] = _IN_CALLER[0], True
    try:
        yield
    finally:
        _IN_CALLER[0] = before


class _Stoppable(Protocol):
    def stop(self) -> None: ...


class Interrupts:
    """Install with `with Interrupts() as intr:`; check `intr.requested`."""

    def __init__(self) -> None:
        self.requested = False
        self.engine: _Stoppable | None = None
        self._previous: dict[int, Any] = {}

    def __enter__(self) -> Interrupts:
        # Only the main thread may handle signals (knee.run() from another thread runs without Ctrl-C handling).
        if threading.current_thread() is threading.main_thread():
            for sig in SIGNALS:
                if sig != signal.SIGINT and signal.getsignal(sig) == signal.SIG_IGN:
                    continue  # nohup: the user asked that a closed terminal not end the run
                self._previous[sig] = signal.signal(sig, self._handle)
        return self

    def __exit__(self, *exc: object) -> None:
        for sig, previous in self._previous.items():
            signal.signal(sig, previous)
        self._previous = {}

    def _handle(self, signum: int, frame: FrameType | None) -> None:
        if not self.requested:
            self.requested = True
            name = signal.Signals(signum).name
            what, again = ("interrupted", "Ctrl-C") if signum == signal.SIGINT else (f"{name} received", name)
            with contextlib.suppress(OSError):  # SIGHUP: the terminal may be gone
                sys.stderr.write(
                    f"\nknee: {what}: ending this step and writing the report ({again} again to quit now)\n"
                )
                sys.stderr.flush()
            return
        engine = self.engine
        if engine is not None:
            engine.stop()  # kills exec process groups before we go
        for hook in list(_HARD_EXIT_HOOKS):
            with contextlib.suppress(Exception):  # leaving anyway: one failing hook must not stop the others
                hook()
        with contextlib.suppress(OSError):
            sys.stderr.write("knee: interrupted twice: stopped\n")
            sys.stderr.flush()
        if _IN_CALLER[0]:
            raise KeyboardInterrupt
        os._exit(130)
