"""Clients profiles (docs/load-shapes.md): a closed loop's clients over time in a scenario, their mistakes as one
sentence each, the engine spec they become (read back by the engine), and the clients ramp's verdict read from a
per-interval series."""

from __future__ import annotations

import json

import pytest

from knee import _engine
from knee.analysis.client_ramp import clients_at, judge_client_ramp
from knee.engine import GroupSnapshot, Snapshot
from knee.errors import UserError
from knee.executor.shards import LoadGenerator, split
from knee.live.progress import LiveProgress
from knee.live.state import Hub
from knee.model import GroupStats, SeriesPoint
from knee.plan import engine_spec, quick, sweep_plan
from knee.runner import new_record
from knee.scenario import Scenario, Slo, parse_scenario, profiles, read_scenario
from knee.spec import ClosedPacer, DurationMs, PointsProfile

HEAD = '[groups.main]\nkind = "http"\nurl = "http://127.0.0.1:9/"\n'


def scenario(clients: str, extra: str = "") -> Scenario:
    return parse_scenario(HEAD + f"clients = {clients}\n" + extra)


def test_a_clients_profile_becomes_a_closed_pacer_of_its_peak() -> None:
    """The group has the profile's peak of clients (floored); the step lasts to its last point or the duration; the
    engine reads the spec back field for field; the scenario writes the profile back as written."""
    sc = scenario('"0s:1, 20s:40.5"')
    g = sc.groups["main"]
    assert g.clients_profile is not None and g.client_count(0) == 40 and sc.levels() == [40]
    spec = engine_spec(sc, sweep_plan(sc)[0])
    (eg,) = spec.groups
    assert eg.pacer == ClosedPacer(profile=PointsProfile(points=[(0.0, 1.0), (20.0, 40.5)]))
    assert eg.clients == 40 and eg.stop == DurationMs(duration_ms=20_000)
    assert json.loads(_engine.check_spec(spec.to_json())) == json.loads(spec.to_json())
    assert 'clients = "0s:1, 20s:40.5"' in sc.to_toml()
    steps = scenario('{points = "0s:4, 2s:0, 3s:2", step = true}', 'duration = "5s"\n')
    (eg,) = engine_spec(steps, sweep_plan(steps)[0]).groups
    assert eg.pacer.profile == PointsProfile(points=[(0, 4), (2, 0), (3, 2)], step=True)
    assert eg.stop == DurationMs(duration_ms=5_000) and eg.clients == 4
    assert parse_scenario(steps.to_toml()).groups["main"].clients_profile == steps.groups["main"].clients_profile
    # on two load machines each shard numbers its clients over the whole group's (the engine's turns)
    parts = split(spec, [LoadGenerator(f"tcp://10.0.0.{i}:1", f"h{i}", 1, 1.0) for i in (1, 2)])
    assert [(p.groups[0].clients, p.groups[0].client_offset, p.groups[0].group_clients) for p in parts if p] == [
        (20, 0, 40),
        (20, 20, 40),
    ]
    # --quick runs the whole shape in 2 s
    assert quick(sc).groups["main"].clients_profile.points == ((0.0, 1.0), (2.0, 40.5))


# What the group's lines are (after its kind and url), and what the one sentence says.
BAD = {
    'clients = "0s:1, 5s:-2"': "'0s:1, 5s:-2': the number of clients at 5s is -2, below 0; give numbers of clients",
    'clients = "0s:0, 5s:0"': "every number of clients is 0, so no client would ever run",
    'clients = "lots"': "'lots' is not a clients profile; give points like \"0s:1, 60s:40\"",
    'clients = "0s:1, 5s:4"\nrate = "0s:1, 5s:4"': "clients is a profile (the clients running over time, a closed",
    'clients = "0s:1, 5s:4"\ntotal = 100': "runs for a duration, not a count of operations (got total)",
    'clients = "sine(mean=5, amplitude=1, period=2s)"': "sweep needs duration",
    'clients = "0s:1, 5s:4"\n[sweep]\ntotal = 100': "groups.main.clients is a profile, which runs for a duration",
    "clients = true": 'must be a number of clients (at least 1), "level" (follow the sweep level) or a clients profile',
}


@pytest.mark.parametrize("lines", list(BAD))
def test_a_bad_clients_profile_is_one_sentence_naming_line_key_and_fix(lines: str) -> None:
    with pytest.raises(UserError) as info:
        parse_scenario(HEAD + lines + "\n")
    (line,) = str(info.value).splitlines()
    assert BAD[lines] in line, line
    if "sweep" not in BAD[lines] + lines:
        assert line.startswith("scenario.toml line"), line


