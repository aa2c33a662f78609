"""100 000 concurrent keep-alive connections from knee to one nginx on this machine (bench/run.py scenario "c100k").

nginx runs as many worker processes as its open-file limit needs (each holds its connections' descriptors),
pinned to core 0; knee runs on core 1, with `--source-addr 127.0.0.2-127.0.0.9` (one local address holds at
most ~28 000 connections to one service address). Each client sends a request, thinks 5 s, and again, so
every connection stays open while the load stays modest. When the hard open-file limit (`ulimit -Hn`) is
below what one process would need, knee spreads the clients over local worker processes (`--cluster
local:N`, each under the limit), as it does over machines.

A sampler reads nginx's own count of active connections (stub_status) every 0.2 s: the peak, less the
sampler's own connection, is what the server saw open at once.
"""

from __future__ import annotations

import json
import math
import resource
import shutil
import tempfile
import time
from pathlib import Path

from measure import run_measured
from nginx_server import Nginx
from tool import find_binary

from knee.machine.kernel import Ticker

CONNECTIONS = 100_000
SOURCES = "127.0.0.2-127.0.0.9"
THINK = "5s"
SERVER_CPU, GENERATOR_CPU = 0, 1
PER_PROCESS_SLACK = 1000  # descriptors a knee or nginx process needs beside its connections


def plan(connections: int = CONNECTIONS) -> tuple[int, int, int]:
    """(nginx workers, connections per nginx worker, knee processes; 1 = no cluster) under the hard limit."""
    hard = resource.getrlimit(resource.RLIMIT_NOFILE)[1]
    per = (hard if hard != resource.RLIM_INFINITY else 1 << 20) - PER_PROCESS_SLACK
    knee_processes = math.ceil(connections / per)
    # one worker more than the connections need: reuseport spreads them by a hash, nearly evenly
    workers = math.ceil(connections / per) + 1
    return workers, min(per, connections), knee_processes


class _Peak:
    """nginx's active connections, sampled every 0.2 s while the block runs (knee's Ticker: at its start and end
    too): the highest count."""

    def __init__(self, server: Nginx) -> None:
        self.server, self.peak, self.polls = server, 0, 0
        self._ticker = Ticker(self._sample, every_s=0.2)

    def _sample(self) -> None:
        try:
            self.peak = max(self.peak, self.server.active() - 1)  # less the sampler's own connection
        except OSError:
            return
        self.polls += 1  # each a request nginx counts too

    def __enter__(self) -> _Peak:
        self._ticker.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._ticker.finish()


def one(duration_s: int, rep: int) -> dict[str, object]:
    knee = find_binary("knee") or "knee"
    workers, per_worker, processes = plan()
    duration = max(duration_s, 20)  # the connects of 100 000 clients take seconds; each then stays open
    row: dict[str, object] = {"scenario": "c100k", "tool": "knee", "rep": rep, "nginx_workers": workers}
    workdir = Path(tempfile.mkdtemp(prefix="knee-bench-c100k-"))
    out = workdir / "knee.json"
    argv = [knee, "run", "-q", "-c", str(CONNECTIONS), "-d", f"{duration}s", "--think", THINK, "--timeout", "60s",
            "--source-addr", SOURCES, "--json", str(out)]  # fmt: skip
    if processes > 1:
        argv += ["--cluster", f"local:{processes}"]
    row["knee_processes"] = processes
    try:
        with Nginx(cpu=SERVER_CPU, connections=per_worker, workers=workers) as server:
            before = server.requests()
            with _Peak(server) as peak:
                measured = run_measured([*argv[:2], server.url, *argv[2:]], GENERATOR_CPU,
                                        timeout_s=duration * 4 + 120, cwd=workdir, sum_rss=True)  # fmt: skip
            time.sleep(0.5)
            # what nginx read from knee: less this count's own request and the sampler's
            row["server_requests"] = server.requests() - before - 1 - peak.polls
            log = (server.dir / "stderr.log").read_text(errors="replace")
            row["nginx_not_enough"] = log.count("worker_connections are not enough")
        row |= {"server_active_peak": peak.peak, "cpu_s": measured.cpu_s, "wall_s": measured.wall_s}
        row |= {"maxrss_mb": measured.maxrss_mb, "tree_rss_mb": measured.tree_rss_mb}
        if measured.timed_out or not out.is_file():
            row["error"] = f"no result (exit {measured.returncode}): {(measured.stderr or measured.stdout)[-300:]}"
            return row
        data = json.loads(out.read_text())
        succeeded, failed, hung = int(data["succeeded"]), int(data["failed"]), int(data.get("hung", 0))
        row |= {"requests": succeeded + failed + hung, "errors": failed + hung, "rps": succeeded / duration}
        row["started"] = int(data["started"])
        row["failures"] = data.get("failures") or {}
        row["reasons"] = [f"{r['count']} × {r['sample']}" for r in (data.get("reasons") or [])[:3]]
    finally:
        shutil.rmtree(workdir, ignore_errors=True)
    return row


def measure(duration_s: int, reps: int) -> list[dict[str, object]]:
    rows = []
    for rep in range(reps):
        row = one(duration_s, rep)
        print(f"  c100k {row}", flush=True)
        rows.append(row)
        time.sleep(2)  # let 200 000 sockets close
    return rows
