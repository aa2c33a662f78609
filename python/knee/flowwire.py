"""The wire under `ctx.http` (knee.flowhttp): one HTTP/1.1 connection as an asyncio Protocol, and the framing of
a response in the bytes read so far. The usual response comes whole in one read and is framed from that read's
bytes; otherwise the bytes gather in the connection's buffer, kept for its life and consumed from the front."""

from __future__ import annotations

import asyncio


class Broken(Exception):
    """A connection that ended or spoke nonsense mid-exchange: `cls` is its class; `stale` when no byte of the
    response came (a kept-alive connection the server had closed: the request is sent again on a new one)."""

    def __init__(self, cls: str, message: str, stale: bool = False) -> None:
        super().__init__(message)
        self.cls, self.stale = cls, stale


def frame(buf: bytes | bytearray, head_only: bool, closed: bool) -> tuple | None:
    """The response at the start of `buf`: (bytes it takes, status, head, body, keep-alive, has Set-Cookie), or
    None while incomplete. A body framed by the connection's end is complete only once `closed`."""
    end = buf.find(b"\r\n\r\n")
    if end < 0:
        if closed:
            raise Broken("closed", "connection closed before a response" if not buf else "closed mid-head")
        return None
    head = bytes(buf[:end])
    if head[:7] != b"HTTP/1.":
        raise Broken("protocol", f"not an HTTP/1.x response: {head[:60]!r}")
    try:
        status = int(head[9:12])
    except ValueError:
        raise Broken("protocol", f"no status in {head[:60]!r}") from None
    low = head.lower()
    start = end + 4
    keep = b"\r\nconnection: close" not in low and (head[7:8] == b"1" or b"\r\nconnection: keep-alive" in low)
    cookies = b"\r\nset-cookie:" in low
    if head_only or status < 200 or status in (204, 304):
        return start, status, head, b"", keep, cookies
    i = low.find(b"\r\ncontent-length:")
    if i >= 0:
        j = low.find(b"\r\n", i + 17)
        try:
            n = int(head[i + 17 : j if j >= 0 else end])
        except ValueError:
            raise Broken("protocol", "bad Content-Length") from None
        if len(buf) < start + n:
            if closed:
                raise Broken("closed", f"closed after {len(buf) - start} of {n} body bytes")
            return None
        return start + n, status, head, bytes(buf[start : start + n]), keep, cookies
    if b"\r\ntransfer-encoding:" in low and b"chunked" in low:
        got = chunked(buf, start)
        if got is None:
            if closed:
                raise Broken("closed", "closed mid-body (chunked)")
            return None
        return got[1], status, head, got[0], keep, cookies
    if not closed:  # the body runs to the connection's end
        return None
    return len(buf), status, head, bytes(buf[start:]), False, cookies


def chunked(buf: bytes | bytearray, pos: int) -> tuple[bytes, int] | None:
    parts: list[bytes] = []
    while True:
        eol = buf.find(b"\r\n", pos)
        if eol < 0:
            return None
        try:
            size = int(bytes(buf[pos:eol]).partition(b";")[0], 16)
        except ValueError:
            raise Broken("protocol", "bad chunk size") from None
        pos = eol + 2
        if size == 0:  # trailers, then an empty line
            while (eol := buf.find(b"\r\n", pos)) > pos:
                pos = eol + 2
            return (b"".join(parts), eol + 2) if eol >= 0 else None
        if len(buf) < pos + size + 2:
            return None
        parts.append(bytes(buf[pos : pos + size]))
        pos += size + 2


class Conn(asyncio.Protocol):
    """One connection: the request written, its response framed as bytes come (one buffer, reused)."""

    def __init__(self, loop: asyncio.AbstractEventLoop) -> None:
        self.loop = loop
        self.transport: asyncio.Transport | None = None
        self.buf = bytearray()
        self.waiter: asyncio.Future[tuple] | None = None
        self.drain: asyncio.Future[None] | None = None
        self.head_only = self.closed = self.heard = False

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = transport  # type: ignore[assignment]

    def data_received(self, data: bytes) -> None:
        self.heard = True
        if self.waiter is not None and not self.buf:  # the usual case: a whole response in one read
            try:
                got = frame(data, self.head_only, False)
            except Broken:
                got = None
            if got is not None and got[0] == len(data) and got[1] >= 200:
                waiter, self.waiter = self.waiter, None
                waiter.set_result(got)
                return
        self.buf += data
        if self.waiter is not None:
            self._check(False)

    def _check(self, closed: bool) -> None:
        buf, waiter = self.buf, self.waiter
        assert waiter is not None
        while True:
            try:
                got = frame(buf, self.head_only, closed)
            except Broken as exc:
                exc.stale = not self.heard
                self.waiter = None
                waiter.set_exception(exc)
                return
            if got is None:
                return
            del buf[: got[0]]
            if got[1] >= 200 or got[1] == 101:  # not an interim 1xx (100 Continue): the response
                self.waiter = None
                waiter.set_result(got)
                return

    def connection_lost(self, exc: Exception | None) -> None:
        self.closed = True
        if self.drain is not None and not self.drain.done():
            self.drain.set_result(None)
        if self.waiter is None or self.waiter.done():
            return
        if exc is None:
            self._check(True)
        else:
            waiter, self.waiter = self.waiter, None
            waiter.set_exception(exc if self.heard else Stale(exc))

    def pause_writing(self) -> None:
        self.drain = self.loop.create_future()

    def resume_writing(self) -> None:
        drain, self.drain = self.drain, None
        if drain is not None and not drain.done():
            drain.set_result(None)

    def usable(self) -> bool:
        return not self.closed and not self.buf

    async def exchange(self, payload: bytes, head_only: bool) -> tuple:
        self.head_only, self.heard = head_only, False
        self.waiter = waiter = self.loop.create_future()
        self.transport.write(payload)  # type: ignore[union-attr]
        if self.drain is not None:
            await self.drain
        return await waiter

    def close(self) -> None:
        if self.transport is not None:
            self.transport.close()


class Stale(Exception):
    """A connection error before any byte of the response (`error` is it)."""

    def __init__(self, error: BaseException) -> None:
        super().__init__(str(error))
        self.error = error
