"""A step's data sources on many load generators (issue 36): each row of a queue exactly once across the fleet.

A `queue` or `shuffle` source (scope `run` or `client`) is cut into disjoint parts, one per shard, in proportion
to the clients of the shard's groups that read it (`cut`, by `shares`' largest remainder); a shard's part is the
`ranges` of positions it may use. Positions are those of a local run: the file's rows in order for a queue, the
engine's seeded permutation of them for a shuffle (the same on every machine: each shard computes it), so a part
needs nothing but its ranges. `DataSplit` is the driver's memory across a run's steps: the positions of each
scope-run source no shard has used yet; after a step, each shard's `used` (the first positions of its part)
comes off (a lost shard's whole part, as it may have sent any of it), and the next step's parts are cut from
what is left. It also names the shard whose part ran out first (`first_out`). `circular` and `random` sources
keep their meaning on every shard: each its own cursor over all the rows.

Workers get the rows through the executor, not a shared file system: the driver reads the file (`read_rows`,
which counts its rows as the engine does) and ships its text to each worker once per run, and `with_texts`
puts it in the shard's spec there. A local run keeps the file.
"""

from __future__ import annotations

import csv
import io
import os
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from knee.errors import UserError
from knee.model.engine_summary import EngineDataUse
from knee.spec import DataSource, EngineSpec, GroupSpec

Range = tuple[int, int]  # [start, end) positions
END = 2**63 - 1  # "to the last row" in a spec's ranges


# ---- position arithmetic -----------------------------------------------------------------------------


def size(ranges: Sequence[Range]) -> int:
    return sum(b - a for a, b in ranges)


def head(ranges: Sequence[Range], n: int) -> list[Range]:
    """The first `n` positions of `ranges`."""
    out: list[Range] = []
    for a, b in ranges:
        if n <= 0:
            break
        take = min(n, b - a)
        out.append((a, a + take))
        n -= take
    return out


def cut(left: Sequence[Range], weights: Sequence[float]) -> list[list[Range]]:
    """`left` (disjoint ranges, in order) cut into consecutive parts, one per weight, each of the size
    `shares(size(left), weights)` gives: disjoint, covering `left`, in proportion to the weights."""
    from knee.executor.shards import shares

    parts: list[list[Range]] = []
    rest = list(left)
    for n in shares(size(left), weights):
        parts.append(head(rest, n))
        rest = subtract(rest, parts[-1])
    return parts


def subtract(left: Sequence[Range], gone: Sequence[Range]) -> list[Range]:
    """The positions of `left` not in `gone` (both disjoint and sorted), merged into as few ranges as can be."""
    out: list[Range] = []
    gone = sorted(gone)
    for start, b in left:
        a = start
        for c, d in gone:
            if d <= a or c >= b:
                continue
            if c > a:
                out.append((a, c))
            a = max(a, d)
            if a >= b:
                break
        if a < b:
            out.append((a, b))
    merged: list[Range] = []
    for a, b in out:
        if merged and merged[-1][1] == a:
            merged[-1] = (merged[-1][0], b)
        else:
            merged.append((a, b))
    return merged


# ---- the file, read on the driver ---------------------------------------------------------------


@dataclass(frozen=True)
class Rows:
    """A data file as the driver read it: its text (what the workers get) and its rows (as the engine counts them)."""

    text: str
    rows: int


def file_key(path: str) -> tuple[str, int, int]:
    """What names a file's version: its path, size and change time (a file written again is read again)."""
    try:
        st = os.stat(path)
    except OSError as exc:  # removed or moved since the sweep began
        raise UserError(f"data file {path}: cannot read it ({exc.strerror or exc}); fix the path") from None
    return (path, st.st_size, st.st_mtime_ns)


def read_rows(d: DataSource) -> Rows:
    """`d`'s file, read once: its text and its row count, as the engine's table counts them (a header first for CSV
    and TSV; blank lines skipped; a quoted CSV field may hold a line end)."""
    assert d.file is not None
    try:
        raw = Path(d.file).read_bytes()
    except OSError as exc:
        raise UserError(f"data {d.name!r}: cannot read {d.file} ({exc.strerror or exc}); fix the path") from None
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise UserError(
            f"data {d.name!r}: {d.file} is not UTF-8 (byte {exc.start}); a cluster ships the rows to its workers as "
            "text: write the file as UTF-8"
        ) from None
    if d.format == "jsonl":  # a line per row, the first too
        return Rows(text, sum(1 for line in text.split("\n") if line.strip(" \t\r\n\f")))
    body = text.removeprefix("\ufeff")
    if d.format == "tsv" or '"' not in body:  # no quotes: a row per line that is not blank (\n, \r\n or \r)
        rows = sum(1 for line in body.replace("\r\n", "\n").replace("\r", "\n").split("\n") if line)
    else:
        try:
            rows = sum(1 for r in csv.reader(io.StringIO(body, newline="")) if r not in ([], [""]))
        except csv.Error as exc:
            raise UserError(f"data {d.name!r}: {d.file} cannot be read as CSV ({exc}); fix the file") from None
    return Rows(text, max(0, rows - 1))  # the header is no row


# ---- a step's parts ------------------------------------------------------------------------------


def split_here(d: DataSource) -> bool:
    """A source whose rows are handed out once (queue, shuffle): cut into a part per shard."""
    return d.order in ("queue", "shuffle")


def reads(g: GroupSpec, name: str) -> bool:
    """Group `g` takes rows of source `name` (a `${name.…}` template, or a worker group's `data`)."""
    return f"${{{name}." in g.client.model_dump_json() or name in (getattr(g.client, "data", None) or [])


