"""The one road: every way of running knee builds the same plan, and what it measured adds up against a
real nginx (its access log), byte for byte and request for request."""

from __future__ import annotations

import json
import os
import re
from collections import Counter
from pathlib import Path

import pytest

import knee
from knee import fmt
from knee.model import RunRecord
from knee.plan import engine_spec, sweep_plan
from knee.scenario import Scenario, Source, from_raw, read_scenario
from knee.scenario.lineopts import OPTION_NAMES
from knee.scenario.oneline import Options, scenario_table
from knee.store import RunDir

from conftest import knee_cli
from servers import Nginx, settled


def plan_of(scenario: Scenario) -> list[str]:
    """The plan as the JSON of every step's engine spec."""
    return [engine_spec(scenario, step).to_json() for step in sweep_plan(scenario)]


def the_run(out: Path) -> RunRecord:
    (run,) = [p for p in out.iterdir() if p.is_dir()]
    return RunDir(run).load()


# Objects keyed by what was measured (the TCP states seen), not by the schema
_DATA_KEYED = ("tcp_states_peak",)


def assert_same_shape(a: object, b: object, path: str = "$") -> None:
    """Two JSON documents have the same structure, not the same numbers: the same keys and value types, and lists
    whose first items have the same shape (an empty list, such as no findings, fits any)."""
    if isinstance(a, dict) and isinstance(b, dict):
        if path.rpartition(".")[2] in _DATA_KEYED:
            return
        assert sorted(a) == sorted(b), path
        for k in a:
            assert_same_shape(a[k], b[k], f"{path}.{k}")
    elif isinstance(a, list) and isinstance(b, list):
        if a and b:
            assert_same_shape(a[0], b[0], f"{path}[0]")
    else:
        assert type(a) is type(b), (path, a, b)


@pytest.mark.alone  # two sweeps' verdicts, field by field (two whole-core sweeps of nginx)
def test_a_one_line_sweep_equals_its_saved_scenario(nginx: Nginx, tmp_path: Path) -> None:
    for name, target in (
        ("http", [nginx.url + "/", "-H", "X-Test: 1", "--expect-status", "200"]),
        ("exec", ["--expect-stdout", "hello", "--", "curl", "-sf", nginx.url + "/"]),
    ):
        line = ["--levels", "2,4", "-d", "0.4s", "--warmup", "0.1s", "--pause", "0.1s", "--no-recovery", *target]
        saved = tmp_path / f"{name}.toml"
        proc = knee_cli("sweep", "--save-scenario", str(saved), *line)
        assert proc.returncode == 0, proc.stderr
        assert f"scenario written to {saved}" in proc.stdout
        # The same plan, spec for spec, from the command line and from the file it wrote.
        from_file = read_scenario(saved.read_text(), saved.name).scenario
        tgt: str | list[str] = nginx.url + "/" if name == "http" else target[target.index("--") + 1 :]
        opts = Options(
            levels=[2, 4],
            duration="0.4s",
            warmup="0.1s",
            pause="0.1s",
            no_recovery=True,
            **({"headers": ["X-Test: 1"], "expect_status": "200"} if name == "http" else {"expect_stdout": "hello"}),
        )
        table = scenario_table(tgt, opts, run=False)
        from_line = from_raw(table, Source("command line", options=OPTION_NAMES)).scenario
        assert plan_of(from_line) == plan_of(from_file)
        assert from_line == from_file
        # Both run, to run directories of the same structure.
        a, b = tmp_path / f"{name}-line", tmp_path / f"{name}-file"
        assert knee_cli("sweep", "--out", str(a), *line).returncode == 0
        assert knee_cli("sweep", str(saved), "--out", str(b)).returncode == 0
        ra, rb = the_run(a), the_run(b)
        assert (
            [(s.level, s.phase) for s in ra.steps]
            == [(s.level, s.phase) for s in rb.steps]
            == [
                (2, "sweep"),
                (4, "sweep"),
            ]
        )
        assert ra.scenario == rb.scenario == from_file
        ja = json.loads(ra.model_dump_json(by_alias=True))
        jb = json.loads(rb.model_dump_json(by_alias=True))
        ja.pop("run_id"), jb.pop("run_id")
        for j in (ja, jb):  # where the peak fell (and so its bracket's fields) is the measurement's, not the plan's
            for v in j["verdicts"]:
                v.pop("brackets")
        assert_same_shape(ja, jb)
        for s in ra.steps:
            assert s.groups["main"].succeeded > 0 and s.groups["main"].failed == 0


