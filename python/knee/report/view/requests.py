"""A request mix's table (one row per level x request of the group's mix) and the steps whose data ran out."""

from __future__ import annotations

from knee import fmt
from knee.analysis.beside import stress_group
from knee.analysis.mix import RequestRow, request_rows
from knee.analysis.ranout import ran_out_words
from knee.model import RunRecord
from knee.report.view.levels import level_cell, row
from knee.report.view.section import Table

REQUESTS_HEADER = ["Level", "Request", "Succeeded (rate)", "Failed", "Hung", "Abandoned", "p50", "p99"]


def failures_cell(r: RequestRow) -> str:
    """'30 (100 %: status 30)': the failed count, its share of the ended operations and the classes."""
    if not r.failed:
        return "0"
    classes = ", ".join(f"{k} {n:,}" for k, n in sorted(r.failures.items(), key=lambda kv: -kv[1]))
    return f"{r.failed:,} ({fmt.pct(r.failed / r.total)}{': ' + classes if classes else ''})"


def request_cells(r: RequestRow) -> list[str]:
    """A request's cells after the level: name, successes (rate), failures by class, hung, abandoned, p50, p99."""
    latency = [fmt.ms(r.p50_ms), fmt.ms(r.p99_ms)] if r.latency_count else ["-", "-"]
    return [r.name, f"{r.succeeded:,} ({fmt.rate(r.rate_hz)})", failures_cell(r), f"{r.hung:,}", f"{r.abandoned:,}",
            *latency]  # fmt: skip


def requests_table(record: RunRecord, group: str) -> Table | None:
    """Per step, each request of the group's mix (None without a mix): recovery probes dim, requests with most of
    their operations failing red."""
    rows: list[list[str]] = []
    styles: list[str] = []
    beside = stress_group(record, group)
    for s in record.in_level_order():
        g = s.groups.get(group)
        if g is None or not g.requests:
            continue
        level = level_cell(row(s, g), record.rates, beside)
        for r in request_rows(s, g):
            rows.append([level, *request_cells(r)])
            styles.append("recovery" if s.phase == "recovery" else ("bad" if r.failure_ratio > 0.5 else ""))
    return Table(REQUESTS_HEADER, rows, styles) if rows else None


def data_lines(record: RunRecord, group: str) -> list[str]:
    """Each step of the group that its data ended: 'step 3 (40 clients): ran out of users after 5,000 rows …'."""
    out = []
    for s in record.steps:
        g = s.groups.get(group)
        words = ran_out_words(s, g) if g is not None else None
        if words is not None:
            out.append(f"step {s.index} ({fmt.load(s.level, record.level_unit)}): {words}; the step ended there")
    return out
