"""The analysis definitions (DESIGN.md) on hand-built steps: peak, onset, collapse, hung, hysteresis, SLO, Little."""

from __future__ import annotations

import pytest
from test_analysis_helpers import T0, step, sweep

from knee.analysis import Slo, analyze, usl
from knee.errors import UserError
from knee.model import LatencyStats, SeriesPoint, StepResult

from sample_records import group_stats, step_result


def test_peak_and_no_errors_ever() -> None:
    v = analyze(sweep({5: 2.0, 20: 4.0, 50: 4.6, 100: 4.4}), "main")
    assert (v.peak_level, v.peak_rate) == (50, pytest.approx(4.6))
    assert v.error_onset_level is None and v.collapse_level is None
    # 20, 50 and 100 clients are within counting noise of each other (46 successes at the peak): a plateau
    assert v.sentences[0] == "a plateau of 4.60 Hz from 20 clients (20: 4.00 Hz; 5: 2.00 Hz) to 100 clients"
    assert "no errors up to 100 clients" in v.sentences
    assert v.hung_by_level == {5: 0, 20: 0, 50: 0, 100: 0}
    assert v.warnings == []  # a clean sweep gets no warnings
    assert v.recovered is None and v.capacity_under_slo is None and v.slo_passed is None


def test_error_onset_is_the_first_level_above_the_threshold() -> None:
    steps = [
        step(0, 10, 1000, failed=1),  # 0.1 %: not above the default onset
        step(1, 20, 1000, failed=2),  # 0.2 %
        step(2, 30, 1000, failed=50),
    ]
    assert analyze(steps, "main").error_onset_level == 20
    assert analyze(steps, "main", onset=0.01).error_onset_level == 30
    assert (
        "errors from 20 clients (0.2 % failed or hung: 2 failed, 0 hung; 10: 0.1 %)" in analyze(steps, "main").sentences
    )


def test_collapse_at_the_first_level_past_the_peak() -> None:
    v = analyze(sweep({10: 50.0, 50: 100.0, 100: 49.0, 200: 10.0}), "main")
    assert v.peak_level == 50
    assert v.collapse_level == 100
    assert "collapsed at 100 clients (49.0 Hz, 49 % of the peak; 50: 100 Hz)" in v.sentences


def test_no_collapse_while_the_rate_stays_above_half_the_peak() -> None:
    v = analyze(sweep({10: 50.0, 50: 100.0, 100: 51.0}), "main")
    assert v.collapse_level is None


def test_failure_based_collapse() -> None:
    steps = [
        step(0, 10, 500),
        step(1, 50, 1000),
        step(2, 100, 800, failed=100),  # 11 % failed, rate 80 % of the peak
        step(3, 200, 700, failed=800),  # 53 % failed, rate still 70 % of the peak
        step(4, 400, 100, failed=2000),
    ]
    v = analyze(steps, "main")
    assert v.peak_level == 50
    assert v.error_onset_level == 100
    assert v.collapse_level == 200
    assert "collapsed at 200 clients (53 % failed or hung: 800 failed, 0 hung; 100: 80.0 Hz)" in v.sentences


def test_failures_below_the_peak_are_not_a_collapse() -> None:
    steps = [step(0, 10, 100, failed=200), step(1, 50, 1000), step(2, 100, 900)]
    assert analyze(steps, "main").collapse_level is None


def test_hung_per_level_over_both_directions() -> None:
    steps = [
        step(0, 10, 100),
        step(1, 50, 100, hung=3),
        step(2, 100, 50, hung=7),
        step(3, 50, 90, hung=1, direction="down"),
    ]
    v = analyze(steps, "main")
    assert v.hung_by_level == {10: 0, 50: 4, 100: 7}
    assert "11 operations hung (from 50 clients)" in v.sentences