def test_every_started_request_is_in_the_access_log(nginx: Nginx, tmp_path: Path) -> None:
    """started = succeeded + failed + hung + abandoned, and started (+ warm-up) is what nginx logged: exactly."""
    nginx.clear_log()
    proc = knee_cli(
        "sweep", nginx.url + "/", "--levels", "5,20,50", "-d", "1s", "--warmup", "0.2s", "--pause", "0.2s",
        "--no-recovery", "--out", str(tmp_path), env={**os.environ, "COLUMNS": "80"},
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    record = the_run(tmp_path)
    groups = [s.groups["main"] for s in record.steps]
    # Standard output is a pipe (as through `| tee` or in a CI log): the table keeps its full width, whatever
    # COLUMNS says, so no cell is cut ("Concur…") and every count is whole on its level's row.
    table = [line for line in proc.stdout.splitlines() if line[:1] in ("│", "┃")]
    cells = [c.strip() for line in table for c in re.split("[│┃]", line)]
    assert "Concurrency" in cells and "Succeeded (rate)" in cells, proc.stdout
    assert not [c for c in cells if "…" in c], proc.stdout
    rows = {line.split("│")[1].strip(): line for line in proc.stdout.splitlines() if line.startswith("│")}
    for s in record.steps:
        assert f" {s.groups['main'].succeeded:,} (" in rows[str(s.level)], (s.level, proc.stdout)
    for g in groups:
        assert g.started == g.succeeded + g.failed + g.hung + g.abandoned
    assert sum(g.abandoned for g in groups) > 0, "requests in flight when a window closed are counted abandoned"
    sent = sum(g.started + g.warmup_ops for g in groups) + record.probes
    assert settled(lambda: len(nginx.access_lines()), sent) == sent
    md = (tmp_path / record.run_id / "report.md").read_text()
    assert "| Abandoned |" in md


def test_transfer_is_the_file_size_times_the_count(nginx: Nginx, tmp_path: Path) -> None:
    size, n = 100_000, 200
    files = nginx.dir / "files"
    files.mkdir(exist_ok=True)
    (files / "blob").write_bytes(b"x" * size)
    r = knee.run(nginx.url + "/files/blob", clients=4, n=n, out=tmp_path)
    g = r.stats
    assert g.succeeded == n and g.payload_bytes == size * n
    head = (g.bytes_received - g.payload_bytes) / n
    assert head.is_integer() and 100 < head < 1000, head  # every response: the same head, then the file
    assert g.bytes_sent % n == 0
    proc = knee_cli("run", nginx.url + "/files/blob", "-c", "2", "-n", "20")
    assert proc.returncode == 0, proc.stderr
    assert f"Document length:            {size} bytes (mean)" in proc.stdout
    assert f"Total transferred:          {20 * (size + int(head))} bytes received" in proc.stdout
    assert "Transfer rate:" in proc.stdout and "MB/s" in proc.stdout and "Mbit/s" in proc.stdout
    assert r.run_dir is not None
    md = (r.run_dir / "report.md").read_text()
    assert "| Transfer |" in md and "Mbit/s" in md


def test_a_background_baseload_keeps_its_connections_across_steps(nginx: Nginx, tmp_path: Path) -> None:
    scenario = tmp_path / "baseload.toml"
    scenario.write_text(
        f"""
[groups.base]
kind = "http"
url = "{nginx.url}/base"
clients = 50
background = true

[groups.stress]
kind = "http"
url = "{nginx.url}/stress"

[sweep]
levels = [2, 4, 8]
duration = "0.5s"
pause = "0.3s"

[recovery]
enabled = false
"""
    )
    nginx.clear_log()
    proc = knee_cli("sweep", str(scenario), "--out", str(tmp_path / "runs"))
    assert proc.returncode == 0, proc.stderr
    record = the_run(tmp_path / "runs")
    base = [s.groups["base"] for s in record.steps]
    assert all(g.clients == 50 and g.succeeded > 0 for g in base)
    between = record.between["base"]
    sent = sum(g.started + g.warmup_ops for g in base) + between.started + between.warmup_ops
    assert settled(lambda: sum(1 for x in nginx.access_lines() if x.split()[2] == "/base"), sent) == sent
    lines = [line.split() for line in nginx.access_lines()]
    connections = Counter(conn for conn, _, uri, *_ in lines if uri == "/base")
    # 50 connections for the whole sweep (not 50 per step), each used in every step
    assert len(connections) == 50, connections
    stress = {conn for conn, _, uri, *_ in lines if uri == "/stress"}
    # the stress group's clients reconnect with each step; each probe of the service's rest is a connection too (a
    # busy machine may stop the sweep before 8 clients: the steps that ran)
    assert [s.level for s in record.steps] == [2, 4, 8][: len(record.steps)] and len(record.steps) >= 2
    assert len(stress) == sum(s.level for s in record.steps) + record.probes
    # The baseload's rows are the stress group's levels: each names the stress level it ran beside, and its
    # verdict is its degradation beside them, not a peak "with 2 clients" of its own.
    v = next(v for v in record.verdicts if v.group == "base")
    assert v.peak_level is None and v.peak_rate is None and v.collapse_level is None
    rates = [g.rate_hz for g in base]
    top = record.steps[-1].level  # 8, or where a busy machine stopped the sweep (above)
    assert v.sentences[0].startswith(f"beside stress from 2 to {top} clients its rate "), v.sentences
    assert f"({fmt.rate(rates[0])} → {fmt.rate(rates[-1])})" in v.sentences[0]
    assert not any("peak" in x for x in v.sentences), v.sentences
    md = (next(p for p in (tmp_path / "runs").iterdir() if p.is_dir()) / "report.md").read_text()
    section = md[md.index("## Group base") :]  # the last group's
    for s in record.steps:
        assert f"| 50 (beside stress at {s.level}) |" in section
    assert f"**Verdict:** beside stress from 2 to {top} clients" in section and "peaked" not in section


def test_a_kept_knee_run_is_a_run_directory_report_and_compare_accept(nginx: Nginx, tmp_path: Path) -> None:
    dirs = []
    for i in range(2):
        out = tmp_path / f"r{i}"
        proc = knee_cli("run", nginx.url + "/", "-c", "4", "-d", "1s", "--out", str(out), "-q")
        assert proc.returncode == 0, proc.stderr
        assert "Complete operations:" in proc.stdout and "run directory:" in proc.stdout
        (run,) = [p for p in out.iterdir() if p.is_dir()]
        for name in ("run.json", "report.html", "report.md", "levels.csv", "series.csv", "scenario.toml"):
            assert (run / name).is_file(), name
        assert (run / "steps" / "0.knee").is_file() and (run / "steps" / "0-main.hgrm").is_file()
        record = RunDir(run).load()
        assert record.status == "complete" and len(record.steps) == 1
        assert record.steps[0].generator.cores_available >= 1
        dirs.append(run)
    rep = knee_cli("report", str(dirs[0]))
    assert rep.returncode == 0 and "wrote" in rep.stdout, rep.stderr
    cmp = knee_cli("compare", str(dirs[0]), str(dirs[1]))
    assert cmp.returncode == 0, cmp.stderr
    assert f"A = {dirs[0].name}" in cmp.stdout and "B vs A" in cmp.stdout


def test_the_python_api_sweeps_and_returns_the_table(nginx: Nginx, tmp_path: Path) -> None:
    run = knee.sweep(nginx.url + "/", levels=[1, 4], duration="0.4s", no_recovery=True, out=tmp_path)
    assert run.exit_code == 0 and run.run_dir is not None and run.run_dir.parent == tmp_path
    assert run.verdict is not None and run.verdict.peak_level in (1, 4)
    rows = run.levels()
    assert [(r["level"], r["group"]) for r in rows] == [(1, "main"), (4, "main")]
    assert all(r["started"] == r["succeeded"] + r["failed"] + r["hung"] + r["abandoned"] for r in rows)
