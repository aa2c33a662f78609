"""The spike's verdict (knee.analysis.spike) read from a per-interval series: the fall, the return within the
noise and its bracket, the failures from the spike to the return, and no verdict without a baseline."""

from __future__ import annotations

from knee.analysis.series_latency import bucket_of, percentile_ms
from knee.analysis.spike import judge_spike, p99_noise
from knee.model import GroupStats, SeriesPoint, StepResult
from knee.scenario.profiles import RateProfile

SPIKE = RateProfile(shape="spike", base=0.0, peak=500.0, at=5.0, hold=5.0)


def group(name: str, rates: list[int], p99s: list[float | None], failed: list[int] | None = None) -> GroupStats:
    failed = failed or [0] * len(rates)
    series = [
        SeriesPoint(
            t=float(i),
            succeeded=r,
            failed=f,
            hung=0,
            p99_ms=p,
            latency=[] if p is None else [(bucket_of(round(p * 1000)), r)],
            failures={"status": f} if f else {},
        )
        for i, (r, p, f) in enumerate(zip(rates, p99s, failed, strict=True))
    ]
    n = len(rates)
    return GroupStats(
        name=name, clients=10, succeeded=sum(rates), elapsed_s=float(n), rate_hz=0.0, series=series, interval_s=1.0
    )


def step(base: GroupStats, spike: GroupStats) -> StepResult:
    return StepResult(
        index=0, level=10, started_unix=0.0, elapsed_s=base.elapsed_s, groups={"base": base, "spike": spike}
    )


def test_the_fall_the_return_and_the_failures_between() -> None:
    rates = [98, 102, 100, 101, 99, *[20, 25, 30, 22, 28], *[50, 97, 99, 101, 100, 98]]
    p99s: list[float | None] = [10.0, 11.0, 10.0, 12.0, 10.0] + [500.0] * 5 + [80.0, 12.0, 11.0, 10.0, 12.0, 11.0]
    failed = [0] * 5 + [2, 0, 1, 0, 0] + [1] + [0] * 5
    spiked = group(
        "spike", [0] * 5 + [400] * 5 + [0] * 6, [None] * 5 + [900.0] * 5 + [None] * 6, [0] * 5 + [100] * 5 + [0] * 6
    )
    s = judge_spike(step(group("base", rates, p99s, failed), spiked), "base", "spike", SPIKE)
    assert s is not None
    assert s.before.rate_hz == 100 and s.before.intervals == 5
    assert s.lowest_hz == 20 and abs(s.fall - 0.8) < 1e-9
    assert s.during is not None and s.during.intervals == 5 and s.during.rate_hz == 25
    # t = 10 is still slow (p99 80 ms > 12 ms + 10 %); back from t = 11 on: 1 s after the spike's end (0–1 s)
    assert (s.recovered_s, s.recovered_low_s) == (1.0, 0.0)
    assert s.after is not None and s.after.intervals == 5 and s.after.rate_hz == 99
    assert s.failures == {"base": {"status": 4}, "spike": {"status": 500}}
    assert s.sentences[0].startswith("through the spike (spike from 0/s to 500/s at 5 s for 5 s): base fell from 100/s")
    assert s.sentences[0].endswith("(−80 %); p99 12.3 ms before, p99 508 ms during")  # the buckets of 12 and 500 ms
    assert s.sentences[1].startswith("base was back within its noise 1 s after the spike (0–1 s over 1-s intervals)")
    assert s.sentences[2] == "failures from the spike to the return: base: status 4; spike: status 500"


def test_a_service_that_never_came_back_and_a_run_without_a_baseline() -> None:
    rates = [100] * 5 + [20] * 11
    p99s: list[float | None] = [10.0] * 5 + [300.0] * 11
    quiet = group("spike", [0] * 16, [None] * 16)
    s = judge_spike(step(group("base", rates, p99s), quiet), "base", "spike", SPIKE)
    assert s is not None and s.recovered_s is None and s.after is None
    assert s.sentences[1] == "base was not back within its noise by the run's end, 6 s after the spike"
    assert s.sentences[2] == "no failures from the spike to the run's end"
    # one back interval alone is not a return: the next must be back too
    rates[12] = 100
    p99s[12] = 10.0
    s = judge_spike(step(group("base", rates, p99s), quiet), "base", "spike", SPIKE)
    assert s is not None and s.recovered_s is None
    # the spike at the start: no interval before it to know the service at rest by
    early = SPIKE.model_copy(update={"at": 0.0})
    assert judge_spike(step(group("base", rates, p99s), quiet), "base", "spike", early) is None


def spread(t: float, n: int, tail: dict[float, int]) -> SeriesPoint:
    """An interval of `n` successes: `tail` {ms: count} of them slow, the others at 10 ms; its p99 read from them."""
    counts = {10.0: n - sum(tail.values()), **tail}
    latency = sorted((bucket_of(round(ms * 1000)), k) for ms, k in counts.items())
    p99 = percentile_ms([SeriesPoint(t=t, succeeded=n, failed=0, hung=0, latency=latency)], 99.0)
    return SeriesPoint(t=t, succeeded=n, failed=0, hung=0, p99_ms=p99, latency=latency)


def test_an_intervals_p99_is_back_within_the_noise_of_its_own_count() -> None:
    # Before: 5 intervals of 500 successes, 8 at 20 ms and 2 at 30 ms each: each reads p99 20 ms (the 495th of 500),
    # so the fixed band is 20 ms + 10 %. After the spike, an interval of the same 500 whose 6 slowest are at 30 ms
    # reads p99 30 ms: above that band, but the before's latencies together put the 99.87th percentile (99 % plus
    # 1.96 standard errors of a rank among 500) at 30 ms too: a p99 of 500 successes reads that much by chance.
    # Of 50 000 successes the same tail (0.6 % at 30 ms) is no chance: their p99 rests on 500 of them.
    before = [spread(float(t), 500, {20.0: 8, 30.0: 2}) for t in range(5)]
    assert {p.p99_ms for p in before} == {percentile_ms(before[:1], 99.0)} and 19 < before[0].p99_ms < 22  # type: ignore[operator]
    assert 29 < (p99_noise(before, 500) or 0) < 32 and (p99_noise(before, 50_000) or 0) < 22
    low = [spread(float(t), 100, {}) for t in range(5, 10)]
    for n, returns in ((500, True), (50_000, False)):
        after = [spread(float(t), n, {30.0: 6 * n // 500}) for t in range(10, 16)]
        assert after[0].p99_ms is not None and 29 < after[0].p99_ms < 32
        rates = [p.succeeded for p in (*before, *low, *after)]
        base = GroupStats(
            name="base", clients=10, succeeded=sum(rates), elapsed_s=16.0, rate_hz=0.0,
            series=[*before, *low, *after], interval_s=1.0,
        )  # fmt: skip
        s = judge_spike(step(base, group("spike", [0] * 16, [None] * 16)), "base", "spike", SPIKE)
        assert s is not None and (s.recovered_s == 0.0) is returns, (n, s.sentences)
