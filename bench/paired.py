"""What the paired benches share (feeder_bench.py, flow_http_bench.py, live_bench.py, search_bench.py): runs side by
side in an order that rotates each repetition, figures taken within one repetition (two runs side by side share the
machine's drift: other processes, the CPU's clock), their medians, knee's own counts from its --json, and the
section between two markers in docs/performance.md.
"""

from __future__ import annotations

import argparse
import json
import operator
import os
import statistics
import subprocess
import sys
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, TypeVar

BENCH = Path(__file__).resolve().parent
ROOT = BENCH.parent
SERVER_CPU, GENERATOR_CPU = 0, 1  # nginx (and the driver) on core 0, the generator on core 1

T = TypeVar("T")
Row = dict[str, Any]


def parser(
    doc: str | None, reps: int, each: str, results: str, *, duration: int = 10, note: bool = False
) -> argparse.ArgumentParser:
    """The flags every paired bench takes: seconds per run, repetitions, clients, the page and the raw figures (and,
    `note`, what the machine was doing, for the page)."""
    p = argparse.ArgumentParser(description=doc, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--duration", type=int, default=duration, help=f"seconds per run (default {duration})")
    if note:
        p.add_argument("--note", default="", help="what the machine was doing, or what else was measured, for the page")
    p.add_argument("--reps", type=int, default=reps, help=f"repetitions of each {each} (default {reps})")
    p.add_argument("--clients", type=int, default=50)
    p.add_argument("--out", type=Path, default=ROOT / "docs" / "performance.md")
    p.add_argument("--json", type=Path, default=BENCH / "results" / results)
    return p


def pinned() -> tuple[float, ...]:
    """The driver moved to the server's core (it shares that one, not the generator's) and its open-file limit
    raised for the generators it starts: the machine's load averages then, for the page."""
    from measure import raise_nofile_limit

    raise_nofile_limit()
    os.sched_setaffinity(0, {SERVER_CPU})
    return os.getloadavg()


def rotated(order: Sequence[T], rep: int) -> list[T]:
    """`order` started at repetition `rep`'s place: over len(order) repetitions each goes first once."""
    k = rep % len(order)
    return [*order[k:], *order[:k]]


def repeated(reps: int, variants: Sequence[str], one: Callable[[str], Row], pause_s: float = 0.0) -> list[Row]:
    """`one(variant)` for every variant in each of `reps` repetitions, their order rotated (each takes each place in
    turn), each row printed as it comes and marked with its repetition."""
    rows: list[Row] = []
    for rep in range(reps):
        for variant in rotated(variants, rep):
            rows.append({"rep": rep, **one(variant)})
            print(json.dumps(rows[-1]), flush=True)
            time.sleep(pause_s)
    return rows


def median(rows: list[Row], key: str) -> float:
    return float(statistics.median(r[key] for r in rows))


def paired(
    rows: list[Row],
    mine: str,
    theirs: str,
    *,
    key: str = "per_cpu_s",
    column: str = "variant",
    op: Callable[[float, float], float] = operator.truediv,
) -> list[float]:
    """Per repetition, `op` of `mine`'s `key` and `theirs'` (rows told apart by `column`), sorted; a repetition
    without either is passed over."""
    by = {(r["rep"], r[column]): r[key] for r in rows if key in r}
    reps = sorted({r["rep"] for r in rows})
    return sorted(op(by[(i, mine)], by[(i, theirs)]) for i in reps if (i, mine) in by and (i, theirs) in by)


def knee_counts(doc: dict[str, Any]) -> Row:
    """A `knee run --json` document's requests (every operation that ended), errors and latency percentiles."""
    return {
        "requests": doc["succeeded"] + doc["failed"] + doc["hung"],
        "errors": doc["failed"] + doc["hung"],
        "p50_ms": doc["latency_ms"]["p50"],
        "p99_ms": doc["latency_ms"]["p99"],
    }


def cpu_per_request(row: Row, doc: dict[str, Any], m: Any, served: int) -> Row:
    """`row` (its `requests` counted) with the CPU figures of a measured `knee run --json` (`doc`; `m`, the
    process tree's wait4): the step's and the process's CPU, nginx's count `served`, and each per request (µs)."""
    row |= {"load_cpu_s": doc["generator"]["cpu_s"], "nginx_requests": served, "cpu_s": m.cpu_s, "wall_s": m.wall_s}
    row["us_per_request"] = row["cpu_s"] / row["requests"] * 1e6
    row["load_us_per_request"] = row["load_cpu_s"] / row["requests"] * 1e6
    return row


def knee_version() -> str:
    from tool import first_line

    return first_line([sys.executable, "-m", "knee", "--version"]).removeprefix("knee, version ")


def write_section(path: Path, text: str) -> None:
    """`text` (starting and ending with its markers) in place of the section between the same markers in `path`,
    or at its end."""
    begin, end = text.splitlines()[0], text.splitlines()[-1]
    doc = path.read_text() if path.exists() else ""
    if begin in doc and end in doc:
        head, rest = doc.split(begin, 1)
        doc = head + text + rest.split(end, 1)[1]
    else:
        doc = doc.rstrip("\n") + "\n\n" + text + "\n"
    path.write_text(doc)


def installed(present: Callable[[], bool], tool: str, what: str) -> None:
    """`bash bench/install.sh TOOL` when `present()` is false; the bench ends with a sentence if it still is."""
    if not present():
        print(f"installing {what} with bench/install.sh {tool} …", flush=True)
        subprocess.run(["bash", str(BENCH / "install.sh"), tool], check=False)
    if not present():
        raise SystemExit(f"{what} is not installed and bench/install.sh {tool} could not install it")


def finish(
    args: argparse.Namespace,
    load_before: tuple[float, ...],
    rows: list[Row],
    section_from: Callable[[dict[str, Any]], str],
    **extra: Any,
) -> None:
    """The bench's figures (its arguments, the machine, the load averages around it, its --note, `rows` and `extra`)
    saved: the raw ones to --json, `section_from` them to --out. Each of `extra` is printed first, as the rows were."""
    from report import machine

    for value in extra.values():
        print(json.dumps(value), flush=True)

    data = {
        "args": vars(args) | {"out": str(args.out), "json": str(args.json)},
        "machine": machine(),
        "loadavg_before": load_before,
        "loadavg_after": os.getloadavg(),
        "note": getattr(args, "note", ""),
        "runs": rows,
        **extra,
    }
    save(args, data, section_from(data))


def section(begin: str, lines: list[str], data: dict[str, Any], results: str, end: str) -> str:
    """The page's section between its markers: `lines`, then the footer."""
    return "\n".join([begin, *lines, "", *footer(data, results), end])


def footer(data: dict[str, Any], results: str) -> list[str]:
    """The section's last lines: the note, the machine, the load averages, where the raw figures are."""
    return [
        *([data["note"], ""] if data.get("note") else []),
        f"Machine: {data['machine']}; load average before {data['loadavg_before'][0]:.2f}, after "
        f"{data['loadavg_after'][0]:.2f}. Raw figures: `bench/results/{results}`.",
    ]


def save(args: argparse.Namespace, data: dict[str, Any], section: str) -> None:
    """The raw figures to --json, the section to --out."""
    args.json.parent.mkdir(exist_ok=True)
    args.json.write_text(json.dumps(data, indent=2))
    write_section(args.out, section)
    print(f"wrote {args.out}", flush=True)
