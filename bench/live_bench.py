#!/usr/bin/env python3
"""`make bench`, watching a run live: what `--serve` costs the load generator (docs/live.md; issue: at most 2 % of
knee's requests per CPU-s in the keep-alive bench, with one browser and one Prometheus watching).

The keep-alive scenario of bench/run.py: nginx (one worker) on core 0, `knee run URL -c 50 -d 10s` on core 1. Each
repetition runs it twice, in alternating order: plain, and with `--serve PORT` while a real Prometheus (Debian's,
scrape interval 1 s) scrapes /metrics and headless Chromium keeps the live page open (both on core 0, with nginx
and this driver, so they take no CPU from knee's core). knee's CPU is its whole process tree's (wait4), start-up
and the end's final report included; "during the load" is its own CPU over the step (run.json's generator.cpu_s).
The section between the markers in docs/performance.md is rewritten with the medians.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
import threading
import time
import urllib.request
from pathlib import Path
from types import SimpleNamespace
from typing import TYPE_CHECKING, Any

BENCH = Path(__file__).resolve().parent
sys.path.insert(0, str(BENCH))

from paired import GENERATOR_CPU, ROOT, SERVER_CPU, median, paired, parser, rotated, save  # noqa: E402

if TYPE_CHECKING:
    from measure import Measured

    from browser import Browser

BEGIN, END = "<!-- live-bench: begin -->", "<!-- live-bench: end -->"


def knee_argv(url: str, clients: int, seconds: int, out: Path, port: int | None) -> list[str]:
    argv = [sys.executable, "-m", "knee", "run", url, "-q", "-c", str(clients), "-d", f"{seconds}s", "--json", str(out)]
    return argv + (["--serve", str(port)] if port is not None else [])


def watch(browser: Browser, port: int, done: threading.Event) -> dict[str, Any]:
    """Open the live page as soon as knee serves it, keep it open to the end; what it showed last."""
    page = f"http://127.0.0.1:{port}/"
    while not done.is_set():
        try:
            urllib.request.urlopen(page + "metrics", timeout=1).close()
            break
        except OSError:
            time.sleep(0.05)
    browser.open(page)
    browser.wait("document.body.dataset.ended === 'true'", 120)
    total = browser.eval("window.knee.state.totals.map(t => t.succeeded).reduce((a, b) => a + b, 0)")
    browser.open("about:blank")
    return {"page_succeeded": total}


def one(variant: str, url: str, args: argparse.Namespace, served: int | None, browser: Browser | None) -> dict:
    from measure import run_measured

    clients, seconds = args.clients, args.duration
    with tempfile.TemporaryDirectory(prefix="knee-live-bench-") as tmp:
        out = Path(tmp) / "knee.json"
        result: dict[str, Measured] = {}
        done = threading.Event()

        def run() -> None:
            result["m"] = run_measured(knee_argv(url, clients, seconds, out, served), GENERATOR_CPU, seconds * 3 + 90)
            done.set()

        worker = threading.Thread(target=run)
        worker.start()
        seen = watch(browser, served, done) if served is not None and browser is not None else {}
        worker.join()
        m = result["m"]
        if m.returncode != 0:
            raise SystemExit(f"knee run failed ({m.returncode}):\n{m.stderr[-2000:]}")
        doc = json.loads(out.read_text())
    requests = doc["succeeded"] + doc["failed"] + doc["hung"]
    return {
        "variant": variant,
        "served": served is not None,
        "requests": requests,
        "succeeded": doc["succeeded"],
        "rps": requests / doc["elapsed_s"],
        "cpu_s": m.cpu_s,
        "wall_s": m.wall_s,
        "load_cpu_s": doc["generator"]["cpu_s"],
        "per_cpu_s": requests / m.cpu_s,
        "per_load_cpu_s": requests / doc["generator"]["cpu_s"],
        "outside_cpu_s": m.cpu_s - doc["generator"]["cpu_s"],  # start-up, the end (its report), lingering
        **seen,
    }


VARIANTS = {
    "plain": "plain",
    "alone": "`--serve`, nobody watching",
    "watched": "`--serve`, a browser and Prometheus watching",
}


def section_from(data: dict[str, Any]) -> str:
    """The section from bench/results/bench-live.json (bench/report.py renders the page with it)."""
    args = SimpleNamespace(clients=data["clients"], duration=data["duration"], reps=data["reps"])
    return section(data["runs"], args, data["scrapes"])  # type: ignore[arg-type]


def section(rows: list[dict[str, Any]], args: argparse.Namespace, scrapes: int) -> str:
    keys = ("rps", "cpu_s", "per_cpu_s", "load_cpu_s", "per_load_cpu_s", "outside_cpu_s", "wall_s")
    table = [
        "| knee run | requests/s | CPU s (whole process) | requests per CPU-s | CPU s during the load | requests per "
        "CPU-s of the load | CPU s outside the load | wall clock |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for variant, name in VARIANTS.items():
        m = {k: median([r for r in rows if r["variant"] == variant], k) for k in keys}
        table.append(
            f"| {name} | {m['rps']:,.0f} | {m['cpu_s']:.2f} | {m['per_cpu_s']:,.0f} | {m['load_cpu_s']:.2f} | "
            f"{m['per_load_cpu_s']:,.0f} | {m['outside_cpu_s']:.2f} | {m['wall_s']:.1f} s |"
        )

    def change(variant: str, key: str) -> str:
        """`variant`'s `key` over plain's in the same repetition, less 1 (a cost is negative)."""
        d = [x - 1 for x in paired(rows, variant, "plain", key=key)]
        return f"**{statistics.median(d):+.1%}** ({d[0]:+.1%} … {d[-1]:+.1%})"

    plain = [r for r in rows if r["variant"] == "plain"]
    extra = median([r for r in rows if r["variant"] == "watched"], "outside_cpu_s") - median(plain, "outside_cpu_s")
    at_2 = extra / 0.02 / (median(plain, "cpu_s") / args.duration)  # the run's length at which the end's CPU is 2 %
    return "\n".join(
        [
            BEGIN,
            "## Watching a run live: what `--serve` costs",
            "",
            f"`python bench/live_bench.py` (part of `make bench`): the keep-alive scenario (nginx, one worker, on core "
            f"0; `knee run URL -c {args.clients} -d {args.duration}s` on core 1), {args.reps} repetitions of three "
            "variants side by side, in rotating order: plain; with `--serve` and nobody watching; with `--serve` "
            "while a real Prometheus scrapes /metrics every second and headless Chromium keeps the live page open "
            "(both on core 0, beside nginx). Medians:",
            "",
            *table,
            "",
            "Each variant's requests per CPU-s against plain's in the same repetition (median, and the lowest … "
            "highest of the repetitions; a cost is negative):",
            "",
            "| | during the load | whole process |",
            "|---|---|---|",
            f"| `--serve`, nobody watching | {change('alone', 'per_load_cpu_s')} | {change('alone', 'per_cpu_s')} |",
            f"| `--serve`, watched | {change('watched', 'per_load_cpu_s')} | {change('watched', 'per_cpu_s')} |",
            "",
            "During the load (knee's own CPU over the step) the runner publishes one small view a second, and the "
            "server's threads answer the page's events and Prometheus' scrapes at a lower CPU priority than the "
            "engine's (target: at most 2 % of knee's requests per CPU-s). The watched variant's browser and "
            "Prometheus share nginx's core: what they take from nginx shows in the requests per second. Outside "
            f"the load the watched runs used {extra:.2f} s more CPU, once per run, to draw the final report for the "
            "open page (importing the analysis and the report, drawing its figures), which a run nobody watches "
            f"does not draw; that is within 2 % of a run of {at_2:.0f} s or more (a sweep's step, or a sweep, is "
            "minutes), and a run that writes report.html (`--out`, every sweep) hands the page that file's body "
            f"instead of drawing it again. Prometheus scraped {scrapes} times in all; every watched page ended "
            "showing the run's succeeded count exactly.",
            END,
        ]
    )


def main(argv: list[str] | None = None) -> int:
    args = parser(__doc__, 7, "variant", "bench-live.json").parse_args(argv)
    sys.path.insert(0, str(ROOT / "tests"))  # the tests' Prometheus and Chromium (tests/servers.py, tests/browser.py)
    from measure import raise_nofile_limit
    from nginx_server import Nginx, free_port

    from browser import Browser
    from servers import start_prometheus

    raise_nofile_limit()
    os.sched_setaffinity(0, {SERVER_CPU})  # this driver, Prometheus and Chromium share nginx's core, not knee's
    port, alone = free_port(), free_port()  # Prometheus scrapes `port` only
    rows: list[dict[str, Any]] = []
    with tempfile.TemporaryDirectory(prefix="knee-live-bench-prom-") as tmp, Nginx(cpu=SERVER_CPU) as server:
        prometheus = start_prometheus(Path(tmp), [f"127.0.0.1:{port}"])
        browser = Browser()
        try:
            for rep in range(args.reps):
                for variant in rotated(list(VARIANTS), rep):
                    served = {"plain": None, "alone": alone, "watched": port}[variant]
                    row = one(variant, server.url, args, served, browser if served == port else None)
                    if variant == "watched" and row["page_succeeded"] != row["succeeded"]:
                        raise SystemExit(f"the page ended at {row['page_succeeded']}, knee at {row['succeeded']}")
                    rows.append({"rep": rep, **row})
                    print(json.dumps(rows[-1]), flush=True)
            found = prometheus.query("sum(count_over_time(knee_running[1h]))")
            scrapes = int(float(found[0]["value"][1])) if found else 0
        finally:
            browser.close()
            prometheus.stop()
    if scrapes < args.reps * args.duration:
        raise SystemExit(f"Prometheus scraped knee only {scrapes} times")
    data = {"clients": args.clients, "duration": args.duration, "reps": args.reps, "runs": rows, "scrapes": scrapes}
    save(args, data, section(rows, args, scrapes))
    return 0


if __name__ == "__main__":
    sys.exit(main())
