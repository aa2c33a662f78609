"""Rate sweeps (`[sweep] rates`): the scenario keys and their errors, the plan, the store, the verdict, the reports."""

from __future__ import annotations

import csv
import io
from collections.abc import Sequence
from pathlib import Path

import pytest

from knee.analysis import analyze, analyze_run, fit_usl
from knee.analysis.table import read_points
from knee.analysis.uslfit import usl
from knee.errors import UserError
from knee.model import GroupStats, LatencyStats, OpenLoopStats, RunRecord, SeriesPoint, StepResult
from knee.plan import engine_spec, probe_step, quick, sweep_plan
from knee.report import plots
from knee.report import view as V
from knee.report.csvout import levels_csv
from knee.report.markdown import render_markdown
from knee.scenario import Slo, parse_scenario, scenario_from_record
from knee.spec import ClosedPacer, RatePacer
from knee.store import RunDir

from sample_records import make_group

RATES = """\
[groups.main]
kind = "http"
url = "http://127.0.0.1:1/x"
rate = "level"
clients = 20

[groups.base]
kind = "http"
url = "http://127.0.0.1:1/y"
clients = 3

[sweep]
rates = [400, 100, 200.0, 2.5]
duration = "1s"
"""


def error_of(text: str) -> str:
    with pytest.raises(UserError) as info:
        parse_scenario(text, "s.toml")
    return str(info.value)


def test_rates_are_the_levels_sorted_and_whole_ones_stay_ints() -> None:
    s = parse_scenario(RATES)
    assert s.rate_sweep
    assert s.measured_group == "main"
    assert s.levels() == [2.5, 100, 200, 400]
    assert [type(v) for v in s.levels()] == [float, int, int, int]


def test_a_rate_range_uses_the_level_range_keys() -> None:
    s = parse_scenario(RATES.replace("[400, 100, 200.0, 2.5]", "{start = 100, stop = 1000, count = 4}"))
    assert s.levels() == [100, 215, 464, 1000]
    s = parse_scenario(
        RATES.replace("[400, 100, 200.0, 2.5]", '{start = 0.5, stop = 2, spacing = "linear", step = 0.5}')
    )
    assert s.levels() == [0.5, 1, 1.5, 2]


def test_stop_max_rate_drops_higher_rates() -> None:
    assert parse_scenario(RATES + "\n[stop]\nmax_rate = 150\n").levels() == [2.5, 100]


@pytest.mark.parametrize(
    ("change", "message"),
    [
        (
            ("rates = [400, 100, 200.0, 2.5]", "rates = [400]\nlevels = [1, 2]"),
            "s.toml line 14: sweep.levels and sweep.rates exclude each other: levels are client counts (closed loop), "
            "rates are arrivals per second (open loop); keep one of them",
        ),
        (
            ("[400, 100, 200.0, 2.5]", "[100, -5]"),
            "s.toml line 13: sweep.rates[1] must be more than 0 (got -5)",
        ),
        (
            ("[400, 100, 200.0, 2.5]", "[100, inf]"),
            "s.toml line 13: sweep.rates[1] must be a finite number (got inf)",
        ),
        (
            ('rate = "level"\nclients = 20\n', 'rate = "level"\n'),
            's.toml line 1: groups.main.clients must be a number of connections when rate = "level" (got "level"): '
            "each arrival is handed to one of that many clients, e.g. clients = 50",
        ),
        (
            ('rate = "level"', "rate = -5"),
            "s.toml line 4: groups.main.rate must be a rate above 0 and at most 10,000,000 arrivals per second "
            "(got -5)",
        ),
        (
            ("clients = 20", 'clients = 20\nthink = "1s"'),
            's.toml line 6: groups.main.think applies to closed loops only (got 1 s with rate = "level"); drop think',
        ),
        (
            ("clients = 20", 'clients = 20\nthink_on_failure = "100ms"'),
            "s.toml line 6: groups.main.think_on_failure applies to closed loops only (got 0.1 s with "
            'rate = "level"); drop think_on_failure',
        ),
        (
            ("clients = 3\n", ""),
            's.toml line 7: groups.base.clients = "level" follows client levels, but this sweep has sweep.rates: '
            'write rate = "level" and clients = N (the connections its arrivals are handed to)',
        ),
        (
            ("rates = [400, 100, 200.0, 2.5]\n", ""),
            "s.toml line 12: sweep needs rates, the arrivals per second of group 'main' (rate = \"level\"), "
            "e.g. rates = [100, 200, 500]",
        ),
        (
            ('duration = "1s"', 'duration = "1s"\narrival = "bursty"'),
            "s.toml line 15: sweep.arrival must be 'constant' or 'poisson' (got 'bursty')",
        ),
        (
            ('duration = "1s"', 'duration = "1s"\n\n[stop]\nmax_level = 5'),
            "s.toml line 17: stop.max_level counts clients, but this sweep has sweep.rates (got 5); "
            "use stop.max_rate, in arrivals per second",
        ),
        (
            ('duration = "1s"', 'duration = "1s"\n\n[slo]\np99_ms = 5\nmin_clients = 5'),
            "s.toml line 18: slo.min_clients counts clients, but this sweep has sweep.rates (got 5); "
            "use slo.min_rate, in arrivals per second",
        ),
    ],
)
def test_rate_mistakes_name_line_key_value_and_fix(change: tuple[str, str], message: str) -> None:
    assert error_of(RATES.replace(*change)) == message


