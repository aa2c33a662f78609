"""`ctx.http`: the HTTP/1.1 client of a Python flow (docs/worker-protocol.md, "HTTP in a flow").

One `Client` per knee client, made on its first use of `ctx.http` and kept across its operations: kept-alive
connections per origin (one while the flow awaits its requests one after another, more if it runs several at
once), a cookie jar (knee.flowcookies) and default headers. Each request is timed as a step of the operation,
named `METHOD /path` (the query left out) or by `name=`, connection included; a response outside `expect`
(default 200–399, as an http group's `expect_status`) raises `StatusError`, and a connection that cannot be
made or breaks raises `HttpError`: either fails the operation with the engine's http client's class (`status`,
`connect_refused`, `reset`, `closed`, …) as the error the flow reports.

    async def flow(ctx):
        r = await ctx.http.post("/login", data={"user": f"user{ctx.client}", "password": "pw"})
        r = await ctx.http.get("/items", name="items")
        return len(r.body)

The base URL of a path is the scenario's var `url`, else `target`; https takes the vars `insecure`, `tls_cacert`,
`tls_capath`, `tls_cert`, `tls_key` (files) and the key's password from the environment's KNEE_TLS_PASSWORD
(set it in the group's `env` from a secret). A flow may set `ctx.http.base_url` itself.

The client is asyncio's Protocol over a socket: a response is framed in `data_received` from one reused buffer
(the head searched once, Content-Length or chunked framing, the headers parsed only when read), so a request
costs a write, a future and a few slices of Python.
"""

from __future__ import annotations

import asyncio
import json as _json
import os
import ssl
import time
import urllib.parse
from collections.abc import Iterable, Mapping
from functools import partialmethod
from typing import Any

from knee.flowcookies import CookieJar
from knee.flowwire import Broken, Conn, Stale

_BODY_METHODS = frozenset({"POST", "PUT", "PATCH"})
_TRUE = frozenset({"1", "true", "yes", "on"})
_dumps = _json.JSONEncoder(separators=(",", ":"), ensure_ascii=False).encode
_DEFAULT: Any = object()  # `expect` not given: the client's own


class HttpError(Exception):
    """A request that failed. `knee_class` names it in knee's reports as the engine's http client would: status,
    connect_refused, connect_timeout, connect_error, tls, reset, closed, read_error, write_error, protocol,
    request (a URL that cannot be sent)."""

    def __init__(self, knee_class: str, message: str, response: Response | None = None) -> None:
        super().__init__(message)
        self.knee_class = knee_class
        self.response = response


class StatusError(HttpError):
    """The response's status was outside what the request expected (`response` holds it)."""


class Headers(dict[str, str]):
    """A response's headers by lower-case name (lookups ignore case); a repeated header's values joined by ', '
    (Set-Cookie's too: the jar has them apart)."""

    def __getitem__(self, name: str) -> str:
        return super().__getitem__(name.lower())

    def __contains__(self, name: object) -> bool:
        return isinstance(name, str) and super().__contains__(name.lower())

    def get(self, name: str, default: Any = None) -> Any:
        return super().get(name.lower(), default)


