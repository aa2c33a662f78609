"""The report's plots, as inline SVG text (knee.report.svgplot draws them)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from knee import fmt
from knee.analysis.client_ramp import intervals as client_intervals
from knee.analysis.levels import window
from knee.analysis.uslfit import usl
from knee.model import ClientRamp, Ramp, RemoteStats, RunRecord, SeriesPoint, Soak, StepResult, USLFit
from knee.report.svgplot import Axes, Figure, viridis

_SIZE = (9.5, 3.6)


def _figure(size: tuple[float, float] = _SIZE) -> tuple[Figure, Axes]:
    fig = Figure(size)
    return fig, fig.axes[0]


def _sweep(record: RunRecord, group: str, direction: str = "up") -> list[StepResult]:
    steps = record.in_level_order()
    return [s for s in steps if s.phase == "sweep" and s.direction == direction and group in s.groups]


def _sweep_figure(
    record: RunRecord, group: str, keep: Callable[[StepResult], bool] | None = None
) -> tuple[Figure, Axes, bool, list[StepResult], list[float]]:
    """A figure of the up sweep of `group` (its steps that `keep` accepts): the figure, its axes, whether x is
    the offered rate, the steps and their x."""
    fig, ax = _figure()
    up = [s for s in _sweep(record, group) if keep is None or keep(s)]
    return fig, ax, record.rates, up, _xs(record, up, group)


def _plot_rates(ax: Axes, record: RunRecord, steps: list[StepResult], group: str, marker: str, **style: Any) -> None:
    """The group's succeeded rate in these steps, at their levels."""
    ax.plot(_xs(record, steps, group), [_rate(s, group) for s in steps], marker, **style)


def _rate(s: StepResult, group: str, completed: bool = False) -> float:
    """The group's succeeded (or, `completed`, all completed) rate in step `s`, as the verdict judges it: after the
    first operation latency when operations were in flight at the step's end (knee.analysis.levels.window)."""
    w = window(s, s.groups[group])
    n = w.succeeded + (w.failed + w.hung if completed else 0.0)
    return n / w.seconds if w.seconds > 0 else 0.0


def _xs(record: RunRecord, steps: list[StepResult], group: str) -> list[float]:
    """The steps' places on the x axis: their clients, or the offered rates of a rate sweep."""
    return [float(s.level) if record.rates else float(s.groups[group].clients) for s in steps]


def _levels_axis(ax: Axes, levels: list[float], rates: bool = False) -> None:
    ax.xlabel = "offered rate, arrivals / s" if rates else "concurrent clients"
    if levels and max(levels) / max(1e-9 if rates else 1, min(levels)) >= 20:
        ax.x.log = True


def _vs(rates: bool) -> str:
    return "offered rate" if rates else "concurrency"


def _twin_svg(fig: Figure, ax: Axes, ax2: Axes, levels: list[float], rates: bool, *, title: str) -> str:
    """Finish a plot with a second y axis on the right: the levels axis, the title, one legend for both axes."""
    _levels_axis(ax, levels, rates)
    ax.title = title
    ax.legend("upper left")  # the entries of both axes
    return fig.svg()


def throughput(record: RunRecord, group: str, fit: USLFit | None, flat: bool = False) -> str:
    """Rate vs concurrency (or offered rate), the USL curve through it, and the recovery probes.

    A rate sweep shows the offered rate as a diagonal and what was achieved; its USL is fitted
    on Little's-law concurrency, another axis, so it is not drawn here. The model is drawn over the measured
    levels only, and its N* only when it lies among them: a model line never stretches the x axis past what was
    measured (a disowned fit is not passed at all: Verdict.usl is null). `flat`: the verdict says the curve
    flattens (a pool, a plateau: Verdict.flat), which the USL's peak does not describe: the model is drawn only up
    to its N*, never turning down across the plateau, and its N* is not marked.
    """
    fig, ax, rates, up, levels = _sweep_figure(record, group)
    ax.plot(levels, [_rate(s, group) for s in up], "o-", label="succeeded (up)", color="C0")
    open_up = [s for s in up if s.groups[group].open_loop is not None]
    if open_up:
        ax.plot(
            _xs(record, open_up, group),
            [_rate(s, group, completed=True) for s in open_up],
            "^:",
            color="C2",
            label="achieved (all completed)",
        )
        ax.plot(levels, levels, "--", color="grey", lw=1, label="offered")
    down = _sweep(record, group, "down")
    if down:
        _plot_rates(ax, record, down, group, "s--", label="succeeded (down)")
    rec = [s for s in record.steps if s.phase == "recovery" and group in s.groups]
    if rec:
        _plot_rates(ax, record, rec, group, "x", color="C3", ms=9, label="recovery probes")
    if fit is not None and levels and not rates:
        # a flat top (`flat`: a pool, a plateau) has no N*: the model is drawn only where it rises, up to its N*
        import numpy as np  # here only: a run's report (no fit) is drawn without loading numpy

        top = min(max(levels), fit.n_star) if flat and fit.n_star else max(levels)
        n = np.geomspace(max(1, min(levels)), max(top, 1, min(levels)), 200)
        ax.plot(list(n), list(usl(n, fit.sigma, fit.kappa, fit.lam)), "-", color="C1", alpha=0.8, label="USL fit")
        if fit.n_star and not flat and min(levels) <= fit.n_star <= max(levels):
            ax.axvline(fit.n_star, color="C1", ls=":", lw=1, label=f"N* = {fit.n_star:.0f}")
    _levels_axis(ax, levels, rates)
    ax.ylabel = "operations / s"
    ax.title = f"Throughput vs {_vs(rates)}"
    ax.legend("best")
    return fig.svg()


