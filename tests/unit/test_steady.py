"""Steady state: MSER-5 cuts a warm-up, batch means say whether the rate has settled."""

from __future__ import annotations

import math
import random
import subprocess
import sys
from collections.abc import Sequence

import pytest

from knee.analysis.steady import (
    MAX_BATCHES,
    MIN_BATCHES,
    T_975,
    Settling,
    as_the_rule_ended,
    batch_means,
    mser_cut,
    steady,
    steady_state,
    student_t,
)
from knee.model import GroupStats, RunRecord, SeriesPoint, StepResult
from knee.scenario import parse_scenario


def _noisy(mean: float, share: float, n: int, seed: int) -> list[float]:
    rng = random.Random(seed)
    return [max(0.0, rng.gauss(mean, mean * share)) for _ in range(n)]


def test_a_slow_start_is_cut_and_the_warm_rate_kept() -> None:
    warm = _noisy(100, 0.03, 60, seed=1)
    series = [10, 20, 30, 40, 50, 60, 70, 80, 90, 95, *warm]
    s = steady(series)
    assert 10 <= s.cut <= 20
    assert abs(s.mean - 100) <= 5
    assert s.settled


def test_a_steady_series_settles_at_its_mean() -> None:
    # MSER may still cut a batch or two of pure noise; never more than half, and the mean is the same.
    s = steady(_noisy(100, 0.03, 30, seed=2))
    assert s.cut <= 15 and s.intervals == 30 - s.cut
    assert s.settled and s.relative < 0.05
    assert abs(s.mean - 100) <= 3


def test_a_noisy_series_does_not_settle() -> None:
    rng = random.Random(3)
    s = steady([rng.choice([20.0, 180.0]) for _ in range(40)])
    assert not s.settled and s.relative > 0.05


def test_too_few_intervals_give_no_interval() -> None:
    mean, half = batch_means([100.0, 101.0, 99.0])
    assert mean == 100.0 and math.isinf(half)
    assert not steady([100.0, 101.0, 99.0]).settled
    assert mser_cut([1.0, 2.0, 3.0]) == 0
    # two batches: a cut would leave one batch mean, which scores 0 whatever it is; a steady 10 s was cut to 5
    assert mser_cut([100.0, 101.0, 99.0, 100.0, 102.0, 98.0, 100.0, 101.0, 99.0, 100.5]) == 0
    assert steady([100.0, 101.0, 99.0, 100.0, 102.0, 98.0, 100.0, 101.0, 99.0, 100.5]).cut == 0
    # three: the first batch is still cut when it is a warm-up
    assert mser_cut([10.0] * 5 + [100.0, 101.0, 99.0, 100.0, 102.0, 98.0, 100.0, 101.0, 99.0, 100.5]) == 5


def test_batch_means_matches_the_t_interval_of_independent_batches() -> None:
    # Five batches of one interval each: the plain t interval of five numbers.
    xs = [10.0, 12.0, 11.0, 9.0, 13.0]
    mean, half = batch_means(xs)
    sd = math.sqrt(sum((x - 11.0) ** 2 for x in xs) / 4)
    assert mean == 11.0
    assert math.isclose(half, 2.7764451051977987 * sd / math.sqrt(5), rel_tol=1e-9)