CLOSED = RATES.replace('rate = "level"\nclients = 20', 'clients = "level"').replace(
    "rates = [400, 100, 200.0, 2.5]", "levels = [1, 2]"
)


@pytest.mark.parametrize(
    ("extra", "message"),
    [
        (
            'arrival = "poisson"',
            "s.toml line 14: sweep.arrival applies to rate sweeps (sweep.rates) only (got 'poisson'); "
            'add sweep.rates and a group with rate = "level"',
        ),
        (
            "\n[stop]\nmax_rate = 100",
            "s.toml line 16: stop.max_rate applies to rate sweeps (sweep.rates) only (got 100); "
            "use stop.max_level, in clients",
        ),
        (
            "\n[slo]\np99_ms = 5\nmin_rate = 10",
            "s.toml line 17: slo.min_rate applies to rate sweeps (sweep.rates) only (got 10); "
            "use slo.min_clients, in clients",
        ),
    ],
)
def test_open_loop_keys_are_refused_in_a_client_sweep(extra: str, message: str) -> None:
    assert error_of(CLOSED + extra + "\n") == message


def test_engine_spec_paces_the_rate_group_and_leaves_the_baseload_closed() -> None:
    s = parse_scenario(RATES.replace('duration = "1s"', 'duration = "1s"\narrival = "poisson"\nmax_in_flight = 500'))
    spec = engine_spec(s, sweep_plan(s)[1])
    main, base = spec.groups
    assert main.clients == 20
    assert main.pacer == RatePacer(rate_hz=100.0, poisson=True, max_in_flight=500)
    assert base.pacer == ClosedPacer() and base.clients == 3
    default = engine_spec(parse_scenario(RATES), sweep_plan(parse_scenario(RATES))[0]).groups[0].pacer
    assert default == RatePacer(rate_hz=2.5, poisson=False, max_in_flight=10_000)


def test_up_down_recovery_and_quick_work_on_rates() -> None:
    longer = RATES.replace('duration = "1s"', 'duration = "1m"\ndirection = "up-down"') + "\n[stop]\nmax_rate = 1600\n"
    s = parse_scenario(longer.replace("[400, 100, 200.0, 2.5]", "[50, 100, 200, 400, 800, 1600]"))
    plan = sweep_plan(s)
    assert [p.level for p in plan if p.direction == "down"] == [800, 400, 200, 100, 50]
    assert probe_step(s).level == 50
    q = quick(s)
    assert q.rate_sweep and q.sweep.duration == 1.0 and q.stop.max_rate is None
    assert q.levels() == [50, 200, 400, 1600]  # at most 4 rates, first and last kept, none dropped for size
    pacer = engine_spec(q, sweep_plan(q)[3]).groups[0].pacer
    assert isinstance(pacer, RatePacer) and pacer.rate_hz == 1600.0


