"""A real PostgreSQL server for the tests: Debian's PostgreSQL, a private data directory, a free loopback port,
started by the test and stopped by PID. As root (CI) it runs as the `postgres` user, as PostgreSQL requires."""

from __future__ import annotations

import os
import pwd
import shutil
import signal
import subprocess
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from servers import free_port, stop_process, wait_for_http, wait_for_port


def _bin() -> Path:
    """The newest installed PostgreSQL's server programs (Debian: /usr/lib/postgresql/N/bin)."""
    found = sorted(Path("/usr/lib/postgresql").glob("*/bin/postgres"), key=lambda p: int(p.parts[-3]))
    if not found or shutil.which("psql") is None:
        raise RuntimeError("PostgreSQL is not installed: run `make ci-deps` (scripts/install-system-deps.sh)")
    return found[-1].parent


@dataclass
class Postgres:
    dir: Path
    port: int
    proc: subprocess.Popen[bytes]

    def psql(self, sql: str) -> list[str]:
        """The argv of one psql call that runs `sql` and exits (an exec client's operation)."""
        return ["psql", "-X", "-q", "-h", "127.0.0.1", "-p", str(self.port), "-U", "postgres", "-d", "postgres",
                "-v", "ON_ERROR_STOP=1", "-tAc", sql]  # fmt: skip

    def query(self, sql: str) -> str:
        out = subprocess.run(self.psql(sql), capture_output=True, text=True, timeout=30, check=True)
        return out.stdout.strip()


def _as_postgres() -> dict[str, object]:
    """Popen arguments that run the server as the `postgres` user when we are root."""
    if os.geteuid() != 0:
        return {}
    pw = pwd.getpwnam("postgres")
    return {"user": pw.pw_uid, "group": pw.pw_gid, "extra_groups": []}


@contextmanager
def start_postgres(max_connections: int = 20) -> Iterator[Postgres]:
    """PostgreSQL with `max_connections` (and no slots reserved for superusers, so the limit is exactly that
    for the tests' superuser), trust authentication on 127.0.0.1 only, in a private directory of its own (under
    the system's temporary directory, which the `postgres` user can reach; removed afterwards)."""
    bin_dir = _bin()
    tmp = Path(tempfile.mkdtemp(prefix="knee-pg-"))
    data = tmp / "pgdata"
    data.mkdir(parents=True)
    who = _as_postgres()
    if who:
        os.chown(tmp, int(who["user"]), int(who["group"]))  # type: ignore[call-overload]
        os.chown(data, int(who["user"]), int(who["group"]))  # type: ignore[call-overload]
    subprocess.run([str(bin_dir / "initdb"), "-D", str(data), "-U", "postgres", "--auth=trust", "-E", "UTF8"],
                   check=True, capture_output=True, timeout=120, **who)  # type: ignore[arg-type]  # fmt: skip
    port = free_port()
    proc = subprocess.Popen(
        [str(bin_dir / "postgres"), "-D", str(data), "-p", str(port), "-c", "listen_addresses=127.0.0.1",
         "-c", f"unix_socket_directories={tmp}", "-c", f"max_connections={max_connections}",
         "-c", "superuser_reserved_connections=0", "-c", "fsync=off", "-c", "log_min_messages=fatal"],
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, **who,  # type: ignore[arg-type]
    )  # fmt: skip
    try:
        wait_for_port(port, timeout_s=30)
        yield Postgres(dir=tmp, port=port, proc=proc)
    finally:
        if proc.poll() is None:
            proc.send_signal(signal.SIGINT)  # fast shutdown: ends the sessions, no checkpoint wait
            try:
                proc.wait(20)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait(5)
        shutil.rmtree(tmp, ignore_errors=True)


@contextmanager
def start_postgres_exporter(pg: Postgres) -> Iterator[str]:
    """Debian's prometheus-postgres-exporter for `pg`, on a free loopback port; yields its /metrics URL."""
    binary = shutil.which("prometheus-postgres-exporter") or shutil.which("postgres_exporter")
    if binary is None:
        raise RuntimeError("prometheus-postgres-exporter is not installed: run `make ci-deps`")
    port = free_port()
    env = {**os.environ, "DATA_SOURCE_NAME": f"postgresql://postgres@127.0.0.1:{pg.port}/postgres?sslmode=disable"}
    proc = subprocess.Popen(
        [binary, f"--web.listen-address=127.0.0.1:{port}"],
        env=env, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
    )  # fmt: skip
    url = f"http://127.0.0.1:{port}/metrics"
    try:
        wait_for_http(url)
        yield url
    finally:
        stop_process(proc)
