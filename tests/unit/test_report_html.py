"""report.html: self-contained, the plots inlined as SVG, the verdict shown, hostile text escaped."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from knee import fmt
from knee.model import RunRecord
from knee.report import write_reports
from knee.report.html import render_html
from knee.store import RunDir
from svgaxes import tick_labels, tick_numbers

from sample_records import fixed_work_record, sample_record, scenario

HOSTILE = "<script>alert(1)</script>"


@pytest.fixture(scope="module")
def page() -> str:
    return render_html(sample_record())


def test_html_is_self_contained(page: str) -> None:
    assert page.startswith("<!DOCTYPE html>")
    assert "<script" not in page.lower()
    assert "<link" not in page.lower()
    assert "@import" not in page
    assert all(u.startswith("#") for u in re.findall(r"url\(\s*['\"]?([^)'\"]*)", page))
    for attr, url in re.findall(r"""(src|href)\s*=\s*["']([^"']*)["']""", page, re.I):
        assert url.startswith("#"), f"{attr}={url} points outside the page"


def test_html_has_the_plots_and_the_verdict(page: str) -> None:
    svgs = re.findall(r"<svg\b.*?</svg>", page, re.S)
    assert len(svgs) == 5
    titles = [
        "Throughput vs concurrency",
        "Failures and hung operations vs concurrency",
        "Latency percentiles vs concurrency",
        "Per-interval series of each level",
        "Latency distribution per level",
    ]
    for svg, title in zip(svgs, titles, strict=True):
        assert title in svg
        assert svg.count("<path") > 5
    n_star = re.search(r"N\* = (\d+)", svgs[0])
    assert "USL fit" in svgs[0] and n_star is not None and 45 <= int(n_star.group(1)) <= 55  # configured: 50
    record = sample_record()
    # the verdict: a headline, then every sentence of the analysis as points (split at their top-level '; ')
    v = record.verdicts[0]
    head = re.search(r'<div class="verdict"><p class="headline">(.*?)</p>\s*<ul>(.*?)</ul></div>', page, re.S)
    assert head is not None
    assert head[1].startswith("peaked at 44.6 Hz with 50 clients; errors from 600") and len(head[1]) < 120, head[1]
    points = re.findall(r"<li>(.*?)</li>", head[2])
    assert points == [c for s in v.sentences for c in fmt.clauses(s)] and len(points) >= len(v.sentences) > 2
    assert "<h2>Scenario</h2>" in page and "levels = [1, 2, 5," in page
    assert "loadgen-1" in page and "knee_version" in page


def test_no_usl_curve_without_a_fit() -> None:
    record = sample_record()
    record.verdicts[0].usl = None
    svgs = re.findall(r"<svg\b.*?</svg>", render_html(record), re.S)
    assert "USL fit" not in svgs[0]


def test_log_axes_label_their_ticks_in_plain_numbers() -> None:
    """issue 37: clients 1, 10, 100 and latency 10, 11, 12 ms, never 10⁰, 10² or 1.225 × 10¹."""
    record = sample_record(levels=(1, 10, 100, 1000))
    for s in record.steps:  # latencies within one decade: the ticks between decades are labelled
        s.groups["main"].latency_ms = s.groups["main"].latency_ms.model_copy(
            update={"p50": 11.0, "p90": 11.6, "p99": 12.2, "max": 12.9}
        )
    svgs = re.findall(r"<svg\b.*?</svg>", render_html(record), re.S)
    latency = svgs[2]
    assert "Latency percentiles" in latency
    clients, ms = tick_labels(latency), tick_labels(latency, "yaxis")
    assert {"1", "10", "100", "1,000"} <= set(clients), clients
    assert {"11", "12"} <= set(ms), ms
    every = [t for svg in svgs for t in tick_labels(svg) + tick_labels(svg, "yaxis")]
    assert every and not [t for t in every if "×" in t or "10^" in t or "mathdefault" in t], every
    assert "<tspan" not in "".join(svgs)  # an exponent would be a raised tspan


def test_a_model_line_never_stretches_the_x_axis_past_the_levels_measured() -> None:
    # issue 25: an N* of 107 315 drawn as a line stretched the axis to 100 000; N* is drawn only among the levels
    record = sample_record()
    fit = record.verdicts[0].usl
    assert fit is not None
    record.verdicts[0].usl = fit.model_copy(update={"n_star": 107_315.0})
    svg = re.findall(r"<svg\b.*?</svg>", render_html(record), re.S)[0]
    ticks = tick_numbers(svg)
    assert ticks and max(ticks) <= 1000, ticks  # the highest level measured is 1000
    assert "USL fit" in svg and "N* =" not in svg


def test_hostile_text_appears_only_escaped() -> None:
    record = sample_record(levels=(1, 10, 600, 1000), group=HOSTILE, error_sample=f"body: {HOSTILE}")
    record.scenario = record.scenario.model_copy(update={"name": HOSTILE})
    record.machine["hostname"] = HOSTILE
    record.verdicts[0].sentences = [f"peaked {HOSTILE}"]
    page = render_html(record)
    assert HOSTILE not in page
    assert "<script" not in page.lower()
    escaped = "&lt;script&gt;alert(1)&lt;/script&gt;"
    assert page.count(escaped) >= 6  # group heading, error sample, scenario, machine, verdict, title
    assert f"body: {escaped}" in page


def test_dollar_signs_in_group_names_do_not_break_the_plots() -> None:
    page = render_html(sample_record(levels=(1, 10, 100), group="$x^2$ group"))
    assert len(re.findall(r"<svg\b", page)) == 5


def test_latency_distribution_is_drawn_from_the_engines_percentiles() -> None:
    record = sample_record(levels=(1, 10, 100))
    g = record.steps[1].groups["main"]
    g.percentiles_ms = [(50.0, 51.0), (90.0, 91.0), (99.0, 100.0), (99.9, 100.9), (100.0, 101.0)]
    page = render_html(record)
    dist = re.findall(r"<svg\b.*?</svg>", page, re.S)[4]
    assert "Latency distribution per level" in dist
    assert len(re.findall(r"<svg\b", page)) == 5


def test_write_reports_writes_the_four_files(tmp_path: Path) -> None:
    record = sample_record(levels=(1, 10, 100))
    (tmp_path / "scenario.toml").write_text(f'name = "{HOSTILE}"\n')
    paths = write_reports(RunDir(tmp_path), record)
    assert [p.name for p in paths] == ["report.md", "report.html", "levels.csv", "series.csv"]
    assert all(p.is_file() and p.stat().st_size > 0 for p in paths)
    page = (tmp_path / "report.html").read_text()
    assert "name = &quot;&lt;script&gt;" in page
    assert not list(tmp_path.glob(".*.tmp"))


def test_fixed_work_runs_skip_the_concurrency_plots_and_empty_runs_render() -> None:
    page = render_html(fixed_work_record())
    svgs = re.findall(r"<svg\b.*?</svg>", page, re.S)
    assert len(svgs) == 2 and "Per-interval series" in svgs[0]
    assert "<h3>Per stage</h3>" in page and "<td>store</td>" in page
    empty = render_html(RunRecord(run_id="fresh", created_unix=0.0, scenario=scenario()))
    assert "No steps yet." in empty and "<svg" not in empty


def _line_end(svg: str, color: str) -> float:
    """Where the longest line drawn in `color` ends on the x axis (the plot's paths; the legend's sample of the line
    is a short one)."""
    paths = re.findall(rf'<path d="([^"]*)"[^>]*? stroke="{color}"', svg, re.S)
    longest = max(paths, key=lambda d: d.count("L"))
    return max(float(x) for x in re.findall(r"[ML](-?[\d.]+) ", longest))


def test_a_flat_curve_draws_no_model_turning_down_across_its_plateau() -> None:
    """issue 37: where the verdict says the USL has no N* (a pool, a plateau), the model is drawn only up to its
    own N*, not past it; a curve that turns down has it drawn over every level, its N* marked."""
    from knee.report import plots

    record = sample_record()  # levels 1 … 1000; the fit's N* is about 50
    fit = record.verdicts[0].usl
    assert fit is not None and fit.n_star is not None and 40 < fit.n_star < 60
    whole, flat = (plots.throughput(record, "main", fit, flat=f) for f in (False, True))
    measured = _line_end(whole, "#1f77b4")  # the succeeded rate (C0), to the highest level
    model, model_flat = _line_end(whole, "#ff7f0e"), _line_end(flat, "#ff7f0e")  # the USL fit (C1)
    assert model == pytest.approx(measured, abs=1.0) and "N* = " in whole
    assert model_flat < 0.8 * measured and "N* = " not in flat and "USL fit" in flat


def test_a_stage_of_several_steps_shows_their_highest_p50_and_p99() -> None:
    from knee.report.view.tables import stages_table

    record = fixed_work_record()
    again = record.steps[0].model_copy(deep=True, update={"index": 2})
    again.groups["main"].latency_ms.p50 = record.steps[0].groups["main"].latency_ms.p50 * 3
    record.steps.append(again)
    table = stages_table(record, "main")
    assert table is not None
    store = next(r for r in table.rows if r[0] == "store")
    assert store[6] == fmt.ms(again.groups["main"].latency_ms.p50)  # the first step's alone was shown
