"""`make bench` cannot rot: its smoke version (1 s per installed generator) runs here, against a real nginx."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
RUN = ROOT / "bench" / "run.py"
REQUIRED = ("knee", "floor", "wrk", "ab")  # CI installs these (and h2load, and gcc for the floor's C clients); the
# peers from bench/install.sh are optional


# One xdist worker for the module's tests: its fixture (bench/run.py --smoke, ~30 s) runs once.
pytestmark = pytest.mark.xdist_group("bench-smoke")


@pytest.fixture(scope="module")
def smoke(tmp_path_factory: pytest.TempPathFactory) -> dict[str, object]:
    for tool in ("nginx", "wrk", "ab", "h2load", "taskset"):
        if shutil.which(tool) is None and not Path(f"/usr/sbin/{tool}").exists():
            pytest.fail(f"{tool} is not installed: run `make ci-deps`")
    out = tmp_path_factory.mktemp("bench") / "smoke.json"
    doc = tmp_path_factory.mktemp("bench") / "performance.md"
    proc = subprocess.run(
        [sys.executable, str(RUN), "--smoke", "--json", str(out), "--out", str(doc)],
        capture_output=True,
        text=True,
        timeout=90,
        cwd=ROOT,
    )
    assert out.exists(), f"bench/run.py --smoke wrote no JSON (exit {proc.returncode}):\n{proc.stdout}\n{proc.stderr}"
    data: dict[str, object] = json.loads(out.read_text())
    data["_exit"] = proc.returncode
    data["_stdout"] = proc.stdout + proc.stderr
    data["_doc_written"] = doc.exists()
    return data


def test_every_installed_generator_ran_without_errors(smoke: dict[str, object]) -> None:
    runs: list[dict[str, object]] = smoke["runs"]  # type: ignore[assignment]
    assert runs, smoke["_stdout"]
    for run in runs:
        label = f"{run['scenario']}/{run['tool']}"
        assert "error" not in run, f"{label}: {run.get('error')}"
        assert float(run["rps"]) > 0, f"{label}: no throughput"  # type: ignore[arg-type]
        assert run["errors"] == 0, f"{label}: {run['errors']} errors"
        assert float(run["cpu_s"]) > 0, f"{label}: no CPU time measured"  # type: ignore[arg-type]
        assert int(run["requests"]) > 0  # type: ignore[call-overload]
    assert smoke["_exit"] == 0, smoke["_stdout"]


def test_required_generators_ran_in_every_mode(smoke: dict[str, object]) -> None:
    runs: list[dict[str, object]] = smoke["runs"]  # type: ignore[assignment]
    ran = {(str(r["scenario"]), str(r["tool"])) for r in runs}
    for tool in REQUIRED:
        assert ("keepalive", tool) in ran, f"{tool} did not run keep-alive: {sorted(ran)}"
        assert ("newconn", tool) in ran, f"{tool} did not run new-connection: {sorted(ran)}"
    for tool in ("knee", "forkexec-c", "python-subprocess"):
        assert ("exec", tool) in ran, f"{tool} did not run exec: {sorted(ran)}"
    for scenario, tools in (("h2-1", ("knee", "h2load")), ("httpsnew", ("knee", "wrk", "ab"))):
        for tool in tools:
            assert (scenario, tool) in ran, f"{tool} did not run {scenario}: {sorted(ran)}"
    assert ("flow", "knee") in ran and ("worker", "knee") in ran, sorted(ran)


def test_smoke_measures_the_generator_not_the_harness(smoke: dict[str, object]) -> None:
    """Each HTTP generator's request count is held against nginx's own counter (stub_status): knee's started
    operations equal it exactly; a peer counts the requests it completed, so nginx may have read at most one
    more per connection (in flight when the tool stopped). The smoke run writes no docs."""
    runs: list[dict[str, object]] = smoke["runs"]  # type: ignore[assignment]
    checked = set()
    for run in runs:
        if "server_requests" not in run or run["tool"] not in REQUIRED:
            continue
        label = f"{run['scenario']}/{run['tool']}"
        served, requests = int(run["server_requests"]), int(run["requests"])  # type: ignore[call-overload]
        assert requests > 0, label
        if run["tool"] == "knee":
            assert served == int(run["started"]), f"{label}: nginx read {served}, knee started {run['started']}"  # type: ignore[call-overload]
        else:
            assert requests <= served <= requests + 10, f"{label}: nginx read {served}, the tool counted {requests}"
        checked.add(label)
    expected = {"keepalive/knee", "newconn/knee", "keepalive/wrk", "keepalive/ab", "keepalive/floor", "newconn/floor"}
    assert expected <= checked, checked
    assert not smoke["_doc_written"]
    meta: dict[str, object] = smoke["meta"]  # type: ignore[assignment]
    versions: dict[str, str] = meta["versions"]  # type: ignore[assignment]
    assert {*REQUIRED, "nginx"} <= set(versions)


@pytest.fixture(scope="module")
def feeders(tmp_path_factory: pytest.TempPathFactory) -> dict[str, object]:
    """bench/feeder_bench.py --smoke: each variant 0.5 s (a 10 000-row file, 10 targets), its counts held against
    nginx's by the script itself (it exits non-zero otherwise)."""
    out = tmp_path_factory.mktemp("bench") / "feeders.json"
    doc = tmp_path_factory.mktemp("bench") / "performance.md"
    proc = subprocess.run(
        [sys.executable, str(ROOT / "bench" / "feeder_bench.py"), "--smoke", "--json", str(out), "--out", str(doc)],
        capture_output=True,
        text=True,
        timeout=90,
        cwd=ROOT,
    )
    assert proc.returncode == 0 and out.exists(), f"feeder_bench.py --smoke failed:\n{proc.stdout}\n{proc.stderr}"
    data: dict[str, object] = json.loads(out.read_text())
    data["_doc_written"] = doc.exists()
    return data


def test_feeder_bench_smoke_runs_every_variant(feeders: dict[str, object]) -> None:
    runs: list[dict[str, object]] = feeders["runs"]  # type: ignore[assignment]
    ran = {str(r["variant"]) for r in runs}
    assert {"fixed", "feeder", "mix", "targets"} <= ran, ran
    for run in runs:
        assert run["errors"] == 0 and int(run["requests"]) > 0, run  # type: ignore[call-overload]
        assert float(run["per_cpu_s"]) > 0, run  # type: ignore[arg-type]
    by = {str(r["variant"]): r for r in runs}
    assert int(by["feeder"]["data_memory_bytes"]) > 0  # type: ignore[call-overload]
    assert set(by["mix"]["per_request"]) == {"read", "write"}  # type: ignore[arg-type]
    assert not feeders["_doc_written"]
