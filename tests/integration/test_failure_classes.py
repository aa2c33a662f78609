"""Every failure class of a network operation, made by a real socket: a listener of the test's own (on loopback, or
inside a network namespace the test makes, whose sysctls, routes and loopback are the test's alone, so that no
traffic leaves the machine and no other test is touched), and `knee run --json` says which class each operation
met. The engine's classes (crates/engine/src/class.rs) come from the kernel's errno; here the kernel produces each:

- connect_timeout: a listener whose accept queue is full drops new SYNs; after tcp_syn_retries the connect fails
  with ETIMEDOUT;
- connect_error: no route to the address (ENETUNREACH), neither refused nor timed out;
- write_error: the server half-closes (FIN), then resets while the client is still writing its body: EPIPE;
- read_error: the request was written, then the link died: the kernel gives up on it (ETIMEDOUT on the read);
- hung: a server that reads the request and never answers; knee drops the connection at --timeout, and the
  server sees it close while knee runs on.

knee's preflight connects once before any load (and says so when that connect fails): each listener answers the
preflight's connect, and what breaks, breaks after the run's first request arrived.
"""

from __future__ import annotations

import contextlib
import ctypes
import json
import os
import shutil
import socket
import struct
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

CLONE_NEWNET = 0x40000000
OK = b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\nConnection: close\r\n\r\nok"


class Namespace:
    """A network namespace of the test's own, its loopback up; `sockets()` makes the calling thread's new sockets
    inside it, `run` runs a program inside it."""

    def __init__(self, tag: str) -> None:
        if os.geteuid() != 0:
            pytest.skip("network namespaces need root")
        assert shutil.which("ip"), "iproute2 is not installed: run `make ci-deps` (scripts/install-system-deps.sh)"
        self.name = f"{tag}{os.getpid() % 100000}"
        if subprocess.run(["ip", "netns", "add", self.name], capture_output=True, timeout=10).returncode:
            pytest.skip("this machine does not let the test make network namespaces (ip netns add failed)")
        self.prefix = ["ip", "netns", "exec", self.name]
        self.ip("link", "set", "lo", "up")

    def ip(self, *args: str) -> None:
        subprocess.run(["ip", "-n", self.name, *args], check=True, timeout=10)

    def sysctl(self, key: str, value: int) -> None:
        subprocess.run([*self.prefix, "sysctl", "-qw", f"{key}={value}"], check=True, timeout=10)

    def counter(self, name: str) -> int:
        """A TcpExt counter of the namespace's kernel (/proc/net/netstat as seen inside it)."""
        text = subprocess.run([*self.prefix, "cat", "/proc/net/netstat"], capture_output=True, text=True, timeout=10)
        head, values = [line.split() for line in text.stdout.splitlines() if line.startswith("TcpExt:")]
        return int(dict(zip(head, values, strict=True))[name])

    @contextlib.contextmanager
    def sockets(self) -> Iterator[None]:
        libc = ctypes.CDLL(None, use_errno=True)
        with open("/proc/thread-self/ns/net") as home, open(f"/run/netns/{self.name}") as there:
            assert libc.setns(there.fileno(), CLONE_NEWNET) == 0, os.strerror(ctypes.get_errno())
            try:
                yield
            finally:
                assert libc.setns(home.fileno(), CLONE_NEWNET) == 0, os.strerror(ctypes.get_errno())

    def close(self) -> None:
        subprocess.run(["ip", "netns", "del", self.name], capture_output=True, timeout=10)


@contextlib.contextmanager
def namespace(tag: str) -> Iterator[Namespace]:
    ns = Namespace(tag)
    try:
        yield ns
    finally:
        ns.close()


class Server:
    """A listener of the test's own. Each connection is read until its first bytes (the preflight's sends none):
    `on_request(conn)` then acts on each that sends a request; without it, the server reads on until the connection
    closes. `events` (in order): ("accept", i), ("request", i), ("closed", i); `closed_at_accept[i]`: the earlier
    connections the kernel had seen closed (end of stream or reset) when connection i was accepted."""

    def __init__(self, listener: socket.socket, on_request: Callable[[socket.socket], None] | None = None) -> None:
        self.listener = listener
        self.port: int = listener.getsockname()[1]
        self.url = f"http://127.0.0.1:{self.port}/"
        self.on_request = on_request
        self.events: list[tuple[str, int]] = []
        self.conns: list[socket.socket] = []
        self.closed_at_accept: dict[int, set[int]] = {}
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._acceptor = threading.Thread(target=self._accept, daemon=True)
        self._acceptor.start()

    def _note(self, kind: str, i: int) -> None:
        with self._lock:
            self.events.append((kind, i))

    def _accept(self) -> None:
        self.listener.settimeout(0.02)
        while not self._stop.is_set():
            try:
                conn, _ = self.listener.accept()
            except TimeoutError:
                continue
            i = len(self.conns)
            self.closed_at_accept[i] = {j for j, c in enumerate(self.conns) if _closed(c)}
            self.conns.append(conn)
            self._note("accept", i)
            threading.Thread(target=self._serve, args=(conn, i), daemon=True).start()

    def _serve(self, conn: socket.socket, i: int) -> None:
        try:
            first = conn.recv(4096)
            if first:
                self._note("request", i)
                if self.on_request is not None:
                    self.on_request(conn)
                    return
            while first:
                first = conn.recv(65536)
        except OSError:
            pass
        self._note("closed", i)

    def stop_accepting(self) -> None:
        self._stop.set()
        self._acceptor.join()

    def close(self) -> None:
        self.stop_accepting()
        for c in [*self.conns, self.listener]:
            c.close()


