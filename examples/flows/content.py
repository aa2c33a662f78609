"""A Python flow for knee (docs/worker-protocol.md#python-flows): each client connects and logs in once,
then fetches a document with its session cookie, operation after operation.

    export CONTENT_PASSWORD=…        # the worker processes inherit knee's environment
    knee run --python content:login_and_fetch --path examples/flows -c 20 -d 30s --var target=http://127.0.0.1:8080

It speaks HTTP/1.1 itself over asyncio streams (no library to install) against `knee target` with a
login (`knee target --config` with `[login] path = "/login"`, docs/demo-target.md). Vars: `target`, `path`
(the document, default /files/doc), `refuse_every` (clients whose number is a multiple of it use a wrong
password: their logins fail, grouped in the report). The password comes from the environment variable
CONTENT_PASSWORD (a --secret: knee writes it nowhere).
"""

from __future__ import annotations

import asyncio
import os
import urllib.parse


class LoginRefused(Exception):
    """The server refused the login."""


class FetchFailed(Exception):
    """The document did not come back."""


async def request(
    conn: tuple[asyncio.StreamReader, asyncio.StreamWriter],
    method: str,
    path: str,
    host: str,
    body: bytes = b"",
    cookie: str = "",
) -> tuple[int, dict[str, str], bytes]:
    """One HTTP/1.1 exchange on a kept-alive connection: (status, headers, body)."""
    reader, writer = conn
    head = f"{method} {path} HTTP/1.1\r\nHost: {host}\r\nContent-Length: {len(body)}\r\n"
    if body:
        head += "Content-Type: application/x-www-form-urlencoded\r\n"
    if cookie:
        head += f"Cookie: {cookie}\r\n"
    writer.write(head.encode() + b"\r\n" + body)
    await writer.drain()
    status_line = await reader.readline()
    if not status_line:
        raise ConnectionResetError("the server closed the connection")
    status = int(status_line.split()[1])
    headers: dict[str, str] = {}
    while (line := await reader.readline()) not in (b"\r\n", b"\n", b""):
        name, _, value = line.decode().partition(":")
        headers[name.strip().lower()] = value.strip()
    data = await reader.readexactly(int(headers.get("content-length", "0")))
    return status, headers, data


async def login_and_fetch(ctx) -> int:  # type: ignore[no-untyped-def]
    url = urllib.parse.urlsplit(ctx.vars["target"])
    host = url.netloc
    s = ctx.session
    try:
        if "conn" not in s:
            with ctx.step("connect"):
                s["conn"] = await asyncio.open_connection(url.hostname, url.port or 80)
        if "cookie" not in s:
            every = int(ctx.vars.get("refuse_every", "0") or 0)
            password = os.environ.get("CONTENT_PASSWORD", "")
            if every and ctx.client % every == 0:
                password += "-wrong"
            form = urllib.parse.urlencode({"user": f"user{ctx.client}", "password": password}).encode()
            with ctx.step("login"):
                status, headers, body = await request(s["conn"], "POST", "/login", host, body=form)
            if status != 200:
                raise LoginRefused(body.decode(errors="replace").strip())
            s["cookie"] = headers["set-cookie"].split(";")[0]
        with ctx.step("fetch"):
            path = ctx.vars.get("path", "/files/doc")
            status, _, body = await request(s["conn"], "GET", path, host, cookie=s["cookie"])
        if status != 200:
            raise FetchFailed(f"{status}: {body.decode(errors='replace').strip()}")
        return len(body)
    except (OSError, asyncio.IncompleteReadError, ValueError):
        # The connection broke: start again with a new one (and a new login) next time.
        conn = s.pop("conn", None)
        s.pop("cookie", None)
        if conn is not None:
            conn[1].close()
        raise
