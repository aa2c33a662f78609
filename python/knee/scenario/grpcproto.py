"""A grpc group's method and message types, before any load: its .proto files compiled by the engine (protox,
no protoc) or a compiled descriptor set read, the method found, its message checked against its input type.
Each problem is one sentence (a ValueError, worded to follow the key that holds the value)."""

from __future__ import annotations

import base64
import json
import os
import re
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from knee import _engine
from knee.scenario.urls import connect_address, grpc_method, host_and_port, http_origin, split

if TYPE_CHECKING:
    from knee.scenario.groups import GrpcGroup
    from knee.scenario.model import Scenario
    from knee.scenario.tls import Tls


@dataclass(frozen=True)
class Method:
    """A method as knee calls it."""

    path: str  # /package.Service/Method
    input: str  # the input message's full name
    output: str
    client_streaming: bool
    server_streaming: bool
    descriptors: str  # the FileDescriptorSet holding it, base64


# the methods found in this process, by the group's URL, where its types come from and those files' times
_FOUND: dict[tuple[object, ...], Method] = {}


def find(g: GrpcGroup) -> Method:
    """The method group `g`'s URL names, from its `proto` files (imports looked for in `include`, then each file's
    directory), its `protoset` file or its server's reflection service. Found once in this process: a run's record
    (its metadata's secrets as placeholders, which a reflection service would refuse) and a scenario's copies take
    what the run found. ValueError: why not."""
    proto, include, protoset = tuple(g.proto), tuple(g.include), g.protoset
    files = (*proto, *([protoset] if protoset else []))
    key = (g.url, g.connect_to, proto, include, protoset, g.reflect, *_stamps(files))
    if key not in _FOUND:
        if g.reflect:
            data = reflected(g.url, g.insecure, g.headers, g.tls, g.connect_to)
        else:
            for path in (*proto, *include, *([protoset] if protoset else [])):
                if not os.path.exists(path):
                    raise ValueError(
                        f"{path!r} does not exist; give the path of the .proto file, directory or protoset"
                    )
            data = _descriptors(proto, include, protoset)
        _FOUND[key] = of_set(grpc_method(g.url), data)
    return _FOUND[key]


def of_set(method: str, data: bytes) -> Method:
    """Method `method` of the FileDescriptorSet `data`. ValueError: why not."""
    try:
        path, inp, out, cs, ss = _engine.grpc_describe(data, method)
    except ValueError as exc:
        raise ValueError(str(exc)) from None
    return Method(path, inp, out, cs, ss, base64.b64encode(data).decode("ascii"))


def reflected(
    url: str, insecure: bool, headers: dict[str, str], tls: Tls | None, connect_to: str | None = None
) -> bytes:
    """The FileDescriptorSet of the service `url` names, from its server's reflection service (the group's TLS,
    metadata and `connect_to`). ValueError: why not."""
    from knee.scenario import tlsfiles

    origin = http_origin(url)
    spec: dict[str, Any] = {
        "url": origin + "/",
        "http2": True,
        "insecure": insecure,
        "headers": [[k, v] for k, v in headers.items()],
    }
    if connect_to is not None:
        spec["connect_to"] = host_and_port(*connect_address(connect_to, split(url, ("grpc", "grpcs"))[2]))
    if origin.startswith("https://"):
        spec["tls"] = {**tlsfiles.pems(tls), "webpki_roots": tls.trusts_webpki if tls is not None else True}
    service = grpc_method(url).split("/", 1)[0]
    try:
        return bytes(_engine.grpc_reflect(json.dumps(spec), service))
    except ValueError as exc:
        raise ValueError(f"cannot read {service}'s types from {origin.partition('://')[2]}: {exc}") from None


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


def _stamps(paths: tuple[str, ...]) -> tuple[float, ...]:
    """The files' modification times (-1: not there): a changed file is compiled again."""
    return tuple(os.stat(p).st_mtime if os.path.exists(p) else -1.0 for p in paths)


def _descriptors(proto: tuple[str, ...], include: tuple[str, ...], protoset: str | None) -> bytes:
    if protoset is not None:
        try:
            with open(protoset, "rb") as f:
                return f.read()
        except OSError as exc:
            raise ValueError(f"{protoset!r} cannot be read ({exc.strerror})") from None
    try:
        return bytes(_engine.grpc_compile(list(proto), list(include)))
    except ValueError as exc:
        raise ValueError(f"does not compile: {exc}") from None
