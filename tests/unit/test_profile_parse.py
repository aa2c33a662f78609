"""Rate profiles (docs/load-shapes.md): the scenario's forms, their integrals, the mistakes as one sentence each,
the engine spec they become, and the ramp's verdict read from a per-interval series."""

from __future__ import annotations

import json

import pytest

from knee import _engine
from knee.analysis.ramp import judge_ramp
from knee.errors import UserError
from knee.executor.shards import LoadGenerator, split
from knee.model import GroupStats, SeriesPoint
from knee.plan import engine_spec, quick, sweep_plan
from knee.scenario import Scenario, parse_scenario, profiles
from knee.spec import DurationMs, PointsProfile, RatePacer, SineProfile

HEAD = '[groups.main]\nkind = "http"\nurl = "http://127.0.0.1:9/"\nclients = 8\n'


def scenario(rate: str, extra: str = "") -> Scenario:
    return parse_scenario(HEAD + f"rate = {rate}\n" + extra)


def test_each_form_and_its_integral() -> None:
    ramp = profiles.parse("0s:10, 60s:400")
    assert ramp.points == ((0.0, 10.0), (60.0, 400.0)) and ramp.end_s == 60 and ramp.rising
    assert ramp.integral(60) == pytest.approx(12_300) and ramp.rate_at(30) == pytest.approx(205)
    steps = profiles.parse({"points": "0s:50, 30s:200, 1m:50", "step": True})
    assert steps.integral(90) == pytest.approx(50 * 30 + 200 * 30 + 50 * 30) and not steps.rising
    assert steps.rate_at(29.9) == 50 and steps.rate_at(30) == 200
    sine = profiles.parse("sine(mean=200, amplitude=100, period=60s)")
    assert sine.end_s is None and sine.integral(120) == pytest.approx(24_000) and sine.peak_hz == 300
    spike = profiles.parse("spike(base=50, peak=2000, at=30s, hold=10s)")
    assert spike.breakpoints() == ((0.0, 50.0), (30.0, 2000.0), (40.0, 50.0)) and spike.end_s == 70
    assert spike.integral(70) == pytest.approx(50 * 60 + 2000 * 10)
    assert profiles.parse("0s:10/s, 500ms:20").points == ((0.0, 10.0), (0.5, 20.0))
    for text in (
        "0s:10, 60s:400",
        "sine(mean=200, amplitude=100, period=60s)",
        "spike(base=50, peak=2000, at=30s, hold=10s)",
    ):
        assert profiles.parse(text).text == text


@pytest.mark.parametrize(
    ("rate", "says"),
    [
        ('"0s:10, 60s:400, 30s:5"', "'0s:10, 60s:400, 30s:5': the times must increase, but 30s comes after 60s; give"),
        ('"0s:10, 60s:-5"', "'0s:10, 60s:-5': the rate at 60s is -5, below 0; give rates of 0 or more"),
        ('"0s:inf, 1s:5"', "'0s:inf, 1s:5': the rate at 0s 'inf' is not a finite number of arrivals per second"),
        ('"saw(period=10s)"', "'saw(period=10s)': unknown shape 'saw'; give points like \"0s:10, 60s:400\""),
        (
            '"sine(mean=10, amplitude=20, period=5s)"',
            "amplitude 20 is more than mean 10, so the rate would fall below 0",
        ),
        ('"spike(base=5, peak=50, at=3s)"', "spike needs hold; e.g. spike(base=50, peak=2000, at=30s, hold=10s)"),
        ('"0s:0, 10s:0"', "every rate is 0, so no arrival would ever be due"),
        ('"10 per second"', "'10 per second' is not a rate profile; give points like"),
        ('{points = "0s:1", stp = true}', "a rate table holds points and step"),
        ('"0s:10, 2x:20"', "a point's time '2x' is not a duration like 30s, 2m or 500ms"),
        ('"spike(base=5, peak=50, at=-3s, hold=2s)"', "at '-3s' must not be negative; give one like 30s"),
        # a duration too long was 'not a duration' (its message was matched for "negative" only)
        ('"0s:10, 100000h:20"', "a point's time '100000h' must be at most 24000h (1000 days); give one like 30s"),
    ],
)
def test_a_bad_profile_is_one_sentence_naming_line_key_value_and_fix(rate: str, says: str) -> None:
    with pytest.raises(UserError) as info:
        scenario(rate)
    (line,) = str(info.value).splitlines()
    assert line.startswith("scenario.toml line 5: groups.main.rate"), line
    assert says in line, line


