#!/usr/bin/env python3
"""Does knee's CPU per request grow with the sockets in TIME_WAIT on the machine? (issue 41: its per-second
samplers dump every TCP socket of the namespace, and a new-connection run leaves tens of thousands behind.)

Each repetition, on the bench's nginx (core 0), the generators on core 1: with the machine's TIME_WAIT sockets
drained (below 1 000), the least keep-alive client (bench/bounds/keepalive_epoll.c) and `knee run URL -c 50 -d D`;
then connections this side closes first until at least --sockets are in TIME_WAIT, and the same two runs beside
them. Printed: requests per CPU-s of each run (knee's whole process, its start-up included), the TIME_WAIT count,
and each client's paired ratio (with / without): the floor's is what the kernel's TCP work alone does with them.
Not part of `make bench` (each repetition waits a minute for the kernel to let its TIME_WAIT sockets go): the
measurement behind docs/performance.md's "Where a request's time goes".
usage: bench/timewait_bench.py [--reps N] [--duration S] [--sockets N]
"""

from __future__ import annotations

import argparse
import re
import socket
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from bounds import knee_run, per_cpu_s
from floor_tool import Floor
from measure import raise_nofile_limit
from nginx_server import Nginx

from knee.machine.kernel import sockstat

SERVER_CPU = 0
REQUESTS = re.compile(r"requests (\d+)")


def time_wait() -> int:
    """The machine's TCP sockets in TIME_WAIT (this namespace), from /proc/net/sockstat."""
    return sockstat()[1]


def drain(below: int, most_s: float = 90) -> int:
    deadline = time.monotonic() + most_s
    while (n := time_wait()) >= below and time.monotonic() < deadline:
        time.sleep(1)
    return n


def fill(port: int, sockets: int) -> int:
    """Connections to nginx that this side closes first, until `sockets` are in TIME_WAIT: each leaves its socket
    in TIME_WAIT here for a minute, as a new-connection run's do. From 127.0.0.2, .3, …: one source address has
    only the ephemeral range's ports (28 232 here) toward one destination."""
    made = 0
    while time_wait() < sockets and made < 4 * sockets:
        source = f"127.0.0.{2 + made // 20_000}"
        for _ in range(1_000):
            with socket.socket() as s:
                s.bind((source, 0))
                s.connect(("127.0.0.1", port))
            made += 1
        time.sleep(0.05)  # nginx's FIN for the last ones, which turns FIN_WAIT2 into TIME_WAIT
    time.sleep(0.5)
    return time_wait()


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--reps", type=int, default=3)
    p.add_argument("--duration", type=float, default=4.0, help="seconds per run")
    p.add_argument("--sockets", type=int, default=30_000, help="TIME_WAIT sockets beside the second runs")
    args = p.parse_args()
    raise_nofile_limit()
    knee_ratios, floor_ratios = [], []
    with tempfile.TemporaryDirectory(prefix="knee-tw-") as tmp, Nginx(cpu=SERVER_CPU) as server:
        work = Path(tmp)
        floor = [str(Floor().program("keepalive")), str(server.port), "50", f"{args.duration:g}"]
        for rep in range(args.reps):
            tw0 = drain(1_000)
            floor0 = per_cpu_s(floor, REQUESTS, args.duration, work)
            knee0 = knee_run(server.url, 50, args.duration, work)
            tw1 = fill(server.port, args.sockets)
            floor1 = per_cpu_s(floor, REQUESTS, args.duration, work)
            knee1 = knee_run(server.url, 50, args.duration, work)
            knee_ratios.append(knee1 / knee0)
            floor_ratios.append(floor1 / floor0)
            print(
                f"repetition {rep + 1}: requests per CPU-s with {tw0:,} in TIME_WAIT: knee {knee0:,.0f}, the floor "
                f"{floor0:,.0f}; with {tw1:,}: knee {knee1:,.0f} ({knee1 / knee0:.3f} ×), the floor {floor1:,.0f} "
                f"({floor1 / floor0:.3f} ×)",
                flush=True,
            )
    own = [k / f for k, f in zip(knee_ratios, floor_ratios, strict=True)]
    for name, r in (
        ("knee", knee_ratios),
        ("the floor (keepalive_epoll.c)", floor_ratios),
        ("knee's over the floor's (what knee's own work adds)", own),
    ):
        print(f"{name}: with / without, median {statistics.median(r):.3f} ({min(r):.3f}–{max(r):.3f})")


if __name__ == "__main__":
    main()
