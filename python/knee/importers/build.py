"""Recorded requests → a scenario's tables: one http group per origin (or one for all), each distinct request once
with a weight, credentials as secret placeholders, large or binary bodies as files.

Every importer (HAR, curl, vegeta's targets) reads its input into `Request`s and calls `build`; `write` puts the
result on disk. A group of one request is written as a plain http group (url, method, headers … at the group
level); a group of several as a request mix (`[[groups.NAME.requests]]`, docs/scenarios.md).
"""

from __future__ import annotations

import base64
import os
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import quote, unquote, urlsplit, urlunsplit

from knee.errors import UserError
from knee.scenario.secrets import sensitive
from knee.scenario.tomlout import to_toml

# Headers a replay must not copy: HTTP/2 pseudo-headers are not headers; hop-by-hop ones describe the recorded
# connection (RFC 9110 7.6.1); Content-Length is the engine's to compute from the body.
HOP_BY_HOP = frozenset(
    {
        "connection",
        "keep-alive",
        "proxy-connection",
        "te",
        "trailer",
        "transfer-encoding",
        "upgrade",
        "content-length",
    }
)
INLINE_BODY_MAX = 4096  # bytes: a longer body is written to a file beside the scenario
_PLACEHOLDER = "${"
_EXTENSIONS = (("json", ".json"), ("xml", ".xml"), ("x-www-form-urlencoded", ".txt"), ("text/", ".txt"))
DEFAULT_SWEEP = {"levels": "auto", "duration": "10s"}


@dataclass
class Request:
    """One request as recorded: its method, absolute URL, headers in order (names as recorded), body, and the
    statuses it was answered with (none when unknown). `body_path`: the file the body was read from (curl's
    --data-binary @FILE, a targets file's @FILE), referenced as it is rather than copied."""

    method: str
    url: str
    headers: list[tuple[str, str]] = field(default_factory=list)
    body: bytes | None = None
    body_path: str | None = None
    statuses: list[int] = field(default_factory=list)


@dataclass
class Secret:
    value: str
    what: str  # "the cookie 'session' of get_index", for the user who must set it


@dataclass
class Imported:
    """A scenario's tables, the body files it refers to (path as written in the scenario → content), its secrets
    (name → value and what it is: the values are never written) and notes for the user."""

    table: dict[str, Any]
    bodies: dict[str, bytes] = field(default_factory=dict)
    secrets: dict[str, Secret] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)

    def toml(self) -> str:
        return to_toml(self.table)


def origin_of(url: str) -> str:
    """scheme://host[:port] of an absolute http(s) URL, as written (lower-cased scheme and host)."""
    parts = urlsplit(url)
    host = parts.hostname or ""
    host = f"[{host}]" if ":" in host else host
    port = f":{parts.port}" if parts.port is not None else ""
    return f"{parts.scheme.lower()}://{host.lower()}{port}"


def _netloc_without_user(url: str) -> str:
    return urlsplit(url).netloc.rpartition("@")[2]


def without_userinfo(url: str) -> str:
    """`url` without a user:password@ (for what is shown or written beside the scenario's secrets)."""
    return re.sub(r"^([A-Za-z][A-Za-z0-9+.-]*://)[^/?#@]*@", r"\1", url)


def replayable(req: Request) -> None:
    """A URL Python cannot take apart (a port above 65535, an unclosed [IPv6 address]) is one sentence."""
    try:
        urlsplit(req.url).port  # noqa: B018 (reading it checks it)
    except ValueError as e:
        shown = without_userinfo(req.url)
        raise UserError(f"the URL {shown!r} cannot be replayed ({e}); correct it in the input") from None


def _clean_headers(req: Request) -> tuple[list[tuple[str, str]], dict[str, str]]:
    """The headers a replay sends (pseudo-headers, hop-by-hop ones, Content-Length and a Host that says what the
    URL says left out; repeated names joined by ', ') and the cookies of its Cookie headers."""
    netloc = _netloc_without_user(req.url).lower()
    headers: dict[str, tuple[str, str]] = {}
    pairs: list[tuple[str, str]] = []
    for name, value in req.headers:
        low = name.lower()
        if name.startswith(":") or low in HOP_BY_HOP:
            continue
        if low == "host" and value.strip().lower() in (netloc, netloc.rsplit(":", 1)[0]):
            continue
        if low == "cookie":
            for pair in value.split(";"):
                cname, eq, cvalue = pair.strip().partition("=")
                if eq and cname:
                    pairs.append((cname, cvalue))
            continue
        if low in headers:
            headers[low] = (headers[low][0], f"{headers[low][1]}, {value}")
        else:
            headers[low] = (name, value)
    cookies = dict(pairs)
    if len(cookies) < len(pairs):  # a name sent twice (two paths' cookies): as recorded, in order, not the last alone
        headers["cookie"] = ("Cookie", "; ".join(f"{n}={v}" for n, v in pairs))
        cookies = {}
    return list(headers.values()), cookies


