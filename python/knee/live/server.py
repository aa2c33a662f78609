"""The HTTP server of the live page: `/` (the page), `/events` (its Server-Sent Events), `/metrics` (Prometheus).

The standard library's ThreadingHTTPServer in a daemon thread: each connection has a thread of its own, at a lower
CPU priority than the engine's, that only reads the hub's last view; a slow or closed browser holds its own thread
at most (its writes time out) and never the runner. Every body it sends goes through the run's `Secrets.scrub`,
as every file knee writes does.
"""

from __future__ import annotations

import errno
import socket
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import parse_qs, urlsplit

from knee.errors import UserError
from knee.live.metrics import CONTENT_TYPE, Metrics
from knee.live.page import live_page
from knee.live.render import NO_STEPS, lower_priority
from knee.live.state import Hub
from knee.live.stream import Sent, States, frame
from knee.scenario.secrets import Secrets

KEEPALIVE_S = 15.0  # a comment on a quiet stream this often, so proxies and browsers keep it open
WRITE_TIMEOUT_S = 10.0  # a browser that reads nothing for this long is dropped
PAGE_WAIT_S = 30.0  # a page asked for before the report of the last step is drawn waits at most this long


class _Server(ThreadingHTTPServer):
    daemon_threads = True
    allow_reuse_address = True

    def __init__(self, address: tuple[str, int], hub: Hub, secrets: Secrets) -> None:
        self.address_family = socket.AF_INET6 if ":" in address[0] else socket.AF_INET
        super().__init__(address, _Handler)
        self.hub = hub
        self.secrets = secrets
        self.metrics = Metrics(hub)
        self.states = States()
        self.closing = False

    def process_request_thread(self, request: Any, client_address: Any) -> None:
        lower_priority()
        super().process_request_thread(request, client_address)

    def handle_error(self, request: Any, client_address: Any) -> None:
        pass  # a browser that went away mid-write: nothing to report, nothing to do


class _Handler(BaseHTTPRequestHandler):
    server: _Server
    protocol_version = "HTTP/1.1"
    timeout = WRITE_TIMEOUT_S
    server_version = "knee"

    def log_message(self, format: str, *args: Any) -> None:
        pass

    def do_GET(self) -> None:
        url = urlsplit(self.path)
        if url.path == "/":
            self._page()
        elif url.path == "/events":
            self._events(parse_qs(url.query))
        elif url.path == "/metrics":
            self.server.hub.scrape()
            self._send(200, CONTENT_TYPE, self.server.metrics.text())
        else:
            self._send(404, "text/plain; charset=utf-8", "not found: knee serves /, /events and /metrics\n")

    def _send(self, status: int, content_type: str, text: str) -> None:
        body = self.server.secrets.scrub(text).encode()
        self.send_response(status)
        self.send_header("Content-Type", content_type)
        self.send_header("Content-Length", str(len(body)))
        self.send_header("Cache-Control", "no-store")
        self.end_headers()
        self.wfile.write(body)

    def _page(self) -> None:
        hub = self.server.hub
        view = hub.view
        hub.want(view.version)
        hub.wait_for(lambda: (hub.report() or (0, ""))[0] >= view.version or self.server.closing, PAGE_WAIT_S)
        report = hub.report() or (0, NO_STEPS)
        self._send(200, "text/html; charset=utf-8", live_page(hub.view, report))

    def _events(self, query: dict[str, list[str]]) -> None:
        hub, scrub = self.server.hub, self.server.secrets.scrub
        sent = Sent()
        try:
            sent.report = int(query.get("v", ["0"])[0])
        except ValueError:
            sent.report = 0
        self.send_response(200)
        self.send_header("Content-Type", "text/event-stream")
        self.send_header("Cache-Control", "no-store")
        self.send_header("Connection", "close")
        self.end_headers()
        self.close_connection = True
        hub.viewing(1)
        try:
            while not self.server.closing:
                view, report = hub.wait(sent.seq, sent.report, KEEPALIVE_S)
                hub.want(view.version)
                out = []
                if view.seq > sent.seq:
                    sent.seq = view.seq
                    state = self.server.states.json(view)
                    out.append(frame("state", scrub(f'{{"state":{state},"points":{sent.points_json(view)}}}')))
                if report is not None and report[0] > sent.report:
                    sent.report = report[0]
                    out.append(frame("report", self.server.states.report_json(report)))
                ended = view.ended and sent.report >= view.version
                if ended:
                    out.append(frame("end", "{}"))
                self.wfile.write(b"".join(out) or b": still here\n\n")
                self.wfile.flush()
                if ended:
                    return
        except OSError:  # the browser went away, or read nothing for WRITE_TIMEOUT_S
            return
        finally:
            hub.viewing(-1)


class LiveServer:
    """The server on `host:port`, bound when made (a port in use is a UserError, before any load), serving from
    `start()` until `close()`."""

    def __init__(self, host: str, port: int, hub: Hub, secrets: Secrets, option: str = "--serve") -> None:
        try:
            self._httpd = _Server((host, port), hub, secrets)
        except OSError as exc:
            raise UserError(_bind_error(option, host, port, exc)) from None
        self.hub = hub
        self._thread = threading.Thread(target=self._httpd.serve_forever, args=(0.25,), daemon=True)

    @property
    def port(self) -> int:
        return int(self._httpd.server_address[1])

    def start(self) -> LiveServer:
        self._thread.name = "knee-live-server"
        self._thread.start()
        return self

    def close(self) -> None:
        self._httpd.closing = True
        self.hub.wake()
        self._httpd.shutdown()
        self._httpd.server_close()
        self._thread.join(5)


def _bind_error(option: str, host: str, port: int, exc: OSError) -> str:
    where = f"{option} {host}:{port}"
    if exc.errno == errno.EADDRINUSE:
        return f"{where}: the port is in use (another process listens on it); pick another port, or 0 for any free one"
    if exc.errno == errno.EADDRNOTAVAIL:
        return f"{where}: {host} is not an address of this machine; give one of its addresses, or 127.0.0.1"
    if exc.errno == errno.EACCES:
        return f"{where}: binding a port below 1024 needs root; pick a port from 1024 up"
    if isinstance(exc, socket.gaierror):
        return f"{where}: the host {host!r} does not resolve ({exc.strerror}); give an address such as 127.0.0.1"
    return f"{where}: cannot listen there ({exc.strerror or exc}); give another [HOST:]PORT"
