"""The run directory's run.json: the scenario as run, every step's measurement and the verdicts."""

from typing import Any, Literal

from pydantic import BaseModel, Field, model_validator

from knee.model.analysis import Verdict
from knee.model.base import Counts
from knee.model.measured import LevelUnit, StepResult
from knee.model.resources import TargetHost
from knee.scenario import Scenario

# 3: a group's latency_ms (and percentiles_ms) are of succeeded operations; failed_latency_ms holds the failures'.
# Version 2 and older timed every completed operation together (compare says so).
SCHEMA_VERSION = 3
SUCCESS_LATENCY_SINCE = 3


class RunRecord(BaseModel):
    """The run directory's run.json."""

    schema_version: int = SCHEMA_VERSION
    run_id: str
    created_unix: float
    # failed: ended early by an error (knee.store.ends_with_a_status), before or between its steps
    status: Literal["running", "complete", "interrupted", "aborted", "stopped", "failed"] = "running"
    knee_version: str = ""
    machine: dict[str, Any] = Field(default_factory=dict)
    # the scenario as run, secrets as ${placeholders} (what --resume starts from)
    scenario: Scenario
    measured_group: str = "main"  # the group whose level the sweep varies
    level_unit: LevelUnit = "clients"  # "rate": every step's level is an offered rate (/s), not a client count
    executor: str = "local"  # "local", or the Dask cluster the steps ran on
    targets: dict[str, TargetHost] | None = Field(
        default=None,
        description="the network groups' hosts and ports, by group, and whether each was the load machine, as "
        "recorded when the run started; absent (null) in run.json written before knee recorded them",
    )
    steps: list[StepResult] = Field(default_factory=list)
    search_end: str = Field(default="", description='levels = "auto": why the search ended (empty while it runs)')
    # a continuous baseload's operations outside the steps (pauses, before the first and after the last)
    between: dict[str, Counts] = Field(default_factory=dict)
    rows_spent: dict[str, int] = Field(
        default_factory=dict,
        description="queue and shuffle: positions the steps that --resume dropped (cut short, run again) had used; "
        "the steps after them start past these too, so no row is sent twice",
    )
    verdicts: list[Verdict] = Field(default_factory=list)

    def next_index(self) -> int:
        """The index the next step gets: one past the highest so far (a resumed run's partial steps leave gaps)."""
        return max((s.index for s in self.steps), default=-1) + 1

    def rows_used(self) -> dict[str, int]:
        """Rows of each data source the steps so far used (a queue's next step starts after them)."""
        used = dict(self.rows_spent)
        for s in self.steps:
            for d in s.data:
                used[d.name] = used.get(d.name, 0) + d.used
        return used

    def in_level_order(self) -> list[StepResult]:
        """The steps as a report lists them: as they ran, except a searched sweep's (levels = "auto"), whose
        levels ran in the search's order, in order of level (recovery probes after them, as they ran)."""
        if not self.scenario.sweep.auto_levels:
            return list(self.steps)
        sweep = sorted((s for s in self.steps if s.phase == "sweep"), key=lambda s: (s.label, s.level, s.index))
        return sweep + [s for s in self.steps if s.phase != "sweep"]

    @property
    def probes(self) -> int:
        """The single operations knee sent to see whether the service was at rest before the steps
        (StepResult.settle): the service saw them, and they are in no step's counts."""
        return sum(s.settle.probes for s in self.steps if s.settle is not None)

    @property
    def rates(self) -> bool:
        """The levels are offered rates (a rate sweep), not client counts."""
        return self.level_unit == "rate"

    @model_validator(mode="before")
    @classmethod
    def _older(cls, data: Any) -> Any:
        """run.json of schema 1: the scenario's groups carried think_s; steps carried rate_hz."""
        # (a version that is not a whole number is left to the field's own check, which names it)
        version = data.get("schema_version", SCHEMA_VERSION) if isinstance(data, dict) else SCHEMA_VERSION
        if isinstance(version, int) and version < 2:
            data = dict(data)
            sc = dict(data.get("scenario") or {})
            groups = sc.get("groups")
            if isinstance(groups, dict):
                sc["groups"] = {n: {k: v for k, v in g.items() if k != "think_s"} for n, g in groups.items()}
            data["scenario"] = sc
            if "level_unit" not in data and any(s.get("rate_hz") is not None for s in data.get("steps", [])):
                data["level_unit"] = "rate"
        return data