def _userinfo(req: Request) -> Request:
    """A URL's user:password@ becomes a Basic Authorization header (as curl sends it) and leaves the URL."""
    parts = urlsplit(req.url)
    if "@" not in parts.netloc:
        return req
    user, _, hostport = parts.netloc.rpartition("@")
    url = urlunsplit((parts.scheme, hostport, parts.path, parts.query, parts.fragment))
    headers = list(req.headers)
    if not any(n.lower() == "authorization" for n, _ in headers):
        name, _, password = user.partition(":")
        token = base64.b64encode(f"{unquote(name)}:{unquote(password)}".encode()).decode()
        headers.append(("Authorization", f"Basic {token}"))
    return Request(req.method, url, headers, req.body, req.body_path, req.statuses)


def _words(text: str) -> str:
    return re.sub(r"[^a-z0-9]+", "_", text.lower()).strip("_")


def request_name(method: str, url: str) -> str:
    """'get_index' for GET /index.html?x=1: the method and the path's last words."""
    segments = [s for s in urlsplit(url).path.split("/") if s]
    if segments:
        segments[-1] = segments[-1].rsplit(".", 1)[0] or segments[-1]
    words = [w for w in (_words(unquote(s)) for s in segments[-3:]) if w]
    name = "_".join([_words(method) or "request", *(words or ["root"])])
    return name[:48].rstrip("_")


def _unique(name: str, taken: set[str]) -> str:
    out, n = name, 1
    while out in taken:
        n += 1
        out = f"{name}_{n}"
    taken.add(out)
    return out


def _group_name(origin: str, taken: set[str]) -> str:
    return _unique(_words(origin.partition("://")[2])[:56] or "group", taken)


def _expect(statuses: list[int]) -> list[list[int]] | None:
    """The statuses a replay accepts: the default (2xx-3xx) unless the recording had 4xx/5xx, which are then
    accepted exactly (beside 2xx-3xx when those were recorded too)."""
    errors = sorted({s for s in statuses if s >= 400})
    if not errors:
        return None
    ok = [[200, 399]] if any(100 <= s < 400 for s in statuses) else []
    return ok + [[s, s] for s in errors]


def _inline(body: bytes, limit: int | None) -> str | None:
    """The body as TOML text when it is short (`limit` bytes at most), UTF-8 and without control characters (a
    `${` escaped); else None."""
    if limit is not None and len(body) > limit:
        return None
    try:
        text = body.decode()
    except UnicodeDecodeError:
        return None
    if any((ord(c) < 32 and c not in "\t\r\n") or ord(c) == 127 for c in text):
        return None
    return literal(text)


def literal(text: str) -> str:
    """`text` as knee sends it: a recorded `${` escaped as `$${` (knee fills `${…}` in bodies, body files too)."""
    return text.replace(_PLACEHOLDER, "$" + _PLACEHOLDER)


def _extension(headers: list[tuple[str, str]]) -> str:
    ctype = next((v.lower() for n, v in headers if n.lower() == "content-type"), "")
    return next((ext for word, ext in _EXTENSIONS if word in ctype), ".bin")


class _Secrets:
    """Credentials → `${name}` placeholders, one secret per distinct (name, value), named as knee names the
    credentials it lifts itself (`main_cookie_session`, `main_header_authorization`)."""

    def __init__(self) -> None:
        self.secrets: dict[str, Secret] = {}
        self._by_value: dict[tuple[str, str], str] = {}

    def placeholder(self, base: str, value: str, what: str) -> str:
        base = re.sub(r"[^A-Za-z0-9_]", "_", base).lower()
        name = self._by_value.get((base, value))
        if name is None:
            name = _unique(base, set(self.secrets))
            self.secrets[name] = Secret(value, what)
            self._by_value[(base, value)] = name
        return f"${{{name}}}"