def test_up_down_hysteresis() -> None:
    steps = [
        step(0, 10, 100),
        step(1, 50, 400),
        step(2, 100, 300),
        step(3, 50, 200, direction="down"),
        step(4, 10, 95, direction="down"),
    ]
    v = analyze(steps, "main")
    assert v.hysteresis == {10: pytest.approx(0.05), 50: pytest.approx(0.5)}
    assert v.peak_level == 50  # the way down does not change the curve
    assert "on the way down it was 50 % slower at 50 clients than on the way up" in v.sentences


def test_repeated_levels_are_pooled() -> None:
    steps = [step(0, 10, 100, elapsed=10), step(1, 10, 300, elapsed=20), step(2, 20, 150, elapsed=10)]
    v = analyze(steps, "main")
    assert v.peak_level == 20  # 15 Hz beats the pooled 400 / 30 s = 13.3 Hz at level 10


def _recovery_run(probe_rates: list[float]) -> list:
    steps = sweep({5: 10.0, 50: 40.0, 100: 5.0})  # steps 0..2 end at T0 + 40 + 10
    for i, r in enumerate(probe_rates):
        steps.append(step(3 + i, 5, round(r * 5), elapsed=5.0, phase="recovery", started=T0 + 60 + 15 * i))
    return steps


def test_recovered_after_the_first_probe_within_ten_percent() -> None:
    v = analyze(_recovery_run([2.0, 8.0, 9.2, 10.0]), "main")
    assert v.recovered is True
    # the load stopped at T0 + 50; the third probe (9.2 Hz ≥ 90 % of 10 Hz) ends at T0 + 60 + 30 + 5
    assert v.time_to_recover_s == pytest.approx(45.0)
    assert "recovered in 45 s" in v.sentences


def _started_empty(index: int, seconds: int, phase: str, started: float) -> StepResult:
    """5 clients of 500 ms operations (10/s) for `seconds`: nothing ends in the first half second, the 5 in flight
    at the end are abandoned."""
    series = [SeriesPoint(t=float(i), succeeded=5 if i == 0 else 10, failed=0, hung=0) for i in range(seconds)]
    done = sum(p.succeeded for p in series)
    lat = LatencyStats(count=done, mean=500.0, p99=500.0)
    g = group_stats("main", 5, done, float(seconds), lat, series=series, interval_s=1.0, abandoned=5)
    return step_result(index, 5, started, float(seconds), {"main": g}, phase=phase)


def test_a_probe_shorter_than_its_baseline_is_judged_on_the_level_tables_rate() -> None:
    # raw, the 3 s probe read 25 / 3 = 8.3/s against the 30 s baseline's 295 / 30 = 9.8/s: 15 % off, "did not
    # recover" for a service that never changed; the level table reads both 10/s (after the first latency)
    steps = [
        _started_empty(0, 30, "sweep", T0),
        *(_started_empty(1 + i, 3, "recovery", T0 + 40 + 5 * i) for i in range(2)),
    ]
    v = analyze(steps, "main")
    assert v.recovered is True and v.time_to_recover_s == pytest.approx(43.0 - 30.0)


def test_not_recovered() -> None:
    v = analyze(_recovery_run([2.0, 3.0, 8.8]), "main")
    assert v.recovered is False and v.time_to_recover_s is None
    # waited from T0 + 50 to the end of the last probe, T0 + 60 + 30 + 5
    assert "did not recover after 45 s (level 5 stayed more than 10 % off its first rate)" in v.sentences


def test_within_ten_percent_either_way() -> None:
    # like knee sweep's own probing: 12 Hz against a first rate of 10 Hz is not back to normal yet, 10.8 Hz is
    v = analyze(_recovery_run([12.0, 10.8]), "main")
    assert v.recovered is True and v.time_to_recover_s == pytest.approx(30.0)


def test_recovery_probes_are_not_part_of_the_sweep() -> None:
    v = analyze(_recovery_run([100.0]), "main")
    assert v.peak_level == 50


def test_no_probes_means_recovery_unknown() -> None:
    v = analyze(sweep({5: 10.0, 50: 40.0}), "main")
    assert v.recovered is None and v.time_to_recover_s is None


