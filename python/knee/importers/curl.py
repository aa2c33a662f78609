"""`knee import curl -- curl ARGS…`: a curl command line (as the shell split it) → the request it sends.

The flags that shape the request are read as curl reads them: -X, -H (and -H @FILE), -d/--data, --data-raw,
--data-binary, --data-urlencode (several joined with '&'; @FILE read; -d implies POST and an
application/x-www-form-urlencoded Content-Type), --json, -G, -I, -u, -b, -A, -e, --compressed, --oauth2-bearer, the
URL (positional or --url), and curl's own User-Agent and Accept headers unless they are given or removed
(-H 'Name:'); the connection's: -k, --cert[:PASSWORD], --key, --cacert, --capath, --http2,
--http2-prior-knowledge, --tlsv1.3, --tls-max, --max-time, --connect-timeout, --resolve and --connect-to (where it
connects: the group's `connect_to`, the URL's host still the Host header and the TLS server name). Flags that change
only what curl prints (-s, -S, -v, -i, -o, -w …) are accepted and have no effect. Any other flag is a mistake,
named, never ignored: a request that differs from the one curl sends would be measured in its place.
"""

from __future__ import annotations

import base64
import functools
import math
import shutil
import subprocess
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import quote_plus

from knee.errors import UserError
from knee.importers.build import Imported, Request, build, without_userinfo
from knee.scenario.urls import host_and_port, split

# flags (long and short names) that take a value: name -> what it sets
_VALUED = {
    "-X": "method",
    "--request": "method",
    "-H": "header",
    "--header": "header",
    "-d": "data",
    "--data": "data",
    "--data-ascii": "data",
    "--data-raw": "data-raw",
    "--data-binary": "data-binary",
    "--data-urlencode": "data-urlencode",
    "--json": "json",
    "-u": "user",
    "--user": "user",
    "-b": "cookie",
    "--cookie": "cookie",
    "-A": "user-agent",
    "--user-agent": "user-agent",
    "-e": "referer",
    "--referer": "referer",
    "--url": "url",
    "--oauth2-bearer": "bearer",
    "-E": "cert",
    "--cert": "cert",
    "--key": "key",
    "--cacert": "cacert",
    "--capath": "capath",
    "--cert-type": "cert-type",
    "--key-type": "key-type",
    "--tls-max": "tls-max",
    "-m": "max-time",
    "--max-time": "max-time",
    "--connect-timeout": "connect-timeout",
    "--resolve": "resolve",
    "--connect-to": "connect-to",
    # only what curl prints or where it writes it: read and dropped
    "-o": "quiet",
    "--output": "quiet",
    "-w": "quiet",
    "--write-out": "quiet",
    "--stderr": "quiet",
    "--trace": "quiet",
    "--trace-ascii": "quiet",
    "-D": "quiet",
    "--dump-header": "quiet",
    "--retry": "quiet",
}
# flags without a value: name -> what it sets
_FLAGS = {
    "-k": "insecure",
    "--insecure": "insecure",
    "-G": "get",
    "--get": "get",
    "-I": "head",
    "--head": "head",
    "--compressed": "compressed",
    "--http2": "http2",
    "--http2-prior-knowledge": "http2",
    "--http1.1": "none",
    "--basic": "none",
    "--tlsv1": "none",
    "--tlsv1.2": "none",
    "--tlsv1.3": "tls13",
    "-L": "location",
    "--location": "location",
    # only what curl prints, its exit status or its own retries
    **{
        f: "none"
        for f in [
            "-s",
            "--silent",
            "-S",
            "--show-error",
            "-v",
            "--verbose",
            "-i",
            "--include",
            "-f",
            "--fail",
            "--fail-with-body",
            "-N",
            "--no-buffer",
            "-O",
            "--remote-name",
            "-#",
            "--progress-bar",
            "--no-progress-meter",
            "-g",
            "--globoff",
            "--path-as-is",
            "-q",
            "--disable",
        ]
    },
}
# flags knee cannot replay, each with what to do instead
_UNSUPPORTED = {
    "-F": "multipart forms: build the body once (curl --trace-ascii shows it) and give it as --data-binary @FILE "
    "with its Content-Type header",
    "--form": "multipart forms: give the body as --data-binary @FILE with its Content-Type header",
    "-x": "proxies: knee connects to the URL's host itself",
    "--proxy": "proxies: knee connects to the URL's host itself",
    "--digest": "digest authentication: knee sends a fixed Authorization header (-H)",
    "--ntlm": "NTLM authentication: knee sends a fixed Authorization header (-H)",
    "--negotiate": "Kerberos authentication: knee sends a fixed Authorization header (-H)",
    "--http3": "HTTP/3: knee speaks HTTP/1.1 and HTTP/2 (--http2)",
    "--unix-socket": "Unix sockets: knee connects over TCP",
    "-T": "uploads with -T: give the file as --data-binary @FILE with -X PUT",
    "--upload-file": "uploads: give the file as --data-binary @FILE with -X PUT",
}
_COMPRESSED = "deflate, gzip, br, zstd"


