"""The target holds 10 000 open connections without failing on its own account, keeps
answering meanwhile, and uses little CPU while it waits."""

from __future__ import annotations

import resource
import socket
import time
import urllib.request

import psutil

from knee.demo_target import start_target

N = 10_000


def _raise_fd_limit(need: int) -> None:
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft < need:
        assert hard == resource.RLIM_INFINITY or hard >= need, (
            f"this test needs {need} open files but the hard limit is {hard}; raise it (ulimit -Hn) to run it"
        )
        resource.setrlimit(resource.RLIMIT_NOFILE, (need if hard == resource.RLIM_INFINITY else hard, hard))


def _wait_for(t, key: str, value: int, within_s: float = 20.0) -> dict:  # type: ignore[no-untyped-def]
    deadline = time.monotonic() + within_s
    while True:
        stats = t.stats()
        if stats[key] == value or time.monotonic() > deadline:
            return stats  # type: ignore[no-any-return]
        time.sleep(0.1)


def test_ten_thousand_open_connections_and_little_cpu_while_waiting() -> None:
    _raise_fd_limit(N + 500)
    with start_target(lam=100.0, sigma=0.0, kappa=0.0, backlog=4096) as t:
        proc = psutil.Process(t.pid)
        assert proc.rlimit(psutil.RLIMIT_NOFILE)[0] >= N + 100, "the target raises its own open-files limit"
        conns: list[socket.socket] = []
        try:
            for _ in range(N):
                s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
                s.settimeout(10)
                s.connect((t.host, t.http_port))
                conns.append(s)
            # (The stats request is one more open connection.)
            stats = _wait_for(t, "connections_open", N + 1)
            assert stats["connections_open"] == N + 1, stats
            assert stats["accept_errors"] == 0 and stats["last_accept_error"] is None, stats
            # It still answers a request (on connection 10 001) and one on an old idle connection.
            with urllib.request.urlopen(t.url + "/x", timeout=5) as resp:
                assert resp.status == 200
            conns[0].sendall(b"GET /y HTTP/1.1\r\nHost: t\r\n\r\n")
            assert conns[0].recv(64).startswith(b"HTTP/1.1 200")
            # Idle waiting with 10 000 connections open costs (almost) no CPU.
            cpu0 = sum(proc.cpu_times()[:2])
            time.sleep(2.0)
            idle_cpu = sum(proc.cpu_times()[:2]) - cpu0
            assert idle_cpu < 0.1, f"the target used {idle_cpu:.3f} s of CPU in 2 s of idle waiting"
        finally:
            for s in conns:
                s.close()
        stats = _wait_for(t, "connections_open", 1)
        assert stats["connections_open"] == 1 and stats["connections_accepted"] > N + 2, stats
