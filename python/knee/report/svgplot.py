"""The report's plotter: lines, markers, shaded spans and labels on linear or logarithmic axes, written as SVG.

knee's figures are a few kinds of line plot. matplotlib drew them until its import (0.45 CPU-s) and a sweep's six
figures (0.3) were half of the CPU a short sweep spent, on the load machine, after its load (a two-level sweep of
1 s steps: 1.10 CPU-s with matplotlib, 0.54 with this; a report's figures now take a few milliseconds). The API
follows matplotlib's names (plot, twinx, axvspan, legend), so knee.report.plots reads as it did. Text stays text
(selectable, scaled with the page), every string is escaped, and a figure's ids derive from its content: two figures
on one page never share one, and one record draws the same bytes.
"""

from __future__ import annotations

import hashlib
import itertools
import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from html import escape

DPI = 72.0  # user units (points) per inch, as matplotlib's SVG
FONT = "DejaVu Sans, Verdana, Arial, sans-serif"
SIZE = 9.0  # the text's size in points: tick labels, axis labels, legends (a title is 1.2 times it)
_CHAR = 0.62  # a character's width in ems, a little over DejaVu Sans' digits (0.64) and lower case: for spacing text
_TICK, _PAD = 3.5, 2.0  # a tick's length and the gap to its label
GRID = "#d9d9d9"
PALETTE = ("#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd", "#8c564b", "#e377c2", "#7f7f7f", "#bcbd22", "#17becf")
_VIRIDIS = ((68, 1, 84), (59, 82, 139), (33, 145, 140), (94, 201, 98), (253, 231, 37))
_DASH = {"-": None, "--": (3.7, 1.6), ":": (1.0, 1.65), "-.": (6.4, 1.6, 1.0, 1.6)}
_MARKERS = "os^vdx."
Point = tuple[float, float]
Box = tuple[float, float, float, float]  # left, top, right, bottom
YMap = Callable[[float], float]  # a y value to its place on the page


def color(c: str | None) -> str:
    """matplotlib's cycle colours by name ("C0".."C9"), "grey", or any CSS colour as given."""
    if c is None:
        return PALETTE[0]
    if len(c) >= 2 and c[0] == "C" and c[1:].isdigit():
        return PALETTE[int(c[1:]) % len(PALETTE)]
    return {"grey": "#808080", "gray": "#808080"}.get(c, c)


def viridis(t: float) -> str:
    """The viridis colour map at `t` in [0, 1], interpolated between five of its colours."""
    t = min(1.0, max(0.0, t)) * (len(_VIRIDIS) - 1)
    i = min(int(t), len(_VIRIDIS) - 2)
    a, b = _VIRIDIS[i], _VIRIDIS[i + 1]
    return "#" + "".join(f"{round(x + (y - x) * (t - i)):02x}" for x, y in zip(a, b, strict=True))


def width_of(s: str, size: float = SIZE) -> float:
    return len(s) * _CHAR * size


def plain(x: float) -> str:
    """A log axis' label in a plain number: 1, 10, 1,000, 11.5, 0.02; never 10² or 1.2 × 10¹."""
    if x >= 1 and abs(x - round(x)) < 1e-9:
        return f"{x:,.0f}"
    return f"{x:,.4g}"


def _n(v: float) -> str:
    return f"{v:.2f}".rstrip("0").rstrip(".")


@dataclass
class _Line:
    xs: list[float]
    ys: list[float]
    dash: str | None  # a key of _DASH, or None: markers only
    marker: str | None
    color: str
    lw: float
    ms: float
    alpha: float
    label: str | None