def test_capacity_under_slo_needs_every_lower_level_to_pass() -> None:
    steps = [
        step(0, 10, 1000, p99_ms=100),
        step(1, 50, 1000, failed=5, p99_ms=300),
        step(2, 100, 1000, p99_ms=900),  # too slow
        step(3, 200, 1000, p99_ms=400),  # passes again, but above a failing level
    ]
    slo = Slo(p99_ms=500, failure_ratio=0.01)
    v = analyze(steps, "main", slo=slo)
    assert v.capacity_under_slo == 50
    assert v.slo_passed is False
    assert "capacity under SLO (p99 ≤ 500 ms, failures ≤ 1.0 %): 50 clients (100 clients: broken)" in v.sentences
    strict = analyze(steps, "main", slo=Slo(failure_ratio=0.0))
    assert strict.capacity_under_slo == 10


def test_slo_passed_when_every_level_meets_it() -> None:
    v = analyze(sweep({10: 5.0, 20: 9.0}), "main", slo=Slo(p99_ms=50))
    assert (v.capacity_under_slo, v.slo_passed) == (20, True)


def test_slo_failed_at_the_first_level() -> None:
    v = analyze([step(0, 10, 100, p99_ms=900), step(1, 20, 100)], "main", slo=Slo(p99_ms=500))
    assert (v.capacity_under_slo, v.slo_passed) == (None, False)
    assert "no level met the SLO (p99 ≤ 500 ms), not even 10 clients" in v.sentences


@pytest.mark.parametrize(
    ("table", "message"),
    [
        ({"p99_ms": "fast"}, "slo.p99_ms must be a number"),
        ({"failure_ratio": 5}, r"slo.failure_ratio must be at most 1 \(got 5\)"),
        ({"p99": 500}, "slo.p99 is not a known key"),
    ],
)
def test_bad_slo_is_a_user_error(table: dict, message: str) -> None:
    with pytest.raises(UserError, match=message):
        Slo.from_dict(table)


def test_littles_law_holds_for_busy_clients_and_flags_idle_ones() -> None:
    # 10 clients, 100 ms each, no think time: X = 100/s → X·R = 10
    ok = step(0, 10, 1000, mean_ms=100.0, elapsed=10.0)
    # 50 clients but only 100 completions/s of 100 ms: 10 busy, 40 hung or starved
    bad = step(1, 50, 1000, mean_ms=100.0, elapsed=10.0)
    v = analyze([ok, bad], "main")
    assert [c.level for c in v.little] == [10, 50]
    assert v.little[0].expected_n == pytest.approx(10.0)
    assert v.little[0].gap == pytest.approx(0.0, abs=1e-9)
    assert v.little[1].gap == pytest.approx(0.8)
    assert any("Little's law does not hold at 50 clients" in w for w in v.warnings)
    assert not any("at 10 clients" in w for w in v.warnings)


def test_littles_law_counts_think_time_and_failures() -> None:
    s = step(0, 20, 500, failed=500, mean_ms=100.0, elapsed=10.0)  # X = 100/s all completions
    v = analyze([s], "main", think_s=0.1)
    assert v.little[0].expected_n == pytest.approx(20.0)


def test_littles_law_holds_with_failures_timed_apart() -> None:
    # 10 clients against a pool of 2: 2 busy with 250 ms successes (8/s), 8 spinning on 1 ms failures
    # (8000/s). Latency is the successes'; Little's law pools both: 8 × 0.25 + 8000 × 0.001 = 10.
    s = step(0, 10, 80, failed=80_000, mean_ms=250.0, failed_mean_ms=1.0, elapsed=10.0)
    assert s.groups["main"].latency_ms.count == 80
    v = analyze([s], "main")
    assert v.little[0].expected_n == pytest.approx(10.0)
    assert not any("Little's law" in w for w in v.warnings)
    # The same 8 backing off 100 ms after each instant failure: 8 / 0.1 s = 80 failures/s.
    s = step(0, 10, 80, failed=800, mean_ms=250.0, failed_mean_ms=0.0, elapsed=10.0)
    assert analyze([s], "main", think_on_failure_s=0.1).little[0].expected_n == pytest.approx(10.0)
    assert analyze([s], "main").little[0].gap == pytest.approx(0.8)