def _closed(conn: socket.socket) -> bool:
    """The kernel has seen the peer close `conn` (end of stream, or a reset): a peek that does not wait."""
    try:
        return conn.recv(1, socket.MSG_PEEK | socket.MSG_DONTWAIT) == b""
    except BlockingIOError:
        return False
    except OSError:
        return True


def listener(backlog: int = 8, rcvbuf: int | None = None) -> socket.socket:
    s = socket.socket()
    if rcvbuf is not None:
        s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, rcvbuf)
    s.bind(("127.0.0.1", 0))
    s.listen(backlog)
    return s


def knee_run(tmp_path: Path, *args: str, prefix: tuple[str, ...] = (), timeout: float = 60) -> dict[str, Any]:
    """`knee run --json ARGS` (run by `prefix`: inside a namespace); its JSON, with the count that must add up."""
    out = tmp_path / f"r{time.monotonic_ns()}.json"
    cmd = [*prefix, sys.executable, "-m", "knee", "run", "-q", "--json", str(out), *args]
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, stdin=subprocess.DEVNULL)
    assert proc.returncode == 0, proc.stderr + proc.stdout
    doc: dict[str, Any] = json.loads(out.read_text())
    assert doc["started"] == doc["succeeded"] + doc["failed"] + doc["hung"] + doc["abandoned"], doc
    assert sum(r["count"] for r in doc["reasons"]) == doc["failed"] == sum(doc["failures"].values()), doc
    return doc


def samples(doc: dict[str, Any], cls: str) -> str:
    return " | ".join(r["sample"] for r in doc["reasons"] if r["class"] == cls)


def test_connect_timeout_when_the_accept_queue_is_full(tmp_path: Path) -> None:
    # The listener's queue holds one connection (backlog 0). It accepts the preflight's connection and the first
    # request's; then it accepts no more, and the test's own connection fills its queue before the first request
    # is answered (Connection: close). The second operation's SYNs are dropped by the kernel (ListenOverflows)
    # until tcp_syn_retries (1 inside the namespace: 3 s) ends its connect with ETIMEDOUT.
    with namespace("kneesyn") as ns:
        ns.sysctl("net.ipv4.tcp_syn_retries", 1)
        with ns.sockets():
            lst, filler = listener(backlog=0), socket.socket()

        def fill_then_answer(conn: socket.socket) -> None:
            server.stop_accepting()
            filler.settimeout(2)
            filler.connect(lst.getsockname())  # into the accept queue: now full
            conn.sendall(OK)
            conn.close()

        server = Server(lst, fill_then_answer)
        try:
            dropped = ns.counter("ListenOverflows")
            doc = knee_run(tmp_path, server.url, "-c", "1", "-n", "2", "--timeout", "10s", prefix=tuple(ns.prefix))
            dropped = ns.counter("ListenOverflows") - dropped
        finally:
            server.close()
            filler.close()
    assert doc["succeeded"] == 1 and doc["failures"] == {"connect_timeout": 1}, doc
    assert "timed out" in samples(doc, "connect_timeout"), doc["reasons"]
    assert dropped >= 2, "the kernel dropped the SYN and its retry at the full queue"


def test_connect_error_when_the_address_is_gone(tmp_path: Path) -> None:
    # The first request is held unanswered while the namespace loses its loopback address: that operation hangs
    # (--timeout 1s), and the next one's connect finds no route to 127.0.0.1 (ENETUNREACH).
    with namespace("kneeroute") as ns:
        with ns.sockets():
            lst = listener()
        server = Server(lst, lambda _: ns.ip("addr", "del", "127.0.0.1/8", "dev", "lo"))
        try:
            doc = knee_run(tmp_path, server.url, "-c", "1", "-n", "2", "--timeout", "1s", prefix=tuple(ns.prefix))
        finally:
            server.close()
    assert doc["hung"] == 1 and doc["failures"] == {"connect_error": 1}, doc
    assert "unreachable" in samples(doc, "connect_error"), doc["reasons"]