@dataclass
class _Command:
    method: str | None = None
    headers: list[tuple[str, str]] = field(default_factory=list)
    data: list[bytes] = field(default_factory=list)
    data_file: str | None = None  # --data-binary @FILE alone: the body is that file
    json: bool = False
    urls: list[str] = field(default_factory=list)
    get: bool = False
    head: bool = False
    cookies: list[str] = field(default_factory=list)
    user: str | None = None  # -u's user name, to say how its Authorization value is made
    group: dict[str, Any] = field(default_factory=dict)
    tls: dict[str, Any] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)
    removed: set[str] = field(default_factory=set)  # headers of curl's own that `-H 'Name:'` removed (lower case)
    # --resolve HOST:PORT:ADDR and --connect-to HOST:PORT:HOST2:PORT2, as given: (flag, value, its fields)
    routes: list[tuple[str, str, list[str]]] = field(default_factory=list)


# What curl sends unless told otherwise (`-A`, `-H 'Name: …'`, `-H 'Name:'` to send none): services and their firewalls
# answer a request without them otherwise (a WAF's rule against requests with no User-Agent: 403 to every one).
CURL_VERSION = "8.5.0"  # where this machine has no curl to ask: the version a replayed request's User-Agent gives


@functools.cache
def curl_version() -> str:
    """The version of the curl on this machine (its User-Agent is curl/VERSION), else CURL_VERSION."""
    found = shutil.which("curl")
    if found is None:
        return CURL_VERSION
    try:
        out = subprocess.run([found, "--version"], check=False, capture_output=True, text=True, timeout=5).stdout
    except (OSError, subprocess.SubprocessError):
        return CURL_VERSION
    words = out.split()
    return words[1] if len(words) > 1 and words[0] == "curl" else CURL_VERSION


def _read(path: str, flag: str) -> bytes:
    if path == "-":
        raise UserError(f"{flag} @-: knee import reads no standard input; save the data in a file and give @FILE")
    try:
        return Path(path).read_bytes()
    except OSError as exc:
        raise UserError(f"{flag} @{path}: cannot read it ({exc.strerror}); check the path") from None


def _urlencode(value: str, flag: str) -> bytes:
    """--data-urlencode's forms: content, =content, name=content, @file, name@file."""
    name, eq, content = value.partition("=")
    if eq:
        return (f"{name}=" if name else "").encode() + quote_plus(content).encode()
    name, at, path = value.partition("@")
    if at:
        text = quote_plus(_read(path, flag).decode(errors="replace"))
        return (f"{name}=" if name else "").encode() + text.encode()
    return quote_plus(value).encode()


