#!/usr/bin/env python3
"""`make bench`, load over time (issue 40): what a rate profile costs knee's open loop.

nginx (one worker, `return 200`) on core 0; on core 1, `knee run -c CLIENTS -d D` in repetitions whose order
rotates: a constant `--rate R`; the flat profile `"0s:R"` (the same arrivals through the profile's count-space
schedule: its machinery alone); and a ramp `--rate-profile "0s:LOW, Ds:HIGH"` of the same mean R (LOW = R/4, HIGH =
7R/4: towards what one core's open loop issues). CPU is the generator's whole process tree (wait4: user + system,
start-up included) and knee's own CPU over the step (its --json `generator.cpu_s`); requests are knee's completed
operations, held against nginx's count. The target: the ramp's CPU per request at most 1.05 × the constant rate's,
the median over the repetitions of the ratio within one.

Writes bench/results/bench-ramp.json and the section between the markers in docs/performance.md.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
from pathlib import Path
from typing import Any

BENCH = Path(__file__).resolve().parent
ROOT = BENCH.parent
sys.path.insert(0, str(BENCH))

from paired import section  # noqa: E402  (bench's modules, on the path above)

SERVER_CPU, GENERATOR_CPU = 0, 1
BEGIN, END = "<!-- ramp-bench: begin -->", "<!-- ramp-bench: end -->"
TARGET = 1.05


VARIANTS = ("constant", "flat", "ramp")


def profile_of(variant: str, a: argparse.Namespace) -> str:
    """The ramp, or the flat profile of the constant rate (the profile's machinery alone, the same shape)."""
    return f"0s:{a.rate:g}" if variant == "flat" else f"0s:{a.rate / 4:g}, {a.duration:g}s:{a.rate * 7 / 4:g}"


def argv_of(variant: str, url: str, a: argparse.Namespace, out: Path) -> list[str]:
    load = ["--rate", f"{a.rate:g}"] if variant == "constant" else ["--rate-profile", profile_of(variant, a)]
    return [sys.executable, "-m", "knee", "run", url, *load, "-q", "-c", str(a.clients), "-d", f"{a.duration:g}s",
            "--json", str(out)]  # fmt: skip


def one(variant: str, server: Any, a: argparse.Namespace) -> dict[str, Any]:
    from measure import run_measured
    from paired import cpu_per_request

    before = server.requests()
    with tempfile.TemporaryDirectory(prefix="knee-ramp-bench-") as tmp:
        out = Path(tmp) / "knee.json"
        m = run_measured(argv_of(variant, server.url, a, out), GENERATOR_CPU, a.duration * 3 + 90, cwd=tmp)
        if m.returncode != 0 or m.timed_out:
            raise SystemExit(f"{variant} failed ({m.returncode}):\n{m.stderr[-2000:]}")
        doc = json.loads(out.read_text())
    ol = doc["open_loop"]
    row = {
        "variant": variant,
        "requests": doc["succeeded"] + doc["failed"] + doc["hung"],
        "started": doc["started"],
        "errors": doc["failed"] + doc["hung"],
        "offered": ol["offered"],
        "late": ol["late"],
        "dropped": ol["dropped"],
        "p50_ms": doc["latency_ms"]["p50"],
        "p99_ms": doc["latency_ms"]["p99"],
    }
    row = cpu_per_request(row, doc, m, server.requests() - before - 1)  # (less this look at nginx's count)
    if row["errors"] or row["nginx_requests"] != row["started"]:
        raise SystemExit(f"{variant}: {row['errors']} errors, nginx read {row['nginx_requests']}: {row}")
    return row


def paired(rows: list[dict[str, Any]], key: str, mine: str = "ramp") -> list[float]:
    by = {(r["rep"], r["variant"]): r[key] for r in rows}
    return sorted(by[(i, mine)] / by[(i, "constant")] for i in sorted({r["rep"] for r in rows}))


def section_from(data: dict[str, Any]) -> str:
    a, rows = data["args"], data["runs"]
    whole, load = paired(rows, "us_per_request"), paired(rows, "load_us_per_request")
    flat, flat_load = paired(rows, "us_per_request", "flat"), paired(rows, "load_us_per_request", "flat")
    med = statistics.median(whole)
    table = [
        "| variant | requests | offered | late | dropped | µs CPU per request (process) | µs per request (step) "
        "| p50 ms | p99 ms |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    titles = {"constant": f"`--rate {a['rate']:g}`", "flat": f'`--rate-profile "0s:{a["rate"]:g}"`'}
    titles["ramp"] = f'`--rate-profile "{data["profile"]}"`'
    for v, title in titles.items():
        mine = [r for r in rows if r["variant"] == v]

        def m(key: str, mine: list[dict[str, Any]] = mine) -> float:
            return float(statistics.median(r[key] for r in mine))

        table.append(
            f"| {title} | {m('requests'):,.0f} | {m('offered'):,.0f} | {m('late'):,.0f} | {m('dropped'):,.0f} "
            f"| {m('us_per_request'):.2f} | {m('load_us_per_request'):.2f} | {m('p50_ms'):.3f} | {m('p99_ms'):.3f} |"
        )
    return section(
        BEGIN,
        [
            f"## Rate profiles (issue 40): a ramp against a constant rate of the same mean, {a['clients']} connections",
            "",
            f"`python bench/ramp_bench.py --rate {a['rate']:g} --duration {a['duration']:g} --reps {a['reps']}` (part "
            "of `make bench`): nginx (one worker, `return 200`) on core 0; on core 1, in turn (the order rotates), "
            f"`knee run -c {a['clients']} -d {a['duration']:g}s` at a constant `--rate {a['rate']:g}`, under the flat "
            f"profile of that rate and under "
            f'`--rate-profile "{data["profile"]}"`, the same mean. CPU is the whole process tree (wait4), start-up '
            "included; the step's is knee's --json `generator.cpu_s`. Every run's count equals nginx's, no errors. "
            "Medians:",
            "",
            *table,
            "",
            "| target | measured | verdict |",
            "|---|---|---|",
            f"| a ramping open loop: CPU per request ≤ {TARGET} × the constant rate's at the same mean "
            f"| **{med:.3f}×** ({whole[0]:.3f}–{whole[-1]:.3f}); over the step: {statistics.median(load):.3f}× "
            f"({load[0]:.3f}–{load[-1]:.3f}) | **{'met' if med <= TARGET else 'not met'}** |",
            "",
            "The profile's machinery alone (a flat profile, the constant rate's shape, through the count-space "
            f"schedule): **{statistics.median(flat):.3f}×** ({flat[0]:.3f}–{flat[-1]:.3f}) the constant rate's CPU "
            f"per request; over the step {statistics.median(flat_load):.3f}× ({flat_load[0]:.3f}–{flat_load[-1]:.3f}). "
            "A run with late or dropped arrivals (the table's columns) was at the generator's limit.",
        ],
        data,
        "bench-ramp.json",
        END,
    )


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--rate", type=float, default=40_000, help="the constant rate and the ramp's mean (/s)")
    p.add_argument("--duration", type=float, default=10.0)
    p.add_argument("--reps", type=int, default=5)
    p.add_argument("--clients", type=int, default=200)
    p.add_argument("--note", default="", help="what the machine was doing, or what else was measured, for the page")
    p.add_argument("--out", type=Path, default=ROOT / "docs" / "performance.md")
    p.add_argument("--json", type=Path, default=BENCH / "results" / "bench-ramp.json")
    a = p.parse_args(argv)
    from feeder_bench import write_section
    from nginx_server import Nginx
    from paired import pinned
    from report import machine

    load_before = pinned()
    rows: list[dict[str, Any]] = []
    with Nginx(cpu=SERVER_CPU) as server:
        for rep in range(a.reps):
            k = rep % len(VARIANTS)
            for variant in VARIANTS[k:] + VARIANTS[:k]:  # each variant takes each place in turn
                rows.append({"rep": rep, **one(variant, server, a)})
                print(json.dumps(rows[-1]), flush=True)
    data = {
        "args": vars(a) | {"out": str(a.out), "json": str(a.json)},
        "profile": f"0s:{a.rate / 4:g}, {a.duration:g}s:{a.rate * 7 / 4:g}",
        "machine": machine(),
        "loadavg_before": load_before,
        "loadavg_after": os.getloadavg(),
        "note": a.note,
        "runs": rows,
    }
    a.json.parent.mkdir(exist_ok=True)
    a.json.write_text(json.dumps(data, indent=2))
    write_section(a.out, section_from(data))
    print(f"wrote {a.json} and {a.out}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
