"""`levels = "auto"`: the search that picks a sweep's next level from the levels measured so far.

The search is a pure function of what was measured: `next_level(points, config)` looks at every level so
far (pooled, in any order) and says which level to measure next and why, or that the search is done and
why. Nothing else is kept, so a resumed sweep continues its search from run.json's steps alone, and a
level measured twice is simply pooled.

Two phases, as a person would do it by hand but without the guessing:

- **Ramp.** From `start`, each level is `factor` times the last (at least one more; `factor`² while the rate
  grows in proportion to the level, where a level in between would teach nothing), until a level is bad
  (failures or hung operations above the onset, the SLO broken, an open loop saturated, or a collapse), `max` is
  reached, or, without a `max`, the rate has stopped growing over two doublings (a plateau or a fall). A first
  level already bad is followed by lower ones until one is good; a bound from the lowest level possible ends no ramp.
- **Refine.** Each located point gets a bracket, the highest good level below and the lowest bad level at or
  above, and the search narrows it until it is narrower than the precision (or no level lies between), in this
  order: the saturation (open loop), the error onset, the capacity under the SLO, the peak, and the collapse when
  the ramp reached one. A bracket is bisected at its geometric middle when the precision is a share of the level,
  except where its bad end measures the point itself (`_guided`: a limit's successes in service, an open loop's
  achieved rate). The peak: when the curve turns down past it and the USL fits the levels without errors, one
  level at the fit's N* (a USL hill is too flat near its top for rates alone to place it); else the wider side of
  the highest rate is bisected (not the side below it when the rate grew in proportion up to it: a limit reached
  at full speed), and a flat top becomes a plateau whose start is bisected instead.

A plan can never run forever: `max`, `max_steps` and the time `budget` each end it, and the reason says which.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Literal

from knee.analysis.levels import COLLAPSE_FAILURES, COLLAPSE_RATE
from knee.analysis.precision import within_noise
from knee.analysis.uslfit import fit_usl
from knee.errors import UserError

USL_GUIDE_POINTS = 4  # levels without errors before the USL fit guides the peak's search
USL_GUIDE_R2 = 0.9  # and how well it must fit them

Kind = Literal["start", "ramp", "saturation", "onset", "slo", "peak", "plateau", "collapse"]


@dataclass(frozen=True)
class Point:
    """One measured level, pooled over its steps."""

    level: float
    rate: float  # successful operations per measured second
    failure_ratio: float = 0.0  # (failed + hung) / completed
    hung: int = 0
    noise: float = 0.0  # the rate's half-width of its confidence interval (/s); 0 when unknown
    slo_ok: bool | None = None  # None without an SLO
    saturated: bool = False  # an open loop that did not keep up with the offered rate (docs/analysis.md)
    busy: float = 0.0  # successful operations in service on average (rate × their mean latency): 0 when unknown


@dataclass(frozen=True)
class Config:
    start: float = 1
    max: float | None = None
    precision: float = 0.10  # a share of the level when `relative`, else in the level's unit
    relative: bool = True
    resolution: float = 1.0  # the finest step: one client (or 1/s for rates)
    factor: float = 2.0
    onset: float = 0.001  # the failure ratio above which errors have started (DESIGN.md: 0.1 %)
    noise: float = 0.05  # rates within this share of each other are the same when a point has no noise figure
    max_steps: int = 40
    budget_s: float | None = None  # total time for the search, with `step_s` the time one level takes
    integer: bool = True  # client counts are whole; rates need not be
    open_loop: bool = False  # the levels are offered rates: locate saturation, onset and SLO, not a peak
    at_least: float | None = None  # a level the ramp reaches unless a bound or `max` comes first (the SLO's min)


@dataclass(frozen=True)
class Next:
    level: float
    kind: Kind
    reason: str


@dataclass(frozen=True)
class Done:
    reason: str


@dataclass(frozen=True)
class Bracket:
    """A located point: the highest level tried below it (`below`, None when none was) and the lowest at or above
    it (`at`)."""

    below: float | None
    at: float


def _fmt(level: float) -> str:
    return f"{level:g}"


class _View:
    """The measured points in order of level, with the analysis the search needs."""

    def __init__(self, points: Sequence[Point], config: Config) -> None:
        self.c = config
        self.points = sorted(points, key=lambda p: p.level)
        self.levels = [p.level for p in self.points]

    def width_ok(self, lo: float, hi: float) -> bool:
        """True when [lo, hi] is narrower than the precision asks (a share of `lo`, or an absolute width), or no
        level lies strictly between: a point between 20 and 22 clients is not yet known to 10 %, one between 20
        and 21 is."""
        if self.mid(lo, hi) is None:
            return True
        return hi - lo <= self.c.resolution or hi - lo < self.tolerance(lo)

    def tolerance(self, level: float) -> float:
        """The precision at `level`: a share of it, or a width in the level's unit."""
        return self.c.precision * level if self.c.relative else self.c.precision

    def snap(self, level: float) -> float:
        """The measurable level nearest `level`: a whole client, or a multiple of the resolution."""
        return float(round(level)) if self.c.integer else round(level / self.c.resolution) * self.c.resolution

    def closing(self, end: float, *, up: bool) -> float:
        """The measurable level farthest from `end` that is still within the precision of it: above `end` (`up`,
        the bracket's good end) or below it (its bad end). Measured and found on the other side, it closes the
        bracket."""
        r, p = self.c.resolution, self.c.precision
        if up:  # the highest u with u - end < the precision of end
            edge = end + self.tolerance(end)
            return max(end + r, (math.ceil(edge / r) - 1) * r)
        # the lowest u with end - u < the precision of u
        edge = end / (1 + p) if self.c.relative else end - p
        return min(end - r, (math.floor(edge / r) + 1) * r)

    def mid(self, lo: float, hi: float) -> float | None:
        """A level strictly between lo and hi, not measured yet; None when there is none. With a precision that
        is a share of the level, the middle is geometric (√(lo·hi)): a bracket is narrow enough when hi/lo is, and
        halving that ratio halves it fastest (256…512 to 10 % in 3 levels: 362, 304, 279; the arithmetic middle
        takes 4)."""
        middle = (lo * hi) ** 0.5 if self.c.relative and lo > 0 else (lo + hi) / 2
        m = self.snap(middle)
        if not lo < m < hi:
            return None
        return m

    # --- what each level is

    def highest(self) -> Point | None:
        """The highest rate measured, errors or not (a collapse and a stop in growth are measured from it)."""
        return max(self.points, key=lambda p: p.rate, default=None)

    def peak(self) -> Point | None:
        """The peak, as the verdict has it: the highest rate among the levels without errors (else the highest)."""
        clean = [p for p in self.points if not self.failing(p)]
        return max(clean, key=lambda p: p.rate, default=None) or self.highest()

    def same(self, a: Point, b: Point) -> bool:
        """The two rates are within noise of each other (the verdict's test, analysis.precision)."""
        return within_noise(a.rate, a.noise, b.rate, b.noise, self.c.noise)

    def failing(self, p: Point) -> bool:
        """Failed or hung above the onset (hung ones are in the ratio): the verdict's test. One hung operation in
        1 600 stopped the ramp while the verdict said no errors."""
        return p.failure_ratio > self.c.onset

    def collapsed(self, p: Point) -> bool:
        top = self.highest()
        if top is None or p.level <= top.level:
            return False
        return p.failure_ratio > COLLAPSE_FAILURES or (top.rate > 0 and p.rate < COLLAPSE_RATE * top.rate)

    def bad(self, p: Point) -> bool:
        return self.failing(p) or p.slo_ok is False or p.saturated or self.collapsed(p)

    def stopped_growing(self) -> bool:
        """The rate has not grown over the last two doublings: the highest level is at least `factor`² times the
        lowest level whose rate is within noise of the highest rate (on a flat top, the noise's highest rate moved
        up a doubling at a time and kept the ramp going to 1 024 clients for a pool of 16)."""
        top, last = self.highest(), self.points[-1]
        if top is None:
            return False
        first = next(p for p in self.points if p is top or (p.level < top.level and self.same(p, top)))
        return last.level >= first.level * self.c.factor**2

    # --- brackets

    def first_where(self, bad: Callable[[Point], bool]) -> Bracket | None:
        """The bracket of the lowest level where `bad` holds."""
        below: float | None = None
        for p in self.points:
            if bad(p):
                return Bracket(below, p.level)
            below = p.level
        return None

    def onset(self) -> Bracket | None:
        return self.first_where(self.failing)

    def saturation(self) -> Bracket | None:
        return self.first_where(lambda p: p.saturated)

    def slo(self) -> Bracket | None:
        return self.first_where(lambda p: p.slo_ok is False)

    def collapse(self) -> Bracket | None:
        top = self.highest()
        if top is None:
            return None
        below: float | None = None
        for p in self.points:
            if p.level > top.level and self.collapsed(p):
                return Bracket(below, p.level)
            below = p.level
        return None

    def plateau_start(self) -> Bracket | None:
        """The lowest level whose rate is within noise of the peak's, when the top is flat: the level above the peak
        and the highest level measured are both within noise of it (the rate stays up, as a fixed pool's does), and
        the flat levels without errors span at least a doubling; None when the peak is a point or a hill."""
        top = self.peak()
        if top is None:
            return None
        i = self.points.index(top)
        upper = self.points[i + 1] if i + 1 < len(self.points) else None
        if upper is None or not self.same(upper, top) or not self.same(self.points[-1], top):
            return None
        j = i
        while j > 0 and self.same(self.points[j - 1], top):
            j -= 1
        # Flat over at least a doubling without errors (a pool's rate stays up while its queue grows); a top that
        # is flat only because the levels past it fail (a connection limit) is a peak at the limit.
        flat = [p.level for p in self.points[j:] if not self.failing(p) and self.same(p, top)]
        if not flat or max(flat) < self.points[j].level * 2:
            return None
        return Bracket(self.points[j - 1].level if j > 0 else None, self.points[j].level)