class Response:
    """`status`, `reason`, `headers`, `body` (bytes), `text`, `json()`, `ok`, `raise_for_status()`; `name` is
    its step's name and `elapsed` its seconds."""

    __slots__ = ("_head", "_headers", "body", "elapsed", "name", "ok", "status")

    def __init__(self, status: int, head: bytes, body: bytes, *, name: str, ok: bool, elapsed: float) -> None:
        self.status, self._head, self.body, self.name, self.ok, self.elapsed = status, head, body, name, ok, elapsed
        self._headers: Headers | None = None

    @property
    def reason(self) -> str:
        line = self._head.partition(b"\r\n")[0]
        return line.split(b" ", 2)[2].decode("latin-1") if line.count(b" ") >= 2 else ""

    @property
    def headers(self) -> Headers:
        if self._headers is None:
            h = Headers()
            for line in self._head.split(b"\r\n")[1:]:
                k, _, v = line.decode("latin-1").partition(":")
                k, v = k.strip().lower(), v.strip()
                h[k] = f"{dict.__getitem__(h, k)}, {v}" if dict.__contains__(h, k) else v
            self._headers = h
        return self._headers

    @property
    def text(self) -> str:
        ctype = self.headers.get("content-type", "")
        charset = ctype.partition("charset=")[2].split(";")[0].strip().strip('"') or "utf-8"
        try:
            return self.body.decode(charset, errors="replace")
        except LookupError:
            return self.body.decode("utf-8", errors="replace")

    def json(self) -> Any:
        return _json.loads(self.body)

    def raise_for_status(self) -> Response:
        """Raise StatusError (class `status`) unless the status was expected; the response otherwise."""
        if not self.ok:
            raise StatusError("status", _status_message(self), self)
        return self

    def __repr__(self) -> str:
        return f"<Response [{self.status}] {self.name}>"


def _status_message(r: Response) -> str:
    line = r.body[:200].decode("utf-8", errors="replace").strip().partition("\n")[0][:120]
    return f"HTTP {r.status} {r.reason} ({r.name})" + (f": {line}" if line else "")


def _ranges(expect: Any) -> tuple[tuple[int, int], ...]:
    """200, (200, 299), range(200, 300), "2xx", "200-299", or a list of them → ((lo, hi), …)."""
    if isinstance(expect, int):
        return ((expect, expect),)
    if isinstance(expect, range):
        return ((expect.start, expect.stop - 1),)
    if isinstance(expect, str):
        out = []
        for part in expect.split(","):
            p = part.strip().lower()
            if len(p) == 3 and p.endswith("xx") and p[0].isdigit():
                out.append((int(p[0]) * 100, int(p[0]) * 100 + 99))
            else:
                lo, _, hi = p.partition("-")
                out.append((int(lo), int(hi or lo)))
        return tuple(out)
    if isinstance(expect, tuple) and len(expect) == 2 and all(isinstance(x, int) for x in expect):
        return ((expect[0], expect[1]),)
    if isinstance(expect, Iterable):
        return tuple(r for e in expect for r in _ranges(e))
    raise TypeError(f"expect must be a status, (lo, hi), '2xx' or a list of them (got {expect!r})")


class _Origin:
    __slots__ = ("host", "host_header", "https", "key", "port", "server_hostname")

    def __init__(self, url: str) -> None:
        parts = urllib.parse.urlsplit(url)
        if parts.scheme not in ("http", "https") or not parts.hostname:
            raise HttpError("request", f"{url!r} is not an http:// or https:// URL")
        self.https = parts.scheme == "https"
        self.host = parts.hostname
        self.port = parts.port or (443 if self.https else 80)
        self.host_header = parts.netloc.rpartition("@")[2]
        self.server_hostname = self.host if self.https else None
        self.key = f"{parts.scheme}://{self.host_header}"


class _Config:
    """What every client of a process shares: the base URL and the TLS context, from the scenario's vars."""

    def __init__(self, variables: Mapping[str, str]) -> None:
        self.base_url = variables.get("url") or variables.get("target") or ""
        self.insecure = str(variables.get("insecure", "")).lower() in _TRUE
        self.files = tuple(variables.get(k) or None for k in ("tls_cacert", "tls_capath", "tls_cert", "tls_key"))
        self._ssl: ssl.SSLContext | None = None

    def ssl(self) -> ssl.SSLContext:
        if self._ssl is None:
            cacert, capath, cert, key = self.files
            context = ssl.create_default_context(cafile=cacert, capath=capath)
            if self.insecure:
                context.check_hostname = False
                context.verify_mode = ssl.CERT_NONE
            if cert:
                context.load_cert_chain(cert, key, password=os.environ.get("KNEE_TLS_PASSWORD"))
            context.set_alpn_protocols(["http/1.1"])
            self._ssl = context
        return self._ssl


_CONFIGS: dict[tuple, _Config] = {}