def counters(record: RunRecord, group: str) -> str:
    """The machine's and the target's counters beside throughput, level by level: throughput on the left axis;
    ephemeral ports in use, TIME_WAIT sockets, listen overflows and SYN retransmits (and the target's RSS) on
    the right."""
    fig, ax, rates, up, levels = _sweep_figure(record, group, lambda s: s.counters is not None or s.target is not None)
    ax.plot(levels, [_rate(s, group) for s in up], "o-", color="C0", label="succeeded / s")
    ax.ylabel = "operations / s"
    ax2 = ax.twinx()
    series = [
        ("ephemeral ports in use", "o--", lambda s: s.counters.ephemeral_in_use_peak if s.counters else None),
        ("TIME_WAIT sockets", "s--", lambda s: s.counters.time_wait_peak if s.counters else None),
        ("listen overflows", "^--", lambda s: s.counters.listen_overflows if s.counters else None),
        ("SYN retransmits", "v--", lambda s: s.counters.syn_retrans if s.counters else None),
        ("target RSS, MB", "d:", lambda s: s.target.rss_mb_peak if s.target else None),
        ("target threads", "x:", lambda s: s.target.threads_peak if s.target else None),
    ]
    for i, (label, style, get) in enumerate(series, start=1):
        ys = [get(s) for s in up]
        if any(y for y in ys):
            ax2.plot(levels, [float("nan") if y is None else y for y in ys], style, color=f"C{i}", label=label)
    ax2.ylabel = "count (peak or per step)"
    return _twin_svg(fig, ax, ax2, levels, rates, title=f"Counters beside throughput vs {_vs(rates)}")


def remote(record: RunRecord, group: str) -> str:
    """The target's machines beside throughput, level by level: throughput on the left axis; on the right, in % of
    what each has, every endpoint's CPU busy and memory in use, and a database's connections of its limit."""
    fig, ax, rates, up, levels = _sweep_figure(record, group, lambda s: bool(s.remote))
    ax.plot(levels, [_rate(s, group) for s in up], "o-", color="C0", label="succeeded / s")
    ax.ylabel = "operations / s"
    ax2 = ax.twinx()
    hosts = list(dict.fromkeys(r.host for s in up for r in s.remote))
    series: list[tuple[str, str, Callable[[RemoteStats], float | None]]] = [
        ("CPU busy", "s--", lambda r: r.cpu_busy),
        (
            "memory used",
            "d:",
            lambda r: r.mem_used_mb_peak / r.mem_total_mb if r.mem_used_mb_peak and r.mem_total_mb else None,
        ),
        (
            "connections of max",
            "^--",
            lambda r: (
                r.pg_connections_peak / r.pg_max_connections
                if r.pg_connections_peak is not None and r.pg_max_connections
                else None
            ),
        ),
    ]
    color = 1
    for host in hosts:
        for what, style, get in series:
            ys = [next((get(r) for r in s.remote if r.host == host), None) for s in up]
            if all(y is None for y in ys):
                continue
            share = [float("nan") if y is None else 100 * y for y in ys]
            ax2.plot(levels, share, style, color=f"C{color}", label=f"{host}: {what}")
            color += 1
    ax2.set_ylim(0, 105)
    ax2.ylabel = "% of the host's"
    return _twin_svg(fig, ax, ax2, levels, rates, title=f"The target's machines beside throughput vs {_vs(rates)}")


