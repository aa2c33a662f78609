"""analyze_run: one verdict per group from a RunRecord, with the scenario's onset and SLO."""

from __future__ import annotations

import pytest
from test_analysis_helpers import step

from knee.analysis import analyze_run
from knee.analysis.compare import compare_runs
from knee.errors import UserError
from knee.model import GroupStats, RunRecord
from knee.scenario import parse_scenario

SCENARIO = """
[groups.stress]
kind = "http"
url = "http://127.0.0.1:1/"
think = "{think}"

[groups.base]
kind = "http"
url = "http://127.0.0.1:1/base"
clients = 50

[sweep]
levels = [1, 10, 20, 40, 80]
duration = "10s"
"""


def _base(level: int, succeeded: int, failed: int = 0) -> GroupStats:
    return GroupStats(
        name="base", clients=50, succeeded=succeeded, failed=failed, hung=0, elapsed_s=10.0, rate_hz=succeeded / 10
    )


def _record(extra: str = "", think: str = "0s") -> RunRecord:
    levels = [(1, 100), (10, 800), (20, 1200), (40, 1000), (80, 300)]
    steps = [
        step(
            i,
            lvl,
            ok,
            failed=2 if lvl >= 40 else 0,
            group="stress",
            extra={"base": _base(lvl, 500 - 50 * i, failed=5 if lvl == 80 else 0)},
        )
        for i, (lvl, ok) in enumerate(levels)
    ]
    sc = parse_scenario(SCENARIO.format(think=think) + extra)
    return RunRecord(run_id="r1", created_unix=0.0, scenario=sc, measured_group="stress", steps=steps)


def test_one_verdict_per_group_measured_group_first() -> None:
    verdicts = analyze_run(_record())
    assert [v.group for v in verdicts] == ["stress", "base"]
    stress, base = verdicts
    assert stress.peak_level == 20 and stress.collapse_level == 80
    assert stress.error_onset_level == 40  # 2 of 1002 > 0.1 %
    assert stress.usl is not None and base.usl is None
    # The baseload ran beside the stress levels: no peak of its own, its degradation beside them instead.
    assert base.peak_level is None and base.collapse_level is None
    assert base.sentences[0] == "beside stress from 1 to 80 clients its rate fell 40 % (50.0 Hz → 30.0 Hz)"
    assert base.error_onset_level == 80
    assert base.sentences[1] == "first errors beside 80 clients of stress: 300 succeeded (30.0 Hz), 5 failed"


def test_scenario_onset_and_slo_are_used() -> None:
    stress, base = analyze_run(_record("[analysis]\nonset = 0.01\n[slo]\nfailure_ratio = 0.0\n"))
    assert stress.error_onset_level is None
    assert stress.capacity_under_slo == 20 and stress.slo_passed is False
    # the baseload met the SLO beside the stress group up to 40 clients (its failures came at 80)
    assert base.capacity_under_slo == 40 and base.slo_passed is False
    assert "it met the SLO (failures ≤ 0 %) beside stress up to 40 clients" in base.sentences


def test_think_time_from_the_scenario_groups() -> None:
    record = _record(think="1s")
    a = analyze_run(record)[0].little[0].expected_n
    b = analyze_run(_record())[0].little[0].expected_n
    assert a == pytest.approx(b + 10.0)  # X = 10/s at level 1, Z = 1 s


@pytest.mark.parametrize(
    ("extra", "message"),
    [
        ("[analysis]\nonset = 2\n", r"analysis.onset must be at most 1 \(got 2\)"),
        ("slo = 500\n", r"slo must be a table \(got 500\)"),
    ],
)
def test_bad_analysis_settings_are_refused_when_the_scenario_is_read(extra: str, message: str) -> None:
    with pytest.raises(UserError, match=message):
        _record(extra) if not extra.startswith("slo") else parse_scenario(extra + SCENARIO.format(think="0s"))


def test_recovery_tolerance_from_the_scenario() -> None:
    record = _record()
    end = max(s.started_unix + s.elapsed_s for s in record.steps)
    record.steps.append(step(10, 1, 70, group="stress", phase="recovery", started=end + 5))  # 7 Hz vs 10 Hz at first
    assert analyze_run(record)[0].recovered is False
    record.scenario = _record("[recovery]\ntolerance = 0.5\n").scenario
    stress = analyze_run(record)[0]
    assert stress.recovered is True and stress.time_to_recover_s == pytest.approx(15.0)


def test_verdicts_survive_run_json() -> None:
    record = _record("[slo]\np99_ms = 500\n")
    record.verdicts = analyze_run(record)
    back = RunRecord.model_validate_json(record.model_dump_json(indent=2))
    assert back.verdicts == record.verdicts
    assert back.verdicts[0].usl is not None and back.verdicts[0].usl.ci == record.verdicts[0].usl.ci


def test_compare_gives_a_background_group_no_peak_of_its_own() -> None:
    cmp = compare_runs(_record(), _record())
    assert [p.group for p in cmp.peaks] == ["stress"]
    assert {d.group for d in cmp.levels} == {"stress", "base"}  # its levels are still compared
    assert not any(line.startswith("base: peak") for line in cmp.summary)


def test_a_background_group_that_failed_beside_one_level_says_how_in_english() -> None:
    """issue 37: not "0 Hz beside stress at 2 clients; errors from beside stress at 2 clients" but how its
    operations ended there, with the failures' reasons (an HTTP status by its code and phrase, else the class)."""
    from knee.model import Reason

    record = _record()
    record.steps = record.steps[1:2]  # one stress level: 10 clients
    g = record.steps[0].groups["base"] = _base(10, 0, failed=16)
    g.reasons = [
        Reason.model_validate(
            {"class": "status", "key": "k", "sample": "HTTP/1.1 401 Unauthorized: denied", "count": 12}
        ),
        Reason.model_validate({"class": "refused", "key": "r", "sample": "connection refused", "count": 4}),
    ]
    _, base = analyze_run(record)
    assert (
        base.sentences[0] == "beside 10 clients of stress: 0 succeeded, 16 failed (12 × 401 Unauthorized, 4 × refused)"
    )
    assert base.error_onset_level == 10 and not any("errors from" in s for s in base.sentences)
    g.reasons = g.reasons[:1]
    g.succeeded, g.rate_hz = 40, 4.0
    assert analyze_run(record)[1].sentences[0] == (
        "beside 10 clients of stress: 40 succeeded (4.00 Hz), 16 failed (401 Unauthorized)"
    )
