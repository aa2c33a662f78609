#!/usr/bin/env python3
"""`make bench`, traffic like production (issue 36): what data sources and request mixes cost knee's engine.

nginx (one worker, `return 200` on every path and method) on core 0; on core 1, `knee run -c 50` in five variants,
keep-alive, in paired repetitions whose order rotates (each variant takes each place once in 5 repetitions):

- fixed: one URL, `/u/500000`;
- feeder: `/u/${ids.id}` from a 1 000 000-row CSV (`id,name`), `--data-order random`;
- mix: a scenario of two requests, 9 GET `/read` to 1 POST `/write` with a 44-byte JSON body;
- targets: `knee run --targets FILE`, a vegeta targets file of 1 000 distinct URLs (`GET …/u/I`);
- vegeta: `vegeta attack -targets FILE -rate=0 -workers=50 -max-workers=50 | vegeta report -type=json`, the same
  file (both programs counted, as in bench/run.py).

CPU is each generator's whole process tree (wait4: user + system, start-up and the file's load included); knee's
own CPU over the step (its --json `generator.cpu_s`) is shown beside it. Requests are the generator's own count,
held against nginx's (stub_status). Each target is the median over the repetitions of the ratio within one
repetition. Then the file's load: a one-request run (`-n 1`) with and without the 1 000 000-row file, alternating,
its wall clock, CPU, peak RSS and the time from launch to the step's start (run.json's `started_unix`).

The results go to bench/results/bench-feeders.json and the section between the markers in docs/performance.md.
`--smoke` (tests/integration/test_bench_smoke.py): 0.5 s per variant, one repetition, a 10 000-row file, no docs.
"""

from __future__ import annotations

import argparse
import json
import operator
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

BENCH = Path(__file__).resolve().parent
sys.path.insert(0, str(BENCH))

from paired import (  # noqa: E402
    GENERATOR_CPU,
    ROOT,
    SERVER_CPU,
    knee_counts,
    knee_version,
    median,
    paired,
    rotated,
    write_section,
)

BEGIN, END = "<!-- feeder-bench: begin -->", "<!-- feeder-bench: end -->"
VARIANTS = ("fixed", "feeder", "mix", "targets", "vegeta")
TARGETS = 1000  # distinct URLs in the targets file
FEEDER_VS_FIXED = MIX_VS_FIXED = 0.95
VS_VEGETA = 2.0
MEMORY_FACTOR, MEMORY_EXTRA_MB = 1.5, 50.0

BODY = '{"id": 123456, "name": "user123456", "n": 1}'
JSON = {"Content-Type": "application/json"}


def write_inputs(d: Path, url: str, rows: int, targets_count: int) -> dict[str, Path]:
    """The CSV (`id,name`, `rows` rows), the mix scenario and the targets file (`targets_count` URLs), in `d`."""
    sys.path.append(str(ROOT / "tests"))  # the tests' writers of the same files
    from datafiles import ids_csv, mix_scenario

    csv = ids_csv(d / "ids.csv", rows)
    write = {"name": "write", "weight": 1, "url": "/write", "method": "POST", "headers": JSON, "body": BODY}
    mix = d / "mix.toml"
    mix.write_text(mix_scenario(f"{url}read", {"name": "read", "weight": 9}, write, seed=1))
    targets = d / "targets.txt"
    targets.write_text("".join(f"GET {url}u/{i * 997}\n" for i in range(targets_count)))
    return {"csv": csv, "mix": mix, "targets": targets}


def argv_of(variant: str, url: str, files: dict[str, Path], a: argparse.Namespace, out: Path) -> list[str]:
    if variant == "vegeta":
        vegeta = _vegeta()
        attack = (f"{vegeta} attack -rate=0 -workers={a.clients} -max-workers={a.clients} -duration={_ms(a.duration)} "
                  f"-targets={files['targets']}")  # fmt: skip
        return ["sh", "-c", f"{attack} | {vegeta} report -type=json"]
    common = ["-q", "-c", str(a.clients), "-d", _ms(a.duration), "--json", str(out)]
    knee = [sys.executable, "-m", "knee", "run"]
    if variant == "fixed":
        return [*knee, f"{url}u/500000", *common]
    if variant == "feeder":
        return [*knee, url + "u/${ids.id}", "--data", f"ids={files['csv']}", "--data-order", "random", *common]
    if variant == "mix":
        return [*knee, str(files["mix"]), *common]
    return [*knee, "--targets", str(files["targets"]), *common]