def failures(record: RunRecord, group: str) -> str:
    fig, ax, rates, up, levels = _sweep_figure(record, group)
    ax.plot(levels, [s.groups[group].failed for s in up], "o-", color="C3", label="failed")
    ax.plot(levels, [s.groups[group].hung for s in up], "s-", color="C4", label="hung")
    worst = max((max(s.groups[group].failed, s.groups[group].hung) for s in up), default=0)
    loops = [s.groups[group].open_loop for s in up]
    if all(o is not None for o in loops) and loops:
        late = [o.late for o in loops if o is not None]
        dropped = [o.dropped for o in loops if o is not None]
        ax.plot(levels, late, "^-", color="C1", label="late (> 10 ms)")
        if any(o.lagged for o in loops if o is not None):
            ax.plot(levels, [o.lagged for o in loops if o is not None], "^:", color="C1", label="of them knee's lag")
        ax.plot(levels, dropped, "v-", color="C5", label="dropped")
        worst = max(worst, *late, *dropped)
    ax2 = ax.twinx()
    ax2.plot(levels, [s.groups[group].failure_ratio * 100 for s in up], ":", color="grey", label="failure ratio")
    ax2.ylabel = "(failed + hung) / all, %"
    ax.set_ylim(0, max(1, worst) * 1.08)
    ax2.set_ylim(0, max(1.0, max((s.groups[group].failure_ratio * 100 for s in up), default=0.0)) * 1.08)
    ax.ylabel = "operations"
    return _twin_svg(fig, ax, ax2, levels, rates, title=f"Failures and hung operations vs {_vs(rates)}")


def latency(record: RunRecord, group: str) -> str:
    fig, ax, rates, up, levels = _sweep_figure(record, group)
    for key, style in (("p50", "o-"), ("p90", "^-"), ("p99", "s-"), ("max", ".:")):
        ax.plot(levels, [getattr(s.groups[group].latency_ms, key) for s in up], style, label=key)
    loops = [s.groups[group].open_loop for s in up]
    if loops and all(o is not None for o in loops):
        unc = [o.latency_uncorrected_ms.p99 for o in loops if o is not None]
        ax.plot(levels, unc, "s--", color="grey", label="p99 uncorrected (from the actual start)")
    _levels_axis(ax, levels, rates)
    ax.y.log = True
    ax.ylabel = "latency, ms (from the intended start)" if loops and loops[0] is not None else "latency, ms"
    ax.title = f"Latency percentiles vs {_vs(rates)}"
    ax.legend("upper left")
    return fig.svg()


def series(record: RunRecord, group: str) -> str:
    """Every interval of every step on one time line: successes, failures and hung per second, each interval's
    p99 on a log axis of its own (right), and a spike's time (knee.analysis.spike) shaded."""
    fig, ax = _figure((_SIZE[0], 3.0))
    steps = [s for s in record.steps if group in s.groups]
    t0 = min((s.started_unix for s in steps), default=0.0)
    timed = [s for s in steps if any(p.p99_ms for p in s.groups[group].series)]
    right = ax.twinx() if timed else None
    for s in timed:
        points = [(s.started_unix - t0 + p.t, p.p99_ms) for p in s.groups[group].series if p.p99_ms]
        right.plot([t for t, _ in points], [v for _, v in points], ":", color="grey", lw=1)  # type: ignore[union-attr]
    if right is not None:
        right.y.log = True
        right.ylabel = "p99 per interval, ms (dotted)"
    spike = next((v.spike for v in record.verdicts if v.group == group and v.spike is not None), None)
    if spike is not None and steps:
        at = steps[0].started_unix - t0 + spike.at_s
        ax.axvspan(at, at + spike.hold_s, color="C1", alpha=0.15, label=f"the spike of {spike.spiking}")
    for s in steps:
        g = s.groups[group]
        if not g.series:
            continue
        t = [s.started_unix - t0 + p.t for p in g.series]
        per = g.interval_s or 1.0
        color = "C2" if s.phase == "recovery" else "C0"
        ax.plot(t, [p.succeeded / per for p in g.series], "-", color=color, lw=1.2)
        bad = [(p.failed + p.hung) / per for p in g.series]
        if any(bad):
            ax.plot(t, bad, "-", color="C3", lw=1)
        top = max(p.succeeded / per for p in g.series)
        mark = fmt.level_rate(s.level) if record.rates else str(g.clients)
        ax.annotate(mark, (t[0], top), dy=3, fontsize=7, color="grey")
    ax.plot([], [], "-", color="C0", label="succeeded / s")
    ax.plot([], [], "-", color="C3", label="failed + hung / s")
    if right is not None:
        ax.plot([], [], ":", color="grey", label="p99 per interval, ms (right)")
    if any(s.phase == "recovery" for s in steps):
        ax.plot([], [], "-", color="C2", label="recovery probes")
    peak = max(
        (p.succeeded / (s.groups[group].interval_s or 1.0) for s in steps for p in s.groups[group].series), default=0
    )
    ax.set_ylim(0, max(1.0, peak) * 1.18)
    what = "offered rate" if record.rates else "clients"
    ax.xlabel = f"seconds since the first step (numbers: {what} of each step)"
    ax.ylabel = "per second"
    ax.title = "Per-interval series of each level"
    ax.legend("best", fontsize=7)
    return fig.svg()


