"""The socket census (knee.machine.sockets.tcp_census) against real sockets on 127.0.0.1: a client's sockets in
TIME_WAIT count toward the ports held, and TIME_WAIT is no state of the census's (sockstat counts it). The engine
dumps them (knee_engine::sockdiag, whose test says a server's, on its own port, are never sent to it)."""

from __future__ import annotations

import socket
import time
from collections.abc import Iterator

import pytest

from knee.machine import sockets
from knee.machine.kernel import ephemeral_port_range


@pytest.fixture
def listener() -> Iterator[socket.socket]:
    """A listening socket on a port outside the ephemeral range, as a service's is."""
    lo, hi = ephemeral_port_range()
    candidates = [*range(lo - 1, max(lo - 2000, 1024), -1), *range(hi + 1, min(hi + 2000, 65536))]
    assert candidates, f"the ephemeral range {lo}-{hi} leaves no port outside it for a service"
    for port in candidates:
        try:
            s = socket.create_server(("127.0.0.1", port), backlog=128)
        except OSError:
            continue
        try:
            yield s
        finally:
            s.close()
        return
    raise AssertionError("no free port outside the ephemeral range")


def test_a_servers_time_wait_is_left_out_and_a_clients_is_held(listener: socket.socket) -> None:
    port = listener.getsockname()[1]
    clients: list[int] = []
    for server_first in [True] * 20 + [False] * 20:
        c = socket.create_connection(("127.0.0.1", port))
        a, _ = listener.accept()
        if not server_first:
            clients.append(c.getsockname()[1])
        first, second = (a, c) if server_first else (c, a)
        first.close()
        second.recv(1)  # the FIN: the side that closed first keeps the TIME_WAIT
        second.close()
    time.sleep(0.2)
    lo, hi = ephemeral_port_range()
    everything = [s for s in sockets._diag(1 << sockets._TIME_WAIT)]
    assert sum(s.port == port for s in everything) >= 20  # the server's, on its port
    assert set(clients) <= {s.port for s in everything}  # the clients', on the ephemeral range
    # the census (the engine's: knee_engine::sockdiag, whose own test says the kernel never sends it the server's)
    census = sockets.tcp_census((lo, hi))
    assert census.held >= 20 and "TIME_WAIT" not in census.states
    assert census.states.get("LISTEN", 0) >= 1 and census.waiting.get(port, 0) == 0
