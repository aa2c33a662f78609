"""The benchmark's scenarios: which generators run, in which mode, at what concurrency."""

from __future__ import annotations

from dataclasses import dataclass

from exec_tools import ForkExecC, PySubprocess, Xargs
from floor_tool import Floor
from http_tools import Ab, H2load, Hey, Locust, Oha, Vegeta, Wrk
from knee_tool import Knee
from tool import Tool

TOOLS: dict[str, Tool] = {
    t.name: t
    for t in (
        Knee(),
        Floor(),
        Wrk(),
        Ab(),
        Oha(),
        Hey(),
        Vegeta(),
        Locust(),
        H2load(),
        ForkExecC(),
        Xargs(),
        PySubprocess(),
    )
}
# Modes whose generators talk to nginx (and whose request counts are held against nginx's own).
HTTP_MODES = ("keepalive", "close", "h2", "https", "https-close")


@dataclass(frozen=True)
class Scenario:
    name: str
    title: str
    mode: str  # keepalive | close | h2 | https | https-close | exec | exec-hold | flow | worker | distributed |
    # many-connections
    concurrency: int  # clients; HTTP/2: streams in flight in all
    tools: tuple[str, ...]  # in run order (interleaved within a repetition)
    smoke: bool  # part of `--smoke`
    streams: int = 1  # HTTP/2: concurrent streams per connection


def scenarios(concurrency: int, smoke: bool) -> list[Scenario]:
    c = min(concurrency, 10) if smoke else concurrency
    return [
        Scenario(
            "keepalive",
            f"HTTP keep-alive, {c} clients",
            "keepalive",
            c,
            ("knee", "floor", "wrk", "oha", "hey", "vegeta", "ab", "locust"),
            True,
        ),
        Scenario(
            "newconn", f"New connection per request, {c} clients", "close", c, ("knee", "floor", "ab", "wrk"), True
        ),
        # HTTP/2 with prior knowledge against h2load: a stream per connection, then 100 streams on each of 2.
        # (`--smoke`, CI's, takes one HTTP/2 and one HTTPS scenario: each generator's new path, not every size.)
        Scenario("h2-1", f"HTTP/2 (h2c), {c} connections × 1 stream", "h2", c, ("knee", "h2load"), True),
        Scenario("h2-100", "HTTP/2 (h2c), 2 connections × 100 streams", "h2", 200, ("knee", "h2load"), False, 100),
        Scenario("https", f"HTTPS keep-alive, {c} clients", "https", c, ("knee", "wrk", "ab"), False),
        Scenario(
            "httpsnew",
            f"HTTPS, new connection per request (full handshake), {c} clients",
            "https-close",
            c,
            ("knee", "ab", "wrk"),
            True,
        ),
        Scenario("c1000", "1 000 concurrent keep-alive clients", "keepalive", 1000, ("knee", "wrk", "oha"), False),
        Scenario("c10000", "10 000 concurrent keep-alive clients", "keepalive", 10000, ("knee", "wrk", "oha"), False),
        # forkexec-c runs first in each repetition: xargs (count-based) is sized from its rate.
        Scenario(
            "exec",
            "exec of /bin/true, 4 clients",
            "exec",
            4,
            ("forkexec-c", "knee", "xargs", "python-subprocess"),
            True,
        ),
        # Clients that are code: a no-op Python flow (knee plus its worker processes) against Locust's no-op task.
        Scenario("flow", f"No-op Python flow, {c} clients", "flow", c, ("knee", "locust"), True),
        # The worker protocol's own cost: a no-op worker in C; knee's own CPU per operation.
        Scenario("worker", f"No-op worker program (C), {c} clients", "worker", c, ("knee",), True),
        # Many load machines on one (Dask): orchestration overhead, and 1 against 2 pinned worker processes.
        Scenario(
            "distributed", "Dask executor: overhead, and exec on 1 vs 2 workers", "distributed", 8, ("knee",), False
        ),
        # 100 000 keep-alive connections to one nginx, from 8 local addresses (issue 23).
        Scenario("c100k", "100 000 concurrent keep-alive connections", "many-connections", 100_000, ("knee",), False),
        # Memory at scale for exec clients (issue 5): every client holds a running process at once.
        Scenario(
            "exec5000", "5 000 concurrent exec clients, each running sleep 20", "exec-hold", 5000, ("knee",), False
        ),
    ]