def test_write_error_when_the_server_resets_while_the_body_is_sent(tmp_path: Path) -> None:
    # The server reads nothing past the request's first bytes (its receive buffer is small), half-closes (FIN: the
    # client's socket is in CLOSE_WAIT) and resets (RST) while the client is still writing its body, twice what the
    # largest send buffer holds: in CLOSE_WAIT the kernel gives the writer EPIPE, not ECONNRESET.
    def half_close_then_reset(conn: socket.socket) -> None:
        conn.shutdown(socket.SHUT_WR)
        time.sleep(0.1)
        conn.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
        conn.close()

    body = tmp_path / "body"
    largest = int(Path("/proc/sys/net/ipv4/tcp_wmem").read_text().split()[2])
    body.write_bytes(b"x" * max(8 << 20, 2 * largest))
    server = Server(listener(rcvbuf=4096), half_close_then_reset)
    try:
        doc = knee_run(tmp_path, server.url, "-m", "POST", "--body-file", str(body), "-c", "1", "-n", "2")
    finally:
        server.close()
    assert doc["failures"] == {"write_error": 2}, doc
    assert "Broken pipe" in samples(doc, "write_error"), doc["reasons"]


def test_read_error_when_the_link_dies_after_the_request(tmp_path: Path) -> None:
    # A POST whose body the server's small window cannot take at once: the client's write ends (the rest waits in
    # its send buffer) and it reads. The server takes the first bytes, then the namespace's loopback goes down:
    # nothing the client sends is acknowledged any more, and after tcp_retries2 (2 inside the namespace) the kernel
    # ends the connection with ETIMEDOUT, met by the read.
    body = tmp_path / "body"
    body.write_bytes(b"x" * (64 << 10))
    with namespace("kneelink") as ns:
        ns.sysctl("net.ipv4.tcp_retries2", 2)
        with ns.sockets():
            lst = listener(rcvbuf=4096)
        server = Server(lst, lambda _: ns.ip("link", "set", "lo", "down"))
        try:
            doc = knee_run(
                tmp_path, server.url, "-m", "POST", "--body-file", str(body), "-n", "1", "--timeout", "20s",
                prefix=tuple(ns.prefix),
            )  # fmt: skip
        finally:
            server.close()
    assert doc["failures"] == {"read_error": 1}, doc
    assert "timed out" in samples(doc, "read_error"), doc["reasons"]


def test_a_hung_connection_is_dropped_while_the_run_goes_on(tmp_path: Path) -> None:
    # The server reads each request and never answers. One client, two operations, --timeout 1s: the first hangs,
    # knee drops its connection and opens the next; the server sees the first closed before the second arrives,
    # so it was knee that closed it, not its exit.
    server = Server(listener())
    try:
        doc = knee_run(tmp_path, server.url, "-c", "1", "-n", "2", "--timeout", "1s")
        deadline = time.monotonic() + 5
        while sum(kind == "closed" for kind, _ in server.events) < 3 and time.monotonic() < deadline:
            time.sleep(0.01)
    finally:
        server.close()
    assert doc["hung"] == 2 and doc["failed"] == 0 and doc["succeeded"] == 0, doc
    first, second = [i for kind, i in server.events if kind == "request"]
    assert first in server.closed_at_accept[second], server.events
    assert ("closed", second) in server.events, server.events


def test_a_name_with_several_addresses_is_reached_on_the_one_that_listens(tmp_path: Path) -> None:
    # `localhost` is ::1 and 127.0.0.1 on most distributions (Debian's /etc/hosts), ::1 first (RFC 6724); a service
    # listening on 127.0.0.1 alone was refused at every operation (the engine dialled the first address only) and
    # the preflight said "connection refused". `ip netns exec` reads the namespace's own /etc/netns/NAME/hosts.
    with namespace("kneehosts") as ns:
        etc = Path("/etc/netns") / ns.name
        etc.mkdir(parents=True)
        try:
            (etc / "hosts").write_text("127.0.0.1 svc\n::1 svc\n")
            order = subprocess.run(
                [*ns.prefix, sys.executable, "-c", "import socket; print(socket.getaddrinfo('svc', 1)[0][4][0])"],
                capture_output=True, text=True, timeout=10, check=True,
            )  # fmt: skip
            assert order.stdout.strip() == "::1"  # the name's first address is the one nothing listens on
            with ns.sockets():
                lst = listener()

            def answer(conn: socket.socket) -> None:
                conn.sendall(OK)
                conn.close()

            server = Server(lst, answer)
            try:
                doc = knee_run(tmp_path, f"http://svc:{server.port}/", "-c", "2", "-n", "10", prefix=tuple(ns.prefix))
            finally:
                server.close()
        finally:
            shutil.rmtree(etc)
    assert doc["succeeded"] == 10 and doc["failed"] == 0, doc
    assert sum(kind == "request" for kind, _ in server.events) == 10
