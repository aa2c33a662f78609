"""The Python side of the engine contract (docs/engine-spec.md).

`Engine` wraps `knee._engine.Engine`: a spec dict in, a started shard, live
snapshots, and a `ShardResult` out. Everything friendlier (CLI options, sweeps)
builds spec dicts and calls this.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

from knee import _engine
from knee.model import GroupStats

ShardResult = _engine.ShardResult


class Engine:
    """One running shard. Use `run()` for the blocking form."""

    def __init__(self, spec: dict[str, Any]) -> None:
        self._inner = _engine.Engine(json.dumps(spec))
        self.spec = spec

    def start(self) -> Engine:
        self._inner.start()
        return self

    def snapshot(self) -> dict[str, Any]:
        return json.loads(self._inner.snapshot())

    def stop(self) -> None:
        self._inner.stop()

    def wait(self, timeout_s: float | None = None) -> bool:
        return bool(self._inner.wait(timeout_s))

    def result(self) -> ShardResult:
        return self._inner.result()


def summary(result: ShardResult) -> dict[str, Any]:
    """The engine summary of a result, as a dict (see docs/engine-spec.md)."""
    return json.loads(result.summary())


def group_stats(result: ShardResult) -> dict[str, GroupStats]:
    """Each group's GroupStats, by group name."""
    s = summary(result)
    interval = float(s.get("interval_s", 1.0))
    return {g["name"]: GroupStats.from_engine(g, interval) for g in s["groups"]}


def run(
    spec: dict[str, Any],
    on_snapshot: Callable[[dict[str, Any]], None] | None = None,
    every_s: float = 1.0,
) -> ShardResult:
    """Run a shard to its end, calling `on_snapshot` about once a second.

    Ctrl-C (KeyboardInterrupt) stops the engine, waits for it to wind down (killing
    every client process group) and re-raises with the partial result attached as
    `exc.knee_result`.
    """
    eng = Engine(spec).start()
    try:
        while not eng.wait(every_s):
            if on_snapshot is not None:
                on_snapshot(eng.snapshot())
    except KeyboardInterrupt as exc:
        eng.stop()
        eng.wait(None)
        exc.knee_result = eng.result()  # type: ignore[attr-defined]
        raise
    return eng.result()
