"""The data knee records: a step's measured groups, a run, a verdict.

Everything here is plain data (pydantic models) that round-trips through JSON: `run.json` in the run
directory is a `RunRecord` dumped with `model_dump(mode="json")`. One room per concern:

- `base`: the shapes defined once and reused: the outcome counts (`Outcomes`, `Counts`) and a group's
  identity (`GroupIdentity`);
- `engine_summary`: the typed mirror of what `knee._engine` returns (held against the Rust side by
  tests/unit/test_boundary.py), read by `knee.engine`, not re-exported here;
- `measured`: what a step measured (`GroupStats`, `StepResult` …), all latencies in milliseconds;
- `resources`: what was true of the machines during a step (load-side CPU, kernel counters, the target);
- `analysis`: what the analysis concluded (`Verdict` and its parts);
- `run`: `RunRecord`, the run directory's run.json.

The record types are importable from `knee.model` itself.
"""

from knee.model.analysis import (
    Bracket,
    Burst,
    ClientRamp,
    ClientRampPoint,
    CurveShape,
    Drift,
    Finding,
    LittleCheck,
    Ramp,
    RampPoint,
    Soak,
    Spike,
    SpikeWindow,
    USLFit,
    Verdict,
)
from knee.model.base import Counts, GroupIdentity, Outcomes
from knee.model.measured import (
    SKEW_WARN_SHARE,
    DataUse,
    GroupStats,
    LatencyStats,
    Level,
    LevelUnit,
    OpenLoopStats,
    Reason,
    RequestStats,
    SeriesPoint,
    Settle,
    SteadyState,
    StepResult,
    WorkerShare,
)
from knee.model.resources import (
    BusiestProcess,
    GeneratorStats,
    HostCounters,
    ListenSocket,
    RemoteMetric,
    RemoteStats,
    SoakSample,
    TargetHost,
    TargetStats,
)
from knee.model.run import SCHEMA_VERSION, SUCCESS_LATENCY_SINCE, RunRecord

__all__ = [
    "SCHEMA_VERSION",
    "SKEW_WARN_SHARE",
    "SUCCESS_LATENCY_SINCE",
    "Bracket",
    "Burst",
    "BusiestProcess",
    "ClientRamp",
    "ClientRampPoint",
    "Counts",
    "CurveShape",
    "DataUse",
    "Drift",
    "Finding",
    "GeneratorStats",
    "GroupIdentity",
    "GroupStats",
    "HostCounters",
    "LatencyStats",
    "Level",
    "LevelUnit",
    "ListenSocket",
    "LittleCheck",
    "OpenLoopStats",
    "Outcomes",
    "Ramp",
    "RampPoint",
    "Reason",
    "RemoteMetric",
    "RemoteStats",
    "RequestStats",
    "RunRecord",
    "SeriesPoint",
    "Settle",
    "Soak",
    "SoakSample",
    "Spike",
    "SpikeWindow",
    "SteadyState",
    "StepResult",
    "TargetHost",
    "TargetStats",
    "USLFit",
    "Verdict",
    "WorkerShare",
]