def _ms(seconds: float) -> str:
    """A duration as both knee's -d and vegeta's -duration read it."""
    return f"{round(seconds * 1000)}ms"


def _vegeta() -> str:
    from tool import find_binary

    found = find_binary("vegeta")
    if found is None:
        raise SystemExit("vegeta is not installed: run bench/install.sh vegeta")
    return found


def vegeta_present(install: bool) -> bool:
    """Whether vegeta is there; with `install`, installed first as bench/run.py installs its peers."""
    from tool import find_binary

    if find_binary("vegeta") is None and install:
        print("installing vegeta with bench/install.sh …", flush=True)
        subprocess.run(["bash", str(BENCH / "install.sh"), "vegeta"], check=False)
    return find_binary("vegeta") is not None


def one(variant: str, server: Any, files: dict[str, Path], a: argparse.Namespace) -> dict[str, Any]:
    from http_tools import Vegeta
    from measure import run_measured

    before, engine, started = server.requests(), engine_id(), time.time()
    with tempfile.TemporaryDirectory(prefix="knee-feeder-bench-") as tmp:
        out = Path(tmp) / "knee.json"
        m = run_measured(argv_of(variant, server.url, files, a, out), GENERATOR_CPU, a.duration * 3 + 90, cwd=tmp)
        if m.returncode != 0 or m.timed_out:
            raise SystemExit(f"{variant} failed ({m.returncode}):\n{m.stderr[-2000:]}")
        row: dict[str, Any] = {"variant": variant, "started_unix": started, "engine": engine}
        if variant == "vegeta":
            s = Vegeta().parse(m, None)  # type: ignore[arg-type]
            row |= {"requests": s.requests, "errors": s.errors, "p50_ms": s.p50_ms, "p99_ms": s.p99_ms}
        else:
            doc = json.loads(out.read_text())
            row |= knee_counts(doc)
            row |= {"started": doc["started"], "load_cpu_s": doc["generator"]["cpu_s"], "elapsed_s": doc["elapsed_s"]}
            if doc.get("data"):
                row["data_memory_bytes"] = doc["data"][0]["memory_bytes"]
            names = doc.get("requests") or {}
            row["request_names"] = len(names)
            if 0 < len(names) <= 10:  # the mix's; not the targets' thousand
                row["per_request"] = {k: v["succeeded"] for k, v in names.items()}
    row["nginx_requests"] = server.requests() - before - 1  # nginx's count, less this look at it
    row["loadavg_1m"] = os.getloadavg()[0]  # other work on the machine (this run's own adds about 2)
    row |= {"cpu_s": m.cpu_s, "user_s": m.user_s, "sys_s": m.sys_s, "wall_s": m.wall_s, "rss_mb": m.maxrss_mb}
    row["per_cpu_s"] = row["requests"] / m.cpu_s
    if "load_cpu_s" in row:
        row["per_load_cpu_s"] = row["requests"] / row["load_cpu_s"]
    return row


def check(row: dict[str, Any], clients: int) -> None:
    """The generator's count against nginx's: knee's started operations are what nginx read; vegeta counts the
    requests it completed, so nginx may have read one more per connection (in flight when it stopped)."""
    extra = row["nginx_requests"] - row.get("started", row["requests"])
    if row["errors"] or not (extra == 0 if "started" in row else 0 <= extra <= 2 * clients):
        raise SystemExit(f"{row['variant']}: {row['errors']} errors, nginx read {row['nginx_requests']}: {row}")


