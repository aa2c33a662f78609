#!/usr/bin/env python3
"""How far above wrk any HTTP/1.1 client can get on this machine: the least clients (bench/bounds/*.c) against wrk
and knee, on the bench's nginx, pinned and interleaved as `make bench` runs them. Not part of `make bench`: it is
the measurement behind docs/performance.md's "What was tried" on the keep-alive and new-connection targets.

- keep-alive, 50 clients: keepalive_epoll.c (one write and one read per request, nothing else) and
  keepalive_uring.c (the same on io_uring: multishot receive, provided buffers, one submission per loop);
- a new connection per request, 50 clients: newconn_epoll.c (connect and the first write merged).

Each figure is requests per CPU-s as a share of wrk's in the same repetition; the median and range are printed.
usage: bench/bounds.py [--reps N] [--duration S] [--clients 50,1000,10000]
(liburing-dev is needed for the io_uring client)
"""

from __future__ import annotations

import argparse
import json
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from measure import raise_nofile_limit, run_measured
from nginx_server import Nginx
from tool import ROOT

SERVER_CPU, GENERATOR_CPU = 0, 1
SOURCES = Path(__file__).resolve().parent / "bounds"
KNEE = ROOT / ".venv" / "bin" / "knee"


def build(out: Path) -> dict[str, Path]:
    """The C clients, compiled -O2; the io_uring one only where liburing's header is installed."""
    built = {}
    for src in sorted(SOURCES.glob("*.c")):
        libs = ["-luring"] if "uring" in src.stem else []
        if libs and not Path("/usr/include/liburing.h").exists():
            print(f"{src.name}: not built (liburing-dev is not installed)", flush=True)
            continue
        subprocess.run(["gcc", "-O2", "-o", str(out / src.stem), str(src), *libs], check=True)
        built[src.stem] = out / src.stem
    return built


def per_cpu_s(argv: list[str], count: re.Pattern[str], duration: float, workdir: Path) -> float:
    """Requests per CPU-s of one pinned run: the count its output gives, over its whole CPU."""
    m = run_measured(argv, GENERATOR_CPU, timeout_s=duration + 30, cwd=workdir)
    found = count.search(m.stdout)
    if m.returncode != 0 or found is None:
        raise RuntimeError(f"{argv[0]} failed: {m.stderr[-300:] or m.stdout[-300:]}")
    return int(found.group(1)) / m.cpu_s


def knee_run(url: str, clients: int, duration: float, workdir: Path, *extra: str) -> float:
    out = workdir / "knee.json"
    argv = [str(KNEE), "run", url, "-q", "-c", str(clients), "-d", f"{duration:g}s", "--json", str(out), *extra]
    m = run_measured(argv, GENERATOR_CPU, timeout_s=duration + 30, cwd=workdir)
    data = json.loads(out.read_text())
    return (data["succeeded"] + data["failed"]) / m.cpu_s


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--reps", type=int, default=7)
    p.add_argument("--duration", type=float, default=4.0, help="seconds per run")
    p.add_argument("--clients", default="50", help="keep-alive concurrencies, comma-separated (e.g. 50,1000,10000)")
    args = p.parse_args()
    if shutil.which("wrk") is None:
        sys.exit("wrk is not installed: run scripts/install-system-deps.sh")
    raise_nofile_limit()
    levels = [int(c) for c in args.clients.split(",")]
    wrk_count = re.compile(r"(\d+) requests in")
    c_count = re.compile(r"requests (\d+)")
    secs = f"{args.duration:g}"
    shares: dict[str, list[float]] = {}

    def note(name: str, value: float, wrk: float, line: list[str]) -> None:
        shares.setdefault(name, []).append(value / wrk)
        line.append(f"{name} {value / wrk:.3f}")

    with tempfile.TemporaryDirectory(prefix="knee-bounds-") as tmp, Nginx(cpu=SERVER_CPU) as server:
        work = Path(tmp)
        clients = build(work)
        port = str(server.port)
        for rep in range(args.reps):
            line: list[str] = []
            for c in levels:
                at = "" if c == 50 else f" ×{c}"
                wrk_argv = ["wrk", "-t1", f"-c{c}", f"-d{secs}s", server.url]
                wrk = per_cpu_s(wrk_argv, wrk_count, args.duration, work)
                line.append(f"wrk{at} {wrk:,.0f}")
                for name in ("keepalive_epoll", "keepalive_uring"):
                    if name in clients:
                        value = per_cpu_s([str(clients[name]), port, str(c), secs], c_count, args.duration, work)
                        note(name + at, value, wrk, line)
                note("knee keep-alive" + at, knee_run(server.url, c, args.duration, work), wrk, line)
            wrk_argv = ["wrk", "-t1", "-c50", f"-d{secs}s", "-H", "Connection: close", server.url]
            wrk_close = per_cpu_s(wrk_argv, wrk_count, args.duration, work)
            line.append(f"wrk new-connection {wrk_close:,.0f}")
            note(
                "knee new connection",
                knee_run(server.url, 50, args.duration, work, "--new-connection"),
                wrk_close,
                line,
            )
            if "newconn_epoll" in clients:
                value = per_cpu_s([str(clients["newconn_epoll"]), port, "50", secs], c_count, args.duration, work)
                note("newconn_epoll", value, wrk_close, line)
            print(f"repetition {rep + 1} (requests per CPU-s; the others as a share of wrk's): " + ", ".join(line))
    print("\nrequests per CPU-s as a share of wrk's (median, lowest–highest):")
    for name, values in shares.items():
        print(f"  {name:<28} {statistics.median(values):.3f} ({min(values):.3f}–{max(values):.3f})")


if __name__ == "__main__":
    main()