@dataclass
class _Scale:
    log: bool = False
    lo: float | None = None  # set by the plot (None: from the data)
    hi: float | None = None
    ticks: list[tuple[float, str]] | None = None  # set by the plot (None: chosen here)

    def f(self, v: float) -> float:
        return math.log10(v) if self.log else v

    def usable(self, v: float | None) -> bool:
        return v is not None and math.isfinite(v) and (v > 0 or not self.log)

    def limits(self, values: list[float]) -> tuple[float, float]:
        """The axis' ends: the data's with a 5 % margin (in the axis' own scale), or what the plot set."""
        vs = [self.f(v) for v in values if self.usable(v)]
        lo, hi = (min(vs), max(vs)) if vs else (0.0, 1.0)
        if hi - lo < 1e-12:
            lo, hi = (
                (lo - 0.5, hi + 0.5) if self.log else (lo - max(abs(lo) * 0.05, 0.5), hi + max(abs(hi) * 0.05, 0.5))
            )
        pad = (hi - lo) * 0.05
        lo, hi = lo - pad, hi + pad
        if self.lo is not None and self.usable(self.lo):
            lo = self.f(self.lo)
        if self.hi is not None and self.usable(self.hi):
            hi = self.f(self.hi)
        return (lo, hi) if hi > lo else (lo, lo + 1.0)


def _linear_ticks(lo: float, hi: float, count: int) -> list[tuple[float, str]]:
    """Round ticks (steps of 1, 2, 2.5 or 5 times a power of ten) from lo to hi, about `count` of them."""
    raw = (hi - lo) / max(1, count)
    mag = 10.0 ** math.floor(math.log10(raw))
    step = next(m * mag for m in (1, 2, 2.5, 5, 10) if m * mag >= raw * (1 - 1e-9))
    decimals = max(0, -math.floor(math.log10(step) + 1e-9)) + (1 if round(step / mag, 6) == 2.5 else 0)
    steps = range(math.ceil(lo / step - 1e-9), math.floor(hi / step + 1e-9) + 1)
    return [(i * step, f"{i * step:,.{decimals}f}" if i else f"{0:.{decimals}f}") for i in steps]


def _log_ticks(lo: float, hi: float, count: int) -> list[tuple[float, str]]:
    """Ticks of a log axis whose ends are lo and hi (their logarithms): the decades (every n-th when crowded), with
    2 and 5 between them when there are few. With fewer than two decades in view: 1, 2 and 5 times a power of ten,
    or every whole multiple of one, if that gives three ticks or more and no more than `count`; else round linear
    ticks (11, 11.5, 12 within a decade)."""
    e0, e1 = math.ceil(lo - 1e-9), math.floor(hi + 1e-9)
    if e1 - e0 + 1 >= 2:
        every = max(1, math.ceil((e1 - e0 + 1) / max(1, count)))
        decades = [10.0**e for e in range(e0, e1 + 1) if e % every == 0]
        if e1 - e0 + 1 <= count // 3:
            decades += [m * 10.0**e for e in range(e0 - 1, e1 + 1) for m in (2, 5) if lo <= math.log10(m) + e <= hi]
        return [(v, plain(v)) for v in sorted(decades)]
    for subs in ((1, 2, 5), range(1, 10)):
        ticks = [m * 10.0**e for e in range(e0 - 1, e1 + 2) for m in subs if lo <= math.log10(m) + e <= hi]
        if 3 <= len(ticks) <= count:
            return [(v, plain(v)) for v in ticks]
    return [(v, plain(v)) for v, _ in _linear_ticks(10**lo, 10**hi, count) if v > 0]