def test_a_profile_needs_connections_and_no_think_time() -> None:
    with pytest.raises(UserError, match="clients must be a number of connections with a rate profile"):
        parse_scenario(
            HEAD.replace("clients = 8", 'clients = "level"') + 'rate = "0s:1, 2s:5"\n[sweep]\nlevels = [1]\n'
        )
    with pytest.raises(UserError, match="think applies to closed loops only"):
        scenario('"0s:1, 2s:5"', 'think = "1s"\n')
    with pytest.raises(UserError, match="sweep needs duration"):
        scenario('"sine(mean=5, amplitude=1, period=2s)"')


def test_the_engine_spec_of_each_profile() -> None:
    """The step lasts to the profile's end unless a duration is given; a spike is steps; poisson and max_in_flight
    apply; the engine reads each spec back field for field."""
    cases = [
        ('"0s:10, 60s:400"', "", PointsProfile(points=[(0.0, 10.0), (60.0, 400.0)]), 60_000),
        ('{points = "0s:5, 3s:9", step = true}', "", PointsProfile(points=[(0.0, 5.0), (3.0, 9.0)], step=True), 3_000),
        (
            '"spike(base=5, peak=50, at=2s, hold=1s)"',
            "",
            PointsProfile(points=[(0, 5), (2, 50), (3, 5)], step=True),
            5_000,
        ),
        # at 0 s: the peak from the start (two points at 0 s were an engine error about points), then base as long
        ('"spike(base=5, peak=50, at=0s, hold=1s)"', "", PointsProfile(points=[(0, 50), (1, 5)], step=True), 2_000),
        (
            '"sine(mean=5, amplitude=1, period=2s)"',
            'duration = "7s"\n',
            SineProfile(mean_hz=5, amplitude_hz=1, period_s=2),
            7_000,
        ),
    ]
    for rate, extra, profile, ms in cases:
        sc = scenario(rate, extra or '[sweep]\narrival = "poisson"\nmax_in_flight = 40\n')
        (g,) = engine_spec(sc, sweep_plan(sc)[0]).groups
        assert isinstance(g.pacer, RatePacer) and g.pacer.rate_hz is None
        assert g.pacer.profile == profile, rate
        assert g.stop == DurationMs(duration_ms=ms) and g.clients == 8
        spec = engine_spec(sc, sweep_plan(sc)[0])
        assert json.loads(_engine.check_spec(spec.to_json())) == json.loads(spec.to_json())
    sc = scenario('"0s:10, 60s:400"', '[sweep]\narrival = "poisson"\nmax_in_flight = 40\n')
    (g,) = engine_spec(sc, sweep_plan(sc)[0]).groups
    assert g.pacer.poisson and g.pacer.max_in_flight == 40
    # --save-scenario writes the profile back as written
    assert 'rate = "0s:10, 60s:400"' in sc.to_toml()
    assert parse_scenario(scenario('{points = "0s:5, 3s:9", step = true}').to_toml()).groups["main"].profile.step


def test_shards_and_quick_keep_the_shape() -> None:
    """Split over load machines, each shard keeps the whole profile and takes the turns of its own clients over the
    whole group's (group_clients; the engine's pacer test holds the union exact); --quick squeezes the whole shape
    into 2 s."""
    sc = scenario('"0s:10, 60s:400"')
    spec = engine_spec(sc, sweep_plan(sc)[0])
    gens = [LoadGenerator(f"tcp://10.0.0.{i}:1", f"h{i}", 1, w) for i, w in enumerate((1.0, 3.0))]
    parts = [p.groups[0] for p in split(spec, gens) if p is not None]
    assert [(g.client_offset, g.clients, g.group_clients) for g in parts] == [(0, 2, 8), (2, 6, 8)]
    assert all(g.pacer.profile == spec.groups[0].pacer.profile for g in parts)
    for part in split(spec, gens):
        assert part is not None and json.loads(_engine.check_spec(part.to_json())) == json.loads(part.to_json())
    q = quick(sc)
    assert q.groups["main"].profile.points == ((0.0, 10.0), (2.0, 400.0))


