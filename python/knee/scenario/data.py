"""Traffic like production: a scenario's data sources (`[[data]]`), an http group's request mix
(`[[groups.NAME.requests]]`) and the checks of the templates that read them (`${NAME.COLUMN}`).

A data source is a CSV or TSV file with a header row, or JSON Lines; every operation of a group whose templates
read it takes one row (docs/scenarios.md, "Data and request mixes"). The engine loads the rows once per process
and hands them out; this module checks, before any load, that every `${NAME.COLUMN}` names a source and one of
its columns (reading only the file's first line), so a typo is one sentence naming the key and the columns.
"""

from __future__ import annotations

import csv
import json
import re
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any, Literal

from pydantic import Field, field_validator, model_validator

from knee.scenario.fields import Count, Headers, Table

if TYPE_CHECKING:
    from knee.scenario.model import Scenario

# Names templates use for themselves (crates/engine/src/spec/data.rs RESERVED).
RESERVED = frozenset({"client", "iteration", "uuid", "now_ms", "random_int", "random_string", "stage"})
_FIELD = re.compile(r"(?<!\$)\$\{([A-Za-z_][A-Za-z0-9_]*)\.([^}]*)\}")
Order = Literal["circular", "queue", "random", "shuffle"]
OnExhausted = Literal["stop", "stop_client", "recycle"]
_FORMATS = {".csv": "csv", ".tsv": "tsv", ".tab": "tsv", ".jsonl": "jsonl", ".ndjson": "jsonl"}


class DataTable(Table):
    """One `[[data]]` table: a file of rows and how they are handed out."""

    name: Annotated[str, Field(pattern=r"^[A-Za-z_][A-Za-z0-9_]*$")]
    file: str
    format: Literal["csv", "tsv", "jsonl"] | None = None
    order: Order = "circular"
    # default: stop for queue and shuffle (circular and random never run out)
    on_exhausted: OnExhausted | None = None
    scope: Literal["run", "client"] = "run"

    @field_validator("file")
    @classmethod
    def _absolute(cls, v: str) -> str:
        """Relative to the working directory, as body_file is; kept absolute, so a run's record finds it again."""
        return str(Path(v).expanduser().resolve()) if v else v

    @field_validator("name")
    @classmethod
    def _not_reserved(cls, v: str) -> str:
        if v in RESERVED:
            raise ValueError(f"{v!r} is a name templates use for themselves; call the data something else")
        return v

    @model_validator(mode="after")
    def _consistent(self) -> DataTable:
        if self.format is None and Path(self.file).suffix.lower() not in _FORMATS:
            raise ValueError(
                f"the file {self.file!r} does not say its format by its name: name it .csv, .tsv or .jsonl (or, in "
                'a scenario, set format = "csv", "tsv" or "jsonl")'
            )
        if self.order in ("circular", "random") and self.on_exhausted not in (None, "recycle"):
            raise ValueError(
                f'on_exhausted = "{self.on_exhausted}" applies to the queue and shuffle orders only '
                f"({self.order} never runs out); drop it"
            )
        return self

    @property
    def file_format(self) -> str:
        return self.format or _FORMATS[Path(self.file).suffix.lower()]

    @property
    def runs_out(self) -> bool:
        """A queue or shuffle that does not recycle: each row once, then the rule."""
        return self.order in ("queue", "shuffle") and self.on_exhausted != "recycle"

    def columns(self) -> list[str]:
        """The file's columns (its header, or its first JSON line's keys), read from its first line only."""
        path = Path(self.file)
        try:
            with path.open("rb") as f:
                first = f.readline()
                while first and not first.strip():
                    first = f.readline()
        except OSError as exc:
            raise ValueError(f"cannot read {self.file!r} ({exc.strerror or exc}); fix the path") from None
        text = first.decode("utf-8", "replace").lstrip("\ufeff").rstrip("\r\n")
        if not text.strip():
            raise ValueError(f"{self.file!r} is empty; give a header row and at least one row")
        if self.file_format == "jsonl":
            try:
                obj = json.loads(text)
            except ValueError:
                obj = None
            if not isinstance(obj, dict):
                raise ValueError(f"the first line of {self.file!r} is not a JSON object; write one object per line")
            return sorted(obj)
        # as the engine reads them: CSV's quotes (a quoted name may hold a comma), TSV's none
        fields = text.split("\t") if self.file_format == "tsv" else next(csv.reader([text]), [])
        return [c.strip() for c in fields]