@dataclass
class Axes:
    """One plotting area; `twinx` gives a second y axis on the right sharing its x."""

    x: _Scale = field(default_factory=_Scale)
    y: _Scale = field(default_factory=_Scale)
    lines: list[_Line] = field(default_factory=list)
    spans: list[tuple[float, float, str, float]] = field(default_factory=list)
    vlines: list[tuple[float, str, str, float]] = field(default_factory=list)
    notes: list[tuple[str, float, float, str, float, float]] = field(default_factory=list)
    xlabel: str = ""
    ylabel: str = ""
    title: str = ""
    grid: bool = True
    legend_at: tuple[str, float, str | None, int] | None = None
    right: Axes | None = None
    shares_x: Axes | None = None  # a twin's or a lower panel's owner of the x axis
    _cycle: int = 0

    def plot(self, xs: Sequence[float], ys: Sequence[float | None], fmt: str = "-", *, color: str | None = None,
             lw: float = 1.5, ms: float = 6.0, alpha: float = 1.0, label: str | None = None) -> None:  # fmt: skip
        """A line through (xs, ys) in matplotlib's format ("o-": circles joined; "s--", "^:", "x": markers only);
        a None, NaN or (on a log axis) non-positive y breaks the line there."""
        marker = fmt[0] if fmt and fmt[0] in _MARKERS else None
        dash = fmt[1:] if marker else fmt
        if color is None:
            color, self._cycle = f"C{self._cycle}", self._cycle + 1
        ms = ms / 3 if marker == "." else ms
        ys_ = [math.nan if y is None else float(y) for y in ys]
        self.lines.append(_Line([float(x) for x in xs], ys_, dash or None, marker, color, lw, ms, alpha, label))

    def axvline(self, x: float, *, color: str, ls: str = "-", lw: float = 1.0, label: str | None = None) -> None:
        self.vlines.append((x, color, ls, lw))
        if label:
            self.lines.append(_Line([], [], ls, None, color, lw, 0, 1.0, label))

    def axvspan(self, lo: float, hi: float, *, color: str, alpha: float, label: str | None = None) -> None:
        self.spans.append((lo, hi, color, alpha))
        if label:
            self.lines.append(_Line([], [], "span", None, color, 8.0, 0, alpha, label))

    def annotate(self, text: str, at: Point, *, dy: float = 3.0, fontsize: float = 7.0, color: str = "grey") -> None:
        """`text` above the point `at` (data units), `dy` points up; dropped where it would cover another note."""
        self.notes.append((text, at[0], at[1], color, fontsize, dy))

    def set_xlim(self, lo: float | None, hi: float | None = None) -> None:
        self.x.lo, self.x.hi = lo, hi

    def set_ylim(self, lo: float | None, hi: float | None = None) -> None:
        self.y.lo, self.y.hi = lo, hi

    def set_xticks(self, values: Sequence[float], labels: Sequence[str]) -> None:
        self.x.ticks = list(zip(values, labels, strict=True))

    def twinx(self) -> Axes:
        self.right = Axes(grid=False, shares_x=self)
        return self.right

    def legend(self, loc: str = "best", *, fontsize: float = SIZE, title: str | None = None, ncol: int = 1) -> None:
        self.legend_at = (loc, fontsize, title, ncol)


class Figure:
    """Panels in `rows` and `cols`. With `sharex` (one column), the panels share the x axis the lowest labels;
    otherwise each has its own, labelled under it."""

    def __init__(self, size: tuple[float, float], rows: int = 1, cols: int = 1, sharex: bool = True) -> None:
        self.width, self.height = size[0] * DPI, size[1] * DPI
        self.rows, self.cols, self.sharex = rows, cols, sharex and cols == 1
        self.axes = [Axes() for _ in range(rows * cols)]
        for a in self.axes[1:] if self.sharex else []:
            a.shares_x = self.axes[0]

    def svg(self) -> str:
        # the margins (left, right, bottom, top) and the gaps between panels, in inches: the tick labels and the
        # axis label left of a panel (and right of it, beside a second y axis), the title above, the x label below
        left, right, bottom, top = 0.8, 0.8 if any(a.right for a in self.axes) else 0.15, 0.5, 0.3
        hgap = 0.3 if self.sharex else 0.85
        wgap = left + right
        w = (self.width - (left + right + wgap * (self.cols - 1)) * DPI) / self.cols
        h = (self.height - (top + bottom + hgap * (self.rows - 1)) * DPI) / self.rows
        out: list[str] = []
        shared = self.axes[0].x.limits([v for a in self.axes for v in _xs(a)]) if self.sharex else None
        for i, a in enumerate(self.axes):
            row, col = divmod(i, self.cols)
            box = ((left + col * wgap) * DPI + col * w, (top + row * hgap) * DPI + row * h, w, h)
            scale = self.axes[0].x if self.sharex else a.x
            xlim = shared or a.x.limits(_xs(a))
            _Draw(out, a, box, xlim, scale, last=row == self.rows - 1 or not self.sharex, clip=f"@ID@-{i}").all()
        body = "\n".join(out)
        tag = "k" + hashlib.sha1(body.encode()).hexdigest()[:10]
        W, H = _n(self.width), _n(self.height)
        return (
            f'<svg xmlns="http://www.w3.org/2000/svg" width="{W}pt" height="{H}pt" viewBox="0 0 {W} {H}" '
            f'font-family="{FONT}" font-size="{_n(SIZE)}">\n'
            f'<rect width="{W}" height="{H}" fill="#fff"/>\n{body.replace("@ID@", tag)}\n</svg>'
        )