def _header(cmd: _Command, value: str, flag: str) -> None:
    if value.startswith("@"):
        for line in _read(value[1:], flag).decode(errors="replace").splitlines():
            if line.strip():
                _header(cmd, line.strip(), flag)
        return
    if value.endswith(";") and ":" not in value:  # curl's 'Name;': the header, empty
        cmd.headers.append((value[:-1].strip(), ""))
        return
    name, colon, rest = value.partition(":")
    if not colon or not name.strip() or any(c.isspace() for c in name.strip()):
        raise UserError(f"{flag} {value!r}: a header looks like 'Name: value'")
    if not rest.strip():  # curl's 'Name:' removes a header curl would send (and any given before)
        cmd.headers = [(n, v) for n, v in cmd.headers if n.lower() != name.strip().lower()]
        cmd.removed.add(name.strip().lower())
        return
    cmd.headers.append((name.strip(), rest.strip()))


def _apply(cmd: _Command, what: str, value: str, flag: str) -> None:
    if what == "method":
        cmd.method = value.upper()
    elif what == "header":
        _header(cmd, value, flag)
    elif what == "data":
        body = _read(value[1:], flag).replace(b"\r", b"").replace(b"\n", b"") if value.startswith("@") else None
        cmd.data.append(body if body is not None else value.encode())
    elif what == "data-raw":
        cmd.data.append(value.encode())
    elif what == "data-binary":
        if value.startswith("@"):
            cmd.data.append(_read(value[1:], flag))
            cmd.data_file = value[1:]
        else:
            cmd.data.append(value.encode())
    elif what == "data-urlencode":
        cmd.data.append(_urlencode(value, flag))
    elif what == "json":
        cmd.data.append(_read(value[1:], flag) if value.startswith("@") else value.encode())
        cmd.json = True
    elif what == "user":
        user, colon, password = value.partition(":")
        if not colon:
            raise UserError(f"{flag} {value}: no password (curl would ask for it); give {flag} {user}:PASSWORD")
        token = base64.b64encode(f"{user}:{password}".encode()).decode()
        cmd.headers.append(("Authorization", f"Basic {token}"))
        cmd.user = user
    elif what == "bearer":
        cmd.headers.append(("Authorization", f"Bearer {value}"))
    elif what == "cookie":
        if "=" not in value:
            raise UserError(
                f"{flag} {value}: curl reads a cookie file there; knee import takes the cookies themselves, "
                f"{flag} 'name=value; other=value'"
            )
        cmd.cookies.append(value)
    elif what == "user-agent":
        cmd.headers.append(("User-Agent", value))
    elif what == "referer":
        cmd.headers.append(("Referer", value.removesuffix(";auto")))
    elif what == "url":
        cmd.urls.append(value)
    elif what == "cert":
        cert, colon, password = value.partition(":")
        cmd.tls["cert"] = cert
        if colon:
            cmd.tls["password"] = password
    elif what in ("key", "cacert", "capath"):
        cmd.tls[what] = value
    elif what in ("cert-type", "key-type"):
        if value.upper() not in ("PEM", "P12"):
            raise UserError(f"{flag} {value}: knee reads PEM and PKCS#12 (P12) files only")
    elif what == "tls-max":
        if value not in ("1.2", "1.3"):
            raise UserError(f"{flag} {value}: knee speaks TLS 1.2 and 1.3; give --tls-max 1.2 or 1.3")
        cmd.tls["version"] = value if value == "1.2" else cmd.tls.get("version")
    elif what in ("resolve", "connect-to"):
        fields = _fields(value.lstrip("+"))
        ports = fields[1:2] + (fields[3:4] if what == "connect-to" else [])
        bad_port = any(p and not (p.isdigit() and 0 < int(p) < 65536) for p in ports)
        if len(fields) != (3 if what == "resolve" else 4) or (what == "resolve" and not fields[2]) or bad_port:
            shape = "HOST:PORT:ADDRESS" if what == "resolve" else "HOST:PORT:CONNECT-TO-HOST:CONNECT-TO-PORT"
            raise UserError(f"{flag} {value}: curl reads {shape} there")
        cmd.routes.append((flag, value, fields))
    elif what in ("max-time", "connect-timeout"):
        try:
            seconds = float(value)
        except ValueError:
            seconds = math.nan
        if not (0 < seconds < math.inf):
            raise UserError(f"{flag} {value}: a number of seconds above 0, e.g. {flag} 5") from None
        cmd.group["timeout" if what == "max-time" else "connect_timeout"] = f"{seconds:g}s"


