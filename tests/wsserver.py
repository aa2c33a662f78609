"""A WebSocket server nobody here wrote (the `websockets` package's), run as its own process by the tests, that counts
what it was sent: GET /stats (plain HTTP) answers {"connections": …, "messages": …, "by_path": {path: messages}}.

Paths: /echo answers each message with itself; /tagged answers "echo: MESSAGE" after a "noise" message of its own;
/close closes every connection at once with 1008 "policy says no"; /forbidden refuses the upgrade with 403;
/json answers a JSON message with another one (id "someone else") and then itself; /push sends every connection
`PUSHES` messages 5 ms apart, then waits for the client's close; /push1 one message."""

from __future__ import annotations

import json
import sys
import urllib.request
from dataclasses import dataclass

from servers import Served, free_port, spawn_listening

PUSHES = 20

SERVER = r"""
import asyncio, collections, json, sys
from http import HTTPStatus
from websockets.asyncio.server import serve

counts = {"connections": 0, "messages": 0, "pushed": 0, "open": 0, "most_open": 0}
by_path = collections.Counter()

def process_request(connection, request):
    if request.path == "/stats":
        return connection.respond(HTTPStatus.OK, json.dumps({**counts, "by_path": by_path}) + "\n")
    if request.path == "/forbidden":
        return connection.respond(HTTPStatus.FORBIDDEN, "no upgrade for you\n")
    return None

def process_response(connection, request, response):
    if request.path == "/headers":  # a proxy's or a CDN's many headers on the upgrade's answer
        for i in range(40):
            response.headers[f"X-Hop-{i}"] = "1"
    return response

async def handler(ws):
    counts["connections"] += 1
    counts["open"] += 1
    counts["most_open"] = max(counts["most_open"], counts["open"])
    try:
        await serve_one(ws)
    finally:
        counts["open"] -= 1

async def serve_one(ws):
    path = ws.request.path
    if path in ("/push", "/push1"):
        for i in range(PUSHES if path == "/push" else 1):
            await ws.send(f"tick {i}")
            counts["pushed"] += 1
            await asyncio.sleep(0.005)
        await ws.wait_closed()
        return
    if path in ("/idle", "/idle-drop"):  # a connection idle for 100 ms is closed (a proxy's idle timeout)
        while True:
            try:
                m = await asyncio.wait_for(ws.recv(), 0.1)
            except asyncio.TimeoutError:
                if path == "/idle":
                    await ws.close(1001, "idle")
                else:
                    ws.transport.close()  # no close frame: the connection's end alone
                return
            counts["messages"] += 1
            by_path[path] += 1
            await ws.send(m)
    if path == "/close":
        await ws.close(1008, "policy says no")
        return
    async for m in ws:
        counts["messages"] += 1
        by_path[path] += 1
        if path == "/json":  # another exchange's reply first, then this one's
            await ws.send(json.dumps({"id": "someone else", "n": counts["messages"]}))
            await ws.send(m)
        elif path == "/tagged":
            await ws.send("noise")
            await ws.send("echo: " + (m if isinstance(m, str) else m.decode()))
        else:
            await ws.send(m)

async def main():
    tls = None
    if len(sys.argv) > 2:  # wss: the server's chain and key, and the CAs its clients' certificates must chain to
        import ssl
        tls = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        tls.load_cert_chain(sys.argv[2], sys.argv[3])
        tls.load_verify_locations(sys.argv[4])
        tls.verify_mode = ssl.CERT_REQUIRED
    # backlog: asyncio's default of 100 dropped the SYNs of 500 clients starting at once (they came a second later)
    async with serve(handler, "127.0.0.1", int(sys.argv[1]), process_request=process_request,
                     process_response=process_response, max_queue=None, ping_interval=None, ssl=tls,
                     backlog=4096) as server:
        await server.serve_forever()

asyncio.run(main())
""".replace("PUSHES", str(PUSHES))


@dataclass
class WsServer(Served):
    secure: bool = False

    def url(self, path: str = "/echo") -> str:
        return f"{'wss' if self.secure else 'ws'}://127.0.0.1:{self.port}{path}"

    def stats(self) -> dict:
        if self.secure:
            raise NotImplementedError("a wss server's /stats needs a client certificate: count through knee")
        with urllib.request.urlopen(f"http://127.0.0.1:{self.port}/stats", timeout=5) as r:
            return json.loads(r.read())


def start_ws_server(tls: tuple[str, str, str] | None = None) -> WsServer:
    """The server on a free port of 127.0.0.1; with `tls` (its certificate chain, its key, the CAs of the client
    certificates it requires): wss://."""
    port = free_port()
    proc = spawn_listening([sys.executable, "-c", SERVER, str(port), *(tls or ())], [port])
    return WsServer(port, proc, secure=tls is not None)
