"""knee.report.svgplot, the report's plotter: its axes' ticks, its lines' breaks, its text's escaping, its legend's
place and its ids; the report's own figures are checked through report.html (test_report_html, the browser's
layout check in test_report_layout)."""

from __future__ import annotations

import itertools
import math
import re

from knee.report.svgplot import Figure, plain, viridis
from svgaxes import tick_labels


def _figure(xs: list[float], ys: list[float], *, xlog: bool = False, ylog: bool = False, size=(9.5, 3.6)) -> str:
    fig = Figure(size)
    ax = fig.axes[0]
    ax.x.log, ax.y.log = xlog, ylog
    ax.plot(xs, ys, "o-", label="line")
    return fig.svg()


def test_linear_ticks_are_round_steps_inside_the_data() -> None:
    svg = _figure([1, 2, 3], [0.0, 20.6, 41.2])
    ys = [float(t.replace(",", "")) for t in tick_labels(svg, "yaxis")]
    step = ys[1] - ys[0]
    assert step in (2, 2.5, 5, 10) and all(math.isclose(b - a, step) for a, b in itertools.pairwise(ys)), ys
    assert ys[0] <= 0 and ys[-1] >= 40 and ys[-1] <= 45, ys
    assert tick_labels(_figure([0, 1], [0.0, 0.25]), "yaxis") == ["0.00", "0.05", "0.10", "0.15", "0.20", "0.25"]


def test_log_axes_label_decades_and_within_a_decade_plain_numbers() -> None:
    wide = _figure([1, 10, 100, 1000], [1, 2, 3, 4], xlog=True)
    assert {"1", "10", "100", "1,000"} <= set(tick_labels(wide, "xaxis"))
    narrow = _figure([1, 2, 3], [11.0, 12.2, 12.9], ylog=True)
    labels = tick_labels(narrow, "yaxis")
    assert {"11", "12"} <= set(labels) and not [t for t in labels if "e" in t or "×" in t], labels
    assert plain(1000) == "1,000" and plain(11.5) == "11.5" and plain(0.02) == "0.02"


def test_a_log_axis_of_less_than_two_decades_is_labelled_across_it() -> None:
    """A p99 from 25 to 320 ms: 50, 100 and 200 along the axis, not 100, 200 and 300 bunched at its top."""
    assert tick_labels(_figure([1, 2, 3], [25.0, 100.0, 320.0], ylog=True), "yaxis") == ["50", "100", "200"]


def test_tick_labels_never_crowd_each_other() -> None:
    """On a narrow figure, wide labels are thinned until each is a label's width from the next."""
    svg = _figure([0, 1_000_000], [0, 1], size=(3.0, 2.0))
    xs = [float(x) for x in re.findall(r'<text x="([\d.]+)"', svg.split('<g class="xaxis">')[1].split("</g>")[0])]
    labels = tick_labels(svg, "xaxis")[: len(xs)]
    assert len(xs) >= 2
    for (a, la), (b, lb) in itertools.pairwise(zip(xs, labels, strict=True)):
        assert b - a >= (len(la) + len(lb)) / 2 * 0.55 * 9, (labels, xs)


def test_a_missing_or_non_positive_value_breaks_the_line() -> None:
    svg = _figure([1, 2, 3, 4, 5], [1.0, math.nan, 3.0, 0.0, 5.0], ylog=True)
    (path,) = re.findall(r'<path d="([^"]*)" fill="none"', svg)
    assert path.count("M") == 3 and "L" not in path, path  # 1, 3 and 5 alone: NaN and 0 (on a log axis) break it
    assert len(re.findall(r"<circle ", svg)) == 3


def test_text_from_outside_is_escaped() -> None:
    fig = Figure((9.5, 3.6))
    ax = fig.axes[0]
    ax.plot([1, 2], [1, 2], label='<script>alert("x")</script> & $x^2$')
    ax.title = "<b>t</b>"
    ax.legend()
    svg = fig.svg()
    assert "<script>" not in svg and "<b>" not in svg
    assert "&lt;script&gt;alert(&quot;x&quot;)&lt;/script&gt; &amp; $x^2$" in svg and "&lt;b&gt;t&lt;/b&gt;" in svg


def test_the_legend_goes_where_the_lines_are_not() -> None:
    """A line along the top, left to right: "best" puts the legend in a lower corner."""
    fig = Figure((9.5, 3.6))
    ax = fig.axes[0]
    ax.plot(list(range(20)), [10.0] * 19 + [0.0], "o-", label="high")
    ax.legend("best")
    svg = fig.svg()
    box = re.search(r'<g class="legend">\s*<rect x="([\d.]+)" y="([\d.]+)"', svg)
    assert box and float(box[2]) > 259.2 / 2, box


def test_ids_are_the_figures_own_and_drawing_is_repeatable() -> None:
    a, b = _figure([1, 2], [1, 2]), _figure([1, 2], [2, 1])
    ids_a, ids_b = set(re.findall(r'id="([^"]+)"', a)), set(re.findall(r'id="([^"]+)"', b))
    assert ids_a and ids_b and not ids_a & ids_b
    assert _figure([1, 2], [1, 2]) == a


def test_viridis_runs_from_purple_to_yellow() -> None:
    assert viridis(0.0) == "#440154" and viridis(1.0) == "#fde725" and viridis(0.5) == "#21918c"
