"""The wait for rest reads the target machines' exporters (knee.machine.exporters_rest): a real PostgreSQL and
postgres_exporter. A service's connection pool keeps its connections open between queries, idle: at rest. Counted
with the rest, a pool grown under load (as pools do) held every later step's wait until it ran out, and each such step
was marked "not at rest" and left out of the verdict. A query still running is not at rest."""

from __future__ import annotations

import subprocess
import time
from collections.abc import Callable

from knee.machine.exporters_rest import Exporters

from postgres import Postgres, start_postgres, start_postgres_exporter
from servers import stop_process


def _until(what: Callable[[], bool], seconds: float = 20.0) -> None:
    deadline = time.monotonic() + seconds
    while not what():
        assert time.monotonic() < deadline, "not within the time given"
        time.sleep(0.2)


def _sessions(pg: Postgres, sql: str | None, n: int) -> list[subprocess.Popen[bytes]]:
    """`n` psql sessions: each running `sql`, or (None) connected and idle, waiting on its input."""
    base = ["psql", "-X", "-q", "-h", "127.0.0.1", "-p", str(pg.port), "-U", "postgres", "-d", "postgres"]
    argv = base if sql is None else [*base, "-c", sql]
    return [
        subprocess.Popen(argv, stdin=subprocess.PIPE, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        for _ in range(n)
    ]


def _count(pg: Postgres, state: str) -> int:
    return int(pg.query(f"SELECT count(*) FROM pg_stat_activity WHERE state = '{state}' AND pid <> pg_backend_pid()"))


def test_a_pools_idle_connections_are_at_rest_and_a_running_query_is_not() -> None:
    with start_postgres(max_connections=40) as pg, start_postgres_exporter(pg) as url:
        exporters = Exporters([url])
        exporters.learn()
        pool = _sessions(pg, None, 12)  # a pool of 12, grown under load and kept (above the slack of 2)
        running: list[subprocess.Popen[bytes]] = []
        try:
            _until(lambda: _count(pg, "idle") >= 12)
            assert exporters.left() == ""
            running = _sessions(pg, "SELECT pg_sleep(30)", 8)  # well above the exporter's own (1 or 2)
            _until(lambda: _count(pg, "active") >= 8)
            left = exporters.left()
            assert "database connections at work" in left, left
        finally:
            for p in [*pool, *running]:
                stop_process(p)
