"""The console knee prints its tables and sentences on (standard output).

On a terminal it is the terminal's width. Elsewhere (`| tee`, a file, a CI log) tables keep their full width and
sentences are not wrapped, whatever COLUMNS says: no cell is cut short ("Concur…", "(112,4…") and no number is
split over two lines, since a log is read by whatever shows it. Light to import (rich only): `knee run` uses it.
"""

from __future__ import annotations

import sys

from rich.console import Console

# Wider than any table knee prints: off a terminal, rich draws a table at its natural width, up to this.
UNBOUNDED = 100_000


def make_console(highlight: bool = True) -> Console:
    """A console on standard output: the terminal's width, or unbounded when standard output is not a terminal."""
    if sys.stdout.isatty():
        return Console(highlight=highlight)
    return Console(width=UNBOUNDED, soft_wrap=True, highlight=highlight)