def load_time(server: Any, files: dict[str, Path], reps: int) -> list[dict[str, Any]]:
    """A one-request run with and without the file, alternating: what the file's load costs before any request."""
    from measure import run_measured

    rows = []
    for rep in range(reps):
        for variant in rotated(("fixed", "feeder"), rep):
            with tempfile.TemporaryDirectory(prefix="knee-feeder-load-") as tmp:
                url = server.url + ("u/${ids.id}" if variant == "feeder" else "u/500000")
                data = ["--data", f"ids={files['csv']}", "--data-order", "random"] if variant == "feeder" else []
                argv = [sys.executable, "-m", "knee", "run", url, *data, "-q", "-n", "1", "--out", tmp]
                launched = time.time()
                m = run_measured(argv, GENERATOR_CPU, 120, cwd=tmp)
                if m.returncode != 0:
                    raise SystemExit(f"load {variant} failed ({m.returncode}):\n{m.stderr[-2000:]}")
                (record,) = Path(tmp).glob("*/run.json")
                step = json.loads(record.read_text())["steps"][0]
            held = step["data"][0]["memory_bytes"] if step.get("data") else None
            rows.append({"rep": rep, "variant": variant, "wall_s": m.wall_s, "cpu_s": m.cpu_s, "rss_mb": m.maxrss_mb,
                         "to_step_s": step["started_unix"] - launched, "data_memory_bytes": held})  # fmt: skip
            print(json.dumps(rows[-1]), flush=True)
    return rows


def engine_id() -> str:
    """The installed engine's file, size and time: a build that replaced it during the bench shows as a change."""
    import knee

    found = sorted(Path(knee.__file__).parent.glob("_engine*.so"))
    if not found:
        return "not found"
    st = found[0].stat()
    return f"{found[0].name} {st.st_size} bytes, {time.strftime('%Y-%m-%d %H:%M:%S', time.gmtime(st.st_mtime))} UTC"


def versions() -> dict[str, str]:
    from tool import find_binary, go_module_version

    vegeta = find_binary("vegeta")
    return {
        "knee": knee_version(),
        "vegeta": go_module_version(vegeta) if vegeta else "not installed",
        "nginx": __import__("nginx_server").nginx_version(),
    }


# --- the section in docs/performance.md -----------------------------------------------------------------------


def _per_request(rows: list[dict[str, Any]], key: str) -> float:
    """Median over the runs of `key` (CPU seconds) per request, in µs."""
    return float(statistics.median(r[key] / r["requests"] * 1e6 for r in rows))


def _ratio(r: list[float]) -> str:
    return f"**{statistics.median(r):.3f}×** ({r[0]:.3f}–{r[-1]:.3f})" if r else "—"


def _verdict(ok: bool) -> str:
    return "**met**" if ok else "**not met**"


def _titles(data: dict[str, Any]) -> dict[str, str]:
    return {
        "fixed": "fixed URL (`/u/500000`)",
        "feeder": f"`/u/${{ids.id}}`, {data['csv_rows']:,} rows, random",
        "mix": "9:1 mix, GET `/read`, POST `/write`",
        "targets": f"`--targets`, {data['args']['targets']:,} URLs",
        "vegeta": "vegeta, the same targets file",
    }


