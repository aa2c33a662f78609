"""The executor contract: what the runner asks of wherever steps run, and what a step's run hands back.

An executor runs one step's engine spec (`run_step`, to a `StepRun`), keeps a baseload running across
steps (`start_background`, a `BackgroundShard`), says where it runs (`describe`) and runs knee's preflight
where the load comes from (`preflight`). `LocalExecutor` (this machine) and `DaskExecutor` (a Dask
cluster) subclass `Executor`; a new backend subclasses it too and gets the defaults of `describe` and
`preflight`. The backend-neutral work of a distributed run (splitting a step, merging its shards) is in
`knee.executor.shards`.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Protocol

from knee.engine import ShardResult, Snapshot
from knee.executor.interrupt import Interrupts
from knee.model import GeneratorStats, HostCounters, SoakSample, WorkerShare
from knee.spec import EngineSpec

if TYPE_CHECKING:
    from knee.scenario import Scenario

# Called with each live snapshot (about once a second); returning True ends the step early and whole (it has
# measured enough: duration = "auto"), as its duration's end would.
OnSnapshot = Callable[[Snapshot], bool | None]


class StoppedBeforeStart(Exception):
    """Ctrl-C came before a step's shards began (a cluster's wait for its workers, the wait for the service to be
    at rest): the step never started, nothing of it is kept, and the run ends as interrupted."""


@dataclass
class StepRun:
    """What running one step's spec produced."""

    result: ShardResult
    partial: bool
    started_unix: float
    generator: GeneratorStats
    workers: list[WorkerShare] = field(default_factory=list)
    start_skew_s: float | None = None  # distributed: latest minus earliest shard start
    lost: list[str] = field(default_factory=list)  # distributed: workers whose shard was lost
    counters: HostCounters | None = None  # the load machines' kernel counters (knee.machine.kernel)
    first_out: dict[str, str] = field(default_factory=dict)  # distributed: per data source, the shard out first
    soak: list[SoakSample] = field(default_factory=list)  # a soak's memory, interval by interval (knee.soaking)
    background_lead_s: float = 0.0  # the baseload's window opened this long before the step's engine started


class BackgroundShard(Protocol):
    """A baseload running across steps: `cut()` the window since the last cut, `stop()` it."""

    def cut(self) -> ShardResult: ...
    def stop(self) -> ShardResult: ...


class Executor(Protocol):
    """Where steps run: this machine (`LocalExecutor`) or a Dask cluster (`DaskExecutor`)."""

    name: str  # recorded in run.json as where the steps ran

    def run_step(self, spec: EngineSpec, interrupts: Interrupts, on_snapshot: OnSnapshot | None = None) -> StepRun:
        """Run `spec` to its end, or until `interrupts.requested` (then the run is partial)."""
        ...

    def start_background(self, spec: EngineSpec) -> BackgroundShard:
        """Start a baseload that runs across the sweep's steps."""
        ...

    def describe(self) -> str | None:
        """One line on where the steps run, shown before the sweep; None (the default): nothing to say."""
        return None

    def preflight(self, scenario: Scenario) -> list[str]:
        """knee's preflight where the load comes from: raises a UserError for what cannot run, returns the
        warnings. The default runs it on this machine."""
        from knee.preflight import preflight_scenario

        return preflight_scenario(scenario)

    def close(self) -> None:
        """Let go of what the executor holds (a cluster it started)."""
        ...
