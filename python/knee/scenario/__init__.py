"""The scenario: what to run, as a file (TOML) or one line (`knee run URL`), checked before anything runs.

    model.py     the Scenario and its tables (sweep, stop, recovery, SLO, cluster, monitor)
    groups.py    the client groups (http, tcp, exec, worker program, Python flow)
    fields.py    the base table and the field types users type (durations, counts, rates)
    load.py      TOML or a one-line scenario's tables → Loaded (the Scenario as it runs and as recorded, Secrets)
    messages.py  the wording of every mistake: file and line (or option), key, value, fix
    oneline.py   the tables of `knee run TARGET` / `knee sweep TARGET --levels …` from their options
    secrets.py   `Secrets`: the run's secret values, handed to whatever writes or prints, which scrubs with it
    units.py     durations, status ranges, headers as typed
    tomlout.py   the TOML writer (`--save-scenario`, the demo target's config)

The names below are importable from `knee.scenario` itself; they load on first use, so that importing a
light module of the package (units, tomlout) does not load pydantic.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from knee.scenario.groups import (
        CommandGroup,
        ExecGroup,
        ExpectFile,
        Group,
        GrpcGroup,
        HttpGroup,
        NetworkGroup,
        ProcessGroup,
        PythonGroup,
        TcpGroup,
        UrlGroup,
        WebsocketGroup,
        WorkerGroup,
    )
    from knee.scenario.load import (
        RUNTIME_PLACEHOLDERS,
        Loaded,
        from_raw,
        load_scenario,
        parse_scenario,
        read_scenario,
        scenario_from_record,
    )
    from knee.scenario.messages import Source
    from knee.scenario.model import (
        DEFAULT_MAX_IN_FLIGHT,
        Analysis,
        Cluster,
        LevelRange,
        Monitor,
        RateRange,
        Recovery,
        Scenario,
        Slo,
        StopRules,
        Sweep,
    )
    from knee.scenario.secrets import Secrets

__all__ = [
    "DEFAULT_MAX_IN_FLIGHT",
    "RUNTIME_PLACEHOLDERS",
    "Analysis",
    "Cluster",
    "CommandGroup",
    "ExecGroup",
    "ExpectFile",
    "Group",
    "GrpcGroup",
    "HttpGroup",
    "LevelRange",
    "Loaded",
    "Monitor",
    "NetworkGroup",
    "ProcessGroup",
    "PythonGroup",
    "RateRange",
    "Recovery",
    "Scenario",
    "Secrets",
    "Slo",
    "Source",
    "StopRules",
    "Sweep",
    "TcpGroup",
    "UrlGroup",
    "WebsocketGroup",
    "WorkerGroup",
    "from_raw",
    "load_scenario",
    "parse_scenario",
    "read_scenario",
    "scenario_from_record",
]

# the modules the names above live in, the lightest first: a name is taken from the first that has it, so that
# `Secrets` does not load pydantic, nor `Source` the groups' models
_MODULES = ("secrets", "messages", "groups", "model", "load")


def __getattr__(name: str) -> Any:
    if name not in __all__:
        raise AttributeError(f"module 'knee.scenario' has no attribute {name!r}")
    for module in _MODULES:
        found = importlib.import_module(f"knee.scenario.{module}")
        if hasattr(found, name):
            value = getattr(found, name)
            globals()[name] = value
            return value
    raise AttributeError(f"module 'knee.scenario' has no attribute {name!r}")