def test_the_t_table_is_scipys_and_a_step_does_not_import_scipy() -> None:
    from scipy import stats

    for df, t in T_975.items():
        assert t == float(stats.t.ppf(0.975, df))
    assert set(T_975) == set(range(MIN_BATCHES - 1, MAX_BATCHES))
    assert student_t(0.9, 7) == float(stats.t.ppf(0.95, 7))  # another confidence: scipy's
    # a step's steady state (what every run computes) leaves scipy unloaded: 0.6 CPU-s and 97 MB at every run
    code = (
        "import sys; from knee.analysis.steady import steady; "
        "s = steady([100.0 + (i % 3) for i in range(30)]); print(s.settled, 'scipy' in sys.modules)"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.split() == ["True", "False"]


def _group(per_interval: Sequence[float], elapsed_s: float) -> GroupStats:
    series = [SeriesPoint(t=float(i), succeeded=int(n), failed=0, hung=0) for i, n in enumerate(per_interval)]
    ok = int(sum(per_interval))
    rate = ok / elapsed_s
    return GroupStats(
        name="main", clients=8, succeeded=ok, failed=0, hung=0, elapsed_s=elapsed_s, rate_hz=rate, series=series
    )


def test_the_live_stop_and_the_record_judge_alike() -> None:
    # issue 34: 8 clients x 100 ms after a slow first second, 64 then 80 a second. The live rule stopped the level
    # at its 10 s minimum; the group's own clock had run 9.93 s, so its record had 9 whole intervals (64, 80 x 8)
    # and said "did not settle by max_duration". One judgement, on the same readings from the step's start.
    live = Settling(10.0)
    total, stops = 0, []
    for i, n in enumerate([64] + [80] * 9, 1):
        total += n
        stops.append(live.add(float(i), total))
    assert stops == [False] * 9 + [True]
    st = steady_state(_group([64] + [80] * 8 + [74], 9.93), auto=True)
    assert st is not None and st.settled and st.auto
    assert st.rate_hz == pytest.approx(80.0, rel=0.01) and st.cut_s == 1.0  # the slow first second


def test_the_live_rule_and_the_record_agree_on_noisy_series() -> None:
    # Fed the readings the record replays (one at each interval's end), the live rule stops exactly when the record
    # of a step ended there says settled, and runs on when it says not settled.
    rng = random.Random(7)
    for trial in range(200):
        first = rng.uniform(0.3, 1.0)
        per = [round(100 * first)] + [round(max(0.0, rng.gauss(100, rng.choice([2, 4, 8])))) for _ in range(14)]
        live = Settling(5.0)
        total = 0
        for i, n in enumerate(per, 1):
            total += n
            stop = live.add(float(i), total)
            if i >= 5:
                st = steady_state(_group(per[:i], float(i)), auto=True)
                assert st is not None and st.settled == stop, (trial, per[:i])


def test_the_record_says_what_the_live_rule_decided() -> None:
    # The live view reads the successes up to 0.2 s after each interval's end, the record counts whole intervals:
    # a noisy level crosses ±5 % at a reading where its record's intervals may be a little either side of it. The
    # level's record says what ended it: the rule (settled), or max_duration (not).
    sc = parse_scenario(
        '[groups.main]\nkind = "http"\nurl = "http://127.0.0.1:1/"\n'
        '[sweep]\nlevels = [1]\nduration = "auto"\nmin_duration = "5s"\nmax_duration = "30s"\n'
    )
    rng = random.Random(1)
    said, stopped = [], []
    for _ in range(300):
        per = [round(100 * rng.uniform(0.5, 1.0))] + [
            max(0, round(rng.gauss(100, rng.choice([2, 6, 10, 60])))) for _ in range(40)
        ]

        def done(t: float, per: list[int] = per) -> int:
            k = int(t)
            return round(sum(per[:k]) + (t - k) * per[k])

        live, end, ended = Settling(5.0), 0.0, False
        while end < 30 and not ended:
            end = min(30.0, math.floor(end) + 1 + rng.uniform(0, 0.2))
            ended = live.add(end, done(end)) and end < 30
        whole = int(end)
        g = _group([*per[:whole], done(end) - sum(per[:whole])], end)
        st = steady_state(g, auto=True)
        step = StepResult(index=0, level=1, started_unix=0.0, elapsed_s=end, groups={"main": g}, steady=st)
        record = RunRecord(run_id="r", created_unix=0.0, scenario=sc, measured_group="main", steps=[step])
        as_the_rule_ended(record)
        assert record.steps[0].steady is not None
        said.append(record.steps[0].steady.settled)
        stopped.append(ended)
    assert said == stopped and any(stopped) and not all(stopped)
