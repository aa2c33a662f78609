"""The input files the tests and bench/feeder_bench.py write: a CSV of rows `id,name`, and a scenario of one HTTP group
sending a mix of requests (TOML, by knee's own writer, which `tomllib` reads back as written)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from knee.scenario.tomlout import to_toml


def ids_csv(path: Path, rows: int) -> Path:
    """`path`, written: the header `id,name` and `rows` rows `I,userI` (I from 0)."""
    with path.open("w") as f:
        f.write("id,name\n")
        f.writelines(f"{i},user{i}\n" for i in range(rows))
    return path


def mix_scenario(url: str, *requests: dict[str, Any], group: dict[str, Any] | None = None, **tables: Any) -> str:
    """A scenario whose group `main` (kind http, `url`, the sweep's level of clients, and `group`'s keys) sends
    `requests`, each a name, a weight and what it changes from the group's request; `tables` are the scenario's
    other keys (seed, data, sweep, …)."""
    main = {"kind": "http", "url": url, **(group or {}), "clients": "level", "requests": list(requests)}
    return to_toml({**tables, "groups": {"main": main}})
