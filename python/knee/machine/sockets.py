"""Every TCP socket of this network namespace, by one netlink sock_diag dump per address family (as `ss`
does): the census by state and ephemeral ports held (`HostSampler`), and the sockets a monitored process
owns (`TargetMonitor`)."""

from __future__ import annotations

import socket
import struct
from collections.abc import Iterator
from typing import NamedTuple

from knee import _engine

# the kernel's TCP state codes (include/net/tcp_states.h), as sock_diag reports them
_TCP_STATE_NAMES = {
    1: "ESTABLISHED",
    2: "SYN_SENT",
    3: "SYN_RECV",
    4: "FIN_WAIT1",
    5: "FIN_WAIT2",
    6: "TIME_WAIT",
    7: "CLOSE",
    8: "CLOSE_WAIT",
    9: "LAST_ACK",
    10: "LISTEN",
    11: "CLOSING",
}


_SOCK_DIAG_BY_FAMILY = 20
_NLM_F_DUMP_REQUEST = 0x1 | 0x300
_NLMSG_ERROR, _NLMSG_DONE = 2, 3
_NETLINK_SOCK_DIAG = 4  # NETLINK_INET_DIAG
_ALL_STATES = 0xFFF
_TIME_WAIT = 6
_NOT_TIME_WAIT = _ALL_STATES & ~(1 << _TIME_WAIT)
_LISTEN = 10
_DIAG_MSG = struct.Struct("=BBBBHH16s16sIQIIIII")  # inet_diag_msg: its sockid, then expires … inode


class _Sock(NamedTuple):
    state: int
    port: int  # local
    rq: int
    wq: int
    inode: int
    peer: tuple[bytes, bytes, int]  # (local address, remote address, remote port)


def _diag(states: int) -> Iterator[_Sock]:
    """Every TCP socket of this network namespace in `states` (a bit mask of state codes), by one netlink sock_diag
    dump per address family, as `ss` does (reading /proc/net/tcp walks the whole hash table for every page it
    returns)."""
    for family in (socket.AF_INET, socket.AF_INET6):
        req = struct.pack("=BBBBI48x", family, socket.IPPROTO_TCP, 0, 0, states)
        head = struct.pack("=IHHII", 16 + len(req), _SOCK_DIAG_BY_FAMILY, _NLM_F_DUMP_REQUEST, 1, 0)
        try:
            with socket.socket(socket.AF_NETLINK, socket.SOCK_RAW, _NETLINK_SOCK_DIAG) as nl:
                nl.sendall(head + req)
                done = False
                while not done:
                    data = nl.recv(1 << 16)
                    if not data:
                        break
                    at = 0
                    while at + 16 <= len(data):
                        length, kind = struct.unpack_from("=IH", data, at)
                        if kind in (_NLMSG_DONE, _NLMSG_ERROR) or length < 16:
                            done = True
                            break
                        if length >= 16 + _DIAG_MSG.size:
                            f = _DIAG_MSG.unpack_from(data, at + 16)
                            yield _Sock(f[1], socket.ntohs(f[4]), f[11], f[12], f[14], (f[6], f[7], f[5]))
                        at += (length + 3) & ~3
        except OSError:
            continue


def tcp_sockets() -> dict[int, tuple[str, int, int, int]]:
    """Every TCP socket of this network namespace but those in TIME_WAIT (they belong to no process):
    inode -> (state, local port, receive queue, send queue). For a listening socket the receive queue is
    its accept queue and the send queue that queue's limit."""
    return {s.inode: (_TCP_STATE_NAMES.get(s.state, str(s.state)), s.port, s.rq, s.wq) for s in _diag(_NOT_TIME_WAIT)}


class Census(NamedTuple):
    """One census of this namespace's TCP sockets (`tcp_census`)."""

    states: dict[str, int]  # sockets by state, TIME_WAIT left out (/proc/net/sockstat counts those for nothing)
    held: int  # the most local ports of the ephemeral range held toward one destination (TIME_WAIT included)
    waiting: dict[int, int]  # listening port -> connections waiting in its accept queue (only ports with some)