def test_a_p99_slo_fails_a_level_where_nothing_succeeded() -> None:
    # failures that come at once have no p99 of their own to meet the limit with
    steps = [step(0, 10, 1000, p99_ms=100.0), step(1, 50, 0, failed=5000, mean_ms=0.1)]
    v = analyze(steps, "main", slo=Slo(p99_ms=500))
    assert v.capacity_under_slo == 10
    assert v.slo_passed is False


def test_empty_input_gives_a_verdict_with_a_warning() -> None:
    v = analyze([], "main")
    assert v.peak_level is None and v.usl is None
    assert v.warnings and "nothing to analyze" in v.warnings[0]


def test_single_level() -> None:
    v = analyze([step(0, 10, 100)], "main")
    assert v.peak_level == 10
    assert v.sentences[0] == "10.0 Hz with 10 clients"
    assert v.warnings == ["only one level (10 clients) was measured: no curve, so no peak, collapse or USL model"]
    assert v.usl is None


def test_two_levels_are_too_few_for_the_usl() -> None:
    v = analyze(sweep({10: 5.0, 20: 9.0}), "main")
    assert v.usl is None
    assert any("no USL fit: it needs at least 3 levels" in w for w in v.warnings)


def test_nothing_succeeded() -> None:
    v = analyze([step(0, 10, 0, failed=10), step(1, 20, 0, failed=10)], "main")
    assert v.peak_level is None
    assert v.sentences[0] == "no operation succeeded (10 to 20 clients)"


def test_partial_steps_count_and_are_noted() -> None:
    steps = sweep({10: 5.0, 20: 9.0})
    steps.append(step(2, 40, 30, elapsed=3.0, partial=True, mean_ms=100.0))
    v = analyze(steps, "main")
    assert v.peak_level == 40  # 10 Hz over its 3 measured seconds
    assert any("level 40 was cut short (partial)" in w and "3.0 s" in w for w in v.warnings)


def test_a_step_cut_short_before_its_first_operations_ended_is_left_out() -> None:
    # Ctrl-C 0.8 s into 100 clients of 1 s operations: nothing ended, 100 abandoned. It was a collapse at 100
    # ("0 Hz, 0 % of the peak") and a point of the USL fit.
    steps = sweep({10: 50.0, 50: 100.0})
    cut = step(2, 100, 0, elapsed=0.8, partial=True, mean_ms=0.0)
    cut.groups["main"].abandoned = 100
    v = analyze([*steps, cut], "main")
    assert v.collapse_level is None and v.peak_level == 50, v.sentences
    assert (
        "the step at level 100 was cut short (partial) after 0.8 s, before its first operations ended: left out"
        in v.warnings
    )
    assert not any("collapse" in s for s in v.sentences)


def test_a_step_that_lost_a_worker_is_left_out() -> None:
    # one of two workers lost at 95 % of the peak: the other's half read 47 %, "a collapse"
    steps = sweep({100: 100.0, 200: 190.0})
    lost = step(2, 400, 470, elapsed=5.0, partial=True)
    lost.lost_workers = ["tcp://10.0.0.2:8786"]
    v = analyze([*steps, lost], "main")
    assert v.collapse_level is None and v.peak_level == 200, v.sentences
    assert (
        "the step at level 400 lost tcp://10.0.0.2:8786 (partial): fewer clients than its level, left out" in v.warnings
    )


