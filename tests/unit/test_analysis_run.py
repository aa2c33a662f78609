"""analyze_run: one verdict per group from a RunRecord, with the scenario's onset and SLO."""

from __future__ import annotations

import pytest
from test_analysis_helpers import step

from knee.analysis import analyze_run
from knee.errors import UserError
from knee.model import GroupStats, RunRecord


def _base(level: int, succeeded: int, failed: int = 0) -> GroupStats:
    return GroupStats(
        name="base", clients=50, succeeded=succeeded, failed=failed, hung=0, elapsed_s=10.0, rate_hz=succeeded / 10
    )


def _record(scenario: dict) -> RunRecord:
    levels = [(1, 100), (10, 800), (20, 1200), (40, 1000), (80, 300)]
    steps = [
        step(i, lvl, ok, failed=2 if lvl >= 40 else 0, group="stress", extra={"base": _base(lvl, 500 - i)})
        for i, (lvl, ok) in enumerate(levels)
    ]
    return RunRecord(run_id="r1", created_unix=0.0, scenario=scenario, measured_group="stress", steps=steps)


def test_one_verdict_per_group_measured_group_first() -> None:
    verdicts = analyze_run(_record({}))
    assert [v.group for v in verdicts] == ["stress", "base"]
    stress, base = verdicts
    assert stress.peak_level == 20 and stress.collapse_level == 80
    assert stress.error_onset_level == 40  # 2 of 1002 > 0.1 %
    assert stress.usl is not None and base.usl is None
    assert base.peak_level == 1  # the baseload group's rate only drifts down


def test_scenario_onset_and_slo_are_used() -> None:
    stress = analyze_run(_record({"analysis": {"onset": 0.01}, "slo": {"failure_ratio": 0.0}}))[0]
    assert stress.error_onset_level is None
    assert stress.capacity_under_slo == 20 and stress.slo_passed is False


def test_think_time_from_the_scenario_groups() -> None:
    record = _record({"groups": [{"name": "stress", "think_ms": 1000}]})
    a = analyze_run(record)[0].little[0].expected_n
    b = analyze_run(_record({}))[0].little[0].expected_n
    assert a == pytest.approx(b + 10.0)  # X = 10/s at level 1, Z = 1 s


@pytest.mark.parametrize(
    ("scenario", "message"),
    [({"analysis": {"onset": 2}}, "analysis.onset"), ({"slo": 500}, "slo must be a table")],
)
def test_bad_scenario_values_are_user_errors(scenario: dict, message: str) -> None:
    with pytest.raises(UserError, match=message):
        analyze_run(_record(scenario))


def test_recovery_tolerance_from_the_scenario() -> None:
    record = _record({})
    end = max(s.started_unix + s.elapsed_s for s in record.steps)
    record.steps.append(step(10, 1, 70, group="stress", phase="recovery", started=end + 5))  # 7 Hz vs 10 Hz at first
    assert analyze_run(record)[0].recovered is False
    record.scenario = {"recovery": {"tolerance": 0.5}}
    stress = analyze_run(record)[0]
    assert stress.recovered is True and stress.time_to_recover_s == pytest.approx(15.0)


def test_verdicts_survive_run_json() -> None:
    record = _record({"slo": {"p99_ms": 500, "failure_ratio": None}})
    record.verdicts = analyze_run(record)
    back = RunRecord.model_validate_json(record.model_dump_json(indent=2))
    assert back.verdicts == record.verdicts
    assert back.verdicts[0].usl is not None and back.verdicts[0].usl.ci == record.verdicts[0].usl.ci