def section_from(data: dict[str, Any]) -> str:
    rows, a, loads, titles = data["runs"], data["args"], data["load"], _titles(data)
    table = [
        "| generator | requests/s | CPU s (user + sys) | core use | requests per CPU-s | knee's CPU s during the load "
        "| requests per CPU-s of the load | µs per request, user + sys | p50 ms | p99 ms | errors | peak RSS MB |",
        "|---|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for v in VARIANTS:
        mine = [r for r in rows if r["variant"] == v]
        if not mine:
            continue
        per = sorted(r["per_cpu_s"] for r in mine)
        load = f"{median(mine, 'load_cpu_s'):.2f}" if "load_cpu_s" in mine[0] else "—"
        per_load = f"{median(mine, 'per_load_cpu_s'):,.0f}" if "per_load_cpu_s" in mine[0] else "—"
        use = median(mine, "cpu_s") / median(mine, "wall_s")
        table.append(
            f"| {titles[v]} | {median(mine, 'requests') / a['duration']:,.0f} | {median(mine, 'cpu_s'):.2f} "
            f"({median(mine, 'user_s'):.2f} + {median(mine, 'sys_s'):.2f}) | {use:.0%} "
            f"| {statistics.median(per):,.0f} ({per[0]:,.0f}–{per[-1]:,.0f}) | {load} | {per_load} "
            f"| {_per_request(mine, 'user_s'):.2f} + {_per_request(mine, 'sys_s'):.2f} "
            f"| {median(mine, 'p50_ms'):.3f} | {median(mine, 'p99_ms'):.3f} | {sum(r['errors'] for r in mine)} "
            f"| {median(mine, 'rss_mb'):.0f} |"
        )
    feeder, mix = paired(rows, "feeder", "fixed"), paired(rows, "mix", "fixed")
    vegeta, targets_fixed = paired(rows, "targets", "vegeta"), paired(rows, "targets", "fixed")
    feeder_load, mix_load = (
        paired(rows, "feeder", "fixed", key="per_load_cpu_s"),
        paired(rows, "mix", "fixed", key="per_load_cpu_s"),
    )
    size_mb = data["csv_bytes"] / 2**20
    bound = MEMORY_FACTOR * size_mb + MEMORY_EXTRA_MB
    fed = [r for r in rows if r["variant"] == "feeder"]
    fixed = [r for r in rows if r["variant"] == "fixed"]
    rss, rss_fixed = max(r["rss_mb"] for r in fed), median(fixed, "rss_mb")
    held = statistics.median(r["data_memory_bytes"] for r in fed) / 2**20
    by_load = {v: [r for r in loads if r["variant"] == v] for v in ("fixed", "feeder")}
    load_wall = paired_diff(loads, "wall_s")
    load_to_step = paired_diff(loads, "to_step_s")
    load_cpu = paired_diff(loads, "cpu_s")
    targets = [
        "| target | measured | verdict |",
        "|---|---|---|",
        f"| templated URL from {data['csv_rows']:,} rows (random): requests per CPU-s ≥ {FEEDER_VS_FIXED} × the "
        "fixed URL's "
        f"| {_ratio(feeder)} (during the load: {_ratio(feeder_load)}) "
        f"| {_verdict(bool(feeder) and statistics.median(feeder) >= FEEDER_VS_FIXED)} |",
        f"| 9:1 mix: requests per CPU-s ≥ {MIX_VS_FIXED} × the fixed URL's | {_ratio(mix)} (during the load: "
        f"{_ratio(mix_load)}) | {_verdict(bool(mix) and statistics.median(mix) >= MIX_VS_FIXED)} |",
        f"| {data['csv_rows']:,}-row feeder's memory, the whole process: knee's peak RSS ≤ {MEMORY_FACTOR} × the "
        f"file ({size_mb:.1f} MB) + {MEMORY_EXTRA_MB:.0f} MB = {bound:.1f} MB | largest peak RSS {rss:.1f} MB (the "
        f"fixed URL's, no file: {rss_fixed:.1f} MB) | {_verdict(rss <= bound)} |",
        f"| {data['csv_rows']:,}-row feeder's memory, what the file adds: peak RSS over the fixed URL's run, and the "
        f"rows' `memory_bytes`, each ≤ {bound:.1f} MB | +{rss - rss_fixed:.1f} MB; `memory_bytes` {held:.1f} MB "
        f"({held / size_mb:.2f} × the file) | {_verdict(rss - rss_fixed <= bound and held <= bound)} |",
        f"| `--targets` ({a['targets']:,} URLs): requests per CPU-s ≥ {VS_VEGETA} × vegeta's on the same file "
        f"| {_ratio(vegeta)} "
        f"| {_verdict(bool(vegeta) and statistics.median(vegeta) >= VS_VEGETA)} |",
    ]
    load = [
        "| one-request run (`-n 1`) | wall clock s | launch → the step's start, s | CPU s | peak RSS MB |",
        "|---|---|---|---|---|",
    ]
    for v, title in (("fixed", "fixed URL"), ("feeder", f"with the {data['csv_rows']:,}-row file")):
        mine = by_load[v]
        load.append(f"| {title} | {median(mine, 'wall_s'):.3f} | {median(mine, 'to_step_s'):.3f} | "
                    f"{median(mine, 'cpu_s'):.3f} | {median(mine, 'rss_mb'):.0f} |")  # fmt: skip
    load.append(
        f"| the file's cost (paired difference, median (lowest–highest)) | {_diff(load_wall)} | {_diff(load_to_step)} "
        f"| {_diff(load_cpu)} | {median(by_load['feeder'], 'rss_mb') - median(by_load['fixed'], 'rss_mb'):+.0f} |"
    )
    v = data["versions"]
    return "\n".join(
        [
            BEGIN,
            f"## Data sources and request mixes (issue 36), {a['clients']} keep-alive clients",
            "",
            f"`python bench/feeder_bench.py --duration {a['duration']:g} --reps {a['reps']}` (part of `make bench`): "
            "nginx (one worker, `return 200` on every path and method) on core 0; on core 1, in turn (the order "
            f"rotates each repetition), `knee run -c {a['clients']} -d {a['duration']:g}s` on a fixed URL, on "
            f"`/u/${{ids.id}}` with `--data ids=ids.csv --data-order random` ({data['csv_rows']:,} rows `id,name`, "
            f"{size_mb:.1f} MB), on a scenario of two requests (9 GET `/read` to 1 POST `/write` with a "
            f"{len(BODY)}-byte JSON body), on `--targets targets.txt` ({a['targets']:,} distinct `GET …/u/I` lines), "
            "and `vegeta attack "
            f"-targets targets.txt -rate=0 -workers={a['clients']} -max-workers={a['clients']} | vegeta report` on "
            "the same file. CPU s is the whole process tree (wait4), start-up and the file's load included; "
            "knee's CPU during the load is its --json `generator.cpu_s` over the step. Every run's count equals "
            "nginx's (stub_status; vegeta's within one request per connection), no errors. Medians, requests per "
            "CPU-s with the lowest–highest:",
            "",
            *table,
            "",
            "µs per request is the whole process tree's user and system CPU over its requests (start-up included). "
            "Each ratio is the median over the repetitions of the two runs' ratio within one repetition (lowest–"
            "highest in brackets); it can differ from the ratio of the two medians in the table.",
            "",
            *targets,
            "",
            f"`--targets` against the fixed URL: {_ratio(targets_fixed)}; {_outside(rows)}",
            "",
            f"The file's load, {a['load_reps']} one-request runs each, alternating (launch → the step's start is "
            "the time from the process's launch "
            "to run.json's `started_unix`; each run keeps a run directory, whose report.html is most of its CPU):",
            "",
            *load,
            "",
            f"Machine: {data['machine']}; load average (1 min) before / after: {data['loadavg_before'][0]:.2f} / "
            f"{data['loadavg_after'][0]:.2f}{_load_range(rows)}. {data.get('note', '')}".rstrip(),
            "",
            *_engine_note(data.get("engine"), rows),
            *([f"Where the time goes: {data['profile']}", ""] if data.get("profile") else []),
            f"Versions: knee {v['knee']}, vegeta {v['vegeta']}, {v['nginx']}. Raw figures: "
            "`bench/results/bench-feeders.json`.",
            END,
        ]
    )


def _outside(rows: list[dict[str, Any]]) -> str:
    """What knee spent outside the step (start-up, the end, the report) and its peak RSS, fixed URL and targets."""
    parts = []
    for v in ("fixed", "targets"):
        mine = [r for r in rows if r["variant"] == v]
        if mine:
            outside = statistics.median(r["cpu_s"] - r["load_cpu_s"] for r in mine)
            parts.append(f"{v}: {outside:.2f} CPU-s outside the step, peak RSS {median(mine, 'rss_mb'):.0f} MB")
    return "knee's own figures, " + "; ".join(parts) + "." if parts else ""


def _load_range(rows: list[dict[str, Any]]) -> str:
    loads = [r["loadavg_1m"] for r in rows if "loadavg_1m" in r]
    if not loads:
        return ""
    return f", after each run {min(loads):.2f}–{max(loads):.2f} (a run of its own keeps about 2 busy)"


def _engine_note(engine: list[str] | None, rows: list[dict[str, Any]]) -> list[str]:
    if not engine:
        return []
    if engine[0] == engine[1]:
        return [f"The same engine throughout ({engine[0]}).", ""]
    used: dict[str, list[str]] = {}
    for r in rows:
        if "engine" in r:
            used.setdefault(r["engine"], []).append(f"{r['variant']} {r['rep']}")
    runs = "; ".join(f"{e}: {len(v)} runs ({', '.join(v) if len(v) < 8 else 'the others'})" for e, v in used.items())
    return [f"**The engine was rebuilt during the bench** (another engineer's build; {engine[0]} at the start, "
            f"{engine[1]} at the end). The paired runs started with: {runs or 'not recorded'}.", ""]  # fmt: skip


def paired_diff(rows: list[dict[str, Any]], key: str) -> list[float]:
    return paired(rows, "feeder", "fixed", key=key, op=operator.sub)


def _diff(d: list[float]) -> str:
    return f"{statistics.median(d):+.3f} ({d[0]:+.3f}–{d[-1]:+.3f})" if d else "—"


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--smoke", action="store_true", help="0.5 s per variant, 1 repetition, 10 000 rows, no docs")
    p.add_argument("--duration", type=float, default=None, help="seconds per run (default 10; smoke 0.5)")
    p.add_argument("--reps", type=int, default=None, help="repetitions (default 5; smoke 1)")
    p.add_argument("--load-reps", type=int, default=None, help="one-request runs for the load time (default 5)")
    p.add_argument("--rows", type=int, default=None, help="rows in the CSV (default 1 000 000; smoke 10 000)")
    p.add_argument("--targets", type=int, default=None, help="URLs in the targets file (default 1 000; smoke 10)")
    p.add_argument("--clients", type=int, default=50)
    p.add_argument("--note", default="", help="what the machine was doing, for the page")
    p.add_argument("--profile", default="", help="where the time went (a profile's findings), for the page")
    p.add_argument("--out", type=Path, default=ROOT / "docs" / "performance.md")
    p.add_argument("--json", type=Path, default=None, help="default bench/results/bench-feeders.json (smoke: none)")
    a = p.parse_args(argv)
    a.duration = a.duration or (0.5 if a.smoke else 10)
    a.reps = a.reps or (1 if a.smoke else 5)
    a.load_reps = a.load_reps if a.load_reps is not None else (0 if a.smoke else 5)
    a.rows = a.rows or (10_000 if a.smoke else 1_000_000)
    a.targets = a.targets or (10 if a.smoke else TARGETS)
    if a.json is None and not a.smoke:
        a.json = BENCH / "results" / "bench-feeders.json"
    from measure import raise_nofile_limit
    from nginx_server import Nginx
    from report import machine

    variants = VARIANTS if vegeta_present(install=not a.smoke) else VARIANTS[:-1]
    if not a.smoke and variants != VARIANTS:
        raise SystemExit("vegeta is not installed and bench/install.sh could not install it")
    raise_nofile_limit()
    os.sched_setaffinity(0, {SERVER_CPU})  # this driver shares nginx's core, not knee's
    load_before, engine_before = os.getloadavg(), engine_id()
    rows: list[dict[str, Any]] = []
    with tempfile.TemporaryDirectory(prefix="knee-feeder-inputs-") as tmp, Nginx(cpu=SERVER_CPU) as server:
        files = write_inputs(Path(tmp), server.url, a.rows, a.targets)
        for rep in range(a.reps):
            for variant in rotated(variants, rep):
                row = {"rep": rep, **one(variant, server, files, a)}
                check(row, a.clients)
                rows.append(row)
                print(json.dumps(row), flush=True)
        loads = load_time(server, files, a.load_reps)
        size = files["csv"].stat().st_size
    data = {
        "args": {
            "duration": a.duration,
            "reps": a.reps,
            "clients": a.clients,
            "load_reps": a.load_reps,
            "targets": a.targets,
        },
        "csv_rows": a.rows,
        "csv_bytes": size,
        "machine": machine(),
        "loadavg_before": load_before,
        "loadavg_after": os.getloadavg(),
        "note": a.note,
        "profile": a.profile,
        "engine": [engine_before, engine_id()],  # before and after: the same engine measured throughout?
        "versions": versions(),
        "runs": rows,
        "load": loads,
    }
    if a.json:
        a.json.parent.mkdir(exist_ok=True)
        a.json.write_text(json.dumps(data, indent=2))
        print(f"wrote {a.json}", flush=True)
    if not a.smoke:
        write_section(a.out, section_from(data))
        print(f"wrote {a.out}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
