"""Where the network groups connect, as this machine sees it.

- `reachable`: before any load, the target answers one connect (or the command exists), as an `Endpoint`;
- `host_is_local` / `Endpoint.local`: the address is this machine's (loopback, or one of its interfaces');
- `target_hosts`: what of that was true when a run started, for run.json (`RunRecord.targets`), so that the
  findings read it from the record and `knee report` elsewhere does no lookup.
"""

from __future__ import annotations

import os
import shutil
import socket
import time
from dataclasses import dataclass

import psutil

from knee.errors import UserError
from knee.model import TargetHost
from knee.scenario import CommandGroup, Group, HttpGroup, NetworkGroup, PythonGroup, Scenario
from knee.scenario.address import host_port, loopback
from knee.scenario.urls import host_and_port


@dataclass(frozen=True)
class Endpoint:
    """Where a network group connects, as the reachability check found it."""

    host: str
    port: int
    ip: str
    connect_s: float | None = None  # how long one connect took

    @property
    def label(self) -> str:
        return host_and_port(self.host, self.port)

    @property
    def loopback(self) -> bool:
        return loopback(self.ip)

    @property
    def local(self) -> bool:
        """The service runs on this machine: a loopback address, or one of this machine's own."""
        return self.loopback or self.ip.split("%")[0] in _local_addresses()


def host_is_local(host: str) -> bool:
    """`host` (a name or an address) resolves to this machine: loopback, or one of its own addresses."""
    try:
        infos = socket.getaddrinfo(host, None)
    except OSError:
        return False
    return any(Endpoint(host, 0, str(info[4][0])).local for info in infos)


def _local_addresses() -> set[str]:
    try:
        nics = psutil.net_if_addrs()
    except (OSError, psutil.Error):  # pragma: no cover - no /sys
        return set()
    inet = (socket.AF_INET, socket.AF_INET6)
    return {a.address.split("%")[0] for addrs in nics.values() for a in addrs if a.family in inet}


def reachable(g: Group, connect_timeout_s: float = 3.0) -> Endpoint | None:
    """Catch what would make every operation fail before any load starts: one sentence each. A network group's
    endpoint (with one connect's time) comes back."""
    if isinstance(g, PythonGroup):
        return None  # the worker's start message says whether the flow can be imported
    if isinstance(g, CommandGroup):
        prog = g.argv[0]
        if "${" in prog:
            return None
        if os.sep in prog and os.path.isdir(prog):
            raise UserError(f"{prog!r} is a directory, not a program: give the program to run there")
        found = shutil.which(prog) if os.sep not in prog else (prog if os.access(prog, os.X_OK) else None)
        if found is None:
            raise UserError(f"command not found or not executable: {prog!r} (check the name and your PATH)")
        cwd = getattr(g, "cwd", None)
        if cwd and "${" not in cwd and not os.path.isdir(cwd):
            raise UserError(
                f"cwd {cwd!r} is not a directory (--cwd): the command would run nowhere; give one that exists"
            )
        return None
    if isinstance(g, HttpGroup) and g.body_file is not None and not os.access(g.body_file, os.R_OK):
        raise UserError(f"body_file {g.body_file!r} cannot be read (does it exist?)")
    where = host_port(g)
    if where is None:
        return None
    host, port = where
    try:
        infos = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)
    except socket.gaierror as exc:
        raise UserError(f"cannot resolve host {host!r}: {exc.strerror} (check the name)") from None
    # a group that allows its connections longer is waited for as long (a slow network), never less
    if isinstance(g, NetworkGroup) and g.connect_timeout is not None:
        connect_timeout_s = max(connect_timeout_s, g.connect_timeout)
    # each address in turn, as the engine does (`localhost` is ::1 first, and a service on 127.0.0.1 alone is
    # reached on the second): the first that takes the connection is the one the run uses
    first: UserError | None = None
    for family, socktype, proto, _, addr in infos:
        with socket.socket(family, socktype, proto) as s:
            s.settimeout(connect_timeout_s)
            t0 = time.perf_counter()
            try:
                s.connect(addr)
            except OSError as exc:
                first = first or _unreachable(host, port, exc, connect_timeout_s)
                continue
            return Endpoint(host, port, str(addr[0]), time.perf_counter() - t0)
    assert first is not None
    raise first


def _unreachable(host: str, port: int, exc: OSError, timeout_s: float) -> UserError:
    if isinstance(exc, ConnectionRefusedError):
        return UserError(f"connection refused by {host}:{port}: is the service running on that port?")
    if isinstance(exc, TimeoutError):
        return UserError(f"no answer from {host}:{port} within {timeout_s:g} s: is the host reachable?")
    return UserError(f"cannot connect to {host}:{port}: {exc.strerror or exc}")


def target_hosts(scenario: Scenario) -> dict[str, TargetHost]:
    """The network groups' hosts and ports, and whether each resolves to this machine now: recorded when a run
    starts. `scenario` as recorded (secrets as ${placeholders}): a host or URL made of placeholders is left out."""
    out: dict[str, TargetHost] = {}
    for name, g in scenario.groups.items():
        try:
            where = host_port(g)
        except (UserError, ValueError):
            continue
        if where is not None and "${" not in where[0]:
            out[name] = TargetHost(host=where[0], port=where[1], local=host_is_local(where[0]))
    return out
