"""The verdict names the side that held the clients, provoked for real on loopback (issue 20): a service that
stops accepting past its connection limit is named by that limit with its figures, never the load side; a
load side that really is saturated (knee pinned to one core against a fast service) is named with knee's CPU;
a pool of 8 behind a connection limit of 16 is named both. The rules on hand-built steps are in
tests/unit/test_analysis_side.py."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from knee.demo_target import start_target
from svgaxes import tick_numbers

from conftest import knee_cli

BLAME = re.compile(r"load side|load generator", re.I)

# Serial (make test-py runs it beside one other serial test at most): connection limits from measured rates; the
# load-side test (knee's CPU, measured) runs alone.
pytestmark = pytest.mark.serial


def _record(out: Path) -> dict[str, Any]:
    (run,) = out.iterdir()
    doc: dict[str, Any] = json.loads((run / "run.json").read_text())
    return doc


def _verdict(doc: dict[str, Any]) -> dict[str, Any]:
    v: dict[str, Any] = next(v for v in doc["verdicts"] if v["group"] == doc["measured_group"])
    return v


def _texts(v: dict[str, Any]) -> list[str]:
    """Every sentence that could name a limit: the verdict's, its warnings (Little's law among them), the findings."""
    return [*v["sentences"], *v["warnings"], *(f["what"] for f in v["findings"]), *(f["fix"] for f in v["findings"])]


@pytest.mark.alone  # the connections served come from measured rates and latencies (Little's law at the door)
def test_a_service_that_stops_accepting_is_named_by_its_connection_limit(tmp_path: Path) -> None:
    # The case: 12 connections, a listen queue of 4; the clients past 12 wait in connect. knee's CPU is idle.
    # Three levels below the limit, each with room for the last one's lingering connections (2 + 4, 4 + 6 ≤ 12):
    # enough levels without errors for a USL fit, which the verdict must then disown.
    with start_target(lam=200.0, sigma=0.0, kappa=0.0, max_connections=12, backlog=4) as t:
        r = knee_cli(
            "sweep", f"{t.url}/", "--levels", "2,4,6,24,48", "-d", "2s", "--timeout", "1s", "--no-recovery",
            "--out", str(tmp_path), timeout=90,
        )  # fmt: skip
    assert r.returncode == 0, r.stderr
    doc = _record(tmp_path)
    v = _verdict(doc)
    shape = v["shape"]
    assert shape is not None and shape["name"] == "connection_limit", v["sentences"]
    # Little's law at the door reads the limit a little low, never high: a slot freed by a client that timed out
    # idles until the next waiting connect is accepted, and the last level's connections linger at a step's start.
    # Measured: 10–12 on an idle machine; 8 and 9 in two fresh clones' CI runs (one paired, one alone), where the
    # clients' timeouts left more slots idle. Never above the limit.
    served = shape["connections"]
    assert 8 <= served <= 12, shape
    said = shape["evidence"]
    assert said.startswith(
        f"the service stopped accepting connections past about {served}: {served} connections served; the clients "
        f"past {served} waited to be accepted"
    ), said
    top = doc["steps"][-1]
    assert top["level"] == 48
    held = top["groups"]["main"]["hung"]
    assert held >= 30, f"at 48 clients, 36 wait at the door and hang at least once in 2 s: {held} hung"
    assert f"at 48 clients {held} hung" in said, said
    assert "connects unanswered (SYN_SENT)" in said or "SYNs dropped by the full listen queue" in said, said
    assert "knee was not the limit (knee and its child processes used" in said, said
    for text in _texts(v):
        assert not BLAME.search(text), text
    gaps = [w for w in v["warnings"] if w.startswith("Little's law does not hold at 48 clients")]
    assert gaps and "the others waited at the service's door" in gaps[0], v["warnings"]
    out = re.sub(r"\s+", " ", r.stdout)  # the terminal's lines joined
    assert f"stopped accepting connections past about {served}" in out and not BLAME.search(out)
    # Issue 25: a USL fit of levels that are not the service's concurrency explains nothing: disowned, with the
    # reason, in the verdict, the terminal and run.json, and not drawn: the plot's x axis ends at the levels measured.
    assert v["usl"] is None, v
    assert v["usl_disowned"] is not None, v
    assert v["usl_disowned"]["disowned"].startswith("the service stopped accepting"), v
    assert any(x.startswith("no USL model fits this curve: the service stopped accepting") for x in v["sentences"])
    assert "no USL model fits this curve" in out
    assert "N*=" not in out and "N* =" not in out
    (run,) = tmp_path.iterdir()
    (plot,) = [x for x in re.findall(r"<svg.*?</svg>", (run / "report.html").read_text(), re.S) if "Throughput vs" in x]
    ticks = tick_numbers(plot)
    assert ticks and max(ticks) <= 1.1 * 48, ticks  # the x axis ends at the highest level measured, 48
    assert "USL fit" not in plot and "N* =" not in plot


def _pinned(core: int) -> list[str]:
    """Run on one core, and (as root) ahead of other processes on it: the machine is shared, and the test needs
    its two processes, not others, to be what fills the cores."""
    return [*(["nice", "-n", "-20"] if os.geteuid() == 0 else []), "taskset", "-c", str(core)]


@pytest.mark.alone  # knee's own core, saturated
def test_a_saturated_load_side_still_says_load_side_with_knees_cpu(tmp_path: Path) -> None:
    assert shutil.which("taskset"), "taskset (util-linux) is not installed"
    assert len(os.sched_getaffinity(0)) >= 2, "this test pins knee and the target to two different cores"
    # A service with no service time (λ so high that 1/λ rounds to 0 ns) on core 1; knee on core 0, one engine
    # thread and a new connection per operation (opening a connection costs the client more than the server: with
    # keep-alive both cores fill about equally), so that its core, not the service, sets the rate.
    with start_target(lam=1e10, sigma=0.0, kappa=0.0, wrap=_pinned(1)) as t:
        r = subprocess.run(
            [
                *_pinned(0), sys.executable, "-m", "knee", "sweep", f"{t.url}/", "--levels", "4,16,64", "-d", "2s",
                "--threads", "1", "--new-connection", "--no-recovery", "--out", str(tmp_path),
            ],
            capture_output=True, text=True, timeout=90, stdin=subprocess.DEVNULL,
        )  # fmt: skip
    assert r.returncode == 0, r.stderr
    doc = _record(tmp_path)
    gens = {s["level"]: s["generator"] for s in doc["steps"]}
    busy = [lvl for lvl, g in gens.items() if g["saturated"]]
    assert busy, f"knee's one core was never saturated (other processes on it?): {gens}"
    assert all(g["cores_available"] == 1 for g in gens.values()), gens
    v = _verdict(doc)
    shape = v["shape"]
    assert shape is not None and shape["name"] == "load_side", v["sentences"]
    assert shape["evidence"].startswith("the limit points at the load side: from "), shape
    cpu = re.search(
        r"knee and its child processes used (\d\.\d\d) of 1 cores at (\d+) clients \(saturated\)", shape["evidence"]
    )
    assert cpu is not None, shape
    at = int(cpu[2])
    g = gens[at]
    assert g["saturated"] and float(cpu[1]) == pytest.approx(g["cpu_cores"] + g["children_cpu_cores"], abs=0.006)
    found = {f["kind"]: f for f in v["findings"]}
    assert "the load side, not the service, was the limit" in found["load_side"]["what"]
    for text in _texts(v):
        assert "stopped accepting" not in text and "service's door" not in text, text


def test_a_pool_behind_a_connection_limit_is_named_both(tmp_path: Path) -> None:
    # 8 workers (requests past 8 wait in a FIFO queue) behind a limit of 16 connections, 20 ms per request: the
    # rate grows to 400/s at 8 clients, the latency then grows up to 16, and past 16 the clients wait to be
    # accepted (the default backlog holds them) and hang.
    with start_target(
        lam=50.0, sigma=0.0, kappa=0.0, max_connections=16, extra_args=["--workers", "8"]
    ) as t:  # fmt: skip
        r = knee_cli(
            "sweep", f"{t.url}/", "--levels", "1,2,4,8,16,32,64", "-d", "2s", "--timeout", "1s", "--no-recovery",
            "--out", str(tmp_path), timeout=120,
        )  # fmt: skip
    assert r.returncode == 0, r.stderr
    v = _verdict(_record(tmp_path))
    shape = v["shape"]
    assert shape is not None and shape["name"] == "pool", v["sentences"]
    assert 7 <= shape["pool_size"] <= 9, shape
    assert shape["connections"] == 16, shape
    said = shape["evidence"]
    size = re.search(r"pool (?:holds |of )about (\d+(?:\.\d)?)", said)  # "the pool holds about 7.9 (…)"
    assert size is not None and 7 <= float(size[1]) <= 9, said
    assert "; then the service stopped accepting connections past about 16: 16 connections served" in said, said
    for text in _texts(v):
        assert not BLAME.search(text), text
