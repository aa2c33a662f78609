"""The report's parts as data: a `Section` (a title, sentences, a preformatted block, a table) and its `Table`.

A group's report is a list of sections (`knee.report.view.group_sections`); the terminal, Markdown and HTML
formatters loop over it and only decide how each part looks. Where they differ today (a title, the order on
the page, a row limit) the section carries what each needs, so their output stays as it was.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Literal


@dataclass(frozen=True)
class Table:
    header: list[str]
    rows: list[list[str]]
    styles: list[str] = field(default_factory=list)  # per row: "", "recovery" or "bad"
    kv: bool = False  # a table of text (keys, reasons): the page aligns every column left


# Where the page (report.html) puts a section: by part, in this order (the plots follow "table"), where
# Markdown and the terminal keep the list's order. A part is a place on the page, not a kind of content.
PAGE_PARTS = ("summary", "table", "details", "reasons", "machine")
PagePart = Literal["summary", "table", "details", "reasons", "machine"]

# How a section's lines read: plain sentences, the verdict (its first line the headline, the others its points:
# a list), findings ("why") or warnings (lists too).
Style = Literal["", "verdict", "why", "warning"]


@dataclass(frozen=True)
class Section:
    """One part of a group's report: a title (or none), sentences, a preformatted block and a table, shown in
    that order; a section with none of them is not built."""

    key: str  # what it is, for a reader that picks one: "table", "verdict", "reasons", "counters" …
    title: str = ""  # the heading in Markdown and on the page ("" for none: the group's table, its sentences)
    lines: list[str] = field(default_factory=list)
    style: Style = ""
    pre: list[str] = field(default_factory=list)  # a preformatted block (a histogram), one string a line
    table: Table | None = None
    # What one formatter needs and the others do not (today's outputs, kept byte for byte):
    terminal_title: str | None = None  # the terminal's title over the table; None: the terminal leaves it out
    terminal_rows: int | None = None  # the terminal shows at most this many rows and says how many more
    empty: str = ""  # the page's words for a table without rows (Markdown and the terminal leave it out)
    page: PagePart = "details"

    @property
    def blank(self) -> bool:
        """Nothing to show but the `empty` words: a table without rows and no lines."""
        return not self.lines and not self.pre and (self.table is None or not self.table.rows)

    def page_rank(self) -> int:
        return PAGE_PARTS.index(self.page)
