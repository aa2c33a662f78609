"""The console knee prints its tables and sentences on (standard output).

On a terminal it is the terminal's width. Elsewhere (`| tee`, a file, a CI log) tables keep their full width and
sentences are not wrapped, whatever COLUMNS says: no cell is cut short ("Concur…", "(112,4…") and no number is
split over two lines, since a log is read by whatever shows it.

rich is imported when the console is first used, not before: a quiet `knee run` may print nothing through it,
and importing rich is some 15 ms of the run's fixed cost (docs/performance.md).
"""

from __future__ import annotations

import sys
from typing import TYPE_CHECKING, Any, cast

if TYPE_CHECKING:
    from rich.console import Console

# Wider than any table knee prints: off a terminal, rich draws a table at its natural width, up to this.
UNBOUNDED = 100_000


class _FirstUse:
    """Stands for a rich Console and makes it on the first attribute asked of it (every method, every property).
    Whoever holds it uses it as the console it becomes."""

    def __init__(self, **settings: Any) -> None:
        self._settings = settings
        self._console: Console | None = None

    def __getattr__(self, name: str) -> Any:
        # Only names not set in __init__ arrive here: everything a Console has.
        return getattr(self._made(), name)

    # Python looks special methods up on the type, past __getattr__: rich's Live holds its console with `with`.
    def __enter__(self) -> Console:
        return self._made().__enter__()

    def __exit__(self, *exc: Any) -> None:
        self._made().__exit__(*exc)

    def _made(self) -> Console:
        if self._console is None:
            from rich.console import Console

            self._console = Console(**self._settings)
        return self._console


def make_console(highlight: bool = True) -> Console:
    """A console on standard output: the terminal's width, or unbounded when standard output is not a terminal."""
    if sys.stdout.isatty():
        return cast("Console", _FirstUse(highlight=highlight))
    return cast("Console", _FirstUse(width=UNBOUNDED, soft_wrap=True, highlight=highlight))