def brackets(points: Sequence[Point], config: Config | None = None) -> dict[str, Bracket]:
    """The located points of these measurements, each with its bracket: `onset`, `slo`, `collapse`, and `plateau`
    (a flat top's start) or `peak` (with `below` the next level down)."""
    v = _View(points, config or Config())
    out: dict[str, Bracket] = {}
    for name, b in (("saturation", v.saturation()), ("onset", v.onset()), ("slo", v.slo()), ("collapse", v.collapse())):
        if b is not None:
            out[name] = b
    if v.c.open_loop:
        return out
    plateau = v.plateau_start()
    top = v.peak()
    if plateau is not None:
        out["plateau"] = plateau
    elif top is not None:
        i = v.points.index(top)
        out["peak"] = Bracket(v.points[i - 1].level if i > 0 else None, top.level)
    return out


def next_level(points: Sequence[Point], config: Config, *, spent_s: float = 0.0, step_s: float = 0.0) -> Next | Done:
    """The next level to measure and why, or why the search is done."""
    c = config
    if not points:
        return Next(c.start, "start", f"the search starts at {_fmt(c.start)}")
    if len(points) >= c.max_steps:
        return Done(f"the search reached its cap of {c.max_steps} levels")
    if c.budget_s is not None and spent_s + step_s > c.budget_s:
        return Done(f"the search's budget ({c.budget_s:g} s) would be passed by another level")
    v = _View(points, c)
    down = _below_the_first(v)
    if down is not None:
        return down
    last = v.points[-1]
    bad_seen = any(_ends_the_ramp(v, p) for p in v.points)
    at_max = c.max is not None and last.level >= c.max

    short = c.at_least is not None and last.level < c.at_least  # the SLO's min_clients not measured yet
    # errors below the SLO's own limit bound nothing it asks: the ramp goes on to its min
    held = short and not any(p.slo_ok is False or p.saturated or v.collapsed(p) for p in v.points)
    if not at_max and (held or (not bad_seen and (short or not (c.max is None and v.stopped_growing())))):
        return _ramp(v, last, "no bound yet" if not short else f"no bound yet, and the SLO asks {_fmt(c.at_least)}")
    steps = (_saturation, _onset, _slo) if c.open_loop else (_onset, _slo, _peak, _collapse)
    for step in steps:
        found = step(v)
        if found is not None:
            return found
    return Done(_done_reason(v, at_max))


