"""The terminal report: per group its sections (the table, the verdict in words, warnings, the model, reasons …)."""

from __future__ import annotations

from rich.console import Console
from rich.markup import escape
from rich.padding import Padding
from rich.table import Table as RichTable

from knee.console import make_console
from knee.model import RunRecord
from knee.report.view import GroupView, ReportView, Section, Table, build

__all__ = ["make_console", "render_terminal"]

# How each style of line starts (the verdict's label is the group's name)
_LABELS = {"why": "[bold magenta]why:[/] ", "warning": "[yellow]warning:[/] "}


def _table(t: Table, title: str) -> RichTable:
    out = RichTable(title=escape(title), title_justify="left")
    for i, h in enumerate(t.header):
        out.add_column(escape(h), justify="left" if i == 0 or h == "Request" else "right")
    for i, cells in enumerate(t.rows):
        style = t.styles[i] if t.styles else ""
        out.add_row(*(escape(c) for c in cells), style={"recovery": "dim", "bad": "red"}.get(style))
    return out


def _section(console: Console, g: GroupView, s: Section) -> None:
    """Lines, then the preformatted block, then the table under its terminal title (none: not shown here)."""
    if s.blank:
        return
    if s.style == "verdict":  # the headline after the group's name, then its points
        console.print(f"[bold]{escape(g.name)}:[/] [bold]{escape(s.lines[0])}[/]")
        for line in s.lines[1:]:
            console.print(Padding(f"• {escape(line)}", (0, 0, 0, 2), expand=False))
    for line in s.lines if s.style != "verdict" else []:
        console.print(_LABELS.get(s.style, "") + escape(line))
    for line in s.pre:
        console.print(escape(line), highlight=False)
    if s.table is None or s.terminal_title is None:
        return
    t, limit = s.table, s.terminal_rows
    if limit is None or len(t.rows) <= limit:
        console.print(_table(t, s.terminal_title))
        return
    console.print(_table(Table(t.header, t.rows[:limit], t.styles[:limit], t.kv), s.terminal_title))
    console.print(f"… {len(t.rows) - limit} more in report.md")


def render_terminal(record: RunRecord, console: Console, view: ReportView | None = None) -> None:
    """Print the run's sections per group: its table, verdict, warnings, USL fit, reasons and the per-stage and
    per-interval views."""
    view = view or build(record)
    console.print(f"[bold]run {escape(view.run_id)}[/] ({escape(view.status)})")
    for g in view.groups:
        for s in g.sections:
            _section(console, g, s)
