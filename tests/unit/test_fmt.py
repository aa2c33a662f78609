"""How knee writes numbers: one formatter for tables and sentences alike."""

from __future__ import annotations

from knee import fmt


def test_rates_have_three_significant_digits() -> None:
    got = [fmt.rate(x) for x in (4.6, 46.23, 1853.2, 0.35, 0.001234, 0.0, 99.96)]
    assert got == ["4.60 Hz", "46.2 Hz", "1,853 Hz", "0.350 Hz", "0.00123 Hz", "0 Hz", "100 Hz"]


def test_percentages() -> None:
    got = [fmt.pct(x) for x in (0, 0.004, 0.053, 0.25, 0.000012, 1.0)]
    assert got == ["0 %", "0.4 %", "5.3 %", "25 %", "0.0012 %", "100 %"]


def test_milliseconds() -> None:
    assert [fmt.ms(x) for x in (0, 0.3, 12.54, 125.4, 1254.0, 12540.0)] == [
        "-",
        "0.300 ms",
        "12.5 ms",
        "125 ms",
        "1.25 s",
        "12.5 s",
    ]


def test_durations() -> None:
    got = [fmt.duration(x) for x in (5, 35, 260, 600, 3600, 5400)]
    assert got == ["5.0 s", "35 s", "4.3 min", "10 min", "1 h", "1.5 h"]


def test_parameters() -> None:
    assert [fmt.num(x) for x in (0.0, 0.0204, 0.0004, 49.3, 1234.0, 1.2e-7)] == [
        "0",
        "0.02",
        "0.0004",
        "49",
        "1234",
        "1.2e-07",
    ]


def test_sizes_and_transfer_rates() -> None:
    assert [fmt.size(x) for x in (512, 1500, 10_000_000, 1_200_000_000)] == ["512 B", "1.50 kB", "10.0 MB", "1.20 GB"]
    assert fmt.transfer(2_500_000) == "2.50 MB/s (20.0 Mbit/s)"
    assert fmt.transfer(12_500) == "0.0125 MB/s (0.100 Mbit/s)"