def _below_the_first(v: _View) -> Next | None:
    """The lowest level measured is already past a bound (errors, the SLO broken, an open loop saturated: a search
    started high, `start = 50` for errors from 30): a level `factor` times lower, down to the resolution, so that
    the bound has a good level below it and can be narrowed."""
    low = v.points[0]
    bounds: list[tuple[bool, Kind, str]] = [
        (v.failing(low), "onset", "errors"),
        (low.slo_ok is False, "slo", "the SLO broken"),
        (low.saturated, "saturation", "saturated"),
    ]
    past = next(((kind, what) for bad, kind, what in bounds if bad), None)
    level = max(v.c.resolution, min(v.snap(low.level / v.c.factor), low.level - v.c.resolution))
    if past is None or low.level <= v.c.resolution or level >= low.level:
        return None
    return Next(
        level,
        past[0],
        f"{_fmt(low.level)}, the lowest level so far, is past a bound ({past[1]}): down to {_fmt(level)}",
    )


def _ends_the_ramp(v: _View, p: Point) -> bool:
    """`p` is bad, by a bound the lowest level measured does not share: errors (or the SLO broken) from the lowest
    level the search can measure bound nothing, so the ramp goes on to the peak and the collapse (a service with
    0.3 % of errors at every level was searched at one level and said located)."""
    low = v.points[0]
    if low.level > v.c.resolution or not v.bad(low):
        return v.bad(p)
    return (
        v.collapsed(p)
        or (p.saturated and not low.saturated)
        or (v.failing(p) and not v.failing(low))
        or (p.slo_ok is False and low.slo_ok is not False)
    )


