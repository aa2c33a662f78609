"""levels.csv and series.csv: columns, one row per step x group, values that add up."""

from __future__ import annotations

import csv
import io

from knee.model import LatencyStats, Settle
from knee.report.csvout import levels_csv, series_csv

from sample_records import make_group, sample_record

LEVEL_COLUMNS = [
    "index",
    "label",
    "phase",
    "direction",
    "level",
    "group",
    "request",
    "clients",
    "started",
    "succeeded",
    "failed",
    "hung",
    "abandoned",
    "rate_hz",
    "failure_ratio",
    "p50_ms",
    "p90_ms",
    "p99_ms",
    "max_ms",
    "bytes_received",
    "transfer_bps",
    "connections",
    "connect_mean_ms",
    "connect_p99_ms",
    "tls_resumed",
    "tls_mean_ms",
    "tls_p99_ms",
    "ttfb_mean_ms",
    "ttfb_p99_ms",
    "partial",
    "superseded",
    "believed",
    "ran_out",
    "rows_used",
    "generator_cpu_cores",
    "machine_cpu_cores",
]


def _two_groups():  # type: ignore[no-untyped-def]
    record = sample_record(levels=(1, 10, 100, 1000), error_from=100, collapse_at=1000)
    for s in record.steps:
        s.groups["baseload"] = make_group("baseload", 4, 9.0, seconds=10, failed=s.index, seed=s.index)
        # the main group's connections shook hands (TLS), the baseload's had no phases (an exec client)
        main = s.groups["main"]
        phases = LatencyStats(count=s.level, mean=1.5, p50=1.0, p90=2.0, p99=3.0, max=4.0)
        main.connect_ms = phases
        main.tls_ms = phases.model_copy(update={"mean": 7.5, "p99": 9.0})
        main.ttfb_ms = phases.model_copy(update={"mean": 11.0, "p99": 12.0})
        main.tls_resumed = s.level // 2
    return record


def test_levels_csv_columns_and_rows() -> None:
    record = _two_groups()
    record.steps[1].settle = Settle(seconds=5.0, settled=False)  # run on a service not back at rest: not believed
    rows = list(csv.DictReader(io.StringIO(levels_csv(record))))
    assert list(rows[0].keys()) == LEVEL_COLUMNS
    assert len(rows) == 2 * len(record.steps)
    for row in rows:
        step = record.steps[int(row["index"])]
        g = step.groups[row["group"]]
        assert int(row["level"]) == step.level
        assert row["phase"] == step.phase and row["direction"] == step.direction
        assert int(row["clients"]) == g.clients
        assert (int(row["succeeded"]), int(row["failed"]), int(row["hung"])) == (g.succeeded, g.failed, g.hung)
        assert abs(float(row["rate_hz"]) - g.rate_hz) <= 1e-5 * g.rate_hz
        assert abs(float(row["failure_ratio"]) - g.failure_ratio) < 1e-6
        assert abs(float(row["p99_ms"]) - g.latency_ms.p99) <= 1e-5 * g.latency_ms.p99
        assert row["partial"] == ("true" if step.partial else "false")
        assert row["believed"] == ("false" if step.index == 1 else "true")
        assert float(row["generator_cpu_cores"]) == step.generator.cpu_cores
        phases = [row[c] for c in LEVEL_COLUMNS[21:29]]
        if row["group"] == "main":
            assert phases == [str(step.level), "1.5", "3", str(step.level // 2), "7.5", "9", "11", "12"]
        else:
            assert phases == ["0", "", "", "", "", "", "", ""]
    assert [r["group"] for r in rows[:2]] == ["main", "baseload"]


def test_series_csv_adds_up_to_each_steps_counts() -> None:
    record = _two_groups()
    rows = list(csv.DictReader(io.StringIO(series_csv(record))))
    assert list(rows[0].keys()) == [
        "step",
        "group",
        "t",
        "succeeded",
        "failed",
        "hung",
        "offered",
        "late",
        "lagged",
        "dropped",
        "p50_ms",
        "p99_ms",
    ]
    # an interval's latency is its own (empty where none succeeded, as in these hand-made series without it)
    assert all(r["p50_ms"] == "" and r["p99_ms"] == "" for r in rows)
    assert len(rows) == sum(len(g.series) for s in record.steps for g in s.groups.values())
    for s in record.steps:
        for name, g in s.groups.items():
            mine = [r for r in rows if int(r["step"]) == s.index and r["group"] == name]
            assert sum(int(r["succeeded"]) for r in mine) == g.succeeded
            assert sum(int(r["failed"]) for r in mine) == g.failed
            assert sum(int(r["hung"]) for r in mine) == g.hung
            assert [float(r["t"]) for r in mine] == [p.t for p in g.series]
