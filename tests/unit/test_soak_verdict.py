"""The soak's verdict (knee.analysis.soak) read from a per-interval series and memory samples: a drift found with
its Theil–Sen slope and interval, noise left as no drift, a slope too small to matter left as no drift, memory
growth in MB/h, error bursts with their classes, errors throughout, and no verdict from fewer than three
intervals."""

from __future__ import annotations

import random

import pytest

from knee.analysis.series_latency import bucket_of
from knee.analysis.soak import SOAK_POINTS, headline, judge_soak
from knee.model import GroupStats, SeriesPoint, SoakSample


def group(rates: list[float], p99s: list[float], failed: list[int] | None = None, dt: float = 10.0) -> GroupStats:
    failed = failed or [0] * len(rates)
    series = [
        SeriesPoint(
            t=i * dt,
            succeeded=round(r * dt),
            failed=f,
            hung=0,
            p99_ms=p,
            latency=[(bucket_of(round(p * 1000)), round(r * dt))],
            failures={"timeout": f} if f else {},
        )
        for i, (r, p, f) in enumerate(zip(rates, p99s, failed, strict=True))
    ]
    n = len(rates)
    return GroupStats(
        name="main",
        clients=50,
        succeeded=sum(p.succeeded for p in series),
        failed=sum(failed),
        elapsed_s=n * dt,
        rate_hz=0.0,
        series=series,
        interval_s=dt,
    )


def noisy(n: int, mean: float, spread: float, seed: int = 7) -> list[float]:
    rng = random.Random(seed)
    return [mean * (1 + rng.uniform(-spread, spread)) for _ in range(n)]


def test_a_rising_p99_drifts_and_a_steady_rate_does_not() -> None:
    # two hours of 10-s intervals: the rate steady at 1 000/s (±2 %), the p99 from 20 ms up by 10 % an hour
    n = 720
    p99 = [20.0 * (1 + 0.10 * (i * 10 / 3600)) * f for i, f in enumerate(noisy(n, 1.0, 0.02, seed=3))]
    s = judge_soak(group(noisy(n, 1000.0, 0.02), p99), [], 50)
    assert s is not None and s.throughput is not None and s.p99 is not None
    assert s.seconds == 7200 and s.intervals == n and s.throughput.points == n // 2 <= SOAK_POINTS  # in bins of two
    assert not s.throughput.drifting and s.p99.drifting
    # the buckets are 1/16 octave wide, so the p99 read back is within ~4.4 % of what was put in
    assert s.p99.pct_per_hour is not None and 7 < s.p99.pct_per_hour[0] < 13, s.p99
    assert s.p99.low_per_hour > 0 and s.p99.first < s.p99.last
    head = s.sentences[0]
    assert head.startswith("soak of 2 h at 50 clients: throughput 999/s, no drift (within ±"), head
    assert "; p99 rose " in head and "%/h (+" in head and " over 2 h" in head, head
    assert s.sentences[1] == "no errors"


def test_a_real_slope_too_small_to_matter_is_no_drift() -> None:
    # +1 % over the whole soak, without noise: the interval leaves out 0, but the change is under 5 %
    n = 360
    s = judge_soak(group([1000.0 * (1 + 0.01 * i / n) for i in range(n)], [10.0] * n), [], 50)
    assert s is not None and s.throughput is not None
    assert s.throughput.low_per_hour > 0 and not s.throughput.drifting
    assert "throughput 1,005/s, no drift" in s.sentences[0], s.sentences[0]