def _ramp(v: _View, last: Point, why: str) -> Next | Done:
    c = v.c
    linear = _in_proportion(v)
    up = last.level * (c.factor**2 if linear else c.factor)
    if linear:
        why = f"{why}; the rate grew in proportion to the level, so two steps at once"
    up = float(max(round(up), last.level + 1)) if c.integer else up
    if c.max is not None:
        up = min(up, c.max)
    if up <= last.level:
        return Done(_done_reason(v, True))
    return Next(up, "ramp", f"ramp: {_fmt(up)} after {_fmt(last.level)} ({why})")


def _in_proportion(v: _View) -> bool:
    """The last ramp step's rate grew in proportion to its level, within noise: the curve is still linear there,
    and a level in between would teach nothing (no peak, no bound), so the ramp takes two steps at once. Any bound
    it passes is bracketed and narrowed as any other."""
    return len(v.points) >= 2 and _proportional(v, v.points[-2], v.points[-1])


def _proportional(v: _View, lo: Point, hi: Point) -> bool:
    """`hi`'s rate is `lo`'s times the ratio of their levels (or more), within noise, and neither is bad: the curve
    is linear between them, so no peak lies inside (a throughput curve is concave)."""
    if lo.rate <= 0 or lo.level <= 0 or v.bad(lo) or v.bad(hi):
        return False
    k = hi.level / lo.level
    return hi.rate >= k * lo.rate or within_noise(k * lo.rate, k * lo.noise, hi.rate, hi.noise, v.c.noise)


def _bisect(v: _View, b: Bracket | None, kind: Kind, what: str) -> Next | None:
    if b is None or b.below is None or v.width_ok(b.below, b.at):
        return None
    m = v.mid(b.below, b.at)
    assert m is not None  # width_ok is True when there is no level between
    return Next(m, kind, f"bisecting {what} between {_fmt(b.below)} and {_fmt(b.at)}")


def _guided(
    v: _View, b: Bracket | None, kind: Kind, what: str, *, guess: Callable[[Point], float], how: str
) -> Next | None:
    """Narrow a bracket where its bad end estimates the point itself, else bisect it. A level past a limit
    measures the limit: the successes in service at the lowest failing level (Little's law: rate × their latency)
    are the pool or connection limit the rest were refused by, and the rate an open loop achieves past saturation
    is the capacity. The search measures at that estimate, then closes the bracket from the side it fell on (one
    level a precision away), once: an estimate the good end has passed (measured at it, and then a level past it,
    both good) is wrong, and bisection takes over rather than walking up a level at a time (a PostgreSQL pool of 20
    estimated at 17.26 from 32 clients was measured at 17, 18, 19 and 20). An estimate outside the bracket, or
    already measured, falls back to bisection too. Every level it picks lies strictly inside the bracket, so the
    bracket still shrinks at each step."""
    if b is None or b.below is None or v.width_ok(b.below, b.at):
        return None
    lo, hi = b.below, b.at
    at = next(p for p in v.points if p.level == hi)
    g = guess(at)
    if g > 0:
        p = v.c.precision
        tol_hi = p * hi / (1 + p) if v.c.relative else p
        if abs(g - lo) < v.tolerance(lo) and (g >= lo or v.snap(g) == lo):  # just past the good end: the farthest
            # level that closes it (for an estimate below the good end, only just after measuring at the estimate)
            level = v.closing(lo, up=True)
        elif abs(hi - g) < tol_hi:  # just below the lowest bad one
            level = v.closing(hi, up=False)
        else:
            level = v.snap(g)
        if lo < level < hi and level not in v.levels:
            return Next(
                level,
                kind,
                f"narrowing the {what} between {_fmt(lo)} and {_fmt(hi)} at {_fmt(level)}: {_fmt(hi)}'s {how} near "
                f"{g:.4g}",
            )
    return _bisect(v, b, kind, f"the {what}")


def _saturation(v: _View) -> Next | None:
    return _guided(v, v.saturation(), "saturation", "saturation", guess=lambda p: p.rate, how="achieved rate places it")


