"""report.md: the terminal report as Markdown (tables, verdicts, warnings)."""

from __future__ import annotations

from knee.model import RunRecord
from knee.report import rows as R


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


def md_table(header: list[str], body: list[list[str]]) -> list[str]:
    lines = [
        "| " + " | ".join(header) + " |",
        "|" + "|".join(":---" if i == 0 else "---:" for i in range(len(header))) + "|",
    ]
    lines += ["| " + " | ".join(md_cell(c) for c in row) + " |" for row in body]
    return lines


def render_markdown(record: RunRecord) -> str:
    out = [f"# knee run {md_cell(record.run_id)}", "", f"Status: {md_cell(record.status)}", ""]
    for group in R.group_names(record):
        out += [f"## Group {md_cell(group)}", ""]
        rates = R.rate_sweep(record)
        out += md_table(R.table_header(record), [R.table_cells(r, rates) for r in R.rows_for(record, group)])
        out.append("")
        v = R.verdict_for(record, group)
        if v is not None:
            out += [f"**Verdict:** {md_cell(R.verdict_sentence(v))}", ""]
            if (line := R.usl_line(v)) is not None:
                out += [md_cell(line), ""]
        warnings = R.warning_lines(record, group)
        out += [f"- warning: {md_cell(w)}" for w in warnings]
        if warnings:
            out.append("")
        labels = R.label_rows(record, group)
        if labels:
            out += ["### Per stage", ""]
            out += md_table(R.LABEL_HEADER, [R.label_cells(r) for r in labels])
            out.append("")
        for _, g in R.long_levels(record, group):
            d = R.interval_distribution(g)
            out += ["### Per-interval distribution", "", md_cell(R.distribution_line(d)), "", "```"]
            out += R.text_histogram(d)
            out += ["```", ""]
    return "\n".join(out).rstrip() + "\n"