def ramp_stats(
    offered: list[int], succeeded: list[int], failed: list[int] | None = None, lagged: list[int] | None = None
) -> GroupStats:
    failed = failed or [0] * len(offered)
    lagged = lagged or [0] * len(offered)
    series = [
        SeriesPoint(t=float(i), succeeded=s, failed=f, hung=0, offered=o, late=n, lagged=n)
        for i, (o, s, f, n) in enumerate(zip(offered, succeeded, failed, lagged, strict=True))
    ]
    n = float(len(offered))
    return GroupStats(name="main", clients=300, succeeded=sum(succeeded), elapsed_s=n, rate_hz=0.0, series=series)


def _ramp(capacity: float, slope: float = 14.5, start: float = 10.0, seconds: int = 20) -> tuple[list[int], list[int]]:
    """A linear ramp's offered counts per second and a service that completes at most `capacity` a second."""
    offered = [round(start + slope * (i + 0.5)) for i in range(seconds)]
    return offered, [min(o, round(capacity)) for o in offered]


@pytest.mark.parametrize("capacity", [100.0, 150.0, 183.0])
def test_the_ramp_falls_behind_at_the_capacity(capacity: float) -> None:
    offered, done = _ramp(capacity)
    r = judge_ramp(ramp_stats(offered, done))
    assert r is not None and r.behind is not None
    assert abs(r.behind.offered_hz - capacity) <= 0.05 * capacity, r
    assert r.behind.low_hz <= r.behind.offered_hz <= r.behind.high_hz
    assert r.behind.high_hz - r.behind.low_hz == pytest.approx(14.5, abs=1)
    assert r.kept_up_to_hz is not None and r.kept_up_to_hz <= capacity
    assert r.errors is None
    assert r.sentences[0].startswith(f"kept up to {r.kept_up_to_hz:.3g}/s: behind from ")
    assert "over 1-s intervals" in r.sentences[0] and r.sentences[1].startswith("no errors up to")


def test_errors_and_a_ramp_that_kept_up() -> None:
    offered, _ = _ramp(1000)
    failed = [0] * 12 + [5] * 8
    r = judge_ramp(ramp_stats(offered, [o - f for o, f in zip(offered, failed, strict=True)], failed))
    assert r is not None and r.behind is None
    assert r.errors is not None and r.errors.offered_hz == offered[12] and r.errors.at_s == 12
    assert r.sentences[0] == f"kept up with the ramp up to {offered[-1]}/s offered"
    assert r.sentences[1].startswith(f"errors from {offered[12]}/s (")
    # one interval's shortfall or one failure is not where it fell behind or errors started
    done = list(offered)
    done[5] -= 20
    lone = [0] * 20
    lone[7] = 3
    r = judge_ramp(ramp_stats(offered, [d - f for d, f in zip(done, lone, strict=True)], lone))
    assert r is not None and r.behind is None and r.errors is None
    # a closed loop (no offered arrivals) has no ramp verdict
    assert judge_ramp(ramp_stats([0] * 5, [10] * 5)) is None


def test_knees_own_lag_is_located_and_named_beside_behind() -> None:
    """Intervals where more than 5 % of the arrivals started late with a client free (knee's lag) from 10 s on, and
    the ramp behind from 14 s: the verdict says knee lagged first, so the load side set the pace there."""
    offered, done = _ramp(215)
    lagged = [0] * 10 + [o // 10 for o in offered[10:]]
    lagged[4] = offered[4] // 10  # one interval alone is not where it lagged
    r = judge_ramp(ramp_stats(offered, done, lagged=lagged))
    assert r is not None and r.behind is not None and r.lagged is not None, r
    assert r.lagged.at_s == 10 and r.lagged.offered_hz == offered[10] and r.behind.at_s >= 10
    (said,) = [s for s in r.sentences if s.startswith("knee itself lagged")]
    assert said.startswith(f"knee itself lagged from {offered[10]}/s (") and "a client was free for them, so" in said
    # 5 % lagged is within the jitter; none: no sentence
    for share in (0.05, 0.0):
        r = judge_ramp(ramp_stats(offered, done, lagged=[int(o * share) for o in offered]))
        assert r is not None and r.lagged is None and not any("lagged" in s for s in r.sentences), r


def test_a_profile_written_back_reads_as_the_same() -> None:
    """run.json and --save-scenario keep a profile's text: every number as it was (six digits made 1234567/s
    1234570, and a point at 1000000s `1e+06s`, which does not read back)."""
    for text in ("0s:10, 1000000s:1234567", "0s:0.1, 12.345678s:3.25", "spike(base=5, peak=50, at=0s, hold=1s)"):
        p = profiles.parse(text)
        assert p.text == text and profiles.parse(p.text) == p