def build(
    requests: list[Request],
    *,
    name: str,
    description: str,
    bodies_dir: str,
    by_origin: bool = False,
    merge: bool = False,
    group_keys: dict[str, Any] | None = None,
    inline_max: int | None = INLINE_BODY_MAX,
    in_turn: bool = False,
) -> Imported:
    """The scenario of `requests`: one group per origin (`by_origin`) or one group "main" for all; equal requests
    merged into one of a higher weight (`merge`), else each one its own request of weight 1. Each origin is a
    var (`target`, `target_2` …) its URLs start with. `bodies_dir`: the directory a body too large or binary to
    inline (longer than `inline_max` bytes, None: no limit) is written to, as the scenario names it. `group_keys`: keys
    every group gets (insecure, tls …). `in_turn`: a mix sends its requests in turn (vegeta's targets), not at
    random by weight."""
    if not requests:
        raise UserError("nothing to import: the input holds no request")
    for r in requests:
        replayable(r)
    requests = [_userinfo(r) for r in requests]
    origins = list(dict.fromkeys(origin_of(r.url) for r in requests))
    if len(origins) > 1 and not by_origin:  # a group's requests share one origin (the scenario refuses others)
        raise UserError(f"the requests go to {len(origins)} origins ({', '.join(origins)}); one group drives one")
    taken: set[str] = set()
    group_of: dict[str, str] = {}
    var_of: dict[str, str] = {}
    for i, origin in enumerate(origins):
        if i == 0:
            group_of[origin], var_of[origin] = _unique("main", taken), "target"
        else:
            group_of[origin] = _group_name(origin, taken)
            var_of[origin] = f"target_{group_of[origin]}"
    groups: dict[str, list[Request]] = {}
    for r in requests:
        groups.setdefault(group_of[origin_of(r.url)], []).append(r)
    ctx = _Context(var_of, _Secrets(), merge, bodies_dir, inline_max, Imported(table={}), in_turn)
    tables = {g: ctx.group(g, reqs) for g, reqs in groups.items()}
    connections = {g: ctx.connection(g, group_keys or {}) for g in tables}
    table: dict[str, Any] = {"name": name, "description": description}
    if ctx.secrets.secrets:
        table["secrets"] = list(ctx.secrets.secrets)
    table["vars"] = {var_of[o]: o for o in origins}
    table["groups"] = {g: {**t, **connections[g]} for g, t in tables.items()}
    table["sweep"] = dict(DEFAULT_SWEEP)
    ctx.out.table = table
    ctx.out.secrets = ctx.secrets.secrets
    if len(groups) > 1:  # each follows the level: the mix between origins is not the recording's
        shares = ", ".join(f"{g} {len(reqs) / len(requests):.0%}" for g, reqs in groups.items())
        ctx.out.notes.append(
            f"the requests go to {len(groups)} origins, a group each, and every group follows the level "
            f'(clients = "level"): at 20 clients each origin gets 20, where the recording sent {shares} of its '
            f"requests; the verdict judges {next(iter(groups))}. Give the other groups fixed clients in proportion, "
            "or import one origin"
        )
    return ctx.out


def _escaped(part: str) -> str:
    """A URL's path or query with what a request line cannot carry as recorded percent-encoded (non-ASCII, spaces
    and controls, `"`, `<`, `>`, a backtick), as Go's net/http (vegeta) and browsers send it; the rest, escapes
    included, as it is."""
    if all(" " < c < "\x7f" and c not in _UNSENDABLE for c in part):
        return part
    return "".join(c if " " < c < "\x7f" and c not in _UNSENDABLE else quote(c, safe="") for c in part)


_UNSENDABLE = '"<>`'


