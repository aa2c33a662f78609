"""report.md: the terminal report as Markdown (per group its sections: tables, verdict, warnings, reasons)."""

from __future__ import annotations

from knee.model import RunRecord
from knee.report.view import ReportView, Section, Table, build

# How each style of line starts; findings and warnings are lists (one blank line after the list)
_PREFIXES = {"verdict": "**Verdict:** ", "why": "- ", "warning": "- warning: "}
_LISTS = {"why", "warning"}


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


def md_section(s: Section) -> list[str]:
    """A `###` heading (when the section has a title), its lines, its preformatted block and its table, each
    followed by a blank line; nothing for a section without content."""
    if s.blank:
        return []
    out = [f"### {md_cell(s.title)}", ""] if s.title else []
    if s.style == "verdict":  # the headline, then its points as a list
        out += [_PREFIXES["verdict"] + md_cell(s.lines[0]), ""]
        out += [f"- {md_cell(line)}" for line in s.lines[1:]] + ([""] if s.lines[1:] else [])
    prefix = _PREFIXES.get(s.style, "")
    for line in s.lines if s.style != "verdict" else []:
        out.append(prefix + md_cell(line))
        if s.style not in _LISTS:
            out.append("")
    if s.lines and s.style in _LISTS:
        out.append("")
    if s.pre:
        out += ["```", *s.pre, "```", ""]
    if s.table is not None and s.table.rows:
        out += [*md_table(s.table), ""]
    return out


def render_markdown(record: RunRecord, view: ReportView | None = None) -> str:
    view = view or build(record)
    out = [f"# knee run {md_cell(view.run_id)}", "", f"Status: {md_cell(view.status)}", ""]
    for g in view.groups:
        out += [f"## Group {md_cell(g.name)}", ""]
        for s in g.sections:
            out += md_section(s)
    return "\n".join(out).rstrip() + "\n"
