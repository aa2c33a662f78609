"""Each level measured from rest (docs/analysis.md "Settling between steps", "A service that does not come back").

A real pre-fork server nobody here wrote (gunicorn: 4 synchronous workers, a 50 ms handler, a short listen backlog)
keeps the connections knee abandons at the end of an overloaded level queued at its door; the search's next level
must wait for them. The demo service's metastable profile stays degraded after an overload: the search stops there
and the verdict says so, and the levels it located agree with a fresh service's."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from knee.analysis.levels import pool
from knee.demo_target import start_target
from knee.model import RunRecord, StepResult
from knee.plan import PlannedStep
from knee.scenario import read_scenario
from knee.settle import Settler
from knee.store import RunDir

from conftest import knee_cli
from servers import NodeExporter, free_port, start_node_exporter, wait_for_port

# Alone (make test-py runs it with nothing beside it): node_exporter's machine-wide connections; gunicorn's timing.
pytestmark = pytest.mark.alone

WORKERS, SERVICE_S, BACKLOG = 4, 0.050, 16

APP = f"""
import time


def app(environ, start_response):
    time.sleep({SERVICE_S})
    start_response("200 OK", [("Content-Type", "text/plain"), ("Content-Length", "2")])
    return [b"ok"]
"""


@pytest.fixture
def prefork(tmp_path: Path) -> Iterator[str]:
    (tmp_path / "slowapp.py").write_text(APP)
    port = free_port()
    proc = subprocess.Popen(
        [sys.executable, "-m", "gunicorn", "-w", str(WORKERS), "-k", "sync", "--backlog", str(BACKLOG),
         "-b", f"127.0.0.1:{port}", "--chdir", str(tmp_path), "slowapp:app"],
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True,
    )  # fmt: skip
    try:
        wait_for_port(port, 20)
        yield f"http://127.0.0.1:{port}/"
    finally:
        os.killpg(proc.pid, signal.SIGKILL)  # the arbiter and its workers: the group this test started
        proc.wait(timeout=10)


def _run(out: Path, *args: str, timeout: float = 240) -> RunRecord:
    proc = knee_cli("sweep", *args, "--no-recovery", "--out", str(out), timeout=timeout)
    assert proc.returncode in (0, 3), proc.stdout + proc.stderr
    (run,) = [p for p in out.iterdir() if p.is_dir()]
    return RunDir(run).load()


def _after_highest(record: RunRecord) -> StepResult:
    steps = [s for s in record.steps if s.phase == "sweep"]
    top = max(steps, key=lambda s: s.level)
    return next(s for s in steps if s.index > top.index)


@pytest.mark.timeout(300)
def test_a_prefork_server_is_measured_from_rest(prefork: str, tmp_path: Path) -> None:
    record = _run(tmp_path / "runs", prefork, "--levels", "auto", "--max-level", "64", "-d", "2s", "--timeout", "1s")
    v = next(v for v in record.verdicts if v.group == record.measured_group)
    said = "\n".join(v.sentences)
    # the pool is the workers, and its plateau starts where they are all busy
    assert v.shape is not None and v.shape.pool_size is not None, said
    assert abs(v.shape.pool_size - WORKERS) <= 1, said
    plateau = v.brackets["plateau"]
    assert WORKERS - 1 <= plateau.at <= WORKERS + 1, said
    # errors start where the workers and the accept queue (backlog + 1) are full: the clients past them wait for a
    # SYN sent again, a second, past the 1 s timeout
    onset = v.brackets["onset"]
    door = WORKERS + BACKLOG + 1
    assert onset.below is not None and door * 0.8 <= onset.below < onset.at <= door * 1.35, said
    # the level measured after the highest one waited for what that level left queued at the server
    after = _after_highest(record)
    assert after.settle is not None and after.settle.settled, after.settle
    assert after.settle.queued > 0, after.settle
    assert "still queued at the service" in after.settle.reason, after.settle
    # every step began at rest, and nothing measured was left out
    assert all(s.settle is not None and s.settle.settled for s in record.steps if s.phase == "sweep")
    assert v.degraded_after is None and not any(s.superseded for s in record.steps)


def _rate(record: RunRecord, level: float) -> float:
    (row,) = [r for r in pool(record.steps, record.measured_group, "up") if r.level == level]
    return row.rate


@pytest.mark.timeout(300)
def test_a_service_stuck_after_an_overload_is_said_and_not_bisected(tmp_path: Path) -> None:
    # srm-fast: peak ~430/s near 50 clients; more than 500 in flight for 2 s and it stays degraded until reset
    with start_target("srm-fast") as target:
        record = _run(
            tmp_path / "runs", f"{target.url}/files/list", "--levels", "auto", "--start", "40", "--max-level", "1200",
            "-d", "3s", "--timeout", "5s", "--settle", "4s",
        )  # fmt: skip
    v = next(v for v in record.verdicts if v.group == record.measured_group)
    said = "\n".join(v.sentences)
    steps = [s for s in record.steps if s.phase == "sweep"]
    # the level after the overload began on a stuck service: marked, and the search ended there
    (stuck,) = [s for s in steps if s.unsettled]
    assert stuck is steps[-1], [(s.level, s.settle) for s in steps]
    overload = steps[-2].level
    assert overload >= 500 and v.degraded_after == overload, said
    assert stuck.settle is not None and "a single operation still took" in stuck.settle.reason, stuck.settle
    assert said.startswith(f"after {overload} clients the service stayed degraded with the load gone"), said
    assert "search stopped" in record.search_end, record.search_end
    # no point is located on the stuck step
    believed = {s.level for s in steps if s.believed}
    assert stuck.level not in believed
    for name, b in v.brackets.items():
        assert b.at in believed and (b.below is None or b.below in believed), (name, b)
    # the levels it did locate are a fresh service's: the peak, and the highest level below the overload
    below = max(s.level for s in steps if s.believed and s.level < overload)
    assert v.peak_level is not None
    for level in (v.peak_level, below):
        with start_target("srm-fast") as fresh:
            again = _run(tmp_path / f"fresh-{level}", f"{fresh.url}/files/list", "--levels", str(level), "-d", "3s")
        assert _rate(again, level) == pytest.approx(_rate(record, level), rel=0.15), level


@pytest.fixture
def node_exporter() -> Iterator[NodeExporter]:
    with start_node_exporter() as exporter:
        yield exporter


def _settler(exporter: NodeExporter, most_s: float) -> Settler:
    text = '[groups.main]\nkind = "tcp"\naddr = "127.0.0.1:9"\n[sweep]\nlevels = [1, 2]\nduration = "1s"\n'
    text += f'[monitor]\nprometheus = ["{exporter.url}"]\n'
    settler = Settler(read_scenario(text).scenario, "main", None, most_s, lambda: False)
    settler.probing = False  # the exporters alone: no socket of the target is seen from here (target None)
    return settler


@pytest.mark.timeout(60)
def test_the_target_machines_exporters_are_waited_for(node_exporter: NodeExporter) -> None:
    # the machine at rest, as node_exporter says it, before the first step
    settler = _settler(node_exporter, 10.0)
    step = PlannedStep(1)
    assert settler.wait(step, 10.0).settled
    # a service that has not accepted 20 connections yet (they wait in its accept queue, established), and lets
    # them go 1.5 s later: the wait before the next step lasts until node_exporter sees them gone
    listener = socket.create_server(("127.0.0.1", 0), backlog=64)
    clients = [socket.create_connection(listener.getsockname()) for _ in range(20)]

    def close() -> None:
        time.sleep(1.5)
        for c in clients:
            c.close()
        listener.close()

    threading.Thread(target=close, daemon=True).start()
    t0 = time.monotonic()
    settle = settler.wait(step, 10.0)
    assert settle.settled, settle
    assert 1.2 <= time.monotonic() - t0 < 8, settle
    # connections that stay: the wait runs out and names what the exporter still saw
    listener = socket.create_server(("127.0.0.1", 0), backlog=64)
    clients = [socket.create_connection(listener.getsockname()) for _ in range(20)]
    try:
        settle = settler.wait(step, 1.5)
        assert not settle.settled, settle
        assert "the target's machines: " in settle.reason and "connections established" in settle.reason, settle
    finally:
        for c in clients:
            c.close()
        listener.close()