def weights(specs: Sequence[EngineSpec], name: str) -> list[float]:
    """Each shard's clients that read source `name` (all its clients when no group says it reads it)."""
    reading = [float(sum(g.clients for g in s.groups if reads(g, name))) for s in specs]
    return reading if any(reading) else [float(sum(g.clients for g in s.groups)) for s in specs]


@dataclass
class _Left:
    """One scope-run source's positions no shard has used, and the count of used ones the runner will know of."""

    key: tuple[str, int, int]
    left: list[Range]
    used: int


@dataclass
class DataSplit:
    """The driver's side of a run's data sources on many shards: the parts of each step, and what they left."""

    rows: dict[tuple[str, int, int], int] = field(default_factory=dict)  # each file version's rows
    _left: dict[str, _Left] = field(default_factory=dict)
    _parts: dict[str, list[list[Range]]] = field(default_factory=dict)  # the last step's, per source

    def count(self, d: DataSource) -> int:
        key = file_key(d.file or "")
        if key not in self.rows:
            self.rows[key] = read_rows(d).rows
        return self.rows[key]

    def parts(self, specs: Sequence[EngineSpec], *, remember: bool = True) -> list[EngineSpec]:
        """Each shard's spec with its part of every queue and shuffle: the positions still left (scope run: after what
        earlier steps used, as the spec's `ranges` say; scope client: all of them, each step) cut in proportion to
        the shard's clients that read it. `remember`: a step's parts, settled by `settle` (a baseload's are not)."""
        if remember:
            self._parts = {}
        out = [list(s.data) for s in specs]
        for i, d in enumerate(specs[0].data if specs else []):
            if not split_here(d) or d.file is None:
                continue
            parts = cut(self._left_of(d, remember), weights(specs, d.name))
            if remember and d.scope == "run":
                self._parts[d.name] = parts
            for k, part in enumerate(parts):
                out[k][i] = d.model_copy(update={"ranges": part})
        return [s.model_copy(update={"data": data}) for s, data in zip(specs, out, strict=True)]

    def _left_of(self, d: DataSource, remember: bool) -> list[Range]:
        rows = self.count(d)
        if d.scope != "run":
            return [(0, rows)]
        start = d.ranges[0][0] if d.ranges else 0  # what the runner counts as used by earlier steps
        key = file_key(d.file or "")
        mine = self._left.get(d.name)
        if mine is None or mine.key != key or mine.used != start:
            # a first step, or one this driver did not split (a resumed run): after the positions used, in order
            mine = _Left(key, [(min(start, rows), rows)] if start < rows else [], start)
            if remember:
                self._left[d.name] = mine
        return mine.left

    def settle(self, names: Sequence[str], uses: Sequence[Sequence[EngineDataUse] | None]) -> dict[str, str]:
        """After the step: each shard's used positions come off what is left (`uses[k]` None: shard `k` was lost, and
        its whole part comes off). Returns, per source that ran out, the name of the shard whose part ran out
        first."""
        for name, parts in self._parts.items():
            mine = self._left[name]
            gone: list[Range] = []
            for k, part in enumerate(parts):
                use = next((u for u in uses[k] or () if u.name == name), None)
                if uses[k] is None:
                    gone += part
                elif use is not None:
                    gone += head(part, use.used)
                    mine.used += use.used
            mine.left = subtract(mine.left, sorted(gone))
        best: dict[str, tuple[float, str]] = {}
        for k, shard_uses in enumerate(uses):
            for u in shard_uses or ():
                at = u.exhausted_after_s
                if at is not None and (u.name not in best or at < best[u.name][0]):
                    best[u.name] = (at, names[k])
        return {name: who for name, (_, who) in best.items()}


# ---- the rows, on the worker ----------------------------------------------------------------------


class Shipping:
    """The rows each worker holds: a file's text goes to a worker once per run (once more when the file changes), by
    `send(text, address)` (the transport's: a Dask scatter), and each step's shard names what it holds."""

    def __init__(self, send: Callable[[str, str], Any], alive: Callable[[Any], bool]) -> None:
        self._send = send
        self._alive = alive  # whether a held text is still there (its worker may have gone and come back)
        self._held: dict[tuple[str, str], tuple[tuple[str, int, int], Any]] = {}  # (address, path): version, handle

    def texts(self, chosen: Sequence[tuple[str, EngineSpec]]) -> list[dict[str, Any]]:
        """For each (worker address, shard spec): each of its file sources' text, as the worker holds it."""
        read: dict[str, str] = {}
        out = []
        for address, spec in chosen:
            here: dict[str, Any] = {}
            for d in spec.data:
                if d.file is None:
                    continue
                version = file_key(d.file)
                held = self._held.get((address, d.file))
                if held is None or held[0] != version or not self._alive(held[1]):
                    if d.file not in read:
                        read[d.file] = read_rows(d).text  # once per step at most, and only for a worker without it
                    held = self._held[(address, d.file)] = (version, self._send(read[d.file], address))
                here[d.name] = held[1]
            out.append(here)
        return out

    def forget(self) -> None:
        self._held.clear()


def without_files(spec: EngineSpec) -> EngineSpec:
    """`spec` as it travels: no path of the driver's (the worker fills the rows in with `with_texts`)."""
    if all(d.file is None for d in spec.data):
        return spec
    return spec.model_copy(update={"data": [d.model_copy(update={"file": None}) if d.file else d for d in spec.data]})


def with_texts(spec: EngineSpec, texts: Mapping[str, str]) -> EngineSpec:
    """`spec` with each source named in `texts` reading its rows from that text (a header line first)."""
    if not texts:
        return spec
    data = [d.model_copy(update={"file": None, "text": texts[d.name]}) if d.name in texts else d for d in spec.data]
    return spec.model_copy(update={"data": data})