def open_group(
    rate: float, achieved: float, *, late: int = 0, lagged: int = 0, dropped: int = 0, w_ms: float = 10.0
) -> GroupStats:
    """The measured group of one 10 s open-loop step: `achieved` completions/s, `w_ms` in the service."""
    g = make_group("main", 50, achieved, seconds=10, noise=0.0, p50_ms=w_ms)
    g.open_loop = OpenLoopStats(
        offered=round(rate * 10),
        offered_rate_hz=rate,
        achieved_rate_hz=g.total / g.elapsed_s,
        late=late,
        lagged=lagged,
        dropped=dropped,
        latency_uncorrected_ms=LatencyStats(count=g.total, mean=w_ms, p99=w_ms * 2),
    )
    return g


def rate_steps(points: Sequence[tuple[float, GroupStats]]) -> list[StepResult]:
    return [
        StepResult(index=i, level=rate, started_unix=100.0 + 11 * i, elapsed_s=10.0, groups={
            "main": g, "base": make_group("base", 3, 30.0, noise=0.0)})
        for i, (rate, g) in enumerate(points)
    ]  # fmt: skip


def test_saturation_is_the_first_rate_not_kept_up_with() -> None:
    steps = rate_steps(
        [
            (100, open_group(100, 99.0)),
            (200, open_group(200, 196.0)),  # 2 % short: still kept up
            (400, open_group(400, 300.0, late=900, dropped=50, w_ms=30.0)),
            (800, open_group(800, 290.0, late=4000, dropped=2000, w_ms=30.0)),
        ]
    )
    v = analyze(steps, "main", unit="rate")
    assert v.level_unit == "rate"
    assert v.saturation_level == 400
    assert v.peak_level == 400 and v.peak_rate == pytest.approx(300.0)
    text = "; ".join(v.sentences)
    assert "peaked at 300 Hz at 400/s offered" in text
    assert (
        "saturated at 400/s offered (200/s offered: kept up): achieved 300 Hz (75 % of offered), 900 late, 50 dropped"
        in text
    )
    assert "clients" not in text
    base = analyze(steps, "base", fit=False, unit="rate")
    assert base.level_unit == "rate" and base.saturation_level is None
    assert "no errors up to 800/s offered" in base.sentences


def test_late_arrivals_alone_mark_saturation_and_in_service_ones_do_not() -> None:
    # 1 s in service at 10/s: nothing ends in the first second, and the 10 arrivals of the last second are still in
    # service when the 10 s window closes (abandoned): 90 completions, 10/s after the first operation latency
    slow = open_group(10, 9.0, w_ms=1000.0)
    slow.series = [SeriesPoint(t=float(i), succeeded=0 if i == 0 else 10, failed=0, hung=0) for i in range(10)]
    slow.abandoned = 10
    steps = rate_steps([(10, slow), (20, open_group(20, 19.9, late=11, w_ms=50.0))])  # 5.5 % of 200 late
    v = analyze(steps, "main", unit="rate")
    assert v.saturation_level == 20
    steps = rate_steps([(10, slow), (20, open_group(20, 19.9, late=9, dropped=1, w_ms=50.0))])  # jitter
    v = analyze(steps, "main", unit="rate")
    assert v.saturation_level is None
    assert "kept up with every offered rate up to 20/s" in v.sentences


