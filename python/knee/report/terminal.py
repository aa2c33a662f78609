"""The terminal report: a table per group, the verdict in words, then warnings and the model."""

from __future__ import annotations

import sys

from rich.console import Console
from rich.markup import escape
from rich.table import Table

from knee.model import RunRecord
from knee.report import rows as R


def make_console() -> Console:
    """A console for reports: the terminal's width, or 120 columns when the output is a pipe or a file."""
    return Console() if sys.stdout.isatty() else Console(width=120)


def render_terminal(record: RunRecord, console: Console) -> None:
    """Print the run's table (per group), verdicts, warnings, USL fit and the per-label / per-interval views."""
    console.print(f"[bold]run {escape(record.run_id)}[/] ({escape(record.status)})")
    for group in R.group_names(record):
        _group_table(record, group, console)
        v = R.verdict_for(record, group)
        if v is not None:
            console.print(f"[bold]{escape(group)}:[/] {escape(R.verdict_sentence(v))}")
            if (line := R.usl_line(v)) is not None:
                console.print(escape(line))
        for w in R.warning_lines(record, group):
            console.print(f"[yellow]warning:[/] {escape(w)}")
        _labels(record, group, console)
        _intervals(record, group, console)


def _group_table(record: RunRecord, group: str, console: Console) -> None:
    table = Table(title=f"group {escape(group)}", title_justify="left")
    rates = R.rate_sweep(record)
    for i, h in enumerate(R.table_header(record)):
        table.add_column(h, justify="left" if i == 0 else "right")
    for r in R.rows_for(record, group):
        style = "dim" if r.phase == "recovery" else ("red" if r.failure_ratio > 0.5 else None)
        table.add_row(*(escape(c) for c in R.table_cells(r, rates)), style=style)
    console.print(table)


def _labels(record: RunRecord, group: str, console: Console) -> None:
    rows = R.label_rows(record, group)
    if not rows:
        return
    table = Table(title=f"group {escape(group)} per stage", title_justify="left")
    for i, h in enumerate(R.LABEL_HEADER):
        table.add_column(h, justify="left" if i == 0 else "right")
    for r in rows:
        table.add_row(*(escape(c) for c in R.label_cells(r)))
    console.print(table)


def _intervals(record: RunRecord, group: str, console: Console) -> None:
    for _, g in R.long_levels(record, group):
        d = R.interval_distribution(g)
        console.print(escape(R.distribution_line(d)))
        for line in R.text_histogram(d):
            console.print(escape(line), highlight=False)
