"""report.md: the same table as the terminal, as Markdown, with hostile text neutralised."""

from __future__ import annotations

from knee import fmt
from knee.report.markdown import render_markdown

from sample_records import sample_record


def _md_rows(md: str) -> list[list[str]]:
    """The rows of the first table (the group's levels)."""
    out = []
    for line in md.split("\n\n| Concurrency", 1)[1].split("\n\n", 1)[0].splitlines()[1:]:
        if line.startswith("| "):
            cells = [c.strip() for c in line.strip().strip("|").replace("\\|", "\x00").split("|")]
            out.append([c.replace("\x00", "|") for c in cells])
    return out


def test_markdown_table_has_a_row_per_step_with_the_numbers() -> None:
    record = sample_record()
    md = render_markdown(record)
    assert "| Concurrency | Succeeded (rate) | Failed | Hung | Abandoned | p50 | p99 |" in md
    assert "|:---|---:|---:|---:|---:|---:|---:|" in md
    rows = _md_rows(md)
    assert len(rows) == len(record.steps)
    for row, step in zip(rows, record.steps, strict=True):
        g = step.groups["main"]
        assert len(row) == 7
        assert row[0].split(" ")[0] == str(g.clients)
        assert row[1].startswith(f"{g.succeeded:,} (")
        assert row[3] == str(g.hung)
    # the verdict: its headline, then every sentence of the analysis as a list of points
    points = [f"- {c}" for s in record.verdicts[0].sentences for c in fmt.clauses(s)]
    assert "**Verdict:** peaked at 44.6 Hz with 50 clients; errors from 600" in md
    assert "\n".join(points) in md and len(points) > 2
    assert "### Failure reasons" in md and "| status |" in md


def test_markdown_neutralises_pipes_and_html_in_group_names_and_verdicts() -> None:
    record = sample_record(levels=(1, 10), group="a|b<script>alert(1)</script>")
    record.verdicts[0].sentences = ["peaked | at <b>x</b>"]
    md = render_markdown(record)
    assert "<script>" not in md
    assert "<b>" not in md
    assert "a\\|b&lt;script&gt;" in md
    assert all(len(r) == 7 for r in _md_rows(md))