def test_usl_is_fitted_on_littles_law_concurrency(tmp_path: Path) -> None:
    sigma, kappa, lam = 0.1, 0.002, 100.0
    points = []
    for n in (0.5, 1.0, 2.0, 5.0, 10.0, 20.0, 22.0):
        x = usl(n, sigma, kappa, lam)
        points.append((round(x), open_group(round(x), x, w_ms=n / x * 1000)))
    v = analyze(rate_steps(points), "main", unit="rate")
    assert v.usl is not None
    assert v.usl.sigma == pytest.approx(sigma, rel=0.05)
    assert v.usl.kappa == pytest.approx(kappa, rel=0.05)
    assert v.usl.advice == []
    assert any(s.startswith("USL on N = achieved × time in service (Little's law)") for s in v.sentences)
    # `knee fit` of the run's levels.csv fits the same points (its N the concurrency column, not the offered rate)
    record = RunRecord(
        run_id="r", created_unix=1.0, scenario=parse_scenario(RATES), measured_group="main", level_unit="rate",
        steps=rate_steps(points),
    )  # fmt: skip
    f = tmp_path / "levels.csv"
    f.write_text(levels_csv(record))
    p = read_points(f, group="main")
    assert p.level_name == "concurrency"
    again = fit_usl(p.levels, p.rates)
    assert (again.sigma, again.kappa) == pytest.approx((v.usl.sigma, v.usl.kappa), rel=1e-3)


def test_slo_min_rate() -> None:
    steps = rate_steps([(100, open_group(100, 100.0)), (200, open_group(200, 200.0, w_ms=900.0))])
    v = analyze(steps, "main", slo=Slo(p99_ms=100, min_rate=100), unit="rate")
    assert v.capacity_under_slo == 100 and v.slo_passed is True
    assert (
        "capacity under SLO (p99 ≤ 100 ms, up to 100/s offered): 100/s offered (200/s offered: broken)" in v.sentences
    )
    assert analyze(steps, "main", slo=Slo(p99_ms=100, min_rate=150), unit="rate").slo_passed is False


def rate_record(lagged: int = 30) -> RunRecord:
    s = parse_scenario(RATES)
    steps = rate_steps([(100, open_group(100, 100.0)), (200, open_group(200, 120, late=700, lagged=lagged, w_ms=40.0))])
    return RunRecord(run_id="r", created_unix=1.0, scenario=s, measured_group="main", level_unit="rate", steps=steps)


def test_rate_steps_and_the_scenario_round_trip_through_the_run_directory(tmp_path: Path) -> None:
    record = rate_record()
    record.steps[0].level = 2.5
    run = RunDir.create(tmp_path, "rates")
    run.save(record)
    back = run.load()
    assert back == record
    assert back.steps[0].level == 2.5 and back.steps[1].level == 200
    assert back.steps[1].groups["main"].open_loop == record.steps[1].groups["main"].open_loop
    again = scenario_from_record(back.scenario).scenario
    assert again.rate_sweep and again.levels() == parse_scenario(RATES).levels()


def test_reports_name_offered_rates_and_show_achieved_late_dropped() -> None:
    record = rate_record()
    record.verdicts = analyze_run(record)
    md = render_markdown(record)
    assert (
        "| Offered | Achieved | Succeeded | Failed | Hung | Abandoned | Late | Dropped | p50 | p99 | p99 uncorr. |"
        in md
    )
    assert "| 200/s | 120 Hz (60 %) |" in md
    assert "| 700 (30 knee's lag) |" in md  # the late, and of them those issued while a client was free
    assert "saturated at 200/s offered" in md
    rows = list(csv.DictReader(io.StringIO(levels_csv(record))))
    assert list(rows[0])[-7:] == V.OPEN_LOOP_COLUMNS
    main = [r for r in rows if r["group"] == "main"]
    assert [(r["level"], r["offered_rate_hz"], r["late"], r["lagged"]) for r in main] == [
        ("100", "100", "0", "0"),
        ("200", "200", "700", "30"),
    ]
    base = next(r for r in rows if r["group"] == "base")
    assert base["offered_rate_hz"] == "" and base["late"] == "" and base["lagged"] == ""
    assert "of them knee" in plots.failures(record, "main")
    assert "of them knee" not in plots.failures(rate_record(lagged=0), "main")
    fallback = record.verdicts[0].model_copy(update={"sentences": []})
    assert V.verdict_line(fallback).startswith("peaked at 120 Hz at 200/s offered")
