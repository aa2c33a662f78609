#!/usr/bin/env python3
"""Open an HTML file in headless Chromium and report what a reader would see.

    python scripts/chromium-check.py report.html [--screenshot out.png] [--chromium PATH]

Prints one JSON object: console errors and exceptions, every network request the page made
(a self-contained report makes none besides its own file), the <svg> elements with their
rendered size, and the page's text length. Drives Chromium over the DevTools protocol with a
small stdlib WebSocket client (no third-party package). Exit status 0 when the page loaded, 2 when
Chromium is missing or the page did not load.
"""

from __future__ import annotations

import argparse
import base64
import contextlib
import json
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path
from typing import Any

FLAGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--remote-debugging-port=0",
    "--remote-allow-origins=*",
]
PROBE_JS = """JSON.stringify({
  svgs: Array.from(document.querySelectorAll('svg')).map(s => {
    const r = s.getBoundingClientRect();
    return {width: r.width, height: r.height, children: s.querySelectorAll('*').length};
  }),
  text_length: document.body ? document.body.innerText.length : 0,
  title: document.title,
  scripts: document.querySelectorAll('script').length,
  height: document.documentElement.scrollHeight
})"""


class WebSocket:
    """Just enough RFC 6455 for the DevTools protocol: text frames, client masking, no extensions."""

    def __init__(self, url: str, timeout: float) -> None:
        m = re.match(r"ws://([^/:]+):(\d+)(/.*)", url)
        if not m:
            raise ValueError(f"not a ws:// URL: {url}")
        host, port, path = m.group(1), int(m.group(2)), m.group(3)
        self.sock = socket.create_connection((host, port), timeout=timeout)
        key = base64.b64encode(os.urandom(16)).decode()
        req = (
            f"GET {path} HTTP/1.1\r\nHost: {host}:{port}\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
            f"Sec-WebSocket-Key: {key}\r\nSec-WebSocket-Version: 13\r\n\r\n"
        )
        self.sock.sendall(req.encode())
        head = b""
        while b"\r\n\r\n" not in head:
            chunk = self.sock.recv(4096)
            if not chunk:
                raise ConnectionError("DevTools closed the connection during the handshake")
            head += chunk
        status = head.split(b"\r\n", 1)[0]
        if b" 101 " not in status:
            raise ConnectionError(f"DevTools refused the WebSocket: {status.decode(errors='replace')}")
        self.buf = head.split(b"\r\n\r\n", 1)[1]

    def send(self, text: str) -> None:
        data = text.encode()
        n = len(data)
        header = bytearray([0x81])
        if n < 126:
            header.append(0x80 | n)
        elif n < 1 << 16:
            header += bytes([0x80 | 126]) + n.to_bytes(2, "big")
        else:
            header += bytes([0x80 | 127]) + n.to_bytes(8, "big")
        mask = os.urandom(4)
        self.sock.sendall(bytes(header) + mask + bytes(b ^ mask[i % 4] for i, b in enumerate(data)))

    def _read(self, n: int) -> bytes:
        while len(self.buf) < n:
            chunk = self.sock.recv(1 << 16)
            if not chunk:
                raise ConnectionError("DevTools closed the connection")
            self.buf += chunk
        out, self.buf = self.buf[:n], self.buf[n:]
        return out

    def recv(self) -> str:
        message = b""
        while True:
            b0, b1 = self._read(2)
            n = b1 & 0x7F
            if n == 126:
                n = int.from_bytes(self._read(2), "big")
            elif n == 127:
                n = int.from_bytes(self._read(8), "big")
            payload = self._read(n)
            opcode = b0 & 0x0F
            if opcode == 0x8:
                raise ConnectionError("DevTools closed the WebSocket")
            if opcode in (0x9, 0xA):  # ping / pong: not sent by DevTools in practice
                continue
            message += payload
            if b0 & 0x80:
                return message.decode()

    def close(self) -> None:
        self.sock.close()


class Page:
    def __init__(self, ws: WebSocket, deadline: float) -> None:
        self.ws, self.deadline, self.next_id = ws, deadline, 0
        self.events: list[dict[str, Any]] = []

    def call(self, method: str, **params: Any) -> dict[str, Any]:
        self.next_id += 1
        my_id = self.next_id
        self.ws.send(json.dumps({"id": my_id, "method": method, "params": params}))
        while True:
            msg = self._next()
            if msg.get("id") == my_id:
                if "error" in msg:
                    raise RuntimeError(f"{method}: {msg['error']}")
                return msg.get("result", {})

    def wait_event(self, method: str) -> dict[str, Any]:
        for e in self.events:
            if e["method"] == method:
                return e
        while True:
            msg = self._next()
            if msg.get("method") == method:
                return msg

    def _next(self) -> dict[str, Any]:
        self.ws.sock.settimeout(max(0.1, self.deadline - time.monotonic()))
        if time.monotonic() > self.deadline:
            raise TimeoutError("Chromium did not answer in time")
        msg = json.loads(self.ws.recv())
        if "method" in msg:
            self.events.append(msg)
        return msg


