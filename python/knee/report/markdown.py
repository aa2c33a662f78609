"""report.md: the terminal report as Markdown (tables, verdicts, warnings, reasons)."""

from __future__ import annotations

from knee.model import RunRecord
from knee.report.view import ReportView, Table, build


def md_cell(text: str) -> str:
    """Text safe inside a Markdown table cell (pipes, newlines and HTML are neutralised)."""
    return (
        text.replace("\\", "\\\\")
        .replace("|", "\\|")
        .replace("<", "&lt;")
        .replace(">", "&gt;")
        .replace("\r", " ")
        .replace("\n", " ")
    )


def md_table(t: Table) -> list[str]:
    lines = [
        "| " + " | ".join(md_cell(h) for h in t.header) + " |",
        "|" + "|".join(":---" if i == 0 else "---:" for i in range(len(t.header))) + "|",
    ]
    lines += ["| " + " | ".join(md_cell(c) for c in row) + " |" for row in t.rows]
    return lines


def render_markdown(record: RunRecord, view: ReportView | None = None) -> str:
    view = view or build(record)
    out = [f"# knee run {md_cell(view.run_id)}", "", f"Status: {md_cell(view.status)}", ""]
    for g in view.groups:
        out += [f"## Group {md_cell(g.name)}", ""]
        out += md_table(g.table)
        out.append("")
        if g.verdict is not None:
            out += [f"**Verdict:** {md_cell(g.verdict)}", ""]
        if g.usl is not None:
            out += [md_cell(g.usl), ""]
        if g.findings:
            out += ["### Why", ""] + [f"- {md_cell(f)}" for f in g.findings] + [""]
        out += [f"- warning: {md_cell(w)}" for w in g.warnings]
        if g.warnings:
            out.append("")
        if g.between:
            out += [md_cell(g.between), ""]
        out += _section("Failure reasons", g.reasons if g.reasons.rows else None)
        out += _section("Timed steps", g.steps)
        out += _section("Per stage", g.stages)
        for iv in g.intervals:
            out += ["### Per-interval distribution", "", md_cell(iv.line), "", "```"]
            out += iv.histogram
            out += ["```", ""]
        out += _section("Machine and target counters", g.counters)
        out += _section("Per worker", g.workers)
    return "\n".join(out).rstrip() + "\n"


def _section(title: str, table: Table | None) -> list[str]:
    """A `###` heading and its table, or nothing without a table."""
    return [] if table is None else [f"### {title}", "", *md_table(table), ""]