def _config(variables: Mapping[str, str]) -> _Config:
    key = tuple(sorted((k, v) for k, v in variables.items() if k in ("url", "target", "insecure") or k[:4] == "tls_"))
    found = _CONFIGS.get(key)
    if found is None:
        found = _CONFIGS[key] = _Config(variables)
    return found


class Client:
    """A knee client's HTTP: `await ctx.http.get(url, …)`, `.post`, `.put`, `.patch`, `.delete`, `.head`,
    `.request(method, url, …)`. `cookies` is its jar, `headers` what it sends with every request, `expect` the
    statuses that count as success (default 200–399), `base_url` what a path is relative to."""

    def __init__(self, ctx: Any) -> None:
        self._ctx = ctx
        self._config = _config(ctx.vars)
        self.cookies = CookieJar()
        self.headers: dict[str, str] = {}
        self.expect: Any = (200, 399)
        self._idle: dict[str, list[Conn]] = {}
        self._origins: dict[str, _Origin] = {}
        self._base: tuple[_Origin, str] | None = None
        self._base_url = ""
        self.base_url = self._config.base_url

    @property
    def base_url(self) -> str:
        return self._base_url

    @base_url.setter
    def base_url(self, url: str) -> None:
        self._base_url, self._base = url, None
        if url:
            origin = _Origin(url)
            self._base = origin, urllib.parse.urlsplit(url).path.rstrip("/")

    def _target(self, url: str) -> tuple[_Origin, str]:
        if "://" not in url:
            if self._base is None:
                raise HttpError(
                    "request", f"{url!r} is a path but there is no base URL: set the var url (or target), or "
                    "ctx.http.base_url, or give a whole URL"
                )  # fmt: skip
            origin, prefix = self._base
            return origin, prefix + (url if url[:1] == "/" else "/" + url)
        parts = urllib.parse.urlsplit(url)
        key = f"{parts.scheme}://{parts.netloc}"
        found = self._origins.get(key)
        if found is None:
            found = self._origins[key] = _Origin(url)
        return found, (parts.path or "/") + (f"?{parts.query}" if parts.query else "")

    async def request(
        self,
        method: str,
        url: str,
        *,
        name: str | None = None,
        params: Mapping[str, Any] | None = None,
        headers: Mapping[str, str] | None = None,
        json: Any = None,
        data: Mapping[str, Any] | str | bytes | None = None,
        expect: Any = _DEFAULT,
    ) -> Response:
        """One exchange, timed as the step `name` (default `METHOD /path`). `json` sends a JSON body, `data` a
        form (a mapping) or raw bytes; `params` adds a query. `expect=None` lets any status through (check
        `ok` or call `raise_for_status()` yourself)."""
        t0 = time.perf_counter()
        method = method.upper()
        origin, path = self._target(url)
        if params:
            path += ("&" if "?" in path else "?") + urllib.parse.urlencode(params, doseq=True)
        step = name or f"{method} {path.partition('?')[0]}"
        head = f"{method} {path} HTTP/1.1\r\nHost: {origin.host_header}\r\n"
        body = b""
        ctype = None
        if json is not None:
            body, ctype = _dumps(json).encode(), "application/json"
        elif data is not None:
            if isinstance(data, Mapping):
                body, ctype = urllib.parse.urlencode(data, doseq=True).encode(), "application/x-www-form-urlencoded"
            else:
                body = data.encode() if isinstance(data, str) else bytes(data)
        if body or method in _BODY_METHODS:
            head += f"Content-Length: {len(body)}\r\n"
        if self.cookies:
            cookie = self.cookies.header(origin.host, path, origin.https)
            if cookie:
                head += f"Cookie: {cookie}\r\n"
        for extra in (self.headers, headers):
            if extra:
                if ctype is not None and any(k.lower() == "content-type" for k in extra):
                    ctype = None
                head += "".join(f"{k}: {v}\r\n" for k, v in extra.items())
        if ctype is not None:
            head += f"Content-Type: {ctype}\r\n"
        payload = (head + "\r\n").encode() + body
        try:
            _, status, rhead, rbody, _, cookies = await self._send(origin, payload, method == "HEAD", step)
        finally:
            elapsed = time.perf_counter() - t0
            steps = self._ctx._steps
            if steps is None:
                self._ctx._steps = {step: elapsed}
            else:
                steps[step] = steps.get(step, 0.0) + elapsed
        if cookies:
            self.cookies.take(rhead, origin.host, path)
        if expect is _DEFAULT:
            expect = self.expect
        if expect == (200, 399):
            ok = 200 <= status <= 399
        else:
            ok = any(lo <= status <= hi for lo, hi in _ranges(expect if expect is not None else (200, 399)))
        response = Response(status, rhead, rbody, name=step, ok=ok, elapsed=elapsed)
        if not ok and expect is not None:
            raise StatusError("status", _status_message(response), response)
        return response

    async def _send(self, origin: _Origin, payload: bytes, head_only: bool, step: str) -> tuple:
        idle = self._idle.get(origin.key)
        conn = None
        while idle:
            conn = idle.pop()
            if conn.usable():
                break
            conn.close()
            conn = None
        for attempt in (0, 1):
            reused = conn is not None
            if conn is None:
                conn = await self._open(origin, step)
            try:
                got = await conn.exchange(payload, head_only)
            except (Broken, Stale) as exc:
                conn.close()
                if reused and attempt == 0 and (isinstance(exc, Stale) or exc.stale):
                    conn = None  # the server had closed it while idle: once more, on a new connection
                    continue
                raise _http_error(exc.error if isinstance(exc, Stale) else exc, step) from None
            except OSError as exc:
                conn.close()
                raise _http_error(exc, step) from None
            except BaseException:  # cancelled (the flow's own timeout): the connection is mid-exchange
                conn.close()
                raise
            if got[4] and not conn.closed:
                self._idle.setdefault(origin.key, []).append(conn)
            else:
                conn.close()
            return got
        raise AssertionError("unreachable")

    async def _open(self, origin: _Origin, step: str) -> Conn:
        loop = asyncio.get_running_loop()
        where = f"{origin.host}:{origin.port}"
        try:
            _, conn = await loop.create_connection(
                lambda: Conn(loop),
                origin.host,
                origin.port,
                ssl=self._config.ssl() if origin.https else None,
                server_hostname=origin.server_hostname,
            )
        except ssl.SSLError as exc:
            raise HttpError("tls", f"{step}: TLS handshake with {where} failed: {exc.reason or exc}") from None
        except ConnectionRefusedError:
            raise HttpError("connect_refused", f"{step}: connection refused by {where}") from None
        except TimeoutError:
            raise HttpError("connect_timeout", f"{step}: no connection to {where}") from None
        except OSError as exc:
            raise HttpError("connect_error", f"{step}: cannot connect to {where}: {exc.strerror or exc}") from None
        return conn

    get = partialmethod(request, "GET")
    post = partialmethod(request, "POST")
    put = partialmethod(request, "PUT")
    patch = partialmethod(request, "PATCH")
    delete = partialmethod(request, "DELETE")
    head = partialmethod(request, "HEAD")

    def close(self) -> None:
        """Close the kept-alive connections (the next request opens a new one)."""
        for conns in self._idle.values():
            for conn in conns:
                conn.close()
        self._idle.clear()


def _http_error(exc: BaseException, step: str) -> HttpError:
    if isinstance(exc, Broken):
        return HttpError(exc.cls, f"{step}: {exc}")
    if isinstance(exc, ssl.SSLError):
        return HttpError("tls", f"{step}: {exc.reason or exc}")
    if isinstance(exc, ConnectionResetError | ConnectionAbortedError):
        return HttpError("reset", f"{step}: connection reset")
    if isinstance(exc, BrokenPipeError):
        return HttpError("write_error", f"{step}: broken pipe")
    return HttpError("read_error", f"{step}: {exc}")