def test_usl_is_fitted_up_to_the_collapse_without_failing_levels() -> None:
    levels = [1, 5, 10, 20, 40, 60, 80, 100]
    steps = [step(i, n, round(usl(float(n), 0.05, 0.002, 10.0) * 100), elapsed=100.0) for i, n in enumerate(levels)]
    steps.append(step(len(steps), 120, 0, failed=5000, elapsed=100.0))  # collapse by failures
    steps.append(step(len(steps), 150, 1, failed=9000, elapsed=100.0))  # past the collapse
    v = analyze(steps, "main")
    assert v.collapse_level == 120
    assert v.usl is not None
    assert v.usl.sigma == pytest.approx(0.05, rel=0.05)
    assert v.usl.kappa == pytest.approx(0.002, rel=0.05)
    assert v.usl.n_star == pytest.approx((0.95 / 0.002) ** 0.5, rel=0.05)
    assert any(s.startswith("USL: σ=0.05, κ=0.002, N*=22, R²=1.00") for s in v.sentences)


def test_fit_false_skips_the_usl() -> None:
    v = analyze(sweep({1: 1.0, 10: 8.0, 20: 12.0, 40: 10.0}), "main", fit=False)
    assert v.usl is None


def test_stages_are_separate_curves() -> None:
    steps = []
    for i, (lvl, store, fetch) in enumerate([(10, 100, 400), (20, 180, 300), (40, 60, 200)]):
        steps.append(step(2 * i, lvl, store * 10, p99_ms=100))
        steps.append(step(2 * i + 1, lvl, fetch * 10, p99_ms=100 if lvl < 40 else 900))
        steps[-2].label, steps[-1].label = "store", "fetch"
    v = analyze(steps, "main", slo=Slo(p99_ms=500), fit=False)
    assert "store: peaked at 180 Hz with 20 clients" in v.sentences
    assert "fetch: peaked at 400 Hz with 10 clients" in v.sentences
    assert "store: collapsed at 40 clients (60.0 Hz, 33 % of the peak; 20: 180 Hz)" in v.sentences
    assert v.peak_level is None  # no single peak across operation types
    assert (v.capacity_under_slo, v.slo_passed) == (20, False)  # fetch is too slow at 40


def test_recovery_compares_with_the_probes_label() -> None:
    steps = [step(0, 5, 1000), step(1, 5, 100), step(2, 50, 100)]
    steps[0].label, steps[1].label, steps[2].label = "fetch", "store", "store"
    probe = step(3, 5, 95, phase="recovery")
    probe.label = "store"
    assert analyze([*steps, probe], "main").recovered is True  # 9.5 Hz against store's 10 Hz, not fetch's 100 Hz


def test_usl_advice_knows_the_collapsed_level_it_left_out() -> None:
    steps = sweep({2: 20.0, 4: 38.0, 8: 70.0, 16: 120.0})
    steps.append(step(4, 32, 500, failed=900))  # 64 % failed: collapse, left out of the fit
    v = analyze(steps, "main")
    assert v.collapse_level == 32
    # a limit that refuses: the fit is disowned (issue 25), and still knows the level it left out
    assert v.usl is None and v.usl_disowned is not None
    assert v.usl_disowned.advice == ["add levels between 16 and 32, e.g. 20 and 25"]


def test_slo_with_min_clients_passes_when_the_capacity_reaches_it() -> None:
    steps = [step(0, 1, 100, p99_ms=50), step(1, 10, 900, p99_ms=80), step(2, 50, 3000, p99_ms=900)]
    v = analyze(steps, "main", slo=Slo(p99_ms=100))
    assert (v.capacity_under_slo, v.slo_passed) == (10, False)
    v = analyze(steps, "main", slo=Slo(p99_ms=100, min_clients=10))
    assert (v.capacity_under_slo, v.slo_passed) == (10, True)
    v = analyze(steps, "main", slo=Slo(p99_ms=100, min_clients=20))
    assert (v.capacity_under_slo, v.slo_passed) == (10, False)
    with pytest.raises(UserError, match=r"slo\.min_clients must be at least 1"):
        Slo.from_dict({"p99_ms": 100, "min_clients": 0})