def _onset(v: _View) -> Next | None:
    return _guided(v, v.onset(), "onset", "error onset", guess=lambda p: p.busy, how="successes in service place it")


def _slo(v: _View) -> Next | None:
    return _bisect(v, v.slo(), "slo", "the capacity under the SLO")


def _collapse(v: _View) -> Next | None:
    return _bisect(v, v.collapse(), "collapse", "the collapse")


def _peak(v: _View) -> Next | None:
    top = v.peak()
    if top is None or top.rate <= 0:
        return None
    n_star = _usl_peak(v, top)
    if n_star is not None:  # a hill, not a plateau: measure at the fitted N* once, and the peak is placed
        return _near_n_star(v, *n_star)
    plateau = v.plateau_start()
    if plateau is not None:
        return _bisect(v, plateau, "plateau", "the plateau's start")
    i = v.points.index(top)
    sides = []  # a side is narrowed until it is within the precision or its neighbour is within noise of the peak
    for j in (i - 1, i + 1):
        if not 0 <= j < len(v.points) or v.same(v.points[j], top):
            continue
        if j < i and _proportional(v, v.points[j], top):
            continue  # linear up to the peak: the peak is at its end (a limit reached at full speed)
        lo, hi = sorted((v.points[j].level, top.level))
        if not v.width_ok(lo, hi):
            sides.append((hi - lo, lo, hi))
    if not sides:
        return None
    _, lo, hi = max(sides)
    m = v.mid(lo, hi)
    assert m is not None
    return Next(m, "peak", f"narrowing the peak ({_fmt(top.level)} so far) between {_fmt(lo)} and {_fmt(hi)}")


def _usl_peak(v: _View, top: Point) -> tuple[float, str] | None:
    """(N*, the fit in words) when the curve turns down past its peak (the highest level without errors is slower
    than the peak beyond noise) and the USL, fitted to the levels without errors, places N* inside them; else None.
    A USL curve is flat near its peak, so its rates alone place the peak no better than their noise, while the fit
    places it from the whole curve."""
    clean = [p for p in v.points if not v.failing(p) and p.rate > 0 and p.level > 0]
    if v.c.open_loop or len(clean) < USL_GUIDE_POINTS:
        return None
    last = clean[-1]
    if last.level <= top.level or v.same(last, top):
        return None  # flat past the peak (a plateau), or nothing measured past it yet
    try:
        f = fit_usl([p.level for p in clean], [p.rate for p in clean])
    except UserError:
        return None
    if f.n_star is None or f.r2 < USL_GUIDE_R2 or not clean[0].level < f.n_star < last.level:
        return None
    return f.n_star, f"N* ≈ {f.n_star:.1f} (σ={f.sigma:.3g}, κ={f.kappa:.3g})"


def _near_n_star(v: _View, n_star: float, words: str) -> Next | None:
    """The level at N*, unless a level within the precision of it was measured (then the peak is placed)."""
    target = v.snap(n_star)
    tolerance = max(v.c.resolution, v.tolerance(n_star))
    if any(abs(p.level - n_star) <= tolerance for p in v.points) or target in v.levels:
        return None
    return Next(target, "peak", f"measuring at the USL fit's {words}")


def anomaly(others: Sequence[Point], p: Point, config: Config) -> str | None:
    """How `p` contradicts both its neighbours among `others` (the nearest levels measured below and above it, both
    clean), or None: errors or hung operations between two clean levels, or a clean rate below both neighbours' by
    more than the noise (a throughput curve does not dip and rise again). Such a level is measured again before it
    is believed (a service still draining the last level's queue looks exactly like this)."""
    v = _View(others, config)
    below = next((q for q in reversed(v.points) if q.level < p.level), None)
    above = next((q for q in v.points if q.level > p.level), None)
    if below is None or above is None:
        return None
    around = f"{_fmt(below.level)} and {_fmt(above.level)}"
    if v.failing(below) or v.failing(above):
        return None  # errors around it: what it does is no contradiction
    if v.failing(p):
        return f"errors between two clean levels ({around})"
    if all(q.rate > p.rate and not v.same(p, q) for q in (below, above)):
        return f"a rate below both neighbours' beyond noise ({around})"
    return None


def _done_reason(v: _View, at_max: bool) -> str:
    if at_max and v.collapse() is None:
        return f"every point is located to the precision asked, up to the highest level allowed ({_fmt(v.c.max or 0)})"
    if v.collapse() is None and v.stopped_growing():
        return "every point is located to the precision asked; the rate stopped growing over two doublings"
    return "every point is located to the precision asked"
