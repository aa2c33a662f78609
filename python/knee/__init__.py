"""knee: find where a service hits the wall.

`knee.run(target, clients=…, n=… | iterations=… | duration=…)` runs one level of load and returns a
`RunResult`; `knee.sweep(target, levels=[…], duration=…)` (or `knee.sweep(scenario="file.toml")`) runs a
sweep and returns a `Run` with its verdict and per-level table. The `knee` command line does the rest.
Engine failures raise `knee.EngineError` (and its subclasses `SpecError`, `FdLimitError` …).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from knee._engine import EngineError, FdLimitError, SpecError, __version__
    from knee.api import Run, RunResult, run, sweep
    from knee.operations import read_operations

__all__ = [
    "EngineError", "FdLimitError", "Run", "RunResult", "SpecError", "__version__", "read_operations", "run", "sweep"
]  # fmt: skip

_API = ("run", "sweep", "Run", "RunResult")
_ERRORS = ("EngineError", "SpecError", "FdLimitError")


def __getattr__(name: str) -> Any:
    # Lazy, so that `import knee` (and `knee fit`, `knee report`) need not load the engine.
    if name in _API:
        from knee import api

        return getattr(api, name)
    if name == "__version__":  # the engine's build carries it (cheaper than importlib.metadata)
        try:
            from knee._engine import __version__
        except ImportError:  # a source tree without a built engine
            return "0.0.0"
        return __version__
    if name == "read_operations":
        from knee.operations import read_operations

        return read_operations
    if name in _ERRORS:
        from knee import _engine

        return getattr(_engine, name)
    raise AttributeError(f"module 'knee' has no attribute {name!r}")
