#!/usr/bin/env python3
"""`make bench`: knee against wrk, ab, oha, hey, vegeta and Locust (and exec and flow baselines), on this machine.

nginx (1 worker) is pinned to core 0, each generator to core 1; runs of one scenario are interleaved and
repeated; the medians go to docs/performance.md. `--smoke` is the short version `make test` runs.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import asdict
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from measure import raise_nofile_limit, run_measured, spawn_curve
from nginx_server import Nginx, nginx_version
from report import machine, write_report
from scenarios import HTTP_MODES, TOOLS, Scenario, scenarios
from tool import BENCH, ROOT, ParseError, Run, Tool

INSTALLABLE = ("oha", "hey", "vegeta", "locust")
SERVER_CPU, GENERATOR_CPU = 0, 1
MEDIAN_KEYS = (
    "requests",
    "rps",
    "cpu_s",
    "user_s",
    "sys_s",
    "wall_s",
    "per_cpu_s",
    "p50_ms",
    "p99_ms",
    "errors",
    "maxrss_mb",
    "own_cpu_s",
    "start_ms",
    "merge_ms",
    "skew_ms",
    "load_cores",
    "server_active_peak",
    "tree_rss_mb",
    "knee_processes",
    "nginx_workers",
)


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--smoke", action="store_true", help="1 s runs, 1 repetition, installed tools only, no docs")
    p.add_argument("--duration", type=int, default=None, help="seconds per run (default 10; smoke 1)")
    p.add_argument("--reps", type=int, default=None, help="repetitions, median reported (default 3; smoke 1)")
    p.add_argument("--only", action="append", default=[], metavar="NAME", help="only this generator (repeatable)")
    p.add_argument("--scenario", action="append", default=[], metavar="NAME", help="only this scenario (repeatable)")
    p.add_argument("--concurrency", type=int, default=50, help="clients in the keep-alive/new-connection runs")
    p.add_argument("--json", type=Path, default=None, help="write every run's numbers here (default bench/results/)")
    p.add_argument("--out", type=Path, default=ROOT / "docs" / "performance.md", help="the report to write")
    p.add_argument("--no-install", action="store_true", help="do not install missing peer generators")
    p.add_argument("--from-json", type=Path, default=None, help="rewrite the report from a --json file; run nothing")
    p.add_argument(
        "--merge-into",
        type=Path,
        default=None,
        metavar="JSON",
        help="keep this results file's runs of the scenarios not run now (with --scenario): the page has every row, "
        "and names which were measured when",
    )
    args = p.parse_args(argv)
    args.duration = args.duration or (1 if args.smoke else 10)
    args.reps = args.reps or (1 if args.smoke else 3)
    unknown = [n for n in args.only if n not in TOOLS]
    if unknown:
        p.error(f"--only {unknown[0]}: unknown generator; choose from {', '.join(TOOLS)}")
    names = {s.name for s in scenarios(args.concurrency, args.smoke)}
    bad = [n for n in args.scenario if n not in names]
    if bad:
        p.error(f"--scenario {bad[0]}: unknown scenario; choose from {', '.join(sorted(names))}")
    if args.duration < 1 or args.reps < 1:
        p.error("--duration and --reps must be at least 1")
    return args


def install_missing(names: list[str]) -> None:
    missing = [n for n in names if n in INSTALLABLE and not TOOLS[n].available()]
    if missing:
        print(f"installing {', '.join(missing)} with bench/install.sh …", flush=True)
        result = subprocess.run(["bash", str(BENCH / "install.sh"), *missing], check=False)
        if result.returncode != 0:
            print(f"bench/install.sh failed ({result.returncode}); those generators are skipped", flush=True)


def one_run(
    tool: Tool, scenario: Scenario, server: Nginx | _NoServer, duration: int, expected_ops: int
) -> dict[str, object]:
    workdir = Path(tempfile.mkdtemp(prefix=f"knee-bench-{tool.name}-"))
    url = server.url_for(scenario.mode)
    run = Run(scenario.mode, scenario.concurrency, duration, url, workdir, expected_ops, scenario.streams)
    row: dict[str, object] = {"scenario": scenario.name, "tool": tool.name}
    http = scenario.mode in HTTP_MODES
    try:
        before = server.requests() if http else 0
        hold = scenario.mode == "exec-hold"
        measured = run_measured(
            tool.command(run), GENERATOR_CPU, timeout_s=duration * 3 + 60, cwd=workdir, count_children=hold
        )
        if hold:
            row["spawn_curve"] = spawn_curve(measured.children)
        if http:  # what nginx read, the counter's own request excluded: held against the tool's own count
            row["server_requests"] = server.requests() - before - 1
        row |= {"cpu_s": measured.cpu_s, "user_s": measured.user_s, "sys_s": measured.sys_s}
        row |= {"maxrss_mb": measured.maxrss_mb, "wall_s": measured.wall_s}
        if measured.timed_out:
            row["error"] = f"timed out after {measured.wall_s:.0f} s"
        else:
            try:
                sample = tool.parse(measured, run)
                row |= asdict(sample)
                row["per_cpu_s"] = sample.requests / measured.cpu_s if measured.cpu_s > 0 else None
            except (ParseError, KeyError, ValueError, TypeError, IndexError) as exc:
                tail = (measured.stderr or measured.stdout).strip()[-300:]
                row["error"] = f"{exc} (exit {measured.returncode}; {tail})"
    finally:
        shutil.rmtree(workdir, ignore_errors=True)
    return row


def run_scenario(
    scenario: Scenario, tools: list[Tool], server: Nginx | _NoServer, args: argparse.Namespace
) -> list[dict[str, object]]:
    rows: list[dict[str, object]] = []
    for rep in range(args.reps):
        expected_ops = 1000 * args.duration
        for tool in tools:
            row = one_run(tool, scenario, server, args.duration, expected_ops)
            row["rep"] = rep
            if tool.name == "forkexec-c" and isinstance(row.get("rps"), float):
                expected_ops = max(100, int(float(row["rps"]) * args.duration))  # type: ignore[arg-type]
            rows.append(row)
            print(_line(row), flush=True)
            time.sleep(0.5)  # let closed connections drain between runs
    return rows


def _line(row: dict[str, object]) -> str:
    head = f"  {row['scenario']:<9} {row['tool']:<18}"
    if "error" in row:
        return f"{head} ERROR {row['error']}"
    per = row.get("per_cpu_s")
    return (
        f"{head} {row['rps']:>10.0f} req/s  cpu {row['cpu_s']:6.2f} s  "
        f"{per or 0:>9.0f} req/cpu-s  errors {row['errors']}  rss {row['maxrss_mb']:.0f} MB"
    )


def fixed_cost(tool: Tool, url: str) -> tuple[float, float]:
    """CPU seconds and peak RSS (MB) of a one-request run: start-up and report, paid once per run whatever its
    length, and the memory before any connection (median of 3)."""
    costs, rss = [], []
    for _ in range(3):
        workdir = Path(tempfile.mkdtemp(prefix="knee-bench-fixed-"))
        try:
            argv = [*tool.command(Run("keepalive", 1, 1, url, workdir)), "-n", "1"]
            argv.remove("-d")
            argv.remove("1s")
            measured = run_measured(argv, GENERATOR_CPU, timeout_s=60, cwd=workdir)
            costs.append(measured.cpu_s)
            rss.append(measured.maxrss_mb)
        finally:
            shutil.rmtree(workdir, ignore_errors=True)
    return statistics.median(costs), statistics.median(rss)


def worker_start_cost() -> float:
    """CPU seconds of a Python worker's start (median of 3): `python -m knee.pyworker noopflow:noop` from its
    start until it is ready (knee's start message, its ready reply), then it ends at the end of its input."""
    start = json.dumps({"op": "start", "protocol": 1, "group": "main", "process": 0, "clients": [0], "vars": {}})
    costs = []
    for _ in range(3):
        with tempfile.TemporaryDirectory(prefix="knee-bench-worker-") as workdir:
            stdin = Path(workdir) / "start.jsonl"
            stdin.write_text(start + "\n")
            argv = ["sh", "-c", f'exec "$0" -m knee.pyworker noopflow:noop --path {BENCH} < {stdin}', _python()]
            measured = run_measured(argv, GENERATOR_CPU, timeout_s=60, cwd=workdir)
            if '"ready":true' not in measured.stdout:
                raise RuntimeError(f"the Python worker did not get ready: {measured.stdout} {measured.stderr}")
            costs.append(measured.cpu_s)
    return statistics.median(costs)


def _python() -> str:
    """The interpreter knee runs on (its venv's), which its Python workers run on too."""
    venv = ROOT / ".venv" / "bin" / "python"
    return str(venv) if venv.is_file() else sys.executable


def compile_bytecode() -> None:
    """An installed knee has its modules compiled (pip does it); a source tree run with PYTHONDONTWRITEBYTECODE
    would compile every module at every start and measure the compiler. Compile them once, as pip would."""
    env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
    subprocess.run([_python(), "-m", "compileall", "-q", str(ROOT / "python" / "knee")], env=env, check=False)


def medians(rows: list[dict[str, object]]) -> list[dict[str, object]]:
    out: list[dict[str, object]] = []
    keys = dict.fromkeys((str(r["scenario"]), str(r["tool"])) for r in rows)
    for scenario, tool in keys:
        good = [r for r in rows if r["scenario"] == scenario and r["tool"] == tool and "error" not in r]
        failed = [r for r in rows if r["scenario"] == scenario and r["tool"] == tool and "error" in r]
        summary: dict[str, object] = {"scenario": scenario, "tool": tool, "runs": len(good), "failed_runs": len(failed)}
        for key in MEDIAN_KEYS:
            values = [float(r[key]) for r in good if r.get(key) is not None]  # type: ignore[arg-type]
            summary[key] = statistics.median(values) if values else None
            if key == "per_cpu_s" and len(values) > 1:
                summary["per_cpu_s_range"] = [min(values), max(values)]
        fixed = {r["fixed_cpu_s"] for r in good if r.get("fixed_cpu_s") is not None}
        if len(fixed) == 1:  # the fixed cost measured in the run these rows came from (report.fixed_cost_note)
            summary["fixed_cpu_s"] = fixed.pop()
        if failed:
            summary["error"] = failed[0]["error"]
        out.append(summary)
    return out


def busy_share(seconds: float) -> float:
    """The share of the machine's CPU time that was not idle over the next `seconds` (/proc/stat), with nothing of
    the benchmark's running: other work on the cores. The load average cannot say it right after bench/install.sh
    compiled a peer (its minute-long mean still counts the build)."""

    def times() -> tuple[int, int]:
        with open("/proc/stat") as f:
            fields = [int(v) for v in f.readline().split()[1:]]
        return sum(fields), fields[3] + fields[4]  # all, idle + iowait

    total0, idle0 = times()
    time.sleep(seconds)
    total1, idle1 = times()
    return 1 - (idle1 - idle0) / max(1, total1 - total0)


def merge_into(
    base: dict[str, Any],
    rows: list[dict[str, object]],
    titles: dict[str, str],
    meta_extra: dict[str, object],
    versions: dict[str, str],
) -> tuple[list[dict[str, object]], dict[str, str], dict[str, object]]:
    """The runs of `base` (a results file) whose scenarios were not run now, then this run's `rows`; the titles of
    both, in base's order; and what the page says of the merge. A figure this run did not measure (the fixed
    cost, when no HTTP scenario ran) is base's, into `meta_extra`; so is the version of a tool whose rows are kept
    (into `versions`). A kept knee row keeps the fixed cost of the run that measured it."""
    ran = {str(r["scenario"]) for r in rows}
    kept = [dict(r) for r in base["runs"] if r["scenario"] not in ran]
    for r in kept:
        if r["tool"] == "knee" and "knee_fixed_cpu_s" in base["meta"]:
            r.setdefault("fixed_cpu_s", base["meta"]["knee_fixed_cpu_s"])
        if r["tool"] in base["meta"].get("versions", {}):
            versions.setdefault(str(r["tool"]), base["meta"]["versions"][r["tool"]])
    fixed_now = "knee_fixed_cpu_s" in meta_extra
    for key in ("knee_fixed_cpu_s", "knee_fixed_rss_mb", "worker_start_cpu_s"):
        if key not in meta_extra and key in base["meta"]:
            meta_extra[key] = base["meta"][key]
    merged = {
        "scenarios": sorted(ran),
        "from": base["meta"].get("results_file", ""),
        "from_started_unix": base["meta"]["started_unix"],
        "fixed_cost_now": fixed_now,
        # base's own merge, if it was one: the page names every run's rows
        **({"before": base["meta"]["merged"]} if base["meta"].get("merged") else {}),
    }
    return kept + rows, {**base["meta"].get("titles", {}), **titles}, merged


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    if args.from_json:
        saved = json.loads(args.from_json.read_text())
        titles = saved["meta"].get("titles") or {s.name: s.title for s in scenarios(args.concurrency, smoke=False)}
        write_report(args.out, saved["meta"], medians(saved["runs"]), saved["runs"], titles)
        print(f"wrote {args.out}", flush=True)
        return 0
    raise_nofile_limit()
    chosen = [s for s in scenarios(args.concurrency, args.smoke) if (s.smoke or not args.smoke)]
    if args.scenario:
        chosen = [s for s in chosen if s.name in args.scenario]
    wanted = sorted({t for s in chosen for t in s.tools if not args.only or t in args.only})
    if not args.smoke and not args.no_install:
        install_missing(wanted)
    tools = {n: TOOLS[n] for n in wanted if TOOLS[n].available()}
    skipped = [n for n in wanted if n not in tools]
    if skipped:
        print(f"not installed, skipped: {', '.join(skipped)}", flush=True)
    versions = {n: t.version() for n, t in tools.items()} | {"nginx": nginx_version()}
    load_before = os.getloadavg()
    busy_before = None if args.smoke else busy_share(3.0)  # the page says it; a smoke run writes no page
    started = time.time()
    rows: list[dict[str, object]] = []
    meta_extra: dict[str, object] = {}
    needs_http = any(s.mode in HTTP_MODES for s in chosen)
    with Nginx(cpu=SERVER_CPU) if needs_http else _NoServer() as server:
        if "knee" in tools and not args.smoke:
            compile_bytecode()
        if "knee" in tools and needs_http and not args.smoke:
            meta_extra["knee_fixed_cpu_s"], meta_extra["knee_fixed_rss_mb"] = fixed_cost(tools["knee"], server.url)
            meta_extra["worker_start_cpu_s"] = worker_start_cost()
            print(
                f"fixed cost: one-request run {meta_extra['knee_fixed_cpu_s']:.3f} CPU-s, Python worker start "
                f"{meta_extra['worker_start_cpu_s']:.3f} CPU-s",
                flush=True,
            )
        for scenario in chosen:
            present = [tools[n] for n in scenario.tools if n in tools]
            if not present:
                continue
            print(f"{scenario.title} ({args.duration} s × {args.reps})", flush=True)
            if scenario.mode == "distributed":
                import dask_bench

                rows += dask_bench.measure(args.duration, args.reps)
                continue
            if scenario.mode == "many-connections":
                import many_conns

                rows += many_conns.measure(args.duration, args.reps)
                continue
            rows += run_scenario(scenario, present, server, args)
    titles = {s.name: s.title for s in chosen}
    for r in rows:
        if r["tool"] == "knee" and "knee_fixed_cpu_s" in meta_extra:
            r["fixed_cpu_s"] = meta_extra["knee_fixed_cpu_s"]
    merged: dict[str, object] = {}
    if args.merge_into:
        base = json.loads(args.merge_into.read_text())
        rows, titles, merged = merge_into(base, rows, titles, meta_extra, versions)
    summary = medians(rows)
    meta = {
        "started_unix": started,
        "duration_s": args.duration,
        "reps": args.reps,
        "loadavg_before": load_before,
        "busy_before": busy_before,
        "loadavg_after": os.getloadavg(),
        "versions": versions,
        "skipped": skipped,
        "smoke": args.smoke,
        "titles": titles,
        "machine": machine(),
        **meta_extra,
        **({"merged": merged} if merged else {}),
    }
    if args.json is None and not args.smoke:  # keep the raw numbers: `--from-json` re-renders the report
        args.json = BENCH / "results" / time.strftime("bench-%Y%m%dT%H%M%SZ.json", time.gmtime(started))
        args.json.parent.mkdir(exist_ok=True)
    if args.json:
        with contextlib.suppress(ValueError):  # a file outside the repository is named as given
            meta["results_file"] = str(args.json.resolve().relative_to(ROOT))
        meta.setdefault("results_file", str(args.json))
        args.json.write_text(json.dumps({"meta": meta, "runs": rows, "medians": summary}, indent=2))
        print(f"wrote {args.json}", flush=True)
    if not args.smoke:
        write_report(args.out, meta, summary, rows, titles)
        print(f"wrote {args.out}", flush=True)
    return 1 if any("error" in r for r in rows) else 0


class _NoServer:
    url = ""

    def url_for(self, mode: str) -> str:
        return ""

    def requests(self) -> int:
        return 0

    def __enter__(self) -> _NoServer:
        return self

    def __exit__(self, *exc: object) -> None:
        return None


if __name__ == "__main__":
    sys.exit(main())