def test_memory_growth_in_megabytes_an_hour_and_knee_flat() -> None:
    n = 60
    samples = [
        SoakSample(t_s=(i + 1) * 10.0, target_rss_mb=100.0 + 0.5 * i, target_fds=12, knee_rss_mb=80.0 + (i % 2) * 0.1)
        for i in range(n)
    ]
    s = judge_soak(group([500.0] * n, [5.0] * n), samples, 20)
    assert s is not None and s.memory is not None and s.descriptors is not None and s.knee_memory is not None
    assert s.memory.drifting and s.memory.per_hour == pytest.approx(0.5 * 360)  # 0.5 MB per 10 s
    assert not s.descriptors.drifting and s.descriptors.per_hour == 0
    assert not s.knee_memory.drifting
    said = "\n".join(s.sentences)
    assert "the target's memory grew 180 MB/h (180 to 180 MB/h): 100 MB → 130 MB over 10 min" in said, said
    assert "the target's open descriptors 12, no drift" in said and "knee's own memory 80.0 MB, no drift" in said


def test_error_bursts_with_their_classes_and_errors_throughout() -> None:
    n = 30
    failed = [0] * n
    failed[5:8] = [4, 9, 2]
    failed[20] = 2  # of 1 000: over analysis.onset (0.1 %)
    s = judge_soak(group([100.0] * n, [5.0] * n, failed), [], 10)
    assert s is not None and s.failing_intervals == 4
    assert [(b.start_s, b.seconds, b.failed, b.failures) for b in s.bursts] == [
        (50.0, 30.0, 15, {"timeout": 15}),
        (200.0, 10.0, 2, {"timeout": 2}),
    ]
    assert s.sentences[1] == (
        "2 bursts of errors: at 50 s for 30 s (15 failed or hung: 15 timeout); at 3.3 min for 10 s (2 failed or hung: "
        "2 timeout)"
    )
    everywhere = judge_soak(group([100.0] * n, [5.0] * n, [3] * n), [], 10)
    assert everywhere is not None and not everywhere.bursts
    assert everywhere.sentences[1].startswith("errors throughout: 30 of 30 intervals had them (0.3 % of operations)")


def test_fewer_than_three_whole_intervals_is_no_verdict() -> None:
    g = group([100.0, 100.0, 100.0], [5.0] * 3)
    g.elapsed_s = 25.0  # the third interval is not whole
    assert judge_soak(g, [], 10) is None


def test_failures_below_the_onset_are_said_in_the_headline_too() -> None:
    # 1 failure in an interval of 1 000: below analysis.onset (0.1 %), so no failing interval, but not "no errors"
    n = 30
    failed = [0] * n
    failed[10] = 1
    s = judge_soak(group([100.0] * n, [5.0] * n, failed), [], 10)
    assert s is not None and s.failing_intervals == 0 and s.failed == 1 and not s.bursts
    assert s.sentences[1] == "1 failed or hung, below analysis.onset"
    assert headline(s, "clients").endswith("; no drift; 1 failed or hung, below analysis.onset"), headline(s, "clients")


def test_a_day_of_memory_samples_is_fitted_in_bins(monkeypatch: pytest.MonkeyPatch) -> None:
    """A 24 h soak's 8 640 samples went to Theil–Sen whole (every pair compared: arrays of n² floats, gigabytes);
    they are binned to SOAK_POINTS medians as the series are, and the growth is still read right."""
    import knee.analysis.soak as soak_module

    fitted: list[int] = []
    drift = soak_module._drift

    def counting(what: str, unit: str, hours: list[float], values: list[float], least: float = 0.0):  # type: ignore[no-untyped-def]
        fitted.append(len(values))
        return drift(what, unit, hours, values, least)

    monkeypatch.setattr(soak_module, "_drift", counting)
    n = 8_640
    samples = [
        SoakSample(t_s=(i + 1) * 10.0, target_rss_mb=100.0 + 0.01 * i, target_fds=12, knee_rss_mb=80.0)
        for i in range(n)
    ]
    s = judge_soak(group([500.0] * 400, [5.0] * 400, dt=216.0), samples, 20)
    assert s is not None and s.memory is not None
    assert max(fitted) <= SOAK_POINTS, fitted
    assert s.memory.per_hour == pytest.approx(0.01 * 360, rel=0.01)  # 0.01 MB per 10 s
