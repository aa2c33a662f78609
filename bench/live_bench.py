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
from typing import Any

BENCH = Path(__file__).resolve().parent
ROOT = BENCH.parent
sys.path.insert(0, str(BENCH))
sys.path.insert(0, str(ROOT / "tests"))

from measure import Measured, raise_nofile_limit, run_measured  # noqa: E402
from nginx_server import Nginx, free_port  # noqa: E402

from browser import Browser  # noqa: E402
from servers import start_prometheus  # noqa: E402

SERVER_CPU, GENERATOR_CPU = 0, 1
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


def one(url: str, clients: int, seconds: int, served: int | None, browser: Browser | None) -> dict[str, Any]:
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


def median(rows: list[dict[str, Any]], key: str) -> float:
    return float(statistics.median(r[key] for r in rows))


def section(rows: list[dict[str, Any]], args: argparse.Namespace, scrapes: int) -> str:
    plain = [r for r in rows if not r["served"]]
    served = [r for r in rows if r["served"]]
    cost = 1 - median(served, "per_cpu_s") / median(plain, "per_cpu_s")
    cost_load = 1 - median(served, "per_load_cpu_s") / median(plain, "per_load_cpu_s")
    table = [
        "| knee run | requests/s | CPU s (whole process) | requests per CPU-s | CPU s during the load | requests per "
        "CPU-s of the load | CPU s outside the load | wall clock |",
        "|---|---|---|---|---|---|---|---|",
    ]
    keys = ("rps", "cpu_s", "per_cpu_s", "load_cpu_s", "per_load_cpu_s", "outside_cpu_s", "wall_s")
    for name, group in (("plain", plain), ("`--serve`, a browser and Prometheus watching", served)):
        m = {k: median(group, k) for k in keys}
        table.append(
            f"| {name} | {m['rps']:,.0f} | {m['cpu_s']:.2f} | {m['per_cpu_s']:,.0f} | {m['load_cpu_s']:.2f} | "
            f"{m['per_load_cpu_s']:,.0f} | {m['outside_cpu_s']:.2f} | {m['wall_s']:.1f} s |"
        )
    extra = median(served, "outside_cpu_s") - median(plain, "outside_cpu_s")
    at_2 = extra / 0.02 / (median(plain, "cpu_s") / args.duration)  # the run's length at which the end's CPU is 2 %
    return "\n".join(
        [
            BEGIN,
            "## Watching a run live: what `--serve` costs",
            "",
            f"`python bench/live_bench.py` (part of `make bench`): the keep-alive scenario (nginx, one worker, on core "
            f"0; `knee run URL -c {args.clients} -d {args.duration}s` on core 1), {args.reps} repetitions of each, "
            "alternating: plain, and with `--serve` while a real Prometheus scrapes /metrics every second and "
            "headless Chromium keeps the live page open (both on core 0). Medians:",
            "",
            *table,
            "",
            f"During the load `--serve` costs **{cost_load:.1%}** of knee's requests per CPU-s (its own CPU over the "
            "step: the runner's one small view a second, the page's events, Prometheus' scrapes; target: at most "
            f"2 %). Over the whole process of these {args.duration}-s runs it costs **{cost:.1%}**: outside the "
            f"load the served runs used {extra:.2f} s more CPU, once per run, to draw the final report for the open "
            "page (importing matplotlib, the analysis, the plots), which a run without a page does not draw. That "
            f"fixed cost is within 2 % of a run of {at_2:.0f} s or more (a sweep's step, or a whole sweep, is "
            "minutes). A run's page draws the report of each finished step once, on a thread below the engine's "
            f"CPU priority. Prometheus scraped {scrapes} times in all; every page ended showing the run's succeeded "
            "count exactly.",
            END,
        ]
    )


def write_section(path: Path, text: str) -> None:
    doc = path.read_text()
    if BEGIN in doc and END in doc:
        head, rest = doc.split(BEGIN, 1)
        doc = head + text + rest.split(END, 1)[1]
    else:
        doc = doc.rstrip("\n") + "\n\n" + text + "\n"
    path.write_text(doc)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--duration", type=int, default=10, help="seconds per run (default 10)")
    p.add_argument("--reps", type=int, default=3, help="repetitions of each variant (default 3)")
    p.add_argument("--clients", type=int, default=50)
    p.add_argument("--out", type=Path, default=ROOT / "docs" / "performance.md")
    p.add_argument("--json", type=Path, default=BENCH / "results" / "bench-live.json")
    args = p.parse_args(argv)
    raise_nofile_limit()
    os.sched_setaffinity(0, {SERVER_CPU})  # this driver, Prometheus and Chromium share nginx's core, not knee's
    port = free_port()
    rows: list[dict[str, Any]] = []
    with tempfile.TemporaryDirectory(prefix="knee-live-bench-prom-") as tmp, Nginx(cpu=SERVER_CPU) as server:
        prometheus = start_prometheus(Path(tmp), [f"127.0.0.1:{port}"])
        browser = Browser()
        try:
            for rep in range(args.reps):
                for served in (False, True) if rep % 2 == 0 else (True, False):
                    row = one(server.url, args.clients, args.duration, port if served else None, browser)
                    if served and row["page_succeeded"] != row["succeeded"]:
                        raise SystemExit(f"the page ended at {row['page_succeeded']}, knee at {row['succeeded']}")
                    rows.append(row)
                    print(json.dumps(row), flush=True)
            found = prometheus.query("sum(count_over_time(knee_running[1h]))")
            scrapes = int(float(found[0]["value"][1])) if found else 0
        finally:
            browser.close()
            prometheus.stop()
    if scrapes < args.reps * args.duration:
        raise SystemExit(f"Prometheus scraped knee only {scrapes} times")
    args.json.parent.mkdir(exist_ok=True)
    args.json.write_text(json.dumps({"runs": rows, "scrapes": scrapes}, indent=2))
    write_section(args.out, section(rows, args, scrapes))
    print(f"wrote {args.out}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
