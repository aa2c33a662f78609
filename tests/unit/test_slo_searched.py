"""A searched sweep's own overshoot fails no SLO (issue 34, item 4): it misses the SLO only when no level met it or
the capacity under it is below min_clients / min_rate; a fixed sweep keeps "every measured level met it"."""

from __future__ import annotations

from test_analysis_helpers import step

from knee.analysis import Slo, analyze, analyze_run
from knee.analysis.slo import not_met
from knee.model import RunRecord
from knee.scenario import parse_scenario
from knee.scenario.oneline import Options, scenario_table

# 1 … 8 clients of a search: the SLO (p99 ≤ 100 ms) holds up to 4 and breaks at 8, past the capacity
STEPS = [
    step(0, 1, 100, p99_ms=20),
    step(1, 2, 200, p99_ms=20),
    step(2, 4, 400, p99_ms=40),
    step(3, 8, 420, p99_ms=300),
]


def test_the_search_past_the_capacity_passes_a_fixed_sweep_does_not() -> None:
    slo = Slo(p99_ms=100)
    fixed = analyze(STEPS, "main", slo=slo)
    assert (fixed.capacity_under_slo, fixed.slo_passed) == (4, False)  # unchanged: every measured level
    searched = analyze(STEPS, "main", slo=slo, searched=True)
    assert (searched.capacity_under_slo, searched.slo_passed) == (4, True)
    assert (
        "capacity under SLO (p99 ≤ 100 ms): 4 clients (8 clients: broken) (levels the search measured past it do not "
        "fail the SLO)" in searched.sentences
    )
    assert analyze(STEPS, "main", slo=Slo(p99_ms=100, min_clients=8), searched=True).slo_passed is False
    assert analyze(STEPS, "main", slo=Slo(p99_ms=100, min_clients=4), searched=True).slo_passed is True
    nothing = analyze(STEPS, "main", slo=Slo(p99_ms=10), searched=True)
    assert (nothing.capacity_under_slo, nothing.slo_passed) == (None, False)


def test_not_met_says_why() -> None:
    assert not_met(Slo(p99_ms=10), None, True, "clients") == "no level met it, not even the lowest"
    assert (
        not_met(Slo(p99_ms=100, min_rate=300), 250, True, "rate")
        == "the capacity under it, 250/s offered, is below min_rate = 300"
    )
    assert (
        not_met(Slo(p99_ms=100), 4, False, "clients")
        == "not every level met it (a fixed sweep must hold at every level)"
    )


def test_a_searched_run_is_analysed_as_searched() -> None:
    text = '[groups.main]\nkind = "http"\nurl = "http://127.0.0.1:1/"\n[slo]\np99_ms = 100\n[sweep]\nduration = "1s"\n'
    for levels, passed in (('"auto"', True), ("[1, 2, 4, 8]", False)):
        sc = parse_scenario(text + f"levels = {levels}\n")
        record = RunRecord(run_id="r", created_unix=0.0, scenario=sc, measured_group="main", steps=STEPS)
        (v,) = analyze_run(record)
        assert v.slo_passed is passed, levels


def test_min_capacity_is_min_clients_or_min_rate() -> None:
    url = "http://127.0.0.1:1/"
    table = scenario_table(url, Options(levels="auto", slo_p99=100, min_capacity=64.0), run=False)
    assert table["slo"] == {"p99_ms": 100, "min_clients": 64}
    table = scenario_table(url, Options(rates="auto", slo_p99=100, min_capacity=250.5), run=False)
    assert table["slo"] == {"p99_ms": 100, "min_rate": 250.5}


def test_an_open_loop_s_dropped_arrivals_count_against_the_failure_limit() -> None:
    from knee.analysis.levels import LevelRow
    from knee.analysis.slo import missed

    # 1 000 arrivals: 200 served, 800 dropped (over max_in_flight): it met a 1 % limit, with p99 well inside
    row = LevelRow(level=1000, direction="up", succeeded=200, p99_ms=50.0, open_loop=True, offered=1000, dropped=800)
    assert missed(Slo(p99_ms=1000, failure_ratio=0.01), row) == ["failed, hung or dropped 80 % > 1.0 %"]
    row.dropped = 0
    assert missed(Slo(p99_ms=1000, failure_ratio=0.01), row) == []


def test_a_min_clients_above_every_level_measured_is_said_not_measured_and_the_search_reaches_it() -> None:
    """Every level met the SLO and the highest, 4, is below min_clients = 8: the capacity is 4 or more, not 4, and
    min_clients was never measured (knee said 'the capacity under it, 4 clients, is below min_clients = 8'); the
    search ramps up to min_clients even where the rate stopped growing (it stopped at 4 × the peak's level)."""
    from knee.analysis.search import Config, Done, Point, next_level

    met = STEPS[:3]
    v = analyze(met, "main", slo=Slo(p99_ms=100, min_clients=8), searched=True)
    assert (v.capacity_under_slo, v.slo_passed) == (4, False) and "slo" not in v.brackets
    assert "capacity under SLO (p99 ≤ 100 ms, up to 8 clients): at least 4 clients (every level measured met it)" in (
        v.sentences
    )
    assert not_met(Slo(p99_ms=100, min_clients=8), 4, True, "clients", broken=False) == (
        "every level measured met it, up to 4 clients, and min_clients = 8 was not measured: measure up to it (the "
        "sweep's levels, or [search] max)"
    )
    flat = [Point(n, 100.0) for n in (1, 2, 4)]  # flat from 1: stopped growing over two doublings at 4
    assert isinstance(next_level(flat, Config()), Done)
    d = next_level(flat, Config(at_least=100))
    assert not isinstance(d, Done) and d.level == 8 and "the SLO asks 100" in d.reason, d


def test_errors_under_the_slo_s_own_limit_do_not_stop_the_ramp_short_of_min_clients() -> None:
    """failure_ratio = 1 %, min_clients = 64, and 0.5 % of errors from 32 (past the 0.1 % onset): the ramp stopped
    at 32 and the run said min_clients was not measured, advice no setting could follow."""
    from knee.analysis.search import Config, Next, Point, next_level

    pts = [Point(n, 100.0 * n, failure_ratio=0.005 if n >= 32 else 0.0, slo_ok=True) for n in (1, 2, 8, 32)]
    d = next_level(pts, Config(at_least=64))
    assert isinstance(d, Next) and d.level == 64 and d.kind == "ramp", d
    broken = [*pts[:3], Point(32, 3200.0, failure_ratio=0.05, slo_ok=False)]
    assert next_level(broken, Config(at_least=64)).kind != "ramp"  # the SLO broken: refined, not ramped past