def distribution(record: RunRecord, group: str) -> str:
    """Latency percentile curves per level, from the percentiles the engine took of each step's histogram."""
    fig, ax = _figure()
    up = [s for s in record.steps if group in s.groups and s.phase == "sweep"]
    drawn = 0
    for i, s in enumerate(up):
        pts = [(q, v) for q, v in s.groups[group].percentiles_ms if q < 100.0 and v > 0]
        if not pts:
            continue
        x = [1 / (1 - q / 100) for q, _ in pts]
        name = fmt.level_rate(s.level) if record.rates else f"{s.groups[group].clients}"
        ax.plot(x, [v for _, v in pts], "-", color=viridis(i / max(1, len(up) - 1)), label=name)
        drawn += 1
    ax.x.log = ax.y.log = True
    ticks = [2, 10, 100, 1000, 10000]
    ax.set_xticks(ticks, ["50%", "90%", "99%", "99.9%", "99.99%"])
    ax.set_xlim(1.8, 2000)
    ax.xlabel = "percentile"
    ax.ylabel = "latency, ms"
    ax.title = "Latency distribution per level"
    if drawn:
        ax.legend("upper left", title="offered" if record.rates else "clients", fontsize=7, ncol=2)
    return fig.svg()


def _intervals(
    ax: Axes, xs: list[float], whole: list[SeriesPoint], per: float, located: list[tuple[float, float, float, str, str]]
) -> None:
    """A ramp's intervals at `xs`: the succeeded and (where any) the failed-or-hung rate, and each located point
    (low, high, at, colour, label) drawn at `at` over its bracket shaded."""
    ax.plot(xs, [p.succeeded / per for p in whole], "o-", color="C0", ms=3, lw=1, label="succeeded / s")
    bad = [(p.failed + p.hung) / per for p in whole]
    if any(bad):
        ax.plot(xs, bad, "o-", color="C3", ms=3, lw=1, label="failed + hung / s")
    for low, high, at, color, label in located:
        ax.axvspan(low, high, color=color, alpha=0.12)
        ax.axvline(at, color=color, lw=1, label=label)


def _interval_figure(fig: Figure, ax: Axes, xlabel: str, title: str) -> str:
    """A ramp's figure finished: its x label and title, rates per second up, the legend at the upper left."""
    ax.xlabel = xlabel
    ax.ylabel = "per second"
    ax.title = title
    ax.legend("upper left", fontsize=7)
    return fig.svg()


def ramp(record: RunRecord, group: str, verdict: Ramp) -> str:
    """A run under a rising rate profile, interval by interval: the achieved (succeeded) and the failed-or-hung
    rate against the offered rate, the line where achieved = offered, and the located points with their brackets
    (knee.analysis.ramp)."""
    fig, ax = _figure()
    (step,) = [s for s in record.steps if s.phase == "sweep" and group in s.groups]
    g = step.groups[group]
    per = g.interval_s or 1.0
    whole = [p for p in g.series if p.t + per <= g.elapsed_s + 1e-6]
    offered = [p.offered / per for p in whole]
    marks = (
        (verdict.behind, "C1", "behind from"),
        (verdict.slo_broken, "C4", "broke the SLO from"),
        (verdict.errors, "C3", "errors from"),
        (verdict.lagged, "C5", "knee lagged from"),  # not C7: the grey of the line achieved = offered
    )
    located = [(p.low_hz, p.high_hz, p.offered_hz, c, f"{w} {fmt.sig3(p.offered_hz)}/s") for p, c, w in marks if p]
    _intervals(ax, offered, whole, per, located)
    top = max(offered, default=1.0)
    ax.plot([0, top], [0, top], "--", color="grey", lw=0.8, label="achieved = offered")
    ax.set_xlim(0, top * 1.02)
    ax.set_ylim(0, top * 1.1)
    return _interval_figure(
        fig, ax, f"offered rate, /s (each point: one {fmt.level(per)}-s interval)", "The ramp: achieved vs offered rate"
    )