@dataclass
class _Context:
    """What building every group shares: each origin's var, the secrets so far, whether to merge equal requests,
    where body files go, and the result's files and notes."""

    var_of: dict[str, str]
    secrets: _Secrets
    merge: bool
    bodies_dir: str
    inline_max: int | None
    out: Imported
    in_turn: bool = False

    def connection(self, gname: str, keys: dict[str, Any]) -> dict[str, Any]:
        """The group's connection keys (insecure, http2, tls …), a client key's password as a secret."""
        tls = keys.get("tls")
        if isinstance(tls, dict) and tls.get("password"):
            what = "the password of the client certificate's key"
            password = self.secrets.placeholder(f"{gname}_tls_password", tls["password"], what)
            return {**keys, "tls": {**tls, "password": password}}
        return dict(keys)

    def group(self, gname: str, reqs: list[Request]) -> dict[str, Any]:
        """The group's table: a plain http group for one request, a request mix for several."""
        entries: list[dict[str, Any]] = []
        index: dict[Any, dict[str, Any]] = {}
        names: set[str] = set()
        for r in reqs:
            headers, cookies = _clean_headers(r)
            key = (r.method.upper(), r.url, tuple(headers), tuple(cookies.items()), r.body, r.body_path)
            if self.merge and key in index:
                index[key]["weight"] += 1
                index[key]["_statuses"].extend(r.statuses)
                continue
            entry = self._request(gname, _unique(request_name(r.method, r.url), names), r, headers, cookies)
            entries.append(entry)
            index[key] = entry
        for e in entries:
            expect = _expect(e.pop("_statuses"))
            if expect is not None:
                e["expect_status"] = expect
        group: dict[str, Any] = {"kind": "http", "clients": "level"}
        if len(entries) == 1:
            return group | {k: v for k, v in entries[0].items() if k not in ("name", "weight")}
        for shared in ("headers", "cookies"):
            first = entries[0].get(shared)
            if first and all(e.get(shared) == first for e in entries):
                group[shared] = first
                for e in entries:
                    del e[shared]
        return group | ({"mix_order": "in_turn"} if self.in_turn else {}) | {"requests": entries}

    def _request(
        self, gname: str, rname: str, r: Request, headers: list[tuple[str, str]], cookies: dict[str, str]
    ) -> dict[str, Any]:
        parts = urlsplit(r.url)
        rest = urlunsplit(("", "", _escaped(parts.path or "/"), _escaped(parts.query), ""))
        entry: dict[str, Any] = {"name": rname, "weight": 1, "method": r.method.upper()}
        entry["url"] = f"${{{self.var_of[origin_of(r.url)]}}}{rest}"
        if _PLACEHOLDER in rest:
            self.out.notes.append(
                f"{gname}.{rname}: its URL holds '${{', which knee reads as a placeholder; edit it if it is none"
            )
        sent = f"{r.method.upper()} {parts.path or '/'}"
        shown = {}
        for hname, value in headers:
            secret = sensitive(hname) and value
            what = f"the {hname} header of {sent}"
            plain = literal(value)  # header lines are templates: a recorded ${ is escaped
            shown[hname] = self.secrets.placeholder(f"{gname}_header_{hname}", value, what) if secret else plain
        if shown:
            entry["headers"] = shown
        if cookies:
            entry["cookies"] = {
                c: self.secrets.placeholder(f"{gname}_cookie_{c}", v, f"the cookie {c!r} of {sent}") if v else v
                for c, v in cookies.items()
            }
        if r.body is not None and (r.body or r.body_path is not None):
            text = _inline(r.body, self.inline_max)
            if text is not None:
                entry["body"] = text
            elif r.body_path is not None and _PLACEHOLDER.encode() not in r.body:
                entry["body_file"] = r.body_path  # as it is; one holding ${ is copied below, escaped (write)
            else:
                path = os.path.normpath(os.path.join(self.bodies_dir, f"{gname}_{rname}{_extension(headers)}"))
                self.out.bodies[path] = r.body
                entry["body_file"] = path
        entry["_statuses"] = list(r.statuses)
        return entry


def write(imported: Imported, out: Path | None) -> str:
    """Write the body files and, with `out`, the scenario; returns the scenario's text."""
    for path, recorded in imported.bodies.items():
        p = Path(path)
        try:
            content = literal(recorded.decode()).encode()  # a text body file is templated: its own ${ escaped
        except UnicodeDecodeError:
            content = recorded  # binary: knee sends it as it is
        try:
            p.parent.mkdir(parents=True, exist_ok=True)
            p.write_bytes(content)
        except OSError as exc:
            raise UserError(f"cannot write the body file {path!r} ({exc.strerror}); choose another -o") from None
    text = imported.toml()
    if out is not None:
        try:
            out.write_text(text)
        except OSError as exc:
            raise UserError(f"-o {str(out)!r}: cannot write it ({exc.strerror}); check the directory") from None
    return text


def bodies_dir_for(out: Path | None) -> str:
    """Where body files go: `bodies/` beside the scenario (-o), or in the current directory."""
    return os.path.normpath(os.path.join(os.path.dirname(str(out)) if out is not None else ".", "bodies"))


def secrets_message(imported: Imported, command: str = "knee run") -> str | None:
    """What the user must set before running the scenario: each secret's name and what it holds."""
    if not imported.secrets:
        return None
    lines = [
        "the recorded credentials are not written in the scenario; before running it, set each of these in the "
        f"environment (or pass --secret NAME=VALUE to {command}):"
    ]
    lines += [f"  {name}: {s.what}" for name, s in imported.secrets.items()]
    return "\n".join(lines)
