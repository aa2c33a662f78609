"""The target's machines in "why", against a real node_exporter (Debian's prometheus-node-exporter, on a free port):
`--monitor-url` scrapes it each second of each step; a core the test burns during one step (a bounded busy loop it
starts and stops) shows in that step's CPU and not in the others; the exporter, stopped mid-run, is noted and the
run goes on; an unreachable URL and one that is not Prometheus text are one sentence each.
"""

from __future__ import annotations

import http.client
import json
import re
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest

from knee.demo_target import TargetProcess, start_target
from knee.model import RemoteStats, RunRecord
from knee.store import RunDir

from conftest import knee_cli
from postgres import start_postgres, start_postgres_exporter
from servers import NodeExporter, free_port, kill_if_running, start_node_exporter, wait_for_http

Burnt = tuple[RunRecord, str, float, Path]  # run.json, knee's output, the burn's CPU seconds, the run directory
STEP_S = 4
BURN_S = 2.5
# A busy loop on one core for BURN_S or until SIGTERM, then its CPU seconds on stdout: bounded, measured by itself.
BURN = "\n".join(
    [
        "import signal, sys, time",
        "def done(*_):",
        "    signal.signal(signal.SIGTERM, signal.SIG_IGN)",
        "    print(time.process_time(), flush=True)",
        "    sys.exit(0)",
        "signal.signal(signal.SIGTERM, done)",
        "t = time.monotonic()",
        f"while time.monotonic() - t < {BURN_S}:",
        "    pass",
        "done()",
    ]
)


# Alone (make test-py runs it with nothing beside it): a core burnt and read back from node_exporter, machine-wide.
pytestmark = pytest.mark.alone


@pytest.fixture(scope="module")
def target() -> Iterator[TargetProcess]:
    with start_target("basic") as t:
        yield t


def knee_step(metrics_url: str) -> int | None:
    """The step knee runs now, from its own /metrics (None before it answers)."""
    try:
        with urllib.request.urlopen(metrics_url, timeout=2) as r:
            text = r.read().decode()
    except (OSError, http.client.HTTPException):  # not answering yet, or knee exiting mid-answer (IncompleteRead)
        return None
    m = re.search(r"^knee_step (-?\d+)$", text, re.M)
    return int(m.group(1)) if m else None


def wait_step(metrics_url: str, index: int, timeout_s: float = 60) -> None:
    deadline = time.monotonic() + timeout_s
    while knee_step(metrics_url) != index:
        assert time.monotonic() < deadline, f"knee never ran step {index}"
        time.sleep(0.05)


def burn_within(metrics_url: str, index: int) -> float:
    """Burn a core from now (step `index` running) for BURN_S, or until knee leaves the step, whichever is first:
    the burn's CPU seconds."""
    burn = subprocess.Popen([sys.executable, "-c", BURN], stdout=subprocess.PIPE, text=True)
    try:
        while burn.poll() is None and knee_step(metrics_url) == index:
            time.sleep(0.05)
        burn.terminate()  # a no-op once it has ended by itself
        out, _ = burn.communicate(timeout=30)
    finally:
        kill_if_running(burn)
    assert burn.returncode == 0, out
    return float(out)


def endpoint(record: RunRecord, index: int) -> RemoteStats:
    (r,) = record.steps[index].remote
    return r


@pytest.fixture(scope="module")
def burnt(target: TargetProcess, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Burnt]:
    """A sweep of four steps watched by node_exporter: a core burnt during the second, the exporter stopped during
    the fourth. Yields run.json, knee's output, the CPU seconds the burn took and the run directory."""
    tmp = tmp_path_factory.mktemp("remote")
    exporter: NodeExporter = start_node_exporter()
    port = free_port()
    metrics = f"http://127.0.0.1:{port}/metrics"
    sweep = subprocess.Popen(
        [sys.executable, "-m", "knee", "sweep", target.url + "/", "--levels", "1,2,3,4", "-d", f"{STEP_S}s",
         "--think", "50ms", "--no-recovery", "--out", str(tmp), "--serve", str(port), "--monitor-url", exporter.url,
         "--monitor-metric", "node_procs_running", "--monitor-metric", "node_forks_total"],
        stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
    )  # fmt: skip
    try:
        wait_for_http(metrics, 30)
        wait_step(metrics, 1)
        burnt_s = burn_within(metrics, 1)
        wait_step(metrics, 3)
        time.sleep(1.5)
        exporter.stop()  # the endpoint stops answering mid-step
        while sweep.poll() is None:  # a scraper to the end: knee serves until its last scrape after the run
            knee_step(metrics)
            time.sleep(0.2)
        out, _ = sweep.communicate(timeout=90)
        assert sweep.returncode == 0, out
        (run,) = tmp.iterdir()
        yield RunDir(run).load(), out, burnt_s, run
    finally:
        if sweep.poll() is None:
            sweep.kill()
            sweep.wait(10)
        exporter.stop()


def busy_cpu_s(record: RunRecord, index: int) -> float:
    r = endpoint(record, index)
    assert r.cpu_busy is not None and r.cpus
    return r.cpu_busy * r.cpus * record.steps[index].elapsed_s


