"""A client's cookie jar for `ctx.http` (knee.flowhttp): what the servers' Set-Cookie headers said, sent back as
a browser would (RFC 6265's domain, path, Secure, Max-Age and Expires rules; no public-suffix list, no
third-party policy: a flow talks to the services it is told to).

The Cookie header of a request is built once per (host, path, scheme) and reused until the jar changes or one
of its cookies expires, so a session cookie costs a dict lookup per request."""

from __future__ import annotations

import email.utils
import time
from collections.abc import Iterator


class Cookie:
    __slots__ = ("domain", "expires", "host_only", "name", "path", "secure", "value")

    def __init__(
        self, name: str, value: str, domain: str, path: str, *, host_only: bool, secure: bool, expires: float | None
    ) -> None:
        self.name, self.value, self.domain, self.path = name, value, domain, path
        self.host_only, self.secure, self.expires = host_only, secure, expires

    def matches(self, host: str, path: str, https: bool) -> bool:
        if self.secure and not https:
            return False
        if self.host_only:
            if host != self.domain:
                return False
        elif host != self.domain and not host.endswith("." + self.domain):
            return False
        p = self.path
        return path == p or (path.startswith(p) and (p.endswith("/") or path[len(p)] == "/"))

    def __repr__(self) -> str:
        return f"Cookie({self.name}={self.value!r}, domain={self.domain!r}, path={self.path!r})"


def _default_path(path: str) -> str:
    """RFC 6265 5.1.4: the request path's directory."""
    path = path.partition("?")[0]
    if not path.startswith("/"):
        return "/"
    cut = path.rfind("/")
    return path[:cut] if cut > 0 else "/"


class CookieJar:
    """The cookies one client holds, by (domain, path, name). `jar["sid"]` reads a value by name (the first
    match), `jar.set(name, value, domain=…)` adds one by hand, `jar.clear()` forgets them all."""

    def __init__(self) -> None:
        self._cookies: dict[tuple[str, str, str], Cookie] = {}
        self._headers: dict[tuple[str, str, bool], str] = {}  # the Cookie header per (host, path, https)
        self._expiry = float("inf")  # the soonest expiry: the cached headers are stale from then

    def __len__(self) -> int:
        return len(self._cookies)

    def __iter__(self) -> Iterator[Cookie]:
        return iter(list(self._cookies.values()))

    def __contains__(self, name: object) -> bool:
        return any(c.name == name for c in self._cookies.values())

    def __getitem__(self, name: str) -> str:
        for c in self._cookies.values():
            if c.name == name:
                return c.value
        raise KeyError(name)

    def get(self, name: str, default: str | None = None) -> str | None:
        try:
            return self[name]
        except KeyError:
            return default

    def clear(self) -> None:
        self._cookies.clear()
        self._changed()

    def set(self, name: str, value: str, domain: str, path: str = "/", *, secure: bool = False) -> None:
        """Add a cookie by hand, sent to `domain` (a host name, without port; its subdomains too)."""
        self._put(Cookie(name, value, domain.lower().lstrip("."), path, host_only=False, secure=secure, expires=None))

    def _put(self, cookie: Cookie) -> None:
        key = (cookie.domain, cookie.path, cookie.name)
        if cookie.expires is not None and cookie.expires <= time.time():
            self._cookies.pop(key, None)  # an expiry in the past deletes it
        else:
            self._cookies[key] = cookie
        self._changed()

    def _changed(self) -> None:
        self._headers.clear()
        self._expiry = min((c.expires for c in self._cookies.values() if c.expires is not None), default=float("inf"))

    def header(self, host: str, path: str, https: bool) -> str:
        """The Cookie header's value for a request (empty: none), longest paths first as RFC 6265 asks."""
        key = (host, path, https)
        found = self._headers.get(key)
        if found is not None and time.time() < self._expiry:
            return found
        if time.time() >= self._expiry:  # drop what expired
            for k, c in list(self._cookies.items()):
                if c.expires is not None and c.expires <= time.time():
                    del self._cookies[k]
            self._changed()
        plain = path.partition("?")[0] or "/"
        sent = sorted((c for c in self._cookies.values() if c.matches(host, plain, https)), key=lambda c: -len(c.path))
        value = "; ".join(f"{c.name}={c.value}" for c in sent)
        if len(self._headers) < 1024:
            self._headers[key] = value
        return value

    def take(self, head: bytes, host: str, path: str) -> None:
        """Store the Set-Cookie headers of a response head (its raw bytes) to a request for `host` and `path`."""
        for line in head.split(b"\r\n")[1:]:
            name, _, value = line.partition(b":")
            if name.strip().lower() == b"set-cookie":
                cookie = parse_set_cookie(value.decode("latin-1"), host, path)
                if cookie is not None:
                    self._put(cookie)


def parse_set_cookie(text: str, host: str, path: str) -> Cookie | None:
    """One Set-Cookie header's value (RFC 6265 5.2), for a response to `host` and `path`; None when ignored (no
    name, or a Domain that does not cover the host)."""
    pair, *attrs = text.split(";")
    name, eq, value = pair.partition("=")
    name, value = name.strip(), value.strip()
    if not eq or not name:
        return None
    if len(value) >= 2 and value[0] == value[-1] == '"':
        value = value[1:-1]
    domain, cpath, secure = "", "", False
    expires: float | None = None
    max_age: float | None = None
    for attr in attrs:
        key, _, val = attr.partition("=")
        key, val = key.strip().lower(), val.strip()
        if key == "domain" and val:
            domain = val.lower().lstrip(".")
        elif key == "path" and val.startswith("/"):
            cpath = val
        elif key == "secure":
            secure = True
        elif key == "max-age":
            try:
                max_age = float(int(val))
            except ValueError:
                continue
        elif key == "expires":
            try:
                expires = email.utils.parsedate_to_datetime(val).timestamp()
            except (TypeError, ValueError, IndexError, OverflowError):
                continue
    if max_age is not None:  # Max-Age wins over Expires; 0 or less deletes
        expires = time.time() + max_age if max_age > 0 else 0.0
    host = host.lower()
    if domain and host != domain and not host.endswith("." + domain):
        return None
    return Cookie(
        name,
        value,
        domain or host,
        cpath or _default_path(path),
        host_only=not domain,
        secure=secure,
        expires=expires,
    )
