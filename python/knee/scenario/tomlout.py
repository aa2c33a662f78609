"""Write TOML: the demo target's config (`knee target --config`), saved scenarios (`--save-scenario`) and imported
ones (`knee import`).

Tables of scalars, lists (of scalars or of lists, e.g. status ranges) and tables; a list of tables is an array of
tables (`[[groups.main.requests]]`), whose own tables are written inline; `None` values are left out. Whatever
`tomllib` reads back equals what was written.
"""

from __future__ import annotations

import json
import math
import re
from typing import Any

from knee.errors import UserError

_BARE = re.compile(r"[A-Za-z0-9_-]+")


def to_toml(table: dict[str, Any]) -> str:
    """`table` as TOML text."""
    lines: list[str] = []
    _emit(table, [], lines)
    return "\n".join(lines).strip() + "\n"


def _key(k: str) -> str:
    """A bare key where TOML allows one (A-Z a-z 0-9 _ -: not é, which isalnum() let through), else quoted."""
    return k if _BARE.fullmatch(k) else json.dumps(k)


def _value(v: Any) -> str:
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, int):
        return str(v)
    if isinstance(v, float):
        if not math.isfinite(v):
            raise UserError(f"value {v!r} cannot be written as TOML; use a finite number")
        return repr(v)
    if isinstance(v, str):
        # JSON's escapes are TOML's, but for DEL, which TOML wants escaped too
        return json.dumps(v, ensure_ascii=False).replace("\x7f", "\\u007f")
    if isinstance(v, list | tuple):
        return "[" + ", ".join(_value(x) for x in v) + "]"
    if isinstance(v, dict):
        return "{" + ", ".join(f"{_key(k)} = {_value(x)}" for k, x in v.items() if x is not None) + "}"
    raise UserError(f"value {v!r} is not a number, string, boolean, list or table; use one of those")


def _array_of_tables(v: Any) -> bool:
    return isinstance(v, list) and bool(v) and all(isinstance(x, dict) for x in v)


def _emit(table: dict[str, Any], prefix: list[str], lines: list[str]) -> None:
    subs = {k: v for k, v in table.items() if isinstance(v, dict)}
    arrays = {k: v for k, v in table.items() if _array_of_tables(v)}
    if prefix and (len(subs) + len(arrays) < len(table) or not table):
        if lines:
            lines.append("")
        lines.append("[" + ".".join(_key(p) for p in prefix) + "]")
    for k, v in table.items():
        if k not in subs and k not in arrays and v is not None:
            lines.append(f"{_key(k)} = {_value(v)}")
    for k, v in subs.items():
        _emit(v, [*prefix, k], lines)
    for k, items in arrays.items():
        for item in items:
            if lines:
                lines.append("")
            lines.append("[[" + ".".join(_key(p) for p in [*prefix, k]) + "]]")
            lines.extend(f"{_key(ik)} = {_value(iv)}" for ik, iv in item.items() if iv is not None)
