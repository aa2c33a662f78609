"""The report's sections are data: built once in the view, every formatter loops over them."""

from __future__ import annotations

import io
import re

import pytest
from rich.console import Console

from knee.report import render_terminal
from knee.report import view as V
from knee.report.html import render_html
from knee.report.markdown import render_markdown
from knee.report.view import Section, Table

from sample_records import fixed_work_record, long_level_record, make_group, sample_record


def _terminal(record) -> str:  # type: ignore[no-untyped-def]
    console = Console(file=io.StringIO(), record=True, width=1000, color_system=None)
    render_terminal(record, console)
    return console.export_text()


def test_a_new_section_is_one_edit_in_the_view(monkeypatch: pytest.MonkeyPatch) -> None:
    built = V.group_sections

    def with_one_more(*args, **kw):  # type: ignore[no-untyped-def]
        extra = Section(
            "extra",
            "Extra part",
            lines=["one more sentence"],
            table=Table(["Key", "Value"], [["alpha", "42"]]),
            terminal_title="extra",
        )
        return [*built(*args, **kw), extra]

    monkeypatch.setattr(V, "group_sections", with_one_more)
    record = sample_record(levels=(1, 10, 100))
    md = render_markdown(record)
    assert "### Extra part\n\none more sentence\n\n| Key | Value |" in md and "| alpha | 42 |" in md
    page = render_html(record)
    assert '<h3>Extra part</h3>\n<p>one more sentence</p>\n<div class="scroll"><table><thead><tr><th>Key</th>' in page
    text = _terminal(record)
    assert "one more sentence" in text and "\nextra " in text and "│ alpha │    42 │" in text


@pytest.mark.parametrize("make", [sample_record, fixed_work_record, long_level_record])
def test_markdown_headings_are_the_sections_titles_in_order(make) -> None:  # type: ignore[no-untyped-def]
    record = make()
    for s in record.steps:
        s.groups["baseload"] = make_group("baseload", 5, 12.0, seconds=10, seed=s.index)
    view = V.build(record)
    md = render_markdown(record, view)
    parts = re.split(r"^## Group .*$", md, flags=re.M)[1:]
    assert len(parts) == len(view.groups) == 2
    for g, part in zip(view.groups, parts, strict=True):
        titles = [s.title for s in g.sections if s.title and not s.blank]
        assert re.findall(r"^### (.*)$", part, flags=re.M) == titles


def test_the_page_orders_the_sections_by_part() -> None:
    record = sample_record(levels=(1, 10, 600, 1000))
    view = V.build(record)
    page = render_html(record, view)
    (g,) = view.groups
    keys = [s.key for s in g.sections]
    assert keys[:2] == ["table", "verdict"] and "reasons" in keys
    on_page = sorted(g.sections, key=Section.page_rank)
    assert on_page[0].key == "verdict" and on_page[-1].key == "reasons"
    assert re.findall(r"<h3>(.*?)</h3>", page) == [s.title for s in on_page if s.title]
    # the table follows the sentences on the page, and the plots follow the table
    assert page.index('<p class="warn">') < page.index("<table><thead><tr><th>Concurrency") < page.index("<svg")


def test_the_verdict_is_a_headline_then_short_points() -> None:
    """issue 37: one headline sentence from the verdict's fields, then every sentence as points (split at its
    top-level '; '), not one paragraph of ten clauses."""
    from knee.model import Bracket, CurveShape, Verdict

    evidence = "a fixed pool with a queue: from 4 to 64 clients … (52 ms → 900 ms); the pool holds about 4 (…)"
    pool = Verdict(
        group="main",
        peak_level=8,
        peak_rate=77.3,
        error_onset_level=70,
        shape=CurveShape(name="pool", evidence=evidence, pool_size=4.02),
        brackets={"plateau": Bracket(at=4, below=2)},
        sentences=["a plateau of 77.3 Hz from 4 clients (2: 50.0 Hz) to 64 clients", "errors from 70 clients (…)"],
    )
    pool.sentences.append(evidence)
    assert V.verdict_lines(pool) == [
        "a pool of about 4: 77.3 Hz from 4 clients; errors from 70",
        "a plateau of 77.3 Hz from 4 clients (2: 50.0 Hz) to 64 clients",
        "errors from 70 clients (…)",
        "a fixed pool with a queue: from 4 to 64 clients … (52 ms → 900 ms)",
        "the pool holds about 4 (…)",
    ]
    broke = Verdict(group="main", peak_level=40, peak_rate=430.0, error_onset_level=640, collapse_level=640)
    broke.recovered, broke.sentences = False, ["peaked at 430 Hz with 40 clients"]
    assert V.verdict_lines(broke)[0] == "peaked at 430 Hz with 40 clients; errors and collapse at 640; did not recover"
    # without a peak (a background group's verdict), its first point heads it
    beside = Verdict(group="b", sentences=["beside 2 clients of main: 0 succeeded, 16 failed (401 Unauthorized)"])
    assert V.verdict_lines(beside) == beside.sentences
    md = render_markdown(sample_record())
    head = md.index("**Verdict:** ")
    block = md[head : md.index("\n\n", md.index("\n- ", head))]
    assert block.count("\n- ") >= 3 and max(len(line) for line in block.splitlines()) < 200, block