def test_a_core_burnt_during_one_step_shows_in_that_step_only(burnt: Burnt) -> None:
    record, _, burnt_s, _ = burnt
    assert burnt_s >= 0.6 * BURN_S, burnt_s  # the loop got most of a core
    for i in (0, 1, 2):
        r = endpoint(record, i)
        assert r.failed == 0 and r.samples >= STEP_S, r
        assert r.cpus >= 1 and r.mem_total_mb and r.mem_used_mb_peak and r.load1_peak is not None
        assert r.context_switches_per_s and r.listen_drops is not None
        assert set(r.cpu_modes) >= {"user", "system", "idle"} and abs(sum(r.cpu_modes.values()) - 1) < 0.01
        assert r.metrics["node_procs_running"].kind == "gauge" and r.metrics["node_procs_running"].peak >= 1
        assert r.metrics["node_forks_total"].kind == "counter"
    # the burn's CPU seconds are in step 1's busy time (less what the other steps used on their own)
    # the others: the steps before and after, the quieter one (another process on the machine may have taken CPU)
    during, others = busy_cpu_s(record, 1), min(busy_cpu_s(record, 0), busy_cpu_s(record, 2))
    shown = [endpoint(record, i).model_dump(include={"cpu_busy", "cpu_modes", "samples"}) for i in (0, 1, 2)]
    assert during - others >= 0.7 * burnt_s, (others, during, burnt_s, shown)
    assert endpoint(record, 1).cpu_modes["user"] > min(endpoint(record, i).cpu_modes["user"] for i in (0, 2))


def test_an_endpoint_that_stops_answering_is_noted_and_the_run_goes_on(burnt: Burnt) -> None:
    record, out, _, run = burnt
    assert record.status == "complete" and len(record.steps) == 4
    last = endpoint(record, 3)
    assert last.samples >= 1 and last.failed >= 1 and last.error.startswith("cannot connect"), last
    v = next(v for v in record.verdicts if v.group == "main")
    (down,) = [f for f in v.findings if f.kind == "remote_down"]
    assert down.level == 4 and "stopped answering during the step at 4 clients" in down.what
    assert "why: http://127.0.0.1:" in out
    report = (run / "report.md").read_text()
    assert "The target's machines" in report and "node_procs_running" in report


def test_an_unreachable_url_and_one_that_is_not_prometheus_text(target: TargetProcess, tmp_path: Path) -> None:
    nowhere = f"http://127.0.0.1:{free_port()}/metrics"
    proc = knee_cli(
        "run", target.url + "/", "-c", "1", "-d", "2s", "--out", str(tmp_path),
        "--monitor-url", nowhere, "--monitor-url", target.url + "/",
    )  # fmt: skip
    assert proc.returncode == 0 and "Traceback" not in proc.stderr, proc.stdout + proc.stderr
    warnings = [line for line in proc.stdout.splitlines() if line.startswith("warning: ")]
    assert warnings == [
        f"warning: monitor: {nowhere} cannot connect (Connection refused); the run goes on, and its steps note each "
        "failed scrape",
        f"warning: monitor: {target.url}/ did not answer with Prometheus text (line 1: not `name{{labels}} value`: "
        "'ok'); the run goes on, and its steps note each failed scrape",
    ], proc.stdout
    (run,) = tmp_path.iterdir()
    (step,) = RunDir(run).load().steps
    assert [(r.samples, r.failed > 0) for r in step.remote] == [(0, True), (0, True)]
    assert step.groups["main"].succeeded > 0
    bad = knee_cli("run", target.url + "/", "-c", "1", "-d", "1s", "--monitor-url", "db:9100")
    assert bad.returncode == 2 and bad.stderr.startswith("knee: error: --monitor-url") and "Traceback" not in bad.stderr
    assert "must be the http:// or https:// URL of a Prometheus exporter" in bad.stderr


def test_doctor_scrapes_each_endpoint_once(target: TargetProcess) -> None:
    nowhere = f"http://127.0.0.1:{free_port()}/metrics"
    proc = knee_cli("doctor", target.url + "/", "-c", "2", "--monitor-url", nowhere, "--json")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    (found,) = [f for f in json.loads(proc.stdout)["findings"] if f["check"] == "monitor"]
    assert found["severity"] == "warning" and found["text"].startswith(f"monitor: {nowhere} cannot connect")


def test_a_database_at_its_max_connections_is_named_from_postgres_exporter(tmp_path: Path) -> None:
    """PostgreSQL with max_connections = 20 and Debian's postgres_exporter: psql clients holding a connection for
    1 s; at 8 clients the database has room, at 24 its connections reach the limit and "why" says so, from the
    exporter's figures."""
    with start_postgres(max_connections=20) as pg, start_postgres_exporter(pg) as exporter:
        proc = knee_cli(
            "sweep", "--levels", "8,24", "-d", "3s", "--pause", "2s", "--timeout", "20s", "--no-recovery",
            "--out", str(tmp_path), "--monitor-url", exporter, "--", *pg.psql("SELECT pg_sleep(1)"),
        )  # fmt: skip
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    (run,) = tmp_path.iterdir()
    record = RunDir(run).load()
    room, full = endpoint(record, 0), endpoint(record, 1)
    assert room.pg_max_connections == full.pg_max_connections == 20 and full.pg_reserved_connections == 0
    assert room.pg_connections_peak is not None and 8 <= room.pg_connections_peak < 20, room
    assert full.pg_connections_peak == 20, full
    assert record.steps[1].groups["main"].failed > 0  # "sorry, too many clients already"
    v = next(v for v in record.verdicts if v.group == "main")
    (found,) = [f for f in v.findings if f.kind == "remote_connections"]
    host = exporter.split("/")[2]
    assert found.level == 24
    assert found.what == f"the database's connections ({host}) reached its max_connections (20) at 24 clients"
