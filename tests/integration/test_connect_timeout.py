"""`--connect-timeout` / `connect_timeout`: a connection that does not open in time (the TCP connect, then the TLS
handshake, together) fails with its own reason instead of hanging until the operation's timeout. Against real
sockets on loopback: a listener whose accept queue is full (the kernel drops the SYNs), and a server that accepts
and then never speaks (the TLS handshake stalls); nginx shows the limit costs a healthy run nothing."""

from __future__ import annotations

import json
import socket
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

import knee
from knee.errors import UserError

from conftest import knee_cli
from pki import Pki
from servers import TlsNginx


@pytest.fixture
def full_listener() -> Iterator[int]:
    """A port whose accept queue is full: backlog 1 and two connections queued, never accepted (with backlog 0 the
    kernel's SYN queue counts as full too, and the queued ones would get through only by syncookies)."""
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(1)
    queued = [socket.create_connection(listener.getsockname(), timeout=2) for _ in range(2)]
    yield listener.getsockname()[1]
    for s in queued:
        s.close()
    listener.close()


@pytest.fixture
def silent_server() -> Iterator[int]:
    """A port that accepts connections and then neither reads nor writes, until the test ends."""
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(64)
    listener.settimeout(0.1)
    held: list[socket.socket] = []
    done = threading.Event()

    def serve() -> None:
        while not done.is_set():
            try:
                held.append(listener.accept()[0])
            except TimeoutError:
                continue

    t = threading.Thread(target=serve, daemon=True)
    t.start()
    yield listener.getsockname()[1]
    done.set()
    t.join()
    for s in held:
        s.close()
    listener.close()


def test_a_stalled_tls_handshake_fails_as_handshake_timeout(silent_server: int, tmp_path: Path) -> None:
    js = tmp_path / "r.json"
    t = time.monotonic()
    proc = knee_cli(
        "run", f"https://127.0.0.1:{silent_server}/", "-k", "-c", "2", "-n", "6", "--connect-timeout", "0.2s",
        "--timeout", "20s", "--json", str(js),
    )  # fmt: skip
    took = time.monotonic() - t
    doc = json.loads(js.read_text())
    assert (doc["started"], doc["failed"], doc["hung"]) == (6, 6, 0), doc["reasons"]
    assert took < 15, f"the limit, not the operation's timeout, ended them ({took:.1f} s)"
    (reason,) = doc["reasons"]
    assert reason["class"] == "tls" and reason["count"] == 6
    assert reason["sample"] == (
        f"TLS handshake with 127.0.0.1:{silent_server}: handshake timeout (the connection not open within 200 ms, "
        "connect_timeout)"
    )
    assert "6 × [tls] TLS handshake with" in proc.stdout and "handshake timeout" in proc.stdout
    # Without the limit the same operations hang until their timeout, as before.
    r = knee.run(f"https://127.0.0.1:{silent_server}/", insecure=True, clients=2, n=2, timeout="0.3s")
    assert (r.stats.failed, r.stats.hung) == (0, 2)


def test_a_connect_that_gets_no_answer_fails_as_connect_timeout(full_listener: int) -> None:
    for target in (f"tcp://127.0.0.1:{full_listener}", f"http://127.0.0.1:{full_listener}/"):
        # check=False: knee's own look before the load would refuse a target that does not answer
        r = knee.run(target, clients=1, n=3, connect_timeout="150ms", timeout="5s", check=False)
        s = r.stats
        assert (s.started, s.failed, s.hung) == (3, 3, 0), s.reasons
        (reason,) = s.reasons
        assert (reason.class_, reason.count) == ("connect_timeout", 3)
        assert reason.sample == f"connect to 127.0.0.1:{full_listener}: no connection within 150 ms (connect_timeout)"


def test_a_healthy_service_under_the_limit_and_the_limits_errors(tls_nginx: TlsNginx, pki: Pki) -> None:
    """Under the limit every request succeeds and nginx saw each: the limit is only a timer."""
    tls_nginx.clear()
    r = knee.run(
        tls_nginx.url("tls"), clients=2, n=40, new_connection=True, connect_timeout="2s", cert=pki.path("proxy.pem"),
        cacert=pki.path("root.pem"),
    )  # fmt: skip
    assert (r.stats.started, r.stats.succeeded, r.stats.tls_ms.count) == (40, 40, 40), r.stats.reasons
    assert r.spec.groups[0].client.connect_timeout_ms == 2000  # type: ignore[union-attr]
    assert len(tls_nginx.lines("tls")) == 40

    bad = {
        "40s": "--connect-timeout: 40s is not shorter than timeout (30s, --timeout on the command line): an operation "
        "would be hung before it; make it shorter, raise timeout, or leave it out",
        "0": "--connect-timeout must be more than 0 (or left out: only timeout applies) (got '0')",
    }
    for value, words in bad.items():
        with pytest.raises(UserError) as err:
            knee.run("http://127.0.0.1:1/", connect_timeout=value, n=1)
        assert str(err.value) == words
        proc = knee_cli("run", "http://127.0.0.1:1/", "--connect-timeout", value, "-n", "1")
        assert (proc.returncode, proc.stderr.strip()) == (2, f"knee: error: {words}")
    with pytest.raises(UserError, match="--connect-timeout applies to http"):
        knee.run("/bin/true", connect_timeout="1s", n=1)
