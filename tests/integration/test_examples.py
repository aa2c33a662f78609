"""Every example in examples/ runs (shortened with --quick) against the demo service, with real outcomes."""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from knee.model import RunRecord
from knee.plan import quick
from knee.scenario import load_scenario
from knee.store import RunDir
from knee.target import TargetProcess, start_target

EXAMPLES = Path(__file__).parents[2] / "examples"


@pytest.fixture(scope="module")
def target() -> Iterator[TargetProcess]:
    with start_target("basic") as t:
        yield t


def run_example(name: str, target: TargetProcess, out: Path) -> tuple[RunRecord, dict]:
    target.reset()
    cmd = [
        sys.executable,
        "-m",
        "knee",
        "sweep",
        str(EXAMPLES / f"{name}.toml"),
        "--quick",
        "--out",
        str(out),
        "--var",
        f"target={target.url}",
        "--var",
        f"tcp=127.0.0.1:{target.tcp_port}",
    ]
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=90, check=False)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "report:" in proc.stdout
    (run,) = [p for p in out.iterdir() if p.is_dir()]
    record = RunDir(run).load()
    assert record.status in ("complete", "stopped")
    assert {v.group for v in record.verdicts} == set(record.steps[0].groups)
    for v in record.verdicts:
        assert v.sentences or v.warnings
    if len({s.level for s in record.steps if s.phase == "sweep"}) > 1:
        measured = next(v for v in record.verdicts if v.group == record.measured_group)
        assert measured.peak_level is not None
        assert measured.peak_rate is not None and measured.peak_rate > 0
    assert (run / "report.html").is_file()
    assert (run / "report.md").is_file()
    return record, target.stats()


def total(record: RunRecord, group: str | None = None) -> int:
    return sum(g.total for s in record.steps for name, g in s.groups.items() if group in (None, name))


def in_flight_bound(record: RunRecord) -> int:
    """Operations abandoned when a timed step ends: at most one per client per step."""
    return sum(g.clients for s in record.steps for g in s.groups.values())


def test_http_sweep(target: TargetProcess, tmp_path: Path) -> None:
    record, stats = run_example("http-sweep", target, tmp_path)
    sweep_levels = [s.level for s in record.steps if s.phase == "sweep"]
    assert sweep_levels == [5, 20, 50, 100]
    assert [s.level for s in record.steps if s.phase == "recovery"][:1] == [5]
    ok = sum(g.succeeded for s in record.steps for g in s.groups.values())
    assert ok > 0
    # the warm-up's operations reach the server but are not measured
    assert total(record) <= stats["requests"]
    assert ok <= stats["served"]


def test_exec_curl_sweep(target: TargetProcess, tmp_path: Path) -> None:
    record, stats = run_example("exec-curl-sweep", target, tmp_path)
    g = [s.groups["cli"] for s in record.steps]
    assert sum(x.succeeded for x in g) > 0
    assert all(x.kind == "exec" for x in g)
    assert 0 <= stats["requests"] - total(record) <= in_flight_bound(record)


def test_baseload_stress_accounts_groups_separately(target: TargetProcess, tmp_path: Path) -> None:
    record, stats = run_example("baseload-stress", target, tmp_path)
    (step,) = record.steps
    assert set(step.groups) == {"baseload", "stress"}
    stress = step.groups["stress"]
    assert stress.clients == 50
    assert stress.total == 50 * 5  # quick: 50 clients x 5 calls
    assert stress.succeeded == stress.total  # 100 % success on an unlimited service
    base = step.groups["baseload"]
    assert base.succeeded > 0 and base.failed == base.hung == 0
    # background: the baseload ran exactly as long as the stress group, no fixed window.
    assert abs(base.elapsed_s - stress.elapsed_s) < 0.2, (base.elapsed_s, stress.elapsed_s)
    assert 0 <= stats["requests"] - total(record) <= base.clients


def test_fixed_work_per_operation_type(target: TargetProcess, tmp_path: Path) -> None:
    record, stats = run_example("fixed-work", target, tmp_path)
    assert [s.label for s in record.steps] == ["store", "fetch", "info", "change"]
    for s in record.steps:
        ops = s.groups["ops"]
        assert ops.total == 50 * 5
        assert ops.rate_hz > 0
        assert s.elapsed_s > 0
    assert stats["requests"] == total(record)  # exactly: fixed work has no cut-off
    assert stats["served"] == sum(s.groups["ops"].succeeded for s in record.steps)


def test_interval_series(target: TargetProcess, tmp_path: Path) -> None:
    record, stats = run_example("interval-series", target, tmp_path)
    (step,) = record.steps
    loop = step.groups["loop"]
    assert loop.clients == 1
    assert loop.interval_s == pytest.approx(0.1)
    assert len(loop.series) >= 8
    assert sum(p.succeeded for p in loop.series) == loop.succeeded
    assert 0 <= stats["requests"] - loop.total <= 1


def test_tcp_handshake(target: TargetProcess, tmp_path: Path) -> None:
    record, stats = run_example("tcp-handshake", target, tmp_path)
    expected = quick(load_scenario(EXAMPLES / "tcp-handshake.toml", {"tcp": "127.0.0.1:1"})).levels()
    assert [s.level for s in record.steps if s.phase == "sweep"] == expected
    ok = sum(s.groups["connect"].succeeded for s in record.steps)
    assert ok > 0
    assert 0 <= stats["tcp_connections"] - total(record) <= in_flight_bound(record)


def test_ab_style(target: TargetProcess, tmp_path: Path) -> None:
    record, stats = run_example("ab-style", target, tmp_path)
    (step,) = record.steps
    ab = step.groups["ab"]
    assert ab.total == 200  # quick: total 100000 -> 200
    assert ab.succeeded == 200
    assert stats["requests"] == 200
    assert ab.latency_ms.count == 200


def test_rate_sweep(target: TargetProcess, tmp_path: Path) -> None:
    record, stats = run_example("rate-sweep", target, tmp_path)
    expected = quick(load_scenario(EXAMPLES / "rate-sweep.toml")).levels()
    assert [s.level for s in record.steps if s.phase == "sweep"] == expected == [50, 400, 800, 1600]
    main = [s.groups["main"] for s in record.steps if s.phase == "sweep"]
    assert all(g.open_loop is not None and g.clients == 50 for g in main)  # quick: 50 connections
    top = main[-1].open_loop
    assert top is not None and top.late + top.dropped > 0  # 1600/s is past basic's ≈ 850/s at 50 connections
    v = next(v for v in record.verdicts if v.group == "main")
    assert v.level_unit == "rate" and v.saturation_level in (800, 1600)  # 800/s is near the capacity
    assert total(record) <= stats["requests"]
