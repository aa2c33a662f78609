"""ctx.http's pure parts: framing a response in the bytes read so far (knee.flowwire), the cookie jar's rules
(knee.flowcookies) and the statuses a request expects (knee.flowhttp). The client itself is tested against
nginx in tests/integration/test_flow_http.py."""

from __future__ import annotations

import time

import pytest

from knee.flowcookies import CookieJar, parse_set_cookie
from knee.flowhttp import _ranges
from knee.flowwire import Broken, frame

OK = b"HTTP/1.1 200 OK\r\nContent-Length: 5\r\nSet-Cookie: a=1\r\n\r\nhello"


def test_a_response_is_framed_only_once_whole() -> None:
    for cut in range(len(OK)):
        assert frame(OK[:cut], False, False) is None
    assert frame(OK + b"HTTP/1.1", False, False) == (len(OK), 200, OK[: OK.index(b"\r\n\r\n")], b"hello", True, True)


def test_chunked_interim_head_and_close_framing() -> None:
    chunked = b"HTTP/1.1 201 Created\r\nTransfer-Encoding: chunked\r\n\r\n3;x=y\r\nabc\r\n2\r\nde\r\n0\r\nT: 1\r\n\r\n"
    for cut in range(len(chunked)):
        assert frame(chunked[:cut], False, False) is None
    got = frame(chunked, False, False)
    assert got is not None and got[0] == len(chunked) and got[1:2] == (201,) and got[3] == b"abcde"
    interim = b"HTTP/1.1 100 Continue\r\n\r\n"
    assert frame(interim + OK, False, False)[:2] == (len(interim), 100)  # type: ignore[index]
    head = b"HTTP/1.1 200 OK\r\nContent-Length: 99\r\n\r\n"
    assert frame(head, True, False)[3] == b""  # type: ignore[index]  # HEAD: no body, whatever the length says
    close = b"HTTP/1.0 200 OK\r\n\r\nuntil the end"
    assert frame(close, False, False) is None
    assert frame(close, False, True)[3:5] == (b"until the end", False)  # type: ignore[index]
    closing = b"HTTP/1.1 200 OK\r\nConnection: close\r\nContent-Length: 0\r\n\r\n"
    assert frame(closing, False, False)[4] is False  # type: ignore[index]


@pytest.mark.parametrize(
    ("data", "cls"),
    [(b"SSH-2.0-OpenSSH\r\n\r\n", "protocol"), (b"HTTP/1.1 2xx\r\n\r\n", "protocol"), (OK[:-2], "closed")],
)
def test_what_cannot_be_a_response_is_classed(data: bytes, cls: str) -> None:
    with pytest.raises(Broken) as info:
        frame(data, False, True)
    assert info.value.cls == cls


def test_the_jar_sends_cookies_by_domain_path_and_scheme() -> None:
    jar = CookieJar()
    jar.take(b"HTTP/1.1 200 OK\r\nSet-Cookie: sid=1; Path=/\r\nset-cookie: deep=2; Path=/app/x\r\n", "a.test", "/")
    jar.take(b"HTTP/1.1 200 OK\r\nSet-Cookie: wide=3; Domain=.test; Secure\r\n", "a.test", "/app/page")
    assert jar.header("a.test", "/", False) == "sid=1"
    assert jar.header("a.test", "/app/x/y?q=1", False) == "deep=2; sid=1"  # longest path first
    assert jar.header("a.test", "/app/xy", False) == "sid=1"  # /app/x does not cover /app/xy
    assert jar.header("b.test", "/app/z", True) == "wide=3"  # Domain covers b.test; default path /app
    assert jar.header("b.test", "/app/z", False) == ""  # Secure: https only
    assert jar.header("b.test", "/", True) == ""
    assert jar["sid"] == "1" and "deep" in jar and len(jar) == 3
    jar.take(b"HTTP/1.1 200 OK\r\nSet-Cookie: sid=gone; Path=/; Max-Age=0\r\n", "a.test", "/")
    assert jar.header("a.test", "/", False) == "" and "sid" not in jar


def test_expiry_and_foreign_domains() -> None:
    assert parse_set_cookie("x=1; Domain=other.test", "a.test", "/") is None
    past = parse_set_cookie("x=1; Expires=Wed, 21 Oct 2015 07:28:00 GMT", "a.test", "/")
    assert past is not None and past.expires is not None and past.expires < time.time()
    jar = CookieJar()
    jar.take(b"HTTP/1.1 200 OK\r\nSet-Cookie: x=1; Max-Age=1\r\n", "a.test", "/")
    assert jar.header("a.test", "/", False) == "x=1"
    jar._expiry = time.time() - 1  # as if a second went by
    next(iter(jar)).expires = time.time() - 1
    assert jar.header("a.test", "/", False) == ""


def test_expected_statuses() -> None:
    assert _ranges(204) == ((204, 204),)
    assert _ranges("2xx, 404") == ((200, 299), (404, 404))
    assert _ranges([200, (300, 302), range(400, 402)]) == ((200, 200), (300, 302), (400, 401))
    with pytest.raises(TypeError):
        _ranges(2.5)
