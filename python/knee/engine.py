"""The Python side of the engine contract (docs/engine-spec.md).

`Engine` wraps `knee._engine.Engine`: a typed `EngineSpec` in, a started shard, typed live
snapshots, and a `ShardResult` out. The loop that drives it is the executor's
(`knee.executor.local.run_step`); everything friendlier builds a Scenario and a plan.

Engine failures arrive as `EngineError` and its subclasses (created in the bindings), never as a
bare ValueError.
"""

from collections.abc import Callable

from pydantic import BaseModel, ConfigDict

from knee import _engine
from knee.model import GroupStats, Outcomes
from knee.model.engine_summary import EngineSummary, Mirror
from knee.scenario.secrets import NO_SECRETS, Secrets
from knee.spec import EngineSpec

ShardResult = _engine.ShardResult
EngineError = _engine.EngineError
SpecError = _engine.SpecError
FdLimitError = _engine.FdLimitError


class GroupSnapshot(Mirror, Outcomes):
    """A live view of one group (engine.rs `GroupSnapshot`): counts from `Outcomes`."""

    name: str
    in_flight: int
    late: int  # an open loop's arrivals that started late, as their operations ended; `lagged`: with a client free
    lagged: int
    p50_us: int
    p99_us: int
    failed_by_class: dict[str, int]  # failures so far by class, the classes with some only


class ShardNow(Outcomes):
    """One load generator's part of a distributed step, as of its last snapshot (its groups added up)."""

    model_config = ConfigDict(extra="forbid")

    worker: str  # how messages name it: 'tcp://10.0.0.7:40213 (10.0.0.7)'
    clients: int
    in_flight: int
    finished: bool


class Snapshot(BaseModel):
    """A live view of a shard (engine.rs `Snapshot`)."""

    model_config = ConfigDict(extra="forbid")

    elapsed_s: float
    finished: bool
    groups: list[GroupSnapshot]
    workers: tuple[int, int] | None = None  # distributed: (workers reporting, workers running the step)
    shards: list[ShardNow] | None = None  # distributed: each reporting worker's part

    def group(self, name: str) -> GroupSnapshot | None:
        return next((g for g in self.groups if g.name == name), None)


class Engine:
    """One running shard."""

    def __init__(self, spec: EngineSpec) -> None:
        self._inner = _engine.Engine(spec.to_json())
        self.spec = spec

    def start(self, ready: Callable[[], object] | None = None) -> "Engine":
        """Start the clients; `ready`, if given, is called once every engine thread is ready (worker programs
        answering) and the clients start when it returns (a distributed step's common start)."""
        if ready is None:
            self._inner.start()
        else:
            self._inner.start(ready)
        return self

    def snapshot(self) -> Snapshot:
        return Snapshot.model_validate_json(self._inner.snapshot())

    def stop(self) -> None:
        self._inner.stop()

    def wait(self, timeout_s: float | None = None) -> bool:
        return bool(self._inner.wait(timeout_s))

    def cut(self) -> ShardResult:
        """The window since the start or the last cut (a shard of background groups only)."""
        return self._inner.cut()

    def result(self) -> ShardResult:
        return self._inner.result()


def summary(result: ShardResult, secrets: Secrets = NO_SECRETS) -> EngineSummary:
    """The engine's summary of a result, typed; `secrets`' values scrubbed from it (a service, or a command, may
    echo a credential it was sent into a failure's sample: the run's record must not hold it)."""
    return EngineSummary.model_validate_json(secrets.scrub_json(result.summary()))


def group_stats(result: ShardResult) -> dict[str, GroupStats]:
    """Each group's GroupStats, by group name."""
    s = summary(result)
    return {g.name: GroupStats.from_engine(g, s.interval_s) for g in s.groups}
