"""knee: find where a service hits the wall.

`knee.run(target, clients=…, n=… | iterations=… | duration=…)` runs one level of
load and returns a `RunResult`; the `knee` command line does the rest.
"""

from __future__ import annotations

from importlib.metadata import PackageNotFoundError, version
from typing import TYPE_CHECKING, Any

try:
    __version__ = version("knee")
except PackageNotFoundError:  # running from a source tree
    __version__ = "0.0.0"

if TYPE_CHECKING:
    from knee.api import RunResult, run

__all__ = ["RunResult", "__version__", "run"]


def __getattr__(name: str) -> Any:
    # Lazy, so that `import knee` (and `knee fit`, `knee report`) need not load the engine.
    if name in ("run", "RunResult"):
        from knee import api

        return getattr(api, name)
    raise AttributeError(f"module 'knee' has no attribute {name!r}")