def _xs(a: Axes) -> list[float]:
    """What the x axis spans for `a` (and its twin): their lines' points, shaded spans and vertical lines."""
    points = [x for ln in a.lines for x, y in zip(ln.xs, ln.ys, strict=True) if a.y.usable(y)]
    own = points + [x for lo, hi, *_ in a.spans for x in (lo, hi)] + [x for x, *_ in a.vlines]
    return own + (_xs(a.right) if a.right else [])


@dataclass
class _Draw:
    """One panel drawn into `out`: its box on the page (x, y, width, height) and the shared x axis' ends and scale."""

    out: list[str]
    a: Axes
    box: tuple[float, float, float, float]
    xlim: tuple[float, float]
    xs: _Scale
    last: bool  # the lowest panel, which labels the x axis
    clip: str  # the id of its clip path

    def __post_init__(self) -> None:
        x0, y0, w, h = self.box
        self.x1, self.y1 = x0 + w, y0 + h
        self.taken: list[Box] = []  # the notes drawn in the panel, which a legend keeps off

    def px(self, v: float) -> float:
        lo, hi = self.xlim
        return self.box[0] + (self.xs.f(v) - lo) / (hi - lo) * self.box[2]

    def py(self, s: _Scale, lim: tuple[float, float]) -> YMap:
        y0, h = self.box[1], self.box[3]
        return lambda v: y0 + h - (s.f(v) - lim[0]) / (lim[1] - lim[0]) * h

    def all(self) -> None:
        a, right = self.a, self.a.right
        x0, y0, w, h = self.box
        ylim = a.y.limits([y for ln in a.lines for y in ln.ys])
        ry = right.y.limits([y for ln in right.lines for y in ln.ys]) if right else None
        py = self.py(a.y, ylim)
        xticks = self.xs.ticks or self.ticks(self.xs, self.xlim, w, horizontal=True)
        yticks = a.y.ticks or self.ticks(a.y, ylim, h, horizontal=False)
        clip = self.clip
        self.out += [f'<clipPath id="{clip}">{_el("rect", x=x0, y=y0, width=w, height=h)}</clipPath>']
        self.out += [f'<g clip-path="url(#{clip})">']
        for lo, hi, c, alpha in a.spans:
            p, q = sorted((self.px(lo), self.px(hi)))
            self.out += [_el("rect", x=p, y=y0, width=q - p, height=h, fill=color(c), fill_opacity=alpha)]
        if a.grid:
            self.out += [_el("path", d=self.vertical(self.px(v)), stroke=GRID, stroke_width=0.8) for v, _ in xticks]
            self.out += [_el("path", d=f"M{_n(x0)} {_n(py(v))}H{_n(self.x1)}", stroke=GRID, stroke_width=0.8)
                         for v, _ in yticks]  # fmt: skip
        for x, c, ls, lw in a.vlines:
            self.out += [_el("path", d=self.vertical(self.px(x)), stroke=color(c), stroke_width=lw, **_dash(ls, lw))]
        for axes, lim in ((a, ylim), (right, ry)):
            if axes is not None and lim is not None:
                self.out += [s for ln in axes.lines for s in self.line(ln, self.py(axes.y, lim), axes.y)]
        self.out += ["</g>", _el("rect", x=x0, y=y0, width=w, height=h, fill="none", stroke="#000", stroke_width=0.8)]
        self.xaxis(xticks)
        self.yaxis("yaxis", yticks, py, at=x0, side=-1, label=a.ylabel)
        if right is not None and ry is not None:
            rticks = self.ticks(right.y, ry, h, horizontal=False)
            self.yaxis("yaxis right", rticks, self.py(right.y, ry), at=self.x1, side=1, label=right.ylabel)
        if a.title:
            self.out += [_text(x0 + w / 2, y0 - 6, a.title, "middle", font_size=SIZE * 1.2)]
        for text, x, y, c, size, dy in a.notes:
            self.note(text, self.px(x), py(y) - dy, c, size)
        if a.legend_at:
            self.legend(a, ylim, ry)

    def vertical(self, x: float) -> str:
        return f"M{_n(x)} {_n(self.box[1])}V{_n(self.y1)}"

    def ticks(self, s: _Scale, lim: tuple[float, float], room: float, horizontal: bool) -> list[tuple[float, str]]:
        """As many ticks as fit: their labels a label's width (x) or 1.6 lines (y) apart."""
        ticks: list[tuple[float, str]] = []
        for count in range(max(2, min(9, int(room / (SIZE * (3 if horizontal else 2))))), 1, -1):
            ticks = (_log_ticks if s.log else _linear_ticks)(lim[0], lim[1], count)
            ticks = [(v, t) for v, t in ticks if lim[0] - 1e-9 <= s.f(v) <= lim[1] + 1e-9]
            at = [(s.f(v) - lim[0]) / (lim[1] - lim[0]) * room for v, _ in ticks]
            need = [(width_of(t) + 6 if horizontal else SIZE * 1.6) for _, t in ticks]
            if all(b - a >= (n + m) / 2 for a, b, n, m in zip(at, at[1:], need, need[1:], strict=False)):
                return ticks
        return ticks[:: max(1, len(ticks) - 1)]

    def xaxis(self, ticks: list[tuple[float, str]]) -> None:
        o = ['<g class="xaxis">']
        for v, label in ticks:
            x = self.px(v)
            o += [_el("path", d=f"M{_n(x)} {_n(self.y1)}v{_TICK}", stroke="#000", stroke_width=0.8)]
            if self.last:
                o += [_text(x, self.y1 + _TICK + _PAD + SIZE, label, "middle")]
        label = self.a.xlabel or (self.a.shares_x.xlabel if self.a.shares_x else "")
        if self.last and label:
            o += [_text(self.box[0] + self.box[2] / 2, self.y1 + _TICK + _PAD + SIZE * 2.4, label, "middle")]
        self.out += [*o, "</g>"]

    def yaxis(self, cls: str, ticks: list[tuple[float, str]], py: YMap, *, at: float, side: int, label: str) -> None:
        """A y axis at x = `at`, its ticks and labels on the left (`side` -1) or the right (1)."""
        o = [f'<g class="{cls}">']
        for v, text in ticks:
            o += [_el("path", d=f"M{_n(at)} {_n(py(v))}h{_n(side * _TICK)}", stroke="#000", stroke_width=0.8)]
            o += [_text(at + side * (_TICK + _PAD), py(v) + SIZE * 0.35, text, "end" if side < 0 else "start")]
        if label:
            # rotated to read upwards, the label's letters lie left of its baseline (x): clear of the tick labels
            widest = max((width_of(t) for _, t in ticks), default=0.0)
            x = max(at + side * (_TICK + _PAD + widest + 3) + (SIZE * 0.8 if side > 0 else 0.0), SIZE * 0.8 + 1)
            y = self.box[1] + self.box[3] / 2
            o += [
                f'<text transform="translate({_n(x)} {_n(y)}) rotate(-90)" text-anchor="middle">{escape(label)}</text>'
            ]
        self.out += [*o, "</g>"]

    def line(self, ln: _Line, py: YMap, s: _Scale) -> list[str]:
        """The line's path (broken where a value is missing) and its markers."""
        pts = [
            (self.px(x), py(y)) if s.usable(y) and self.xs.usable(x) else None
            for x, y in zip(ln.xs, ln.ys, strict=True)
        ]
        c, o = color(ln.color), []
        if ln.dash:
            d, pen = [], "M"
            for p in pts:
                if p is not None:
                    d.append(f"{pen}{_n(p[0])} {_n(p[1])}")
                pen = "M" if p is None else "L"
            if d:
                opacity = {"stroke_opacity": ln.alpha} if ln.alpha < 1 else {}
                style = {"stroke_linejoin": "round", **opacity, **_dash(ln.dash, ln.lw)}
                o += [_el("path", d="".join(d), fill="none", stroke=c, stroke_width=ln.lw, **style)]
        if ln.marker:
            o += [_marker(ln.marker, p, ln.ms, c) for p in pts if p is not None]
        return o

    def note(self, text: str, x: float, y: float, c: str, size: float) -> None:
        w = width_of(text, size)
        box = (x - w / 2, y - size, x + w / 2, y)
        if not any(_overlap(box, b) for b in self.taken):
            self.taken.append(box)
            self.out += [_text(x, y, text, "middle", font_size=size, fill=color(c))]

    def legend(self, a: Axes, ylim: tuple[float, float], ry: tuple[float, float] | None) -> None:
        """The labelled lines of both y axes in a box at `loc`; "best": where it covers the fewest of their points
        and no note."""
        assert a.legend_at is not None
        loc, size, title, ncol = a.legend_at
        entries = [ln for axes in (a, a.right) if axes for ln in axes.lines if ln.label]
        if not entries:
            return
        rows = math.ceil(len(entries) / ncol)
        line_h, handle, pad = size * 1.45, size * 2.0, size * 0.5
        cols = [c for c in (entries[i * rows : (i + 1) * rows] for i in range(ncol)) if c]
        col_w = [handle + size * 0.6 + max(width_of(ln.label or "", size) for ln in col) for col in cols]
        bw, bh = sum(col_w) + pad * (len(col_w) + 1), line_h * (rows + (1 if title else 0)) + pad
        x0, y0, w, h = self.box
        left, right, top, bottom = x0 + 6, self.x1 - 6 - bw, y0 + 6, self.y1 - 6 - bh
        spots = {
            "upper right": (right, top), "upper left": (left, top), "lower left": (left, bottom),
            "lower right": (right, bottom), "center right": (right, y0 + (h - bh) / 2),
            "upper center": (x0 + (w - bw) / 2, top),
        }  # fmt: skip
        if loc == "best":
            points = self.points(a, ylim) + (self.points(a.right, ry) if a.right and ry else [])
            loc = min(
                spots, key=lambda k: _covered((*spots[k], spots[k][0] + bw, spots[k][1] + bh), points, self.taken)
            )
        bx, by = spots[loc]
        o = ['<g class="legend">']
        o += [_el("rect", x=bx, y=by, width=bw, height=bh, rx=2, fill="#fff", fill_opacity=0.8, stroke="#ccc",
                  stroke_width=0.8)]  # fmt: skip
        ty = by + pad / 2 + (line_h if title else 0.0)
        if title:
            o += [_text(bx + bw / 2, ty - line_h * 0.3, title, "middle", font_size=size)]
        cx = bx + pad
        for col, cw in zip(cols, col_w, strict=True):
            for r, ln in enumerate(col):
                mid = ty + line_h * (r + 0.5)
                o += self.handle(ln, cx, mid, handle)
                o += [_text(cx + handle + size * 0.6, mid + size * 0.35, ln.label or "", font_size=size)]
            cx += cw + pad
        self.out += [*o, "</g>"]

    def handle(self, ln: _Line, x: float, y: float, length: float) -> list[str]:
        """A legend entry's sample of its line: the line's dash and marker, or a shaded span's colour."""
        c = color(ln.color)
        if ln.dash == "span":
            return [_el("rect", x=x, y=y - 4, width=length, height=8, fill=c, fill_opacity=ln.alpha)]
        o = []
        if ln.dash:
            o += [
                _el("path", d=f"M{_n(x)} {_n(y)}h{_n(length)}", stroke=c, stroke_width=ln.lw, **_dash(ln.dash, ln.lw))
            ]
        if ln.marker:
            o += [_marker(ln.marker, (x + length / 2, y), min(ln.ms, 7.0), c)]
        return o

    def points(self, a: Axes, lim: tuple[float, float]) -> list[Point]:
        """The axes' lines as points on the page, with points between a line's vertices: what a legend covers."""
        py, out = self.py(a.y, lim), []
        for ln in a.lines:
            usable = [(x, y) for x, y in zip(ln.xs, ln.ys, strict=True) if a.y.usable(y) and self.xs.usable(x)]
            pts = [(self.px(x), py(y)) for x, y in usable]
            out += pts
            if ln.dash:
                out += [(p[0] + (q[0] - p[0]) * k / 4, p[1] + (q[1] - p[1]) * k / 4) for p, q in itertools.pairwise(pts)
                        for k in (1, 2, 3)]  # fmt: skip
        return out


