"""The reports and schemas against files a real run wrote: `knee sweep` against `knee target` (a pool that
refuses past 30 in flight), `knee run --json`; every report rendered from that run.json holds its numbers."""

from __future__ import annotations

import csv
import json
from collections.abc import Iterator
from pathlib import Path

import jsonschema
import pytest

from knee import fmt
from knee.demo_target import TargetProcess, start_target
from knee.model import GroupStats, RunRecord
from knee.store import RunDir

from conftest import knee_cli

SCHEMAS = Path(__file__).resolve().parents[2] / "schemas"


def validate(name: str, doc: object) -> None:
    schema = json.loads((SCHEMAS / name).read_text())
    jsonschema.validators.validator_for(schema)(schema).validate(doc)


# One xdist worker for the module's tests: its fixture (the sweep the reports are made from) runs once.
pytestmark = pytest.mark.xdist_group("reports-real")


@pytest.fixture(scope="module")
def target() -> Iterator[TargetProcess]:
    with start_target("basic", pool=30, lam=400.0, sigma=0.02) as t:
        yield t


@pytest.fixture(scope="module")
def swept(target: TargetProcess, tmp_path_factory: pytest.TempPathFactory) -> RunDir:
    out = tmp_path_factory.mktemp("real")
    proc = knee_cli(
        "sweep",
        target.url + "/",
        "--levels",
        "5,20,60",
        "-d",
        "1500ms",
        "--no-recovery",
        "--out",
        str(out),
        "--name",
        "real",
        timeout=120,
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    (run_dir,) = [p for p in out.iterdir() if p.is_dir()]
    return RunDir(run_dir)


def test_run_json_of_a_real_sweep_validates_and_adds_up(swept: RunDir, target: TargetProcess) -> None:
    doc = json.loads((swept.path / "run.json").read_text())
    validate("run.schema.json", doc)
    record = RunRecord.model_validate(doc)
    assert [s.level for s in record.steps] == [5, 20, 60]
    started = 0
    for s in record.steps:
        g = s.groups["main"]
        assert g.started == g.succeeded + g.failed + g.hung + g.abandoned
        started += g.started + g.warmup_ops
    assert started + record.probes == target.stats()["requests"]
    # the pool of 30 refuses at 60 clients, not below
    assert record.steps[0].groups["main"].failed == record.steps[1].groups["main"].failed == 0
    assert record.steps[2].groups["main"].failed > 0


def test_every_report_of_a_real_sweep_shows_its_numbers(swept: RunDir) -> None:
    record = swept.load()
    rows = list(csv.DictReader((swept.path / "levels.csv").open()))
    assert [float(r["level"]) for r in rows] == [5, 20, 60]
    md = (swept.path / "report.md").read_text()
    html = (swept.path / "report.html").read_text()
    proc = knee_cli("report", str(swept.path), timeout=60)
    assert proc.returncode == 0, proc.stderr
    verdict = record.verdicts[0]
    assert verdict.error_onset_level == 60  # where the failures start
    for s, row in zip(record.steps, rows, strict=True):
        g = s.groups["main"]
        assert int(row["succeeded"]) == g.succeeded and int(row["failed"]) == g.failed
        for text in (md, proc.stdout):
            assert f"{g.succeeded:,}" in text and f"{g.failed:,}" in text
    assert "503" in md and "503" in html  # the refusals' reason, grouped
    assert f"{record.steps[2].groups['main'].failed:,}" in html


def _cells(g: GroupStats) -> list[str]:
    """A level's row as every report writes it: clients, succeeded (rate), failed, hung, abandoned, p50, p99."""
    total = g.succeeded + g.failed + g.hung
    failed = f"{g.failed:,} ({fmt.pct(g.failed / total)})" if g.failed else "0"
    rate = f"{g.succeeded:,} ({fmt.rate(g.rate_hz)})"
    latency = [fmt.ms(g.latency_ms.p50), fmt.ms(g.latency_ms.p99)]
    return [str(g.clients), rate, failed, f"{g.hung:,}", f"{g.abandoned:,}", *latency]


def test_every_report_shows_run_json_level_by_level_cell_by_cell(swept: RunDir) -> None:
    # The rates and percentiles too, not only the counts: each report's row holds run.json's numbers.
    record = swept.load()
    md = (swept.path / "report.md").read_text()
    html = (swept.path / "report.html").read_text()
    proc = knee_cli("report", str(swept.path), timeout=60)
    assert proc.returncode == 0, proc.stderr
    terminal = [[c.strip() for c in line.split("│")[1:-1]] for line in proc.stdout.splitlines() if line.count("│") >= 7]
    rows = list(csv.DictReader((swept.path / "levels.csv").open()))
    for s, row in zip(record.steps, rows, strict=True):
        g = s.groups["main"]
        cells = _cells(g)
        assert "| " + " | ".join(cells) + " |" in md, cells
        assert "".join(f"<td>{c}</td>" for c in cells) in html, cells
        assert any(r[: len(cells)] == cells for r in terminal), (cells, terminal)
        assert float(row["p50_ms"]) == g.latency_ms.p50 and float(row["p99_ms"]) == g.latency_ms.p99
        assert float(row["rate_hz"]) == pytest.approx(g.rate_hz, abs=0.005)  # to the hundredth


def test_knee_run_json_of_a_real_run_validates(target: TargetProcess, tmp_path: Path) -> None:
    out = tmp_path / "r.json"
    before = target.stats()["requests"]
    proc = knee_cli("run", "-q", target.url + "/", "-c", "4", "-n", "300", "--json", str(out))
    assert proc.returncode == 0, proc.stderr
    doc = json.loads(out.read_text())
    validate("knee-run.schema.json", doc)
    assert doc["succeeded"] == 300 == target.stats()["requests"] - before