def stats(succeeded: list[int], failed: list[int] | None = None, p99: list[float] | None = None) -> GroupStats:
    failed = failed or [0] * len(succeeded)
    series = [
        SeriesPoint(t=float(i), succeeded=s, failed=f, hung=0, p99_ms=None if p99 is None else p99[i])
        for i, (s, f) in enumerate(zip(succeeded, failed, strict=True))
    ]
    n = float(len(succeeded))
    return GroupStats(name="main", clients=20, succeeded=sum(succeeded), elapsed_s=n, rate_hz=0.0, series=series)


RAMP = profiles.parse("0s:0, 20s:20", profiles.CLIENTS)  # one client more every second


@pytest.mark.parametrize("pool", [4, 8, 13])
def test_the_clients_ramp_is_no_faster_from_the_pool(pool: int) -> None:
    """A pool of `pool` at 50/s each under one more client a second: no faster from the interval whose clients reach
    the pool, bracketed by the clients it began and ended with; the peak its rate."""
    done = [min(clients_at(RAMP, i + 0.5), pool) * 50 for i in range(20)]
    r = judge_client_ramp(stats(done), RAMP)
    assert r is not None and r.no_faster is not None and r.errors is None
    assert r.no_faster.low <= pool <= r.no_faster.high + 1, r.no_faster
    assert r.peak_hz == pool * 50 and r.top_clients == 19
    assert r.sentences[0] == f"no faster from {pool} clients: a peak of {pool * 50}/s", r.sentences
    assert r.sentences[1] == "no errors up to 19 clients"


def test_a_ramp_still_rising_errors_and_the_slo() -> None:
    """Still rising at the top (fewer than three intervals with more clients after the peak's); errors from where
    they last two intervals, not from one lone failure; the SLO from where p99 passes it for good."""
    done = [clients_at(RAMP, i + 0.5) * 50 for i in range(20)]
    failed = [0] * 20
    failed[3] = 2  # alone: not where errors start
    for i in range(12, 20):
        failed[i] = 40
    p99 = [10.0 + 20 * max(0, i - 9) for i in range(20)]
    r = judge_client_ramp(stats(done, failed, p99), RAMP, slo=Slo(p99_ms=100))
    assert r is not None and r.no_faster is None
    assert r.sentences[0].startswith("still faster with more clients at the top of the ramp: ")
    assert r.errors is not None and r.errors.at_s == 12 and r.errors.low == 12
    assert r.sentences[1] == "errors from 12 clients"  # the interval began and ended with 12
    assert r.slo_broken is not None and r.slo_broken.at_s == 14 and r.slo_missed[0].startswith("p99 ")
    assert r.sentences[2].startswith("broke the SLO (p99 ≤ 100 ms) from 14 clients: p99 ")
    # the warm-up shifts the profile's clock: the series counts from the measured start
    shifted = judge_client_ramp(stats(done[5:]), RAMP, warmup_s=5.0)
    assert shifted is not None and shifted.peak.clients == 19 and shifted.top_clients == 19


class _Quiet:
    """The terminal's progress, saying nothing (knee.progress.Progress)."""

    def __enter__(self) -> _Quiet:
        return self

    def __exit__(self, *exc: object) -> None:
        pass

    def begin(self, *args: object) -> None:
        pass

    def update(self, *args: object) -> None:
        pass


def test_the_live_page_shows_the_clients_and_the_rate_the_profiles_run_now() -> None:
    """The live page's group row: a clients profile's clients at the snapshot's moment (floored), a rate profile's
    offered rate then; not the group's peak."""
    sc = parse_scenario(
        HEAD + 'clients = "0s:1, 10s:21"\n\n[groups.open]\nkind = "http"\nurl = "http://127.0.0.1:9/"\nclients = 50\n'
        'rate = "0s:100, 10s:300"\n'
    )
    loaded = read_scenario(sc.to_toml())
    hub = Hub(new_record(loaded, "run-1"))
    live = LiveProgress(_Quiet(), hub, scenario=sc, record=hub.view.record, results=[])  # type: ignore[arg-type]
    live.begin(1, 1, sweep_plan(sc)[0])
    assert [g.clients for g in hub.view.current.groups] == [21, 50]  # before any snapshot: the step's own
    counts = ("succeeded", "failed", "hung", "abandoned", "in_flight", "late", "lagged", "p50_us", "p99_us")
    groups = [GroupSnapshot(name=n, **dict.fromkeys(counts, 0), failed_by_class={}) for n in ("main", "open")]
    live.update(Snapshot(elapsed_s=4.5, finished=False, groups=groups))
    main, opened = hub.view.current.groups
    assert (main.clients, main.offered_hz) == (10, None)  # 1 + 2 × 4.5 = 10 clients
    assert (opened.clients, opened.offered_hz) == (50, pytest.approx(190.0))