def client_ramp(record: RunRecord, group: str, verdict: ClientRamp) -> str:
    """A closed loop under a rising clients profile, interval by interval: the achieved (succeeded) and the
    failed-or-hung rate against the clients the interval ran, and the located points with their brackets
    (knee.analysis.client_ramp)."""
    fig, ax = _figure()
    (step,) = [s for s in record.steps if s.phase == "sweep" and group in s.groups]
    g = step.groups[group]
    per = g.interval_s or 1.0
    profile = record.scenario.groups[group].clients_profile
    assert profile is not None, "a clients ramp's group has a clients profile"
    whole, clients = client_intervals(g, profile, record.scenario.sweep.warmup)
    marks = (
        (verdict.no_faster, "C1", "no faster from"),
        (verdict.slo_broken, "C4", "broke the SLO from"),
        (verdict.errors, "C3", "errors from"),
    )
    n = fmt.level
    located = [(p.low, p.high, p.clients, c, f"{w} {n(round(p.clients, 1))} clients") for p, c, w in marks if p]
    _intervals(ax, clients, whole, per, located)
    ax.set_xlim(0, max(clients, default=1.0) * 1.02)
    ax.set_ylim(0, None)
    return _interval_figure(
        fig, ax, f"clients (each point: one {fmt.level(per)}-s interval)", "The clients ramp: achieved rate vs clients"
    )


def soak(record: RunRecord, group: str, verdict: Soak) -> str:
    """A soak's trends (knee.analysis.soak): each interval's rate and p99 (right, log) against time, the fitted
    Theil–Sen lines through them, and (when sampled) the target's and knee's memory on a panel below."""
    samples = record.steps[-1].soak if record.steps else []
    memory = [s for s in samples if s.target_rss_mb is not None] or samples
    fig = Figure((_SIZE[0], _SIZE[1] * (1.6 if memory else 1.0)), rows=2 if memory else 1)
    axes = fig.axes
    ax = axes[0]
    g = record.steps[-1].groups[group]
    per = g.interval_s or 1.0
    whole = [p for p in g.series if p.t + per <= g.elapsed_s + 1e-6]
    t = [(p.t + per / 2) / 60 for p in whole]
    ax.plot(t, [p.succeeded / per for p in whole], "-", color="C0", lw=1, label="succeeded / s")
    bad = [(p.failed + p.hung) / per for p in whole]
    if any(bad):
        ax.plot(t, bad, "-", color="C3", lw=1, label="failed + hung / s")
    ends = [0.0, verdict.seconds / 60]
    if verdict.throughput is not None:
        ax.plot(ends, [verdict.throughput.first, verdict.throughput.last], "--", color="C0", lw=1.5, label="its trend")
    ax.set_ylim(0, max([1.0, *(p.succeeded / per for p in whole)]) * 1.18)
    ax.ylabel = "per second"
    timed = [(x, p.p99_ms) for x, p in zip(t, whole, strict=True) if p.p99_ms]
    if timed:
        right = ax.twinx()
        right.plot([x for x, _ in timed], [v for _, v in timed], ":", color="grey", lw=1)
        if verdict.p99 is not None:
            right.plot(ends, [verdict.p99.first, verdict.p99.last], "--", color="grey", lw=1.5)
        right.y.log = True
        right.ylabel = "p99 per interval, ms"
        ax.plot([], [], ":", color="grey", label="p99 per interval, ms (right; dashed: its trend)")
    ax.title = f"The soak: {fmt.load(verdict.level, record.level_unit)} for {fmt.duration(verdict.seconds)}"
    ax.legend("lower left", fontsize=7)
    if memory:
        low = axes[1]
        minutes = [s.t_s / 60 for s in memory]
        if any(s.target_rss_mb is not None for s in memory):
            low.plot(minutes, [s.target_rss_mb for s in memory], "-", color="C1", lw=1.2, label="the target's memory")
        low.plot(minutes, [s.knee_rss_mb for s in memory], "-", color="C4", lw=1.2, label="knee's own memory")
        for d, color in ((verdict.memory, "C1"), (verdict.knee_memory, "C4")):
            if d is not None:
                low.plot(ends, [d.first, d.last], "--", color=color, lw=1)
        low.set_ylim(0, None)
        low.ylabel = "resident memory, MB"
        low.legend("lower left", fontsize=7)
    axes[-1].xlabel = "minutes since the soak's start (dashed: the fitted Theil–Sen trends)"
    return fig.svg()
