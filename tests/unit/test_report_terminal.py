"""The terminal report: the table per group, the verdict in words, warnings, stages and intervals."""

from __future__ import annotations

import numpy as np
from rich.console import Console

from knee import fmt
from knee.model import LittleCheck
from knee.report import render_terminal

from sample_records import fixed_work_record, long_level_record, make_group, sample_record


def _text(record) -> str:  # type: ignore[no-untyped-def]
    console = Console(record=True, width=1000, color_system=None)
    render_terminal(record, console)
    return console.export_text()


def _table_rows(text: str, title: str = "group main") -> list[list[str]]:
    """The body rows of the table titled `title`."""
    lines = text.splitlines()
    start = next(i for i, line in enumerate(lines) if line.strip() == title)
    rows = []
    for line in lines[start + 1 :]:
        if line.startswith("└"):
            break
        if line.startswith("│"):
            rows.append([c.strip() for c in line.strip("│").split("│")])
    return rows


def test_table_has_the_columns_and_one_row_per_step() -> None:
    record = sample_record()
    text = _text(record)
    header = next(line for line in text.splitlines() if "Concurrency" in line)
    assert [c.strip() for c in header.strip("┃").split("┃")] == [
        "Concurrency",
        "Succeeded (rate)",
        "Failed",
        "Hung",
        "Abandoned",
        "p50",
        "p99",
    ]
    rows = _table_rows(text)
    assert len(rows) == len(record.steps)
    for row, step in zip(rows, record.steps, strict=True):
        g = step.groups["main"]
        assert row[0].split(" ")[0] == str(g.clients)
        assert row[1] == f"{g.succeeded:,} ({fmt.rate(g.rate_hz)})"
        assert row[2].split(" ")[0] == f"{g.failed:,}"
        assert row[3] == f"{g.hung:,}"
        assert row[4] == f"{g.abandoned:,}"


def test_verdict_usl_line_reasons_and_load_side_warning() -> None:
    record = sample_record()
    text = _text(record)
    v = record.verdicts[0]
    # the verdict: its headline after the group's name, then each sentence's clauses as points, one a line
    assert "\nmain: peaked at 44.6 Hz with 50 clients; errors from 600; " in text
    points = [f"  • {c}" for s in v.sentences for c in fmt.clauses(s)]
    assert len(points) > 2 and "\n".join(points) in text
    assert v.usl is not None and f"USL fit: σ = {v.usl.sigma:.4g}, κ = {v.usl.kappa:.3g}" in text
    saturated = [s for s in record.steps if s.generator.saturated]
    assert len(saturated) == 1
    assert text.count("the load side was saturated") == 1
    assert f"step {saturated[0].index} ({saturated[0].level} clients: knee" in text
    reasons = _table_rows(text, "group main: failure reasons")
    failing = [s for s in record.steps if s.groups["main"].failed]
    assert [(r[0], r[1], r[2]) for r in reasons] == [
        (str(s.level), "status", f"{s.groups['main'].failed:,}") for s in failing
    ]
    assert all(r[3] == "HTTP/1.1 503 Service Unavailable: pool full" for r in reasons)


def test_recovery_probes_and_partial_steps_are_marked() -> None:
    record = sample_record(levels=(1, 10, 100), collapse_at=1000, recovery_probes=2)
    assert record.steps[2].partial
    rows = _table_rows(_text(record))
    assert rows[2][0] == "100 (partial)"
    assert [r[0] for r in rows[3:]] == ["1 (recovery probe)", "1 (recovery probe)"]
    assert not any("partial" in r[0] for r in rows[:2])


def test_littles_law_gap_is_a_warning_only_when_large() -> None:
    record = sample_record(levels=(1, 10, 100))
    v = record.verdicts[0]
    v.little = [LittleCheck(level=10, expected_n=10.3, gap=0.03), LittleCheck(level=100, expected_n=40.0, gap=0.6)]
    text = _text(record)
    assert "Little's law: at 100 clients" in text
    assert "at 10 clients X" not in text


def test_fixed_work_stages_show_ops_per_second_and_elapsed() -> None:
    record = fixed_work_record()
    text = _text(record)
    assert "per stage" in text
    stage_rows = _table_rows(text, "group main per stage")
    assert [r[0] for r in stage_rows] == ["store", "fetch"]
    for row, step in zip(stage_rows, record.steps, strict=True):
        g = step.groups["main"]
        assert row[2] == f"{g.succeeded:,}"
        assert row[3] == f"{g.succeeded / g.elapsed_s:,.1f}"
        assert row[4] == f"{g.elapsed_s:.1f} s"


def test_long_level_shows_the_interval_distribution() -> None:
    record = long_level_record(seconds=60)
    counts = np.array([p.succeeded for p in record.steps[0].groups["main"].series])
    text = _text(record)
    line = next(x for x in text.splitlines() if x.startswith("successes per 1 s interval"))
    assert f"over {len(counts)} intervals" in line
    assert f"min {counts.min():.0f}," in line
    assert f"median {np.median(counts):.1f}," in line
    assert f"p95 {np.percentile(counts, 95):.1f}," in line
    assert f"max {counts.max():.0f}" in line
    bars = [x for x in text.splitlines() if "│" in x and "–" in x]
    assert len(bars) == 8
    assert sum(int(b.split()[-1]) for b in bars) == len(counts)


def test_a_sweep_does_not_get_the_interval_distribution() -> None:
    assert "successes per" not in _text(sample_record(levels=(1, 10, 100)))


def test_every_group_gets_its_own_table_measured_group_first() -> None:
    record = sample_record(levels=(1, 10, 100))
    for s in record.steps:
        s.groups["baseload"] = make_group("baseload", 5, 12.0, seconds=10, seed=s.index)
    text = _text(record)
    assert text.index("group main") < text.index("group baseload")
    assert len(_table_rows(text)) == len(_table_rows(text, "group baseload")) == len(record.steps)
