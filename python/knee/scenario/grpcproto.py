"""A grpc group's method and message types, before any load: its .proto files compiled by the engine (protox,
no protoc) or a compiled descriptor set read, the method found, its message checked against its input type.
Each problem is one sentence (a ValueError, worded to follow the key that holds the value)."""

from __future__ import annotations

import base64
import json
import os
import re
from dataclasses import dataclass
from functools import lru_cache
from typing import TYPE_CHECKING

from knee import _engine

if TYPE_CHECKING:
    from knee.scenario.model import Scenario


@dataclass(frozen=True)
class Method:
    """A method as knee calls it."""

    path: str  # /package.Service/Method
    input: str  # the input message's full name
    output: str
    client_streaming: bool
    server_streaming: bool
    descriptors: str  # the FileDescriptorSet holding it, base64


def describe(method: str, proto: tuple[str, ...], include: tuple[str, ...], protoset: str | None) -> Method:
    """Method `method` (package.Service/Method) of the `proto` files (imports looked for in `include`, or each
    file's directory), or of the descriptor set in file `protoset`. ValueError: why not."""
    for path in (*proto, *include, *([protoset] if protoset else [])):
        if not os.path.exists(path):
            raise ValueError(f"{path!r} does not exist; give the path of the .proto file, directory or protoset")
    data = _descriptors(proto, include, protoset, *_stamps(proto, include, protoset))
    try:
        path, inp, out, cs, ss = _engine.grpc_describe(data, method)
    except ValueError as exc:
        raise ValueError(str(exc)) from None
    return Method(path, inp, out, cs, ss, base64.b64encode(data).decode("ascii"))


def check(scenario: Scenario) -> tuple[str, str] | None:
    """Each grpc group's method found and its message checked: None, or the first key at fault and why."""
    from knee.scenario.groups import GrpcGroup

    for name, g in scenario.groups.items():
        if isinstance(g, GrpcGroup):
            bad = g.resolve()
            if bad is not None:
                return f"groups.{name}.{bad[0]}", bad[1]
    return None


def check_message(m: Method, message: str) -> None:
    """`message` (JSON; placeholders read as 0) is a message of `m`'s input type; ValueError: why not."""
    text = re.sub(r"\$\{[^}]*\}", "0", message)
    try:
        json.loads(text)
    except json.JSONDecodeError as exc:
        raise ValueError(f"is not JSON ({exc.msg} at line {exc.lineno} column {exc.colno}): {message!r}") from None
    try:
        _engine.grpc_describe(base64.b64decode(m.descriptors), m.path, text)
    except ValueError as exc:
        raise ValueError(str(exc)) from None


def _stamps(proto: tuple[str, ...], include: tuple[str, ...], protoset: str | None) -> tuple[float, ...]:
    """The files' modification times: a changed file is compiled again."""
    return tuple(os.stat(p).st_mtime for p in (*proto, *([protoset] if protoset else [])))


@lru_cache(maxsize=16)
def _descriptors(proto: tuple[str, ...], include: tuple[str, ...], protoset: str | None, *_stamps: float) -> bytes:
    if protoset is not None:
        with open(protoset, "rb") as f:
            return f.read()
    try:
        return bytes(_engine.grpc_compile(list(proto), list(include)))
    except ValueError as exc:
        raise ValueError(f"does not compile: {exc}") from None