def test_a_collapse_below_a_higher_rate_with_errors_is_said_against_that_rate() -> None:
    """The collapse is measured from the highest rate, which here came with errors: its share is of that rate, and
    says so (it was '47 % of the peak' beside a peak of 100 Hz, where 70 Hz is 70 %)."""
    rows = [(1, 250, 0), (2, 500, 0), (4, 1000, 0), (8, 1500, 200), (16, 700, 30)]
    v = analyze([step(i, lvl, ok, failed=f) for i, (lvl, ok, f) in enumerate(rows)], "main")
    assert "peaked at 100 Hz with 4 clients" in v.sentences
    assert "collapsed at 16 clients (70.0 Hz, 47 % of the highest rate (150 Hz, with errors); 8: 150 Hz)" in v.sentences


def test_a_top_flat_only_because_the_level_past_it_fails_is_a_peak() -> None:
    """4 and 8 clients give the same rate, but 8 fails a fifth of its operations: a peak at the limit, not a plateau
    (and no pool of about 4); a plateau needs a doubling without errors, as the level search has it."""
    rows = [(1, 100, 0), (2, 200, 0), (4, 400, 0), (8, 400, 100)]
    v = analyze([step(i, lvl, ok, failed=f) for i, (lvl, ok, f) in enumerate(rows)], "main")
    assert v.sentences[0] == "peaked at 40.0 Hz with 4 clients (4–8 within noise)", v.sentences
    assert "plateau" not in v.brackets and not any("plateau" in s or "pool" in s for s in v.sentences)
    flat = analyze([step(i, lvl, 400 if lvl >= 4 else 100 * lvl) for i, lvl in enumerate((1, 2, 4, 8, 16))], "main")
    assert flat.sentences[0].startswith("a plateau of 40.0 Hz from 4 clients")


def test_a_repeat_cut_short_does_not_confirm_the_level_it_measured_again() -> None:
    # 45 failed 2 % between clean neighbours and was measured again; Ctrl-C cut the repeat short after 1 s. It said
    # "contradicted its neighbours twice (…): real, kept" of a repeat that never judged anything.
    steps = sweep({32: 300.0, 64: 600.0})
    first = step(2, 45, 4200, failed=90)
    again = step(3, 45, 300, elapsed=1.0, partial=True)
    again.repeat_of = 2
    first.unconfirmed = True  # as the search leaves it when the repeat cannot confirm it
    v = analyze([*steps, first, again], "main")
    said = " ".join(v.sentences)
    assert "45 clients contradicted its neighbours (" in said, said
    assert "the repeat was cut short: not confirmed, left out" in said, said
    assert "real, kept" not in said
    assert v.error_onset_level is None, v.sentences  # the errors of a level not confirmed place no onset


def test_after_a_step_on_a_service_not_at_rest_the_levels_back_at_rest_are_not_called_broken() -> None:
    # a fixed sweep goes on past a step that began on a busy service; the next began at rest and is believed, but
    # the sentence said every level after the first was "of a broken service … and locates nothing"
    from knee.model import Settle

    steps = sweep({10: 100.0, 20: 200.0, 40: 150.0, 80: 390.0})
    steps[2].settle = Settle(seconds=30.0, settled=False, reason="12 connections still closing")
    steps[3].settle = Settle(seconds=2.0, settled=True, reason="at rest")
    v = analyze(steps, "main")
    said = v.sentences[0]
    assert "what was measured after that (40 clients) is of a broken service" in said, said
    assert said.endswith("; it was back at rest before 80 clients"), said
    assert v.peak_level == 80 and v.degraded_after == 20
    # the wait that ran out is not said to have brought the service back (make demo said both "stayed degraded … for
    # the 30 s knee waited" and "took 30 s to come back to rest"); a long wait that ended at rest is said
    assert not any("to come back to rest" in s for s in v.sentences), v.sentences
    steps[3].settle = Settle(seconds=6.0, settled=True, reason="at rest")
    assert "after 40 clients the service took 6.0 s to come back to rest (at rest)" in analyze(steps, "main").sentences
