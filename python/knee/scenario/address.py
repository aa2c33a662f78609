"""Where a network group's service is, as the scenario writes it: read from the text alone, no lookup.

`host_port` is a group's (host, port); `loopback` and `named_loopback` say whether an address, or a host as
written, is this machine's loopback. What needs a lookup (is a name one of this machine's addresses?) is
`knee.machine.network`'s, done when a run starts and recorded in run.json.
"""

from __future__ import annotations

import ipaddress

from knee.errors import UserError
from knee.scenario.groups import Group, GrpcGroup, HttpGroup, TcpGroup, WebsocketGroup
from knee.scenario.urls import connect_address, split


def loopback(ip: str) -> bool:
    """`ip` (an address, not a name) is a loopback address, IPv4-mapped ones included."""
    addr = ipaddress.ip_address(ip.split("%", maxsplit=1)[0])
    mapped = getattr(addr, "ipv4_mapped", None)
    return addr.is_loopback or bool(mapped and mapped.is_loopback)


def named_loopback(host: str) -> bool:
    """`host` says it is this machine without a lookup: `localhost`, or a loopback address."""
    if host.lower() == "localhost":
        return True
    try:
        return loopback(host)
    except ValueError:  # a name
        return False


def host_port(g: Group) -> tuple[str, int] | None:
    """A network group's (host, port), the URL's default port when it names none (`connect_to`'s where it has one:
    where its connections go); None for commands and flows.
    A URL without a host or with a bad port: UserError."""
    schemes: tuple[str, ...]
    if isinstance(g, HttpGroup):
        written, schemes = g.url, ("http", "https")
    elif isinstance(g, TcpGroup):
        written, schemes = f"tcp://{g.addr}", ("tcp",)
    elif isinstance(g, WebsocketGroup):
        written, schemes = g.url, ("ws", "wss")
    elif isinstance(g, GrpcGroup):
        written, schemes = g.url, ("grpc", "grpcs")
    else:
        return None
    try:
        _, host, port = split(written, schemes)
    except ValueError as exc:  # a group built without validation
        raise UserError(f"bad URL {written!r}: it {exc}") from None
    if not isinstance(g, TcpGroup) and g.connect_to is not None:
        return connect_address(g.connect_to, port)
    return host, port


DEFAULT_SERVE_HOST = "127.0.0.1"


def listen_address(text: str) -> tuple[str, int]:
    """`[HOST:]PORT` (`--serve`, `[serve] address`) → (host, port): `8089` is 127.0.0.1:8089, `0.0.0.0:8089` every
    IPv4 address, `[::1]:8089` an IPv6 one; port 0 is any free port. ValueError says what is wrong."""
    text = str(text).strip()
    host, sep, port = text.rpartition(":")
    if not sep:
        host = DEFAULT_SERVE_HOST
    elif host.startswith("[") and host.endswith("]"):
        host = host[1:-1]
    elif ":" in host:
        raise ValueError("an IPv6 host goes in brackets, e.g. [::1]:8089")
    if not port.isdigit() or int(port) > 65535:
        raise ValueError("must be [HOST:]PORT with a port from 0 to 65535, e.g. 8089 or 0.0.0.0:8089")
    if not host:
        raise ValueError("names no host before the ':'; write PORT alone for 127.0.0.1, or HOST:PORT")
    return host, int(port)


def parse_serve(value: str | None, option: str = "--serve") -> tuple[str, int] | None:
    """`--serve [HOST:]PORT` (or `option`) → (host, port); None when not given. One sentence for a bad value."""
    if value is None:
        return None
    try:
        return listen_address(value)
    except ValueError as exc:
        raise UserError(f"{option} {value!r}: {exc}") from None
