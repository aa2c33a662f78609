"""A network target as written: an http(s):// URL or tcp://host:port, split into (scheme, host, port) without a
lookup, or a sentence saying what is wrong with it and how to write it.

`split` is the one reader of a target URL: the scenario's `url` and `addr` keys, `knee run` / `knee sweep`'s
TARGET and the Python API all go through it, so a malformed URL is one sentence everywhere, never urllib's
ValueError ("Invalid IPv6 URL"). Its messages start with "must", to follow the key or option that holds the
value (knee.scenario.messages).
"""

from __future__ import annotations

import ipaddress

# scheme -> the port a URL without one means (None: it must name one)
DEFAULT_PORT: dict[str, int | None] = {
    "http": 80,
    "https": 443,
    "tcp": None,
    "ws": 80,
    "wss": 443,
    "grpc": None,
    "grpcs": None,
}
_SHAPE = {
    "http": "http://host:port/path",
    "https": "https://host:port/path",
    "tcp": "tcp://host:port",
    "ws": "ws://host:port/path",
    "wss": "wss://host:port/path",
    "grpc": "grpc://host:port/package.Service/Method",
    "grpcs": "grpcs://host:port/package.Service/Method",
}


def scheme_of(target: str) -> str:
    """The scheme a target says it has ('' when it has no `://`), lower-cased; never raises."""
    scheme, sep, _ = target.partition("://")
    return scheme.lower() if sep else ""


def split(url: str, schemes: tuple[str, ...] = ("http", "https", "tcp")) -> tuple[str, str, int]:
    """(scheme, host, port) of `url`, the scheme's port when it names none (http 80, https 443). A host in
    brackets is an IPv6 address (returned without them). ValueError, worded to follow the key ("must …"), when the
    scheme is not one of `schemes`, the host is missing or not closed, or the port is not 1 to 65535."""
    scheme = scheme_of(url)
    if scheme not in schemes:
        names = [f"{s}://" for s in schemes]
        wanted = names[0] if len(names) == 1 else ", ".join(names[:-1]) + " or " + names[-1]
        return _fail(f"must start with {wanted}, like {_SHAPE[schemes[0]]}")
    shape = _SHAPE[scheme]
    rest = url.partition("://")[2]
    for end in "/?#":
        rest = rest.split(end, 1)[0]
    if "@" in rest:  # the engine sent it in the Host header (servers answer 400) and the files kept the password
        return _fail(
            "must not carry a user:password@: send credentials as a header, -H 'Authorization: Basic BASE64' "
            '(a scenario: headers = {Authorization = "Basic ${cred}"} with --secret cred=…; `knee import curl` '
            "makes that of curl's URL or -u)"
        )
    hostport = rest
    port_text: str | None
    if hostport.startswith("["):
        close = hostport.find("]")
        if close < 0:
            return _fail(f"must close the IPv6 address's '[' with ']', like {scheme}://[::1]:8080")
        host, after = hostport[1:close], hostport[close + 1 :]
        try:
            ipaddress.IPv6Address(host.split("%", 1)[0])
        except ValueError:
            return _fail(f"must have an IPv6 address inside [ ], not {host!r}, like {scheme}://[::1]:8080")
        if after and not after.startswith(":"):
            return _fail(f"must have ':port' right after the ']' of its IPv6 address, like {scheme}://[::1]:8080")
        port_text = after[1:] if after else None
    else:
        if "[" in hostport or "]" in hostport:
            return _fail(f"must put an IPv6 address in [ ] with nothing around them, like {scheme}://[::1]:8080")
        if hostport.count(":") > 1:
            return _fail(f"must put an IPv6 address in brackets, like {scheme}://[::1]:8080")
        host, colon, port = hostport.partition(":")
        port_text = port if colon else None
    if not host:
        return _fail(f"must name a host, like {shape}")
    if not port_text:  # none, or an empty one after ':' (as urllib reads it)
        default = DEFAULT_PORT[scheme]
        if default is None:
            return _fail(f"must name a port, like {shape}")
        return scheme, host, default
    if not port_text.isdigit() or not 1 <= int(port_text) <= 65535:
        return _fail(f"must have a port from 1 to 65535, not {port_text!r}, like {shape}")
    return scheme, host, int(port_text)


def _fail(message: str) -> tuple[str, str, int]:
    raise ValueError(message)


def connect_address(connect_to: str, default_port: int) -> tuple[str, int]:
    """(host, port) of a group's `connect_to`, `HOST` or `HOST:PORT` ([v6] or [v6]:port for IPv6), the URL's port
    (`default_port`) when it names none; ValueError, worded to follow the key, when it is not one."""
    text = connect_to.strip()
    if not text or any(c in text for c in "/?#@ "):
        raise ValueError("must be HOST or HOST:PORT, like 10.0.0.5 or 10.0.0.5:8443 (or [::1]:8443)")
    try:
        _, host, port = split(f"tcp://{text}", ("tcp",))
    except ValueError as exc:
        if "must name a port" not in str(exc):
            raise ValueError(str(exc).replace("tcp://", "")) from None
        host, port = text.strip("[]"), default_port
    return host, port


def check_connect_to(text: str) -> str:
    """`text` if it is a group's `connect_to`, HOST or HOST:PORT; else ValueError."""
    connect_address(text, 1)
    return text


def host_and_port(host: str, port: int) -> str:
    """HOST:PORT, an IPv6 address in brackets."""
    return f"[{host}]:{port}" if ":" in host else f"{host}:{port}"


def check_url(url: str) -> str:
    """`url` if it is an http(s):// URL with a host and a good port (a scenario's `url`); else ValueError."""
    split(url, ("http", "https"))
    return url


def check_ws_url(url: str) -> str:
    """`url` if it is a ws(s):// URL with a host and a good port (a websocket group's `url`); else ValueError."""
    split(url, ("ws", "wss"))
    return url


def check_grpc_url(url: str) -> str:
    """`url` if it is a grpc(s):// URL with a host, a port and a method's path (a grpc group's `url`); else
    ValueError."""
    split(url, ("grpc", "grpcs"))
    if grpc_method(url).count("/") != 1:
        scheme = scheme_of(url)
        raise ValueError(f"must name the method after the port, like {_SHAPE[scheme]}")
    return url


def grpc_method(url: str) -> str:
    """The method a grpc(s):// URL names: `package.Service/Method` (its path without the leading slash)."""
    rest = url.partition("://")[2]
    return rest.partition("/")[2].split("?", 1)[0].strip("/")


def http_origin(url: str) -> str:
    """The HTTP/2 origin a grpc(s):// URL's calls go to: http://host:port (h2c), or https:// for grpcs://."""
    scheme, _, rest = url.partition("://")
    return f"{'https' if scheme.lower() == 'grpcs' else 'http'}://{rest.split('/', 1)[0]}"


def check_addr(addr: str) -> str:
    """`addr` if it is host:port with a good port ([v6]:port for IPv6; a scenario's `addr`); else ValueError."""
    try:
        split(f"tcp://{addr}", ("tcp",))
    except ValueError as exc:
        raise ValueError(str(exc).replace("tcp://", "")) from None
    return addr
