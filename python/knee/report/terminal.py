"""The terminal report: a table per group, the verdict in words, then warnings, the model, reasons."""

from __future__ import annotations

import sys

from rich.console import Console
from rich.markup import escape
from rich.table import Table as RichTable

from knee.model import RunRecord
from knee.report.view import ReportView, Table, build

MAX_REASON_ROWS = 20


def make_console() -> Console:
    """A console for reports: the terminal's width, or 120 columns when the output is a pipe or a file."""
    return Console() if sys.stdout.isatty() else Console(width=120)


def _table(t: Table, title: str) -> RichTable:
    out = RichTable(title=escape(title), title_justify="left")
    for i, h in enumerate(t.header):
        out.add_column(escape(h), justify="left" if i == 0 else "right")
    for i, cells in enumerate(t.rows):
        style = t.styles[i] if t.styles else ""
        out.add_row(*(escape(c) for c in cells), style={"recovery": "dim", "bad": "red"}.get(style))
    return out


def render_terminal(record: RunRecord, console: Console, view: ReportView | None = None) -> None:
    """Print the run's table (per group), verdicts, warnings, USL fit, reasons and the per-stage and
    per-interval views."""
    view = view or build(record)
    console.print(f"[bold]run {escape(view.run_id)}[/] ({escape(view.status)})")
    for g in view.groups:
        console.print(_table(g.table, f"group {g.name}"))
        if g.verdict is not None:
            console.print(f"[bold]{escape(g.name)}:[/] {escape(g.verdict)}")
        if g.usl is not None:
            console.print(escape(g.usl))
        for f in g.findings:
            console.print(f"[bold magenta]why:[/] {escape(f)}")
        for w in g.warnings:
            console.print(f"[yellow]warning:[/] {escape(w)}")
        if g.between:
            console.print(escape(g.between))
        if g.reasons.rows:
            shown = Table(g.reasons.header, g.reasons.rows[:MAX_REASON_ROWS])
            console.print(_table(shown, f"group {g.name}: failure reasons"))
            if len(g.reasons.rows) > MAX_REASON_ROWS:
                console.print(f"… {len(g.reasons.rows) - MAX_REASON_ROWS} more in report.md")
        if g.steps is not None:
            console.print(_table(g.steps, f"group {g.name}: timed steps"))
        if g.stages is not None:
            console.print(_table(g.stages, f"group {g.name} per stage"))
        for iv in g.intervals:
            console.print(escape(iv.line))
            for line in iv.histogram:
                console.print(escape(line), highlight=False)
        if g.workers is not None:
            console.print(_table(g.workers, "per worker"))
