"""`make bench`, every operation logged (issue 40 item 6): what `--operations-log FILE` costs.

nginx (one worker, `return 200`) on core 0; on core 1, `knee run -c CLIENTS -d D` in repetitions whose order
rotates: without a log, and with `--operations-log` (a 40-byte record per operation, appended by each engine thread
in 64 kB writes). CPU is the generator's whole process tree (wait4: user + system, start-up included) and knee's
own CPU over the step (its --json `generator.cpu_s`); requests are knee's completed operations, held against
nginx's count and, logged, against the log's rows (knee.operations.read_records). Reported: the CPU per request of
the logged run against the plain one's (the median of the paired ratios), and the log's bytes per request.

Writes bench/results/bench-oplog.json and the section between the markers in docs/performance.md.
"""

from __future__ import annotations

import json
import statistics
import sys
import tempfile
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from paired import (
    GENERATOR_CPU,
    SERVER_CPU,
    Row,
    cpu_per_request,
    finish,
    median,
    paired,
    parser,
    pinned,
    repeated,
    section,
)

BEGIN, END = "<!-- oplog-bench: begin -->", "<!-- oplog-bench: end -->"
VARIANTS = ("plain", "logged")


def one(variant: str, server: Any, a: Any) -> Row:
    from measure import run_measured

    from knee.operations import read_records

    before = server.requests()
    with tempfile.TemporaryDirectory(prefix="knee-oplog-bench-") as tmp:
        out, log = Path(tmp) / "knee.json", Path(tmp) / "ops.bin"
        argv = [sys.executable, "-m", "knee", "run", server.url, "-q", "-c", str(a.clients), "-d", f"{a.duration:g}s",
                "--json", str(out), *(["--operations-log", str(log)] if variant == "logged" else [])]  # fmt: skip
        m = run_measured(argv, GENERATOR_CPU, a.duration * 3 + 90, cwd=tmp)
        if m.returncode != 0 or m.timed_out:
            raise SystemExit(f"{variant} failed ({m.returncode}):\n{m.stderr[-2000:]}")
        doc = json.loads(out.read_text())
        rows = len(read_records(log)[1]) if variant == "logged" else None
        size = log.stat().st_size if variant == "logged" else 0
    row = {
        "variant": variant,
        "requests": doc["succeeded"] + doc["failed"] + doc["hung"],
        "started": doc["started"],
        "errors": doc["failed"] + doc["hung"],
        "logged": rows,
        "log_bytes": size,
    }
    row = cpu_per_request(row, doc, m, server.requests() - before - 1)  # (less this look at nginx's count)
    if row["errors"] or row["nginx_requests"] != row["started"] or (rows is not None and rows != row["started"]):
        raise SystemExit(f"{variant}: {row['errors']} errors, nginx read {row['nginx_requests']}, logged {rows}: {row}")
    return row


def section_from(data: dict[str, Any]) -> str:
    a, rows = data["args"], data["runs"]
    whole = paired(rows, "logged", "plain", key="us_per_request")
    load = paired(rows, "logged", "plain", key="load_us_per_request")
    by = {v: [r for r in rows if r["variant"] == v] for v in VARIANTS}

    def m(v: str, key: str) -> float:
        return median(by[v], key)

    per_op = statistics.median(r["log_bytes"] / r["started"] for r in by["logged"])
    return section(
        BEGIN,
        [
            f"## Every operation logged (issue 40): `--operations-log`, {a['clients']} clients keep-alive",
            "",
            f"`python bench/oplog_bench.py --duration {a['duration']:g} --reps {a['reps']}` (part of `make bench`): "
            "nginx (one worker, `return 200`) on core 0; on core 1, in turn (the order rotates), "
            f"`knee run -c {a['clients']} -d {a['duration']:g}s` without and with `--operations-log FILE`. CPU is the "
            "whole process tree (wait4), start-up included; the step's is knee's --json `generator.cpu_s`. Every run's "
            "count equals nginx's, and every logged run's log holds one row per operation started. Medians:",
            "",
            "| variant | requests | µs CPU per request (process) | µs per request (step) |",
            "|---|---|---|---|",
            f"| no log | {m('plain', 'requests'):,.0f} | {m('plain', 'us_per_request'):.2f} "
            f"| {m('plain', 'load_us_per_request'):.2f} |",
            f"| `--operations-log` | {m('logged', 'requests'):,.0f} | {m('logged', 'us_per_request'):.2f} "
            f"| {m('logged', 'load_us_per_request'):.2f} |",
            "",
            f"Logged, a request costs **{statistics.median(whole):.3f}×** the CPU ({whole[0]:.3f}–{whole[-1]:.3f} over "
            f"the repetitions); over the step {statistics.median(load):.3f}× ({load[0]:.3f}–{load[-1]:.3f}). The log "
            f"takes {per_op:.1f} bytes per operation (40 a record, and the header): "
            f"{m('logged', 'requests') / a['duration'] * per_op / 1e6:.1f} MB/s at this rate.",
        ],
        data,
        "bench-oplog.json",
        END,
    )


def main(argv: list[str] | None = None) -> int:
    p = parser(__doc__, 5, "variant", "bench-oplog.json", duration=5, note=True)
    a = p.parse_args(argv)
    from nginx_server import Nginx

    load_before = pinned()
    with Nginx(cpu=SERVER_CPU) as server:
        rows = repeated(a.reps, VARIANTS, lambda variant: one(variant, server, a))
    finish(a, load_before, rows, section_from)
    return 0


if __name__ == "__main__":
    sys.exit(main())
