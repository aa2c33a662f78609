"""`knee sweep` over arrival rates against the demo service, whose capacity is known in advance.

knee target with λ = 100/s, σ = 0.2, κ = 0.005 peaks at N* ≈ 12.6 requests in flight, X(N*) ≈ 311/s:
offered rates of 50, 100 and 200/s are served as they arrive; 400 and 600/s are more than the
service can take, so arrivals wait for one of the 30 connections (late) or are dropped.
"""

from __future__ import annotations

import csv
import subprocess
from pathlib import Path

import pytest
from test_html_chromium import chromium_check

from knee.analysis import little
from knee.demo_target import start_target
from knee.model import RunRecord
from knee.store import RunDir

from conftest import knee_cli

CAPACITY = 311.0
RATES = [50, 100, 200, 400, 600]

SCENARIO = """\
name = "rates"

[groups.main]
kind = "http"
url = "${target}/"
rate = "level"
clients = 30
timeout = "2s"

[groups.base]
kind = "http"
url = "${target}/"
clients = 1
think = "50ms"

[sweep]
rates = [50, 100, 200, 400, 600]
max_in_flight = 200
duration = "1500ms"
warmup = "300ms"

[recovery]
probe = "1s"
limit = "4s"
pause = "200ms"
"""

# Serial (make test-py runs it beside one other serial test at most): achieved rates within 3 % of offered.
pytestmark = pytest.mark.serial


def sweep(*args: str) -> subprocess.CompletedProcess[str]:
    return knee_cli("sweep", *args, timeout=90)


def measured(record: RunRecord) -> list[tuple[float, float, float, float, float]]:
    """(level, offered/s, achieved/s, late share, dropped share) of the measured group's sweep steps; the
    shares are of the step's arrivals (offered rate × the step's time)."""
    out = []
    for s in record.steps:
        o = s.groups["main"].open_loop
        if s.phase == "sweep" and o is not None:
            arrivals = o.offered_rate_hz * s.elapsed_s
            out.append((s.level, o.offered_rate_hz, o.achieved_rate_hz, o.late / arrivals, o.dropped / arrivals))
    return out


