#!/usr/bin/env python3
"""`make bench`, HTTP from a Python flow: knee's `ctx.http` (knee.flowhttp) against Locust's FastHttpUser, requests
per CPU-s (issue 36, item 6: at least as many as Locust's).

The keep-alive scenario of bench/run.py: nginx (one worker) on core 0 answering `200 ok`; on core 1, in turn, `knee
run --python httpflow:get -c 50` (bench/httpflow.py: `await ctx.http.get("/")` per operation, knee and its Python
worker processes) and `locust --headless -u 50` with bench/locustfile.py (FastHttpUser, `self.client.get("/")`, no
wait). CPU is each generator's whole process tree (wait4: user + system, start-up included), requests are its own
count, held against nginx's (stub_status). The runs alternate, which goes first too; each repetition's ratio is
knee's requests per CPU-s over Locust's, and the section between the markers in docs/performance.md is rewritten
with the medians.

Locust is not a dependency of knee: `bench/install.sh locust` installs it into the venv (or give --locust PATH).
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import sys
import tempfile
from pathlib import Path
from typing import Any

BENCH = Path(__file__).resolve().parent
sys.path.insert(0, str(BENCH))

from paired import GENERATOR_CPU, SERVER_CPU, knee_counts, knee_version, median, paired, parser, rotated, save  # noqa: E402

BEGIN, END = "<!-- flow-http-bench: begin -->", "<!-- flow-http-bench: end -->"


def knee_argv(url: str, clients: int, seconds: int, out: Path) -> list[str]:
    return [sys.executable, "-m", "knee", "run", "-q", "-c", str(clients), "-d", f"{seconds}s", "--json", str(out),
            "--python", "httpflow:get", "--path", str(BENCH), "--var", f"url={url.rstrip('/')}"]  # fmt: skip


def locust_argv(locust: str, url: str, clients: int, seconds: int) -> list[str]:
    return [locust, "-f", str(BENCH / "locustfile.py"), "--headless", "--only-summary", "-u", str(clients),
            "-r", str(clients), "-t", f"{seconds}s", "--host", url.rstrip("/")]  # fmt: skip


def find_locust(given: str | None) -> str:
    for candidate in (given, str(Path(sys.executable).with_name("locust")), shutil.which("locust")):
        if candidate and os.access(candidate, os.X_OK):
            return candidate
    raise SystemExit("Locust is not installed: run bench/install.sh locust, or give --locust PATH")


def one(tool: str, server: Any, args: argparse.Namespace, locust: str) -> dict[str, Any]:
    from http_tools import Locust
    from measure import run_measured

    before = server.requests()
    with tempfile.TemporaryDirectory(prefix="knee-flow-http-bench-") as tmp:
        out = Path(tmp) / "knee.json"
        argv = (
            knee_argv(server.url, args.clients, args.duration, out)
            if tool == "knee"
            else locust_argv(locust, server.url, args.clients, args.duration)
        )
        m = run_measured(argv, GENERATOR_CPU, args.duration * 3 + 60)
        if m.returncode != 0 or m.timed_out:
            raise SystemExit(f"{tool} failed ({m.returncode}):\n{m.stderr[-2000:]}")
        if tool == "knee":
            counts = knee_counts(json.loads(out.read_text()))
        else:
            s = Locust().parse(m, None)  # type: ignore[arg-type]
            counts = {"requests": s.requests, "errors": s.errors, "p50_ms": s.p50_ms, "p99_ms": s.p99_ms}
    seen = server.requests() - before - 1  # nginx's count, less this look at it
    return {
        "tool": tool,
        **counts,
        "nginx_requests": seen,
        "cpu_s": m.cpu_s,
        "user_s": m.user_s,
        "sys_s": m.sys_s,
        "wall_s": m.wall_s,
        "rss_mb": m.maxrss_mb,
        "per_cpu_s": counts["requests"] / m.cpu_s,
    }


def section_from(data: dict[str, Any]) -> str:
    """The section from bench/results/bench-flow-http.json (bench/report.py renders the page with it)."""
    rows, clients, duration, versions = data["runs"], data["clients"], data["duration"], data["versions"]
    table = [
        "| generator | requests/s | CPU s (user + sys) | core use | requests per CPU-s | p50 ms | p99 ms | errors | "
        "peak RSS MB |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for tool, title in (("knee", "knee, `ctx.http`"), ("locust", "Locust, FastHttpUser")):
        mine = [r for r in rows if r["tool"] == tool]

        def med(key: str, mine: list[dict[str, Any]] = mine) -> float:
            return median(mine, key)

        low, high = min(r["per_cpu_s"] for r in mine), max(r["per_cpu_s"] for r in mine)
        table.append(
            f"| {title} | {med('requests') / duration:,.0f} | {med('cpu_s'):.2f} ({med('user_s'):.2f} + "
            f"{med('sys_s'):.2f}) | {med('cpu_s') / med('wall_s'):.0%} | {med('per_cpu_s'):,.0f} ({low:,.0f}–"
            f"{high:,.0f}) | {med('p50_ms'):g} | {med('p99_ms'):g} | {sum(r['errors'] for r in mine)} | "
            f"{med('rss_mb'):.0f} |"
        )
    r = paired(rows, "knee", "locust", column="tool")  # knee's requests per CPU-s over Locust's, per repetition
    extra = max(x["nginx_requests"] - x["requests"] for x in rows)
    met = "**met**" if statistics.median(r) >= 1.0 else "**not met**"
    return "\n".join(
        [
            BEGIN,
            f"## HTTP from a Python flow: `ctx.http` against Locust's FastHttpUser, {clients} clients",
            "",
            f"`python bench/flow_http_bench.py --duration {duration} --reps {data['reps']}` (part of `make bench`): "
            "nginx (one worker, `return 200`) on core 0; on core 1, in turn, `knee run --python httpflow:get "
            f'-c {clients} -d {duration}s --var url=…` (bench/httpflow.py: `await ctx.http.get("/")` per '
            f"operation; knee and its Python worker) and `locust --headless -u {clients} -r {clients}` with "
            'bench/locustfile.py (FastHttpUser, `self.client.get("/")`, no wait). CPU s is each generator\'s '
            "whole process tree (start-up included); requests are its own count (nginx's count of the requests it "
            f"read was at most {extra} more in any run: those in flight at the end). Medians, with the lowest … "
            "highest requests per CPU-s:",
            "",
            *table,
            "",
            "Core use is CPU s over the run's wall clock (start-up included): below 100 %, the generator waited "
            "for nginx's core or for other work on the machine, so the requests per second say less than the "
            "requests per CPU-s; the runs alternate, and the ratio is taken within each repetition.",
            "",
            f"knee's requests per CPU-s over Locust's, paired by repetition: **{statistics.median(r):.2f}×** "
            f"({r[0]:.2f}× … {r[-1]:.2f}×); target at least 1×: {met}. Versions: knee {versions['knee']}, "
            f"Locust {versions['locust']}, Python {versions['python']}.",
            END,
        ]
    )


def main(argv: list[str] | None = None) -> int:
    p = parser(__doc__, 5, "generator", "bench-flow-http.json")
    p.add_argument("--locust", help="the locust command (default: the venv's, then PATH's)")
    args = p.parse_args(argv)
    from measure import raise_nofile_limit
    from nginx_server import Nginx
    from tool import first_line

    locust = find_locust(args.locust)
    raise_nofile_limit()
    os.sched_setaffinity(0, {SERVER_CPU})  # this driver shares nginx's core, not the generators'
    rows: list[dict[str, Any]] = []
    with Nginx(cpu=SERVER_CPU) as server:
        for rep in range(args.reps):
            for tool in rotated(("knee", "locust"), rep):
                row = one(tool, server, args, locust)
                if not 0 <= row["nginx_requests"] - row["requests"] <= 2 * args.clients or row["errors"]:
                    raise SystemExit(f"{tool}: {row['requests']} requests, nginx read {row['nginx_requests']}: {row}")
                rows.append({"rep": rep, **row})
                print(json.dumps(rows[-1]), flush=True)
    versions = {
        "knee": knee_version(),
        "locust": first_line([locust, "--version"]).split(" from ")[0].removeprefix("locust "),
        "python": sys.version.split()[0],
    }
    data = {"clients": args.clients, "duration": args.duration, "reps": args.reps, "runs": rows, "versions": versions}
    save(args, data, section_from(data))
    return 0


if __name__ == "__main__":
    sys.exit(main())
