"""The preflight of a scenario: before any load (every run and sweep), every target reachable (every command
found), then the machine against the scenario's largest step; `knee doctor` also runs each exec command once.

- `preflight_scenario`: a run's: raises UserError at the first error, raises the open-file limit, returns the
  warnings;
- `check_scenario(..., probe=True)` / `check_machine`: `knee doctor`'s, which collects every check instead of
  stopping at the first error.
"""

from __future__ import annotations

import math

from knee.errors import UserError
from knee.machine.cpu import cores_available
from knee.machine.network import Endpoint, reachable
from knee.preflight.probes import probe_check, run_once
from knee.preflight.rules import Check, Connections, Load, Preflight, preflight
from knee.scenario import (
    CommandGroup,
    ExecGroup,
    GrpcGroup,
    HttpGroup,
    NetworkGroup,
    ProcessGroup,
    Scenario,
    TcpGroup,
    WebsocketGroup,
    addresses,
)

DOCTOR_CLIENTS = 1000  # `knee doctor` without a target: a step of this many clients


def preflight_scenario(scenario: Scenario, connect_timeout_s: float = 3.0, share: float = 1.0) -> list[str]:
    """Before any load: every target reachable (every command found), the machine's limits fit the largest
    step. Raises UserError (one sentence) for what would make every operation fail; returns warnings.
    `share`: the part of the clients this process runs (a Dask worker's; its machine's connections count whole)."""
    return check_scenario(scenario, connect_timeout_s, share=share).warnings


def check_scenario(
    scenario: Scenario,
    connect_timeout_s: float = 3.0,
    *,
    fix: bool = True,
    strict: bool = True,
    probe: bool = False,
    share: float = 1.0,
) -> Preflight:
    """The preflight of a scenario's largest step. A run: `fix` (raise the open-file limit) and `strict` (raise
    the first error). `knee doctor`: neither, and `probe`: run each exec command once, scrape each `[monitor]
    prometheus` endpoint once."""
    early: list[Check] = []
    endpoints: dict[str, Endpoint] = {}
    found: set[str] = set()
    for name, g in scenario.groups.items():
        try:
            ep = reachable(g, connect_timeout_s)
        except UserError as exc:
            if strict:
                raise
            early.append(Check("command" if isinstance(g, CommandGroup) else "target", str(exc), True))
            continue
        found.add(name)
        if ep is not None:
            endpoints[name] = ep
    rss: int | None = None
    for name, g in scenario.groups.items() if probe else ():
        if not isinstance(g, ExecGroup) or name not in found:
            continue
        result = run_once(g)
        if result is None:
            continue
        if result.rss:
            rss = max(rss or 0, result.rss)
        said = probe_check(g, result)
        if said is not None:
            if said.error and strict:
                raise UserError(said.text)
            early.append(said)
    if probe and scenario.monitor.prometheus:  # the target's machines' exporters answer with Prometheus text
        from knee.machine.remote import RemoteMonitor

        early += [Check("monitor", w) for w in RemoteMonitor(scenario.monitor.prometheus, []).probe()]
    load = load_of(scenario, endpoints, rss)
    if share < 1.0:  # this process's clients (its descriptors, its memory); the machine's ports stay whole
        load.clients = {kind: math.ceil(n * share) for kind, n in load.clients.items()}
    out = preflight(load, fix=fix, strict=strict)
    out.findings[:0] = early
    return out


def check_machine(clients: int = DOCTOR_CLIENTS) -> Preflight:
    """`knee doctor` without a target: a step of `clients` HTTP clients opening a new connection per request to
    a service on this machine, latency unknown."""
    ep = Endpoint("127.0.0.1", 80, "127.0.0.1")
    load = Load(
        {"http": clients},
        connections=[Connections("", ep, clients, new_per_op=True)],
        assumed=f"{clients} HTTP clients, a new connection per request, to a service on this machine ({ep.label})",
    )
    return preflight(load, fix=False, strict=False)


def load_of(scenario: Scenario, endpoints: dict[str, Endpoint] | None = None, exec_rss: int | None = None) -> Load:
    """The largest step of `scenario` as a Load (`endpoints`: where its network groups connect, by group)."""
    top = max(scenario.levels())
    threads = scenario.sweep.threads or cores_available()
    load = Load({}, exec_rss=exec_rss)
    for name, g in scenario.groups.items():
        n = g.client_count(top)
        load.clients[g.kind] = load.clients.get(g.kind, 0) + n
        if isinstance(g, ProcessGroup):
            load.processes[g.kind] = load.processes.get(g.kind, 0) + (g.processes or threads)
        conns = n
        if (isinstance(g, HttpGroup) and g.http2 and not g.new_connection) or isinstance(g, GrpcGroup):
            # HTTP/2: the clients are streams of ⌈n / streams⌉ connections, or of `connections`
            conns = min(n, g.connections) if g.connections is not None else -(-n // g.streams)
            load.streams += n - conns  # a descriptor a connection, not a client
        ep = (endpoints or {}).get(name)
        if ep is not None and isinstance(g, NetworkGroup):
            load.connections.append(
                Connections(
                    name,
                    ep,
                    conns,
                    new_per_op=isinstance(g, TcpGroup)
                    or (isinstance(g, HttpGroup) and g.new_connection)
                    or (isinstance(g, WebsocketGroup) and g.mode != "echo"),  # a session's or a listen's own
                    rate=float(top) if g.rate == "level" else (g.profile.peak_hz if g.profile is not None else None),
                    think_s=g.think.mean,
                    http=isinstance(g, HttpGroup),
                    sources=max(1, len(addresses.of_group(g.source_addr))),
                )
            )
    return load
