"""The spike's verdict (knee.analysis.spike) read from a per-interval series: the fall, the return within the
noise and its bracket, the failures from the spike to the return, and no verdict without a baseline."""

from __future__ import annotations

from knee.analysis.series_latency import bucket_of
from knee.analysis.spike import judge_spike
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