def _fields(value: str) -> list[str]:
    """`value` split at the colons outside [ ] (an IPv6 address in brackets is one field, its brackets kept)."""
    fields, depth, start = [], 0, 0
    for k, c in enumerate(value):
        depth += c == "["
        depth -= c == "]"
        if c == ":" and not depth:
            fields.append(value[start:k])
            start = k + 1
    return [*fields, value[start:]]


def _connect_to(cmd: _Command, url: str) -> str | None:
    """Where curl connects for `url` by its --resolve (the first address) and --connect-to (the first that
    matches, as curl takes them), as a group's `connect_to`; None: the URL's own host. One that names another
    host or port is said in a note (curl does not use it for this URL either)."""
    if not cmd.routes:
        return None
    try:
        _, host, port = split(without_userinfo(url), ("http", "https"))
    except ValueError:
        return None  # the URL's own sentence comes from build
    found: str | None = None
    for flag, value, fields in cmd.routes:
        name, on = fields[0].strip("[]").lower(), fields[1]
        if name not in ("", "*", host.lower()) or on not in ("", str(port)) or (flag == "--resolve" and not name):
            cmd.notes.append(f"curl {flag} {value}: not this URL's host and port ({host}:{port}); not used")
        elif found is None and flag == "--resolve":
            found = fields[2].split(",")[0].strip()
        elif found is None:
            found = host_and_port(fields[2].strip("[]") or host, int(fields[3]) if fields[3] else port)
    if found is not None and (found.strip("[]") == host or found == host_and_port(host, port)):
        return None
    return found


def _switch(cmd: _Command, what: str) -> None:
    if what == "insecure":
        cmd.group["insecure"] = True
    elif what == "http2":
        cmd.group["http2"] = True
    elif what == "get":
        cmd.get = True
    elif what == "head":
        cmd.head = True
    elif what == "compressed":
        cmd.headers.append(("Accept-Encoding", _COMPRESSED))
    elif what == "tls13":
        cmd.tls["version"] = "1.3"
    elif what == "location":
        cmd.notes.append("-L: knee does not follow redirects; a 3xx answer counts as a success (expect_status)")


def parse(args: list[str]) -> _Command:
    """The request and connection a curl command line describes (the leading `curl` is optional)."""
    args = list(args)
    if args and Path(args[0]).name == "curl":
        args = args[1:]
    cmd = _Command()
    i = 0
    while i < len(args):
        arg = args[i]
        i += 1
        if arg == "--":
            cmd.urls.extend(args[i:])
            break
        if not arg.startswith("-") or arg == "-":
            cmd.urls.append(arg)
            continue
        if arg.startswith("--") and "=" in arg and arg.split("=", 1)[0] in _VALUED:
            raise UserError(f"{arg}: curl takes the value after a space, {arg.replace('=', ' ', 1)}")
        if arg.startswith("--") or len(arg) == 2:
            i = _one(cmd, arg, None, args, i)
            continue
        # short flags together (-sSk), the last may take a value, attached (-XPOST) or next (-sX POST)
        for k in range(1, len(arg)):
            flag = f"-{arg[k]}"
            if flag in _VALUED:
                i = _one(cmd, flag, arg[k + 1 :] or None, args, i)
                break
            i = _one(cmd, flag, None, args, i)
    return cmd


