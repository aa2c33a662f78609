"""Nothing concluded from too little (issue 34, item 4): the saturation of an open loop is a shortfall beyond the
operations in flight and beyond its count's noise, one definition for the search and the verdict."""

from __future__ import annotations

import pytest

from knee.analysis import analyze
from knee.analysis.levels import pool, saturated, seconds_to_tell, too_short_to_tell
from knee.model import GroupStats, LatencyStats, OpenLoopStats, SeriesPoint, StepResult
from knee.searching import points


def open_step(index: int, rate: float, seconds: int, done: list[int], *, w_ms: float, abandoned: int) -> StepResult:
    """One open-loop step of `seconds` whole 1 s intervals at `rate`/s offered, `done[i]` successes in interval i,
    `abandoned` still in flight at its end, `w_ms` in the service."""
    ok = sum(done)
    series = [SeriesPoint(t=float(i), succeeded=n, failed=0, hung=0) for i, n in enumerate(done)]
    g = GroupStats(
        name="main",
        clients=50,
        succeeded=ok,
        abandoned=abandoned,
        elapsed_s=float(seconds),
        rate_hz=ok / seconds,
        latency_ms=LatencyStats(count=ok, mean=w_ms, p99=w_ms * 1.2),
        series=series,
    )
    g.open_loop = OpenLoopStats(
        offered=round(rate * seconds),
        offered_rate_hz=rate,
        achieved_rate_hz=ok / seconds,
        late=0,
        dropped=0,
        latency_uncorrected_ms=LatencyStats(count=ok, mean=w_ms, p99=w_ms * 1.2),
    )
    return StepResult(index=index, level=rate, started_unix=100.0 + 10 * index, elapsed_s=seconds, groups={"main": g})


def test_a_short_step_of_slow_operations_is_not_saturated() -> None:
    # issue 34: 300 ms operations at 10/s offered for 2 s: 20 arrivals, 17 ended, 3 still in service at the end
    # (the arrivals of the last 300 ms). "saturated at 10/s offered: achieved 8.50 Hz (85 % of offered)".
    step = open_step(0, 10, 2, [7, 10], w_ms=300.0, abandoned=3)
    (row,) = pool([step], "main", "up")
    assert row.achieved_rate == pytest.approx(8.5)
    assert row.in_flight == pytest.approx(2.55)  # Little's law: 8.5/s × 0.3 s in service (3 were)
    assert row.shortfall == pytest.approx((10 - 8.5 - 2.55 / 2) / 10)  # 2 %: within the 5 % anyway
    assert not saturated(row) and not too_short_to_tell(row)
    assert points([row])[0].saturated is False  # the search's point: the same definition
    v = analyze([step], "main", unit="rate")
    assert v.saturation_level is None
    assert "kept up with every offered rate up to 10/s" in v.sentences


def test_a_shortfall_within_the_counts_noise_is_warned_of_not_called() -> None:
    # 20/s offered for 3 s of 10 ms operations, 52 ended: 13 % short, but 1.96 √52 / 3 s = ±4.7/s > 2.7/s short
    step = open_step(0, 20, 3, [17, 18, 17], w_ms=10.0, abandoned=0)
    (row,) = pool([step], "main", "up")
    assert row.shortfall == pytest.approx(8 / 60)
    assert row.achieved_noise_hz == pytest.approx(1.96 * 52**0.5 / 3)
    assert not saturated(row) and too_short_to_tell(row)
    assert seconds_to_tell(row) == pytest.approx(1.96**2 * (52 / 3) / (8 / 3) ** 2)  # ≈ 9.4 s
    v = analyze([step], "main", unit="rate")
    assert v.saturation_level is None
    (warning,) = [w for w in v.warnings if w.startswith("too short to tell")]
    assert warning == (
        "too short to tell whether the service kept up at 20/s offered: the achieved rate fell "
        "2.67 Hz (13 %) short of the offered one, within its count's noise (±4.71 Hz over 3.0 s): not called "
        "saturated; a step of 9.4 s or more would tell a shortfall this large from noise"
    )
    # the same shortfall over 30 s is beyond the noise: saturated
    long = open_step(0, 20, 30, [17, 18, 17] * 10, w_ms=10.0, abandoned=0)
    (row,) = pool([long], "main", "up")
    assert saturated(row) and not too_short_to_tell(row)
    assert analyze([long], "main", unit="rate").saturation_level == 20
