"""Each series interval keeps its successes' latency (crates/engine/src/buckets.rs, knee.analysis.series_latency):
the buckets' bounds, a percentile over a run of intervals, and the ramp's verdict against an SLO read from them."""

from __future__ import annotations

import pytest

from knee.analysis.ramp import judge_ramp
from knee.analysis.series_latency import bucket_of, highest_us, percentile_ms
from knee.model import GroupStats, SeriesPoint
from knee.scenario import Slo


def test_each_bucket_holds_a_sixteenth_of_an_octave_and_the_buckets_tile_the_values() -> None:
    assert [highest_us(b) for b in range(18)] == [*range(17), 17]  # one value each below 16, then 16 ..= 16 too
    assert [highest_us(b) for b in (31, 32, 33, 47, 48)] == [31, 33, 35, 63, 67]
    for b in range(16, 600):
        low, high = highest_us(b - 1) + 1, highest_us(b)
        assert high - low + 1 == 1 << ((b - 16) // 16)
        assert (high - low + 1) * 16 <= low, (b, low, high)  # its width at most 1/16 of its lowest value
        assert bucket_of(low) == bucket_of(high) == b and bucket_of(high + 1) == b + 1


def point(t: float, buckets: list[tuple[int, int]], **counts: int) -> SeriesPoint:
    succeeded = sum(n for _, n in buckets)
    return SeriesPoint(t=t, succeeded=succeeded, failed=0, hung=0, latency=buckets, **counts)


def test_a_percentile_over_several_intervals_adds_their_buckets() -> None:
    a = point(0, [(10, 3), (20, 96), (200, 1)])
    b = point(1, [(20, 50), (300, 50)])
    assert percentile_ms([a], 50) == 0.020
    assert percentile_ms([a], 100) == highest_us(200) / 1000
    assert percentile_ms([a, b], 50) == 0.020  # rank 100 of 200: the 146 counts up to bucket 20 hold it
    assert percentile_ms([a, b], 75) == highest_us(200) / 1000  # rank 150: 3 + 146 + 1
    assert percentile_ms([a, b], 75.5) == highest_us(300) / 1000
    assert percentile_ms([a, b], 0.1) == 0.010  # the rank is at least 1
    assert percentile_ms([], 99) is None and percentile_ms([point(0, [])], 99) is None


def ramp(p99s: list[float | None], failed: list[int] | None = None) -> GroupStats:
    """A ramp of 20 to 210/s offered over 20 one-second intervals, every arrival served, with these p99s."""
    failed = failed or [0] * len(p99s)
    offered = [20 + 10 * i for i in range(len(p99s))]
    series = [
        SeriesPoint(
            t=float(i),
            succeeded=o - f,
            failed=f,
            hung=0,
            offered=o,
            p99_ms=p,
            latency=[] if p is None else [(100, o - f)],
        )
        for i, (o, p, f) in enumerate(zip(offered, p99s, failed, strict=True))
    ]
    n = len(p99s)
    return GroupStats(name="main", clients=300, succeeded=sum(offered), elapsed_s=float(n), rate_hz=0.0, series=series)


def test_the_ramp_says_where_it_broke_the_slo_interval_by_interval() -> None:
    slo = Slo(p99_ms=200)
    p99s: list[float | None] = [50.0] * 8 + [450.0] + [60.0] + [300.0] * 10  # one slow interval is not where
    r = judge_ramp(ramp(p99s), slo=slo)
    assert r is not None and r.slo_broken is not None
    assert (r.slo_broken.offered_hz, r.slo_broken.at_s) == (120, 10)
    assert r.slo_broken.low_hz == 115 and r.slo_broken.high_hz == 125
    assert r.slo_missed == ["p99 300 ms > 200 ms"]
    said = "broke the SLO (p99 ≤ 200 ms) from 120/s (115–125/s over 1-s intervals): p99 300 ms > 200 ms"
    assert r.sentences[-1] == said
    # held: said with the top of the ramp
    r = judge_ramp(ramp([50.0] * 20), slo=slo)
    assert r is not None and r.slo_broken is None
    assert r.sentences[-1] == "met the SLO (p99 ≤ 200 ms) up to 210/s offered"
    # a failure ratio over the limit breaks it too, and an interval with no success has no p99 to meet it with
    failed = [0] * 15 + [3] * 5
    r = judge_ramp(ramp([50.0] * 20, failed), slo=Slo(failure_ratio=0.01))
    assert r is not None and r.slo_broken is not None and r.slo_broken.at_s == 15
    assert r.slo_missed == ["failed or hung 1.8 % > 1.0 %"]  # 3 of 170


@pytest.mark.parametrize("slo", [None, Slo(p99_ms=200)])
def test_no_slo_or_a_series_without_latency_says_nothing_of_it(slo: Slo | None) -> None:
    # a run recorded before the series kept latency: its p99 SLO cannot be judged interval by interval
    r = judge_ramp(ramp([None] * 20), slo=slo)
    assert r is not None and r.slo_broken is None and not any("SLO" in s for s in r.sentences)