def tcp_census(ports: tuple[int, int]) -> Census:
    """This namespace's TCP sockets by state but TIME_WAIT; the most local ports of the ephemeral range `ports`
    (lo, hi) held toward one destination by sockets that are not listening (TIME_WAIT included): what a client
    machine runs out of, since connect() needs a local port unused toward that (local address, remote address and
    port) only, so sockets toward other destinations (another test's server, another service) take none of it; and
    the connections waiting to be accepted on each listening port (a server that stopped accepting). The sockets in
    TIME_WAIT are asked for with a filter on their local port, so the kernel leaves out a server's (on its own
    port), however many tens of thousands a run of new connections left: only a client's count here. The engine
    (knee_engine::sockdiag) dumps and counts them: 5.7 ms of the thread's CPU with 14 000 of a client's sockets in
    TIME_WAIT, where this module's parse of each took 19 (the kernel's walk of its tables, some 3 ms, in both)."""
    states, held, waiting = _engine.tcp_census(*ports)
    return Census({_TCP_STATE_NAMES.get(k, str(k)): n for k, n in states.items()}, held, waiting)


def accept_queues() -> dict[int, int]:
    """The connections waiting to be accepted on each listening port of this namespace (only ports with some): a
    dump of the listening sockets alone, cheap however many other sockets there are."""
    waiting: dict[int, int] = {}
    for s in _diag(1 << _LISTEN):
        if s.rq:
            waiting[s.port] = waiting.get(s.port, 0) + s.rq
    return waiting


# A connection knee made to a port still going (a previous step's, closing or not yet open), seen from its side …
_CLIENT_PENDING = {2, 4, 5, 9, 11}  # SYN_SENT, FIN_WAIT1, FIN_WAIT2, LAST_ACK, CLOSING
# … and one the service on this machine still holds on its port: a handshake half done, or a client gone while the
# service has not closed it yet (it is still serving it, or it waits in the accept queue)
_SERVER_PENDING = {3, 8, 9}  # SYN_RECV, CLOSE_WAIT, LAST_ACK


def packed_addresses(host: str, port: int) -> tuple[bytes, ...]:
    """`host`'s addresses as the kernel's socket census writes a peer (4 bytes, or 16); none when it does not
    resolve (then every connection to the port counts)."""
    try:
        infos = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)
    except (OSError, UnicodeError):
        return ()
    return tuple({socket.inet_pton(family, sa[0].split("%")[0]) for family, _, _, _, sa in infos})


class Pending(NamedTuple):
    """What a step left behind at a service's port (`pending`)."""

    connections: int  # knee's connections to the port still connecting or closing
    held: int  # connections the service (on this machine) still holds after their client went, or half-opened
    queued: int  # connections waiting in the service's accept queue (on this machine)

    @property
    def clear(self) -> bool:
        return not (self.connections or self.held or self.queued)


def pending(port: int, local: bool, addresses: tuple[bytes, ...] = ()) -> Pending:
    """The connections to `port` of this namespace that are not at rest: those still connecting or closing from
    the client's side (to one of the service's `addresses`, packed, when known: another program's connections to
    another host's port 443 are none of knee's), and, when the service runs on this machine (`local`), the ones it
    still holds after their client went (CLOSE_WAIT: it has not finished them) and the accept queue of its listening
    socket. TIME_WAIT is rest: the connection is over on both sides."""
    connections = held = queued = 0
    for s in _diag(_NOT_TIME_WAIT):
        to_it = not addresses or any(s.peer[1].startswith(a) for a in addresses)
        if s.peer[2] == port and s.state in _CLIENT_PENDING and to_it:
            connections += 1
        elif local and s.port == port:
            if s.state == _LISTEN:
                queued += s.rq
            elif s.state in _SERVER_PENDING:
                held += 1
    return Pending(connections, held, queued)
