"""Read a `concurrency,rate` table (the input of `knee fit`).

Lines that are blank or start with '#' are skipped. Columns are separated by commas,
or — when the first line has none — by semicolons, tabs or spaces. The header is optional: without
one the first two columns are concurrency and rate; with one, the columns are found
by name (concurrency/level/clients/load/processors/n and rate/rate_hz/throughput/x),
extra columns are ignored, and a run's levels.csv works too: when it has phase,
direction or group columns, only "sweep" rows going "up" of the chosen group count, of the steps the analysis
believes (its `believed` column), and a rate sweep's N is its `concurrency` (Little's law), not its offered rate.
"""

from __future__ import annotations

import csv
import math
from dataclasses import dataclass
from pathlib import Path

from knee.errors import UserError

LEVEL_NAMES = ("concurrency", "level", "clients", "load", "processors", "users", "threads", "n")
RATE_NAMES = ("rate", "rate_hz", "throughput", "tput", "x")


@dataclass(frozen=True)
class Points:
    levels: list[float]
    rates: list[float]
    level_name: str
    rate_name: str


# Beyond these the model's N² and λN overflow a float (a fit of 1e300 clients ended in a traceback).
MAX_LEVEL = 1e9
MAX_RATE = 1e15


def _number(text: str, where: str, column: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise UserError(f"{where}: {text.strip()!r} in column {column!r} is not a number") from None
    if not math.isfinite(value):
        raise UserError(f"{where}: {text.strip()!r} in column {column!r} is not a finite number")
    return value


def _is_number(text: str) -> bool:
    try:
        float(text)
    except ValueError:
        return False
    return True


def _split(lines: list[str]) -> list[list[str]]:
    """Rows of cells: commas, else semicolons, tabs or runs of spaces (decided on the first data line)."""
    first = next((ln for ln in lines if ln.strip() and not ln.lstrip().startswith("#")), "")
    if "," in first or not first:
        return list(csv.reader(lines))
    for sep in (";", "\t"):
        if sep in first:
            return list(csv.reader(lines, delimiter=sep))
    return [ln.split() for ln in lines]


def _column(header: list[str], names: tuple[str, ...], what: str, path: Path) -> int:
    lowered = [h.strip().lower() for h in header]
    for name in names:
        if name in lowered:
            return lowered.index(name)
    raise UserError(
        f"{path}: the header has no {what} column (looked for {', '.join(names)}); "
        f"rename one of {', '.join(repr(h) for h in header)} or drop the header"
    )


def _concurrency(header: list[str], rows: list[tuple[int, list[str]]], li: int) -> int:
    """The level column: `li`, but a run's levels.csv has both `concurrency` (found first) and `level`, and only a
    rate sweep's group fills `concurrency`, the operations in the service by Little's law, which the USL's N is (its
    `level` is the offered rate); a closed-loop group's rows leave it empty, and their `level` is their clients."""
    lowered = [h.strip().lower() for h in header]
    if lowered[li] != "concurrency" or "level" not in lowered:
        return li
    if rows and all(li >= len(row) or not row[li].strip() for _, row in rows):
        return lowered.index("level")
    return li


def read_points(path: Path, group: str | None = None, label: str | None = None) -> Points:
    """The (level, rate) points of a CSV file; a UserError naming the line for anything wrong."""
    try:
        text = path.read_text(encoding="utf-8-sig")
    except FileNotFoundError:
        raise UserError(f"{path}: no such file") from None
    except IsADirectoryError:
        raise UserError(f"{path} is a directory; give a CSV file of concurrency,rate rows") from None
    except UnicodeDecodeError:
        raise UserError(f"{path} is not a text (UTF-8) file; give a CSV file of concurrency,rate rows") from None
    except OSError as exc:
        raise UserError(f"{path}: cannot read it ({exc.strerror})") from None
    rows = [
        (i, row)
        for i, row in enumerate(_split(text.splitlines()), start=1)
        if row and any(c.strip() for c in row) and not row[0].lstrip().startswith("#")
    ]
    if not rows:
        raise UserError(f"{path} has no data; it needs concurrency,rate rows such as '50,4.6'")
    header: list[str] | None = None
    li, ri = 0, 1
    level_name, rate_name = "concurrency", "rate"
    filters: dict[int, str] = {}
    if not _is_number(rows[0][1][0]):
        header = [h.strip() for h in rows[0][1]]
        rows = rows[1:]
        li = _column(header, LEVEL_NAMES, "concurrency", path)
        ri = _column(header, RATE_NAMES, "rate", path)
        level_name, rate_name = header[li], header[ri]
        filters = _filters(header, rows, path, {"group": group, "label": label})
        rows = [(n, row) for n, row in rows if all(c >= len(row) or row[c].strip() == v for c, v in filters.items())]
        li = _concurrency(header, rows, li)
        level_name = header[li]
        if filters and level_name.lower() == "concurrency":  # a rate sweep's step where nothing succeeded: no N
            rows = [(n, row) for n, row in rows if li >= len(row) or row[li].strip() not in ("", "0")]
    elif group is not None or label is not None:
        raise UserError(f"--group and --label need a file with 'group' and 'label' columns; {path} has no header")
    levels: list[float] = []
    rates: list[float] = []
    width = max(li, ri) + 1
    for lineno, row in rows:
        where = f"{path} line {lineno}"
        if len(row) < width:
            raise UserError(f"{where}: expected {width} columns ({level_name},{rate_name}), got {len(row)}")
        level = _number(row[li], where, level_name)
        rate = _number(row[ri], where, rate_name)
        if not 0 < level <= MAX_LEVEL:
            raise UserError(f"{where}: concurrency must be above 0 and at most {MAX_LEVEL:.0e} (got {row[li].strip()})")
        if not 0 <= rate <= MAX_RATE:
            raise UserError(f"{where}: rate must be from 0 to {MAX_RATE:.0e} (got {row[ri].strip()})")
        levels.append(level)
        rates.append(rate)
    if not levels and filters:
        raise UserError(
            f"{path} has no row to fit: none is of a sweep step going up that the analysis believes (not superseded, "
            "not run on a service that had not come back to rest, no worker lost)"
        )
    if not levels:
        raise UserError(f"{path} has a header but no data rows")
    return Points(levels, rates, level_name, rate_name)


def _filters(
    header: list[str], rows: list[tuple[int, list[str]]], path: Path, chosen: dict[str, str | None]
) -> dict[int, str]:
    """Column index → required value, for a run's levels.csv (phase, direction, superseded, request, group and
    label columns): the steps the verdict fits."""
    lowered = [h.lower() for h in header]
    out: dict[int, str] = {}
    # a request mix's steps have a row per request beside the group's: the group's (request empty) is the point; the
    # steps the analysis believes (`believed`: not superseded, nor run on a service not at rest, nor with a worker
    # lost, nor ended before they measured), or, in a levels.csv from before that column, those not superseded
    believed = ("believed", "true") if "believed" in lowered else ("superseded", "false")
    for column, value in (("phase", "sweep"), ("direction", "up"), believed, ("request", "")):
        if column in lowered:
            out[lowered.index(column)] = value
    for column, want in chosen.items():
        if column not in lowered:
            if want is not None:
                raise UserError(f"--{column} {want!r} needs a {column!r} column; {path} has none")
            continue
        ci = lowered.index(column)
        values = sorted({row[ci].strip() for _, row in rows if len(row) > ci})
        if want is None:
            if len(values) > 1:
                shown = ", ".join(repr(v) for v in values)
                raise UserError(f"{path} holds {column}s {shown}; choose one with --{column} NAME")
            out[ci] = values[0] if values else ""
        elif want not in values:
            raise UserError(f"--{column} {want!r} is not in {path} (it holds {', '.join(values) or 'none'})")
        else:
            out[ci] = want
    return out
