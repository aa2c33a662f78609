"""How the verdict writes numbers."""

from __future__ import annotations

from knee.analysis import words


def test_rates() -> None:
    assert [words.rate(x) for x in (4.6, 46.23, 1853.2, 0.35)] == ["4.6 Hz", "46.2 Hz", "1,853 Hz", "0.35 Hz"]


def test_percentages() -> None:
    assert [words.pct(x) for x in (0, 0.004, 0.25, 0.000012, 1.0)] == ["0 %", "0.4 %", "25 %", "0.0012 %", "100 %"]


def test_durations() -> None:
    got = [words.duration(x) for x in (5, 35, 260, 600, 3600, 5400)]
    assert got == ["5.0 s", "35 s", "4.3 min", "10 min", "1 h", "1.5 h"]


def test_parameters() -> None:
    assert [words.num(x) for x in (0.0, 0.0204, 0.0004, 49.3, 1234.0, 1.2e-7)] == [
        "0",
        "0.02",
        "0.0004",
        "49",
        "1234",
        "1.2e-07",
    ]