def _start(chromium: str, profile: str) -> tuple[subprocess.Popen[str], int]:
    proc = subprocess.Popen(
        [chromium, *FLAGS, f"--user-data-dir={profile}", "about:blank"],
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,
    )
    assert proc.stderr is not None
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        line = proc.stderr.readline()
        if not line:
            break
        m = re.search(r"DevTools listening on ws://[^:]+:(\d+)/", line)
        if m:
            return proc, int(m.group(1))
    proc.kill()
    proc.wait(5)
    raise RuntimeError("Chromium did not print its DevTools address")


def _page_ws(port: int, deadline: float) -> str:
    while time.monotonic() < deadline:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/json/list", timeout=5) as r:
            targets = json.load(r)
        pages = [t for t in targets if t.get("type") == "page"]
        if pages:
            return str(pages[0]["webSocketDebuggerUrl"])
        time.sleep(0.2)
    raise TimeoutError("Chromium opened no page")


def check(
    html: Path, screenshot: Path | None, chromium: str, timeout: float = 60.0, width: int = 1100
) -> dict[str, Any]:
    profile = tempfile.mkdtemp(prefix="knee-chromium-")
    proc, port = _start(chromium, profile)
    try:
        deadline = time.monotonic() + timeout
        ws = WebSocket(_page_ws(port, deadline), timeout)
        page = Page(ws, deadline)
        for domain in ("Page", "Runtime", "Log", "Network"):
            page.call(f"{domain}.enable")
        page.call("Emulation.setDeviceMetricsOverride", width=width, height=900, deviceScaleFactor=1, mobile=False)
        page.call("Page.navigate", url=html.resolve().as_uri())
        page.wait_event("Page.loadEventFired")
        probe = json.loads(page.call("Runtime.evaluate", expression=PROBE_JS, returnByValue=True)["result"]["value"])
        if screenshot is not None:
            shot = page.call("Page.captureScreenshot", format="png", captureBeyondViewport=True)
            screenshot.parent.mkdir(parents=True, exist_ok=True)
            screenshot.write_bytes(base64.b64decode(shot["data"]))
        errors = []
        requests = []
        for e in page.events:
            p = e.get("params", {})
            if e["method"] == "Runtime.consoleAPICalled" and p.get("type") in ("error", "assert", "warning"):
                errors.append(" ".join(str(a.get("value", a.get("description", ""))) for a in p.get("args", [])))
            elif e["method"] == "Runtime.exceptionThrown":
                d = p.get("exceptionDetails", {})
                errors.append(f"{d.get('text', 'exception')} {d.get('exception', {}).get('description', '')}".strip())
            elif e["method"] == "Log.entryAdded" and p.get("entry", {}).get("level") in ("error", "warning"):
                errors.append(p["entry"].get("text", ""))
            elif e["method"] == "Network.requestWillBeSent":
                requests.append(p.get("request", {}).get("url", ""))
        with contextlib.suppress(ConnectionError, OSError, TimeoutError):
            page.call("Browser.close")
        ws.close()
        return {"console_errors": errors, "requests": requests, **probe}
    finally:
        _stop(proc)
        shutil.rmtree(profile, ignore_errors=True)


def _stop(proc: subprocess.Popen[str]) -> None:
    """End Chromium and its helpers: they share the process group we started it in."""
    with contextlib.suppress(subprocess.TimeoutExpired):
        proc.wait(5)
    for sig in (signal.SIGTERM, signal.SIGKILL):
        try:
            os.killpg(proc.pid, sig)
        except ProcessLookupError:
            break
        try:
            proc.wait(5)
        except subprocess.TimeoutExpired:
            continue
    if proc.stderr is not None:
        proc.stderr.close()


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("html", type=Path)
    ap.add_argument("--screenshot", type=Path)
    ap.add_argument("--chromium", default=shutil.which("chromium") or shutil.which("chromium-browser") or "")
    ap.add_argument("--timeout", type=float, default=60.0)
    args = ap.parse_args()
    if not args.chromium:
        print("chromium-check: chromium is not installed; run `make ci-deps`", file=sys.stderr)
        return 2
    if not args.html.is_file():
        print(f"chromium-check: {args.html} is not a file", file=sys.stderr)
        return 2
    print(json.dumps(check(args.html, args.screenshot, args.chromium, args.timeout), indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