def _covered(box: Box, points: list[Point], notes: list[Box]) -> int:
    inside = sum(1 for x, y in points if box[0] <= x <= box[2] and box[1] <= y <= box[3])
    return inside + 1000 * sum(1 for b in notes if _overlap(box, b))


def _overlap(a: Box, b: Box) -> bool:
    return a[0] < b[2] and b[0] < a[2] and a[1] < b[3] and b[1] < a[3]


def _attrs(**attrs: float | str) -> str:
    """Attributes, each after a space: numbers to two decimals, text escaped, `fill_opacity` written fill-opacity."""
    return "".join(
        f' {k.replace("_", "-")}="{_n(v) if isinstance(v, float | int) else escape(v)}"' for k, v in attrs.items()
    )


def _el(tag: str, **attrs: float | str) -> str:
    """An empty element."""
    return f"<{tag}{_attrs(**attrs)}/>"


def _text(x: float, y: float, s: str, anchor: str = "start", **attrs: float | str) -> str:
    return f"<text{_attrs(x=x, y=y, text_anchor=anchor, **attrs)}>{escape(s)}</text>"


def _dash(ls: str | None, lw: float) -> dict[str, str]:
    pattern = _DASH.get(ls or "-")
    return {"stroke_dasharray": ",".join(_n(d * lw) for d in pattern)} if pattern else {}


def _marker(m: str, p: Point, ms: float, c: str) -> str:
    x, y, r = p[0], p[1], ms / 2
    if m in "o.":
        return _el("circle", cx=x, cy=y, r=r, fill=c)
    if m == "x":
        d = f"M{_n(x - r)} {_n(y - r)}l{_n(2 * r)} {_n(2 * r)}M{_n(x - r)} {_n(y + r)}l{_n(2 * r)} {_n(-2 * r)}"
        return _el("path", d=d, stroke=c, stroke_width=1.2)
    shape = {
        "s": [(-r, -r), (r, -r), (r, r), (-r, r)],
        "^": [(0, -r), (r, r), (-r, r)],
        "v": [(0, r), (r, -r), (-r, -r)],
        "d": [(0, -r), (r * 0.6, 0), (0, r), (-r * 0.6, 0)],
    }[m]
    return _el("path", d="M" + "L".join(f"{_n(x + dx)} {_n(y + dy)}" for dx, dy in shape) + "Z", fill=c)