@pytest.mark.timeout(120)
def test_rate_sweep_keeps_up_below_capacity_and_saturates_above(tmp_path: Path) -> None:
    scenario = tmp_path / "rates.toml"
    scenario.write_text(SCENARIO)
    out = tmp_path / "runs"
    with start_target("basic", lam=100.0, sigma=0.2, kappa=0.005) as target:
        assert target.model["peak_rate"] == pytest.approx(CAPACITY, rel=0.01)
        proc = sweep(str(scenario), "--out", str(out), "--var", f"target={target.url}")
        assert proc.returncode == 0, proc.stdout + proc.stderr
        (run,) = [p for p in out.iterdir() if p.is_dir()]
        record = RunDir(run).load()
        stats = target.stats()
        # --resume replays what was recorded and runs only the missing rates (and the probe) again
        kept = record.steps[:3]
        RunDir(run).save(record.model_copy(update={"steps": kept, "status": "running", "verdicts": []}))
        resumed = sweep("--resume", str(run))
        assert resumed.returncode == 0, resumed.stdout + resumed.stderr
    rows = measured(record)
    print("\nlevel offered/s achieved/s late dropped (shares of the arrivals)")
    for row in rows:
        print("{:>5} {:>9.1f} {:>10.1f} {:>5.1%} {:>7.1%}".format(*row))
    assert [r[0] for r in rows] == RATES
    assert record.level_unit == "rate" and record.rates
    # Counts, not rates over the wall clock: a constant pacer offers exactly rate × 1.5 s arrivals per step
    main = [s.groups["main"] for s in record.steps if s.phase == "sweep"]
    assert [g.open_loop.offered for g in main if g.open_loop] == [r * 3 // 2 for r in RATES], main
    # Below capacity none was dropped or failed, and every arrival due in the window was served or still in flight
    # at its end (started may hold one more: an operation of the warm-up still in flight when the window opened).
    for g in main[: RATES.index(200) + 1]:
        assert g.open_loop is not None and g.open_loop.dropped == g.failed == g.hung == 0, g
        assert g.open_loop.offered <= g.succeeded + g.abandoned == g.started, g
    for level, offered, achieved, late, dropped in rows:
        if level < CAPACITY:
            assert achieved == pytest.approx(offered, rel=0.03)
            # late (over 10 ms after due): timer jitter on a busy machine, a small share at most
            assert dropped == 0 and late <= 0.2, rows
        else:
            assert achieved < 0.95 * offered
            assert late + dropped > 0.3, rows  # arrivals queue for a connection: most start late
    v = next(v for v in record.verdicts if v.group == "main")
    assert v.level_unit == "rate"
    assert v.saturation_level == 400  # the first offered rate above the capacity
    assert v.peak_rate is not None and 0.97 * 200 <= v.peak_rate <= 1.05 * CAPACITY  # never above the capacity
    assert any(s.startswith("saturated at 400/s offered") for s in v.sentences)
    assert v.recovered is True
    base = next(v for v in record.verdicts if v.group == "base")
    assert base.level_unit == "rate" and base.saturation_level is None
    assert stats["served"] >= sum(g.succeeded for s in record.steps for g in s.groups.values())

    again = RunDir(run).load()
    assert again.status == "complete"
    assert again.steps[:3] == kept
    assert [s.level for s in again.steps if s.phase == "sweep"] == RATES
    assert next(v for v in again.verdicts if v.group == "main").saturation_level == 400

    with (run / "levels.csv").open() as f:
        table = [r for r in csv.DictReader(f) if r["group"] == "main" and r["phase"] == "sweep"]
    assert [float(r["offered_rate_hz"]) for r in table] == pytest.approx(RATES, rel=0.02)
    assert int(table[-1]["late"]) + int(table[-1]["dropped"]) > 0
    md = (run / "report.md").read_text()
    assert "| Offered | Achieved |" in md and "| 400/s |" in md
    html = (run / "report.html").read_text()
    assert "Throughput vs offered rate" in html and "offered rate, arrivals / s" in html
    # The rate sweep's own plots render in a real browser, like a client sweep's.
    seen = chromium_check(run / "report.html")
    assert seen["console_errors"] == [] and seen["scripts"] == 0
    assert len(seen["svgs"]) >= 4 and all(svg["width"] > 400 and svg["children"] > 20 for svg in seen["svgs"])


SLOW = """\
name = "slow"

[groups.main]
kind = "http"
url = "${target}/slow"
rate = "level"
clients = 20

[groups.base]
kind = "http"
url = "${target}/slow"
clients = 2

[sweep]
rates = [2, 4, 8]
duration = "6s"

[recovery]
enabled = false
"""


@pytest.mark.timeout(90)
def test_operations_long_against_the_step_are_counted_in_flight(tmp_path: Path) -> None:
    """Issue 25: 2-second operations on 12 workers, 2 of them held by a closed-loop baseload of 2 clients: the
    open loop has 10 workers, 5/s. Its 6 s steps are 3 operation latencies: operations still in flight at a step's
    end must not make 2/s and 4/s look saturated, nor the baseload's 2 clients look idle (Little's law)."""
    scenario = tmp_path / "slow.toml"
    scenario.write_text(SLOW)
    out = tmp_path / "runs"
    with start_target(lam=0.5, sigma=0.0, kappa=0.0, workers=12) as target:
        proc = sweep(str(scenario), "--out", str(out), "--var", f"target={target.url}")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    (run,) = [p for p in out.iterdir() if p.is_dir()]
    record = RunDir(run).load()
    v = next(v for v in record.verdicts if v.group == "main")
    text = "; ".join(v.sentences)
    assert v.saturation_level == 8, text  # none at 2 or 4
    assert "saturated at 8/s offered (4/s offered: kept up)" in text
    with (run / "levels.csv").open() as f:
        table = {float(r["level"]): r for r in csv.DictReader(f) if r["group"] == "main" and r["phase"] == "sweep"}
    achieved = {level: float(r["achieved_rate_hz"]) for level, r in table.items()}
    assert achieved[2] == pytest.approx(2.0, rel=0.05) and achieved[4] == pytest.approx(4.0, rel=0.05), achieved
    assert 4.0 <= achieved[8] <= 5.5, achieved  # the 10 workers' 5/s, not the 8/s offered
    assert any(int(r["abandoned"]) > 0 for r in table.values())  # operations were in flight at the steps' ends
    # the steps are short against the operations: one warning naming both figures
    short = [w for w in v.warnings if w.startswith("steps short")]
    assert len(short) == 1 and "6.0 s against an operation latency of 2." in short[0], v.warnings
    base = next(v for v in record.verdicts if v.group == "base")
    assert record.steps and all(s.groups["base"].hung == 0 for s in record.steps)  # nothing hung ...
    assert len(base.little) == 3 and all(c.gap <= little.GAP for c in base.little), base.little
    assert not [w for w in base.warnings + v.warnings if "Little" in w]  # ... so no Little's-law warning