def _one(cmd: _Command, flag: str, value: str | None, args: list[str], i: int) -> int:
    """Apply `flag` (its value attached, or args[i]); returns the index of the next argument."""
    if flag in _UNSUPPORTED:
        raise UserError(f"curl {flag} is not something knee can replay ({_UNSUPPORTED[flag]})")
    if flag in _VALUED:
        if value is None:
            if i >= len(args):
                raise UserError(f"curl {flag} needs a value (none follows it)")
            value, i = args[i], i + 1
        _apply(cmd, _VALUED[flag], value, flag)
    elif flag in _FLAGS:
        _switch(cmd, _FLAGS[flag])
    else:
        raise UserError(
            f"curl {flag}: knee import does not know this flag and will not ignore it (the request would differ "
            "from curl's); drop it, or see `knee import curl --help` for the flags it reads"
        )
    return i


def request_of(cmd: _Command) -> Request:
    """The one request of a parsed command, as curl sends it."""
    if not cmd.urls:
        raise UserError("the curl command names no URL; give it as curl's last argument (or --url URL)")
    if len(cmd.urls) > 1:
        raise UserError(f"the curl command names {len(cmd.urls)} URLs ({', '.join(cmd.urls)}); import one at a time")
    url = cmd.urls[0]
    if "://" not in url:
        url = f"http://{url}"  # as curl does
    scheme = url.partition("://")[0].lower()
    if scheme not in ("http", "https"):
        raise UserError(f"curl URL {cmd.urls[0]!r}: knee replays http:// and https:// requests only")
    headers = list(cmd.headers)
    named = {n.lower() for n, _ in headers}
    body: bytes | None = None
    if cmd.data:
        joined = (b"" if cmd.json else b"&").join(cmd.data)  # --json pieces are appended, -d ones joined by &
        if cmd.get:
            url += ("&" if "?" in url else "?") + joined.decode(errors="replace")
        else:
            body = joined
            ctype = "application/json" if cmd.json else "application/x-www-form-urlencoded"
            if "content-type" not in named:
                headers.append(("Content-Type", ctype))
            if cmd.json and "accept" not in named:
                headers.append(("Accept", "application/json"))
    if cmd.cookies:
        headers.append(("Cookie", "; ".join(c.strip().rstrip(";") for c in cmd.cookies)))
    named = {n.lower() for n, _ in headers} | cmd.removed
    for name, value in (("User-Agent", f"curl/{curl_version()}"), ("Accept", "*/*")):  # curl's own
        if name.lower() not in named:
            headers.append((name, value))
    method = cmd.method or ("HEAD" if cmd.head else "POST" if body is not None else "GET")
    single_file = cmd.data_file if cmd.data_file is not None and len(cmd.data) == 1 else None
    return Request(method, url, headers, body, body_path=single_file)


def group_keys(cmd: _Command, url: str) -> dict[str, Any]:
    """The group's keys for the connection: insecure, http2, timeouts, where it connects and (https) the tls
    table."""
    keys = dict(cmd.group)
    connect_to = _connect_to(cmd, url)
    if connect_to is not None:
        keys["connect_to"] = connect_to
    tls = {k: v for k, v in cmd.tls.items() if v is not None}
    if tls:
        if not url.lower().startswith("https://"):
            raise UserError("curl's --cert, --key, --cacert, --capath and TLS versions apply to https:// URLs only")
        keys["tls"] = tls
    return keys


def import_curl(args: list[str], *, bodies_dir: str) -> Imported:
    """The scenario of one curl command (see the module's docstring)."""
    cmd = parse(args)
    request = request_of(cmd)
    keys = group_keys(cmd, request.url)
    imported = build(
        [request],
        name="curl",
        description=f"imported from a curl command: {request.method} {without_userinfo(request.url.split('?', 1)[0])}",
        bodies_dir=bodies_dir,
        group_keys=keys,
    )
    imported.notes[:0] = cmd.notes
    basic = imported.secrets.get("main_header_authorization")
    if cmd.user is not None and basic is not None and basic.value.startswith("Basic "):
        basic.what += (
            f" (-u): 'Basic ' and base64 of user:password, e.g. \"Basic $(printf %s '{cmd.user}:PASSWORD' | base64)\""
        )
    return imported