class MixRequest(Table):
    """One `[[groups.NAME.requests]]` entry: a request of the group's mix, picked by weight for each operation.
    Keys not given are the group's; `url` may be a path ("/read?id=1") on the group's origin."""

    name: Annotated[str, Field(pattern=r"^[A-Za-z0-9_.:/-]{1,64}$")]
    weight: Annotated[float, Field(gt=0, allow_inf_nan=False)] = 1.0
    url: str | None = None
    method: str | None = None
    headers: Headers | None = None
    cookies: dict[str, str] | None = None
    body: str | None = None
    body_file: str | None = None
    expect_status: list[tuple[int, int]] | None = None
    expect_body: str | None = None
    expect_body_regex: str | None = None
    expect_length: Count | None = None

    @field_validator("expect_status", mode="before")
    @classmethod
    def _status(cls, v: Any) -> Any:
        from knee.scenario.groups import HttpGroup

        return v if v is None else HttpGroup._status(v)

    @model_validator(mode="after")
    def _one_body(self) -> MixRequest:
        if self.body is not None and self.body_file is not None:
            raise ValueError("give either body or body_file, not both")
        return self


def data_tables(items: list[str], order: str | None, on_exhausted: str | None) -> list[dict[str, Any]]:
    """The `[[data]]` tables of `--data NAME=FILE` (with `--data-order`, `--data-on-exhausted` for each)."""
    from knee.errors import UserError

    if not items:
        raise UserError("--data-order and --data-on-exhausted shape --data sources: give --data NAME=FILE too")
    tables: list[dict[str, Any]] = []
    for item in items:
        name, sep, file = item.partition("=")
        if not sep or not name or not file:
            raise UserError(f"--data {item!r} must be NAME=FILE, e.g. --data users=users.csv")
        table: dict[str, Any] = {"name": name, "file": file}
        if order:
            table["order"] = order
        if on_exhausted:
            table["on_exhausted"] = on_exhausted
        tables.append(table)
    return tables


def origin(url: str) -> str:
    """scheme://host:port of a URL."""
    m = re.match(r"^[A-Za-z][A-Za-z0-9+.-]*://[^/?#]*", url)
    return m.group(0) if m else ""


def request_url(group_url: str, url: str | None) -> str | None:
    """A mix request's URL in full: a path is on the group's origin."""
    if url is not None and url.startswith("/"):
        return origin(group_url) + url
    return url


def check(scenario: Scenario) -> tuple[str, str] | None:
    """The first template that names a data source or column that is not there, as (key, message); None when
    every one is. Also: two sources of one name, a data file that cannot be read, a mix whose requests leave
    the group's origin."""
    tables = {d.name: d for d in scenario.data}
    if len(tables) != len(scenario.data):
        dup = next(d.name for i, d in enumerate(scenario.data) if d.name in [e.name for e in scenario.data[:i]])
        return "data.name", f"{dup!r} names two data sources; give every source its own name"
    columns: dict[str, list[str]] = {}
    for i, d in enumerate(scenario.data):
        try:
            columns[d.name] = d.columns()
        except ValueError as exc:
            return f"data.{i}.file", str(exc)

    def shared(g: Any, name: str, what: str) -> str | None:
        if not (g.background and name in tables and tables[name].runs_out):
            return None
        return (
            f"{what}: a background group runs in a shard of its own, so it cannot share the rows of {name} "
            f"({tables[name].order}: each row once) with the steps; use order circular or random"
        )

    for gname, g in scenario.groups.items():
        for i, name in enumerate(getattr(g, "data", None) or []):
            if name not in tables:
                have = ", ".join(tables) or "none: add a [[data]] table"
                return f"groups.{gname}.data.{i}", f"{name!r} names no data source (the scenario's: {have})"
            if why := shared(g, name, repr(name)):
                return f"groups.{gname}.data.{i}", why
    for key, text in _texts(scenario):
        for m in _FIELD.finditer(text):
            name, col = m.group(1), m.group(2)
            group = scenario.groups.get(key.split(".")[1])
            if group is not None and (why := shared(group, name, f"${{{name}.{col}}}")):
                return key, why
            if name not in tables:
                have = ", ".join(tables) or "none: add a [[data]] table"
                return key, f"${{{name}.{col}}} names no data source {name!r} (the scenario's data sources: {have})"
            if col not in columns[name]:
                cols = ", ".join(columns[name])
                return key, f"${{{name}.{col}}} names no column of {name}: {tables[name].file} has {cols}"
    return None


def _texts(scenario: Scenario) -> list[tuple[str, str]]:
    """Every (key, text) a group's templates may hold."""
    out: list[tuple[str, str]] = []

    def add(key: str, value: Any) -> None:
        if isinstance(value, str):
            out.append((key, value))
        elif isinstance(value, dict):
            for k, v in value.items():
                add(f"{key}.{k}", v)
        elif isinstance(value, list | tuple):
            for i, v in enumerate(value):
                add(f"{key}.{i}", v)

    for name, g in scenario.groups.items():
        dumped = g.model_dump(exclude_none=True)
        for k in ("url", "headers", "cookies", "body", "send", "argv", "env", "requests", "expect_file", "bytes_from"):
            if k in dumped:
                add(f"groups.{name}.{k}", dumped[k])
    return out
