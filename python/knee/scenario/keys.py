"""The keys a scenario's table takes, walked down from `Scenario` along an error's location: what an unknown key's
message offers in its place ("group is not a known key; did you mean groups?")."""

from __future__ import annotations

import difflib
import types
import typing
from typing import Any

from pydantic import BaseModel


def _members(t: Any) -> tuple[Any, ...]:
    """`t` without Annotated and None: the types it may be (one, or a union's)."""
    while typing.get_origin(t) is typing.Annotated:
        t = typing.get_args(t)[0]
    if typing.get_origin(t) in (typing.Union, types.UnionType):
        return tuple(m for a in typing.get_args(t) if a is not type(None) for m in _members(a))
    return (t,)


def _kinds(model: type[BaseModel]) -> tuple[Any, ...]:
    field = model.model_fields.get("kind")
    return typing.get_args(field.annotation) if field is not None else ()


def _step(t: Any, part: str | int) -> Any | None:
    """The type one step down `t` at `part` (a key, an index, or a group's kind as pydantic names it)."""
    for m in _members(t):
        origin = typing.get_origin(m)
        if isinstance(m, type) and issubclass(m, BaseModel):
            for name, field in m.model_fields.items():
                if part in (name, field.alias):
                    return field.annotation
        elif origin is dict:
            return typing.get_args(m)[1]
        elif origin in (list, tuple) and isinstance(part, int):
            return typing.get_args(m)[0]
    tagged = [m for m in _members(t) if isinstance(m, type) and issubclass(m, BaseModel) and part in _kinds(m)]
    return tagged[0] if tagged else None


def known_keys(loc: tuple[str | int, ...]) -> list[str]:
    """The keys of the table an error at `loc` (its last part the unknown key) stands in; [] when it cannot tell."""
    from knee.scenario.model import Scenario

    t: Any = Scenario
    for part in loc[:-1]:
        t = _step(t, part)
        if t is None:
            return []
    keys: list[str] = []
    for m in _members(t):
        if isinstance(m, type) and issubclass(m, BaseModel):
            keys += [f.alias or name for name, f in m.model_fields.items()]
    return keys


def closest(key: str, loc: tuple[str | int, ...]) -> str | None:
    """The known key `key` was most likely meant to be, if one is close."""
    match = difflib.get_close_matches(key, known_keys(loc), n=1, cutoff=0.75)
    return match[0] if match else None
