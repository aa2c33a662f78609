"""The driver's lease: the load a driver started stops by itself when the driver is gone (backend-neutral).

The driver renews a lease wherever its shards can read it (on a Dask cluster: a `Variable` on the scheduler),
every `renew_s` (`LeaseKeeper`, a thread of its own). On each load generator a `LeaseWatch` reads it every
`poll_s` and notes when it last saw it change, by that machine's own monotonic clock: no clock is assumed to
agree with another, and nothing but a change counts. Once it has seen no renewal for `lapse_s`, the lease has
lapsed: the watch stops the engines it guards as Ctrl-C does (clients stopped, exec process groups killed), and
the shard returns what it measured to nobody. A driver killed (`kill -9`), a driver cut off by the network and a
scheduler that dies look the same from a load generator: no renewal.

The lease is one promise, `lease_s` (`[cluster] lease`; 5 s by default, `knee.scenario.cluster.DEFAULT_LEASE_S`):
a shard's clients stop within it of the driver's last renewal. The periods are derived from it (`LeaseTimes`),
leaving room for the last read, the check and the stop; the rest is what a renewal may be late by (a busy
scheduler, a network hiccup) before the load stops.

A load generator's process that ends (its scheduler gone, its batch job ended or cancelled) stops the engines
its watches guard before it goes (`atexit`): its clients do not outlive it.
"""

from __future__ import annotations

import atexit
import contextlib
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Protocol

STOP_MARGIN_S = 0.5  # the stop itself: process groups killed, the engine's threads told


class _Stoppable(Protocol):
    def stop(self) -> None: ...


@dataclass(frozen=True)
class LeaseTimes:
    """The lease's periods for its promise: the load stops within `lease_s` of the driver's last renewal."""

    lease_s: float

    @property
    def renew_s(self) -> float:
        """How often the driver renews."""
        return min(1.0, self.lease_s / 10)

    @property
    def poll_s(self) -> float:
        """How often a load generator reads the lease, and checks whether it has lapsed."""
        return min(0.25, self.lease_s / 20)

    @property
    def lapse_s(self) -> float:
        """No renewal seen for this long: the lease has lapsed. A renewal is seen at most one read after it was
        made, and a lapse noticed at most one check after it happened; then the stop."""
        return self.lease_s - 2 * self.poll_s - STOP_MARGIN_S


class LeaseKeeper:
    """On the driver: `renew(n)` with a growing `n` every `renew_s`, on a daemon thread, until `close()`. A renewal
    that fails is skipped (the lease tolerates a few); the next one tries again."""

    def __init__(self, renew: Callable[[int], object], times: LeaseTimes) -> None:
        self._renew = renew
        self._times = times
        self._closed = threading.Event()
        self._thread = threading.Thread(target=self._run, name="knee-lease-keeper", daemon=True)
        self._thread.start()

    def _run(self) -> None:
        n = 0
        while not self._closed.is_set():
            n += 1
            with contextlib.suppress(Exception):
                self._renew(n)
            self._closed.wait(self._times.renew_s)

    def close(self) -> None:
        self._closed.set()
        self._thread.join(timeout=5)


class LeaseWatch:
    """On a load generator: the driver's lease, read with `read()` every `poll_s` (a read that fails, or that
    returns what it returned before, is no renewal). Engines given to `guard` are stopped when it lapses. Use it
    as a context manager (or `close()` it) when the shard is over."""

    def __init__(self, read: Callable[[], object], times: LeaseTimes) -> None:
        self.times = times
        self._read = read
        self._seen: object = None
        self._at = time.monotonic()  # the watch's start counts as a renewal: the shard was just handed out
        self._lapsed = False
        self._engines: list[_Stoppable] = []
        self._lock = threading.Lock()
        self._closed = threading.Event()
        # Two threads: a read that hangs on a sick scheduler must not delay noticing the lapse.
        self._threads = [
            threading.Thread(target=self._reader, name="knee-lease-reader", daemon=True),
            threading.Thread(target=self._checker, name="knee-lease-checker", daemon=True),
        ]
        for t in self._threads:
            t.start()

    def __enter__(self) -> LeaseWatch:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    @property
    def lapsed(self) -> bool:
        """Whether the driver is gone (no renewal seen for `lapse_s`); once lapsed, it stays so."""
        if not self._lapsed and time.monotonic() - self._at > self.times.lapse_s:
            self._lapse()
        return self._lapsed

    def guard(self, engine: _Stoppable) -> None:
        """Stop `engine` when the lease lapses (at once if it has), and when this process ends."""
        with self._lock:
            self._engines.append(engine)
            _RUNNING.add(engine)
        if self.lapsed:
            engine.stop()

    def close(self) -> None:
        """The shard is over: stop watching; its engines are no longer this watch's."""
        self._closed.set()
        with self._lock:
            for engine in self._engines:
                _RUNNING.discard(engine)
            self._engines.clear()

    def _reader(self) -> None:
        while not self._closed.is_set():
            try:
                value = self._read()
            except Exception:
                value = self._seen
            if value != self._seen:
                self._seen, self._at = value, time.monotonic()
            self._closed.wait(self.times.poll_s)

    def _checker(self) -> None:
        while not self._closed.wait(self.times.poll_s):
            if self.lapsed:
                return

    def _lapse(self) -> None:
        with self._lock:
            if self._lapsed:
                return
            self._lapsed = True
            engines = list(self._engines)
        for engine in engines:
            with contextlib.suppress(Exception):
                engine.stop()


# Engines guarded by a watch in this process: stopped when the process ends (a Dask worker closing because its
# scheduler is gone, a batch job ending), so their clients' process groups are killed rather than orphaned.
_RUNNING: set[_Stoppable] = set()


EXIT_WAIT_S = 2.0  # at most this long at exit for the stopped engines to have killed their process groups


@atexit.register
def _stop_running() -> None:
    # `stop` only tells the engine's threads; they kill the process groups. Without the wait the process could end
    # first (a Dask worker closes at once when its scheduler dies) and leave its clients orphaned.
    engines = list(_RUNNING)
    for engine in engines:
        with contextlib.suppress(Exception):
            engine.stop()
    deadline = time.monotonic() + EXIT_WAIT_S
    for engine in engines:
        wait = getattr(engine, "wait", None)
        if wait is not None:
            with contextlib.suppress(Exception):
                wait(max(0.0, deadline - time.monotonic()))
