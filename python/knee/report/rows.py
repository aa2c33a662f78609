"""The numbers every report shows, computed once: one row per step x group, and their formatting."""

from __future__ import annotations

from dataclasses import asdict, dataclass, fields

import numpy as np

from knee.analysis import words
from knee.model import GroupStats, RunRecord, StepResult, Verdict


@dataclass(frozen=True)
class LevelRow:
    """One step x group (the columns of levels.csv, in order; the open-loop ones only in a rate sweep's)."""

    index: int
    label: str
    phase: str
    direction: str
    level: int | float  # clients, or the offered rate (/s) of a rate sweep
    group: str
    clients: int
    succeeded: int
    failed: int
    hung: int
    rate_hz: float
    failure_ratio: float
    p50_ms: float
    p90_ms: float
    p99_ms: float
    max_ms: float
    partial: bool
    generator_cpu_cores: float
    # open loop (None for a closed-loop group): arrivals per second, completions per second, late and
    # dropped arrivals, and p99 from the actual start (p99_ms counts from the intended start)
    offered_rate_hz: float | None = None
    achieved_rate_hz: float | None = None
    late: int | None = None
    dropped: int | None = None
    p99_uncorrected_ms: float | None = None

    def as_dict(self, open_loop: bool = False) -> dict[str, object]:
        d = asdict(self)
        return d if open_loop else {k: d[k] for k in LEVEL_COLUMNS}


OPEN_LOOP_COLUMNS = ["offered_rate_hz", "achieved_rate_hz", "late", "dropped", "p99_uncorrected_ms"]
LEVEL_COLUMNS = [f.name for f in fields(LevelRow) if f.name not in OPEN_LOOP_COLUMNS]


def level_columns(record: RunRecord) -> list[str]:
    """levels.csv's columns: the open-loop ones only for a rate sweep."""
    return LEVEL_COLUMNS + OPEN_LOOP_COLUMNS if rate_sweep(record) else LEVEL_COLUMNS


def rate_sweep(record: RunRecord) -> bool:
    """The run's levels are offered rates (`[sweep] rates`), not client counts."""
    return any(s.rate_hz is not None for s in record.steps)


def level_row(step: StepResult, g: GroupStats) -> LevelRow:
    o = g.open_loop
    return LevelRow(
        index=step.index,
        label=step.label,
        phase=step.phase,
        direction=step.direction,
        level=step.level,
        group=g.name,
        clients=g.clients,
        succeeded=g.succeeded,
        failed=g.failed,
        hung=g.hung,
        rate_hz=g.rate_hz,
        failure_ratio=g.failure_ratio,
        p50_ms=g.latency_ms.p50,
        p90_ms=g.latency_ms.p90,
        p99_ms=g.latency_ms.p99,
        max_ms=g.latency_ms.max,
        partial=step.partial,
        generator_cpu_cores=step.generator.cpu_cores,
        offered_rate_hz=o.offered_rate_hz if o else None,
        achieved_rate_hz=o.achieved_rate_hz if o else None,
        late=o.late if o else None,
        dropped=o.dropped if o else None,
        p99_uncorrected_ms=o.latency_uncorrected_ms.p99 if o else None,
    )


def level_rows(record: RunRecord) -> list[LevelRow]:
    """Every step x group, steps in run order, groups in `group_names` order."""
    names = group_names(record)
    return [level_row(s, s.groups[n]) for s in record.steps for n in names if n in s.groups]


def group_names(record: RunRecord) -> list[str]:
    """All groups seen in the run, the measured group first."""
    seen: list[str] = []
    for s in record.steps:
        for n in s.groups:
            if n not in seen:
                seen.append(n)
    if record.measured_group in seen:
        seen.remove(record.measured_group)
        seen.insert(0, record.measured_group)
    return seen


def rows_for(record: RunRecord, group: str) -> list[LevelRow]:
    return [r for r in level_rows(record) if r.group == group]


def has_labels(record: RunRecord) -> bool:
    return any(s.label for s in record.steps)


def verdict_for(record: RunRecord, group: str) -> Verdict | None:
    return next((v for v in record.verdicts if v.group == group), None)


# --- formatting -----------------------------------------------------------------------------


def fmt_rate(hz: float) -> str:
    if hz >= 100:
        return f"{hz:,.0f} Hz"
    if hz >= 10:
        return f"{hz:.1f} Hz"
    return f"{hz:.2f} Hz"


def fmt_ms(ms: float) -> str:
    if ms <= 0:
        return "-"
    if ms >= 10_000:
        return f"{ms / 1000:.1f} s"
    if ms >= 1000:
        return f"{ms / 1000:.2f} s"
    if ms >= 10:
        return f"{ms:.0f} ms"
    return f"{ms:.2f} ms"


def fmt_pct(ratio: float) -> str:
    return f"{ratio * 100:.1f} %"


def concurrency_cell(r: LevelRow, rates: bool = False) -> str:
    """The level as the table shows it (clients, or a rate sweep's offered rate), with its phase, direction,
    label and partial marks."""
    text = words.level_rate(r.level) if rates else str(r.clients)
    marks = []
    if r.label:
        marks.append(r.label)
    if r.phase == "recovery":
        marks.append("recovery probe")
    elif r.direction == "down":
        marks.append("down")
    if r.partial:
        marks.append("partial")
    return f"{text} ({', '.join(marks)})" if marks else text


def table_cells(r: LevelRow, rates: bool = False) -> list[str]:
    """`Concurrency | Succeeded (rate) | Failed | Hung | p50 | p99`; a rate sweep's (RATE_TABLE_HEADER) adds
    what was achieved, late and dropped, and the uncorrected p99, and its Succeeded is a count beside
    Achieved (a closed-loop group beside the open loop: '-' for those, its rate stays in Succeeded)."""
    cells = [
        concurrency_cell(r, rates),
        f"{r.succeeded:,} ({fmt_rate(r.rate_hz)})",
        _failed_cell(r),
        f"{r.hung:,}",
        fmt_ms(r.p50_ms),
        fmt_ms(r.p99_ms),
    ]
    if not rates:
        return cells
    if r.achieved_rate_hz is None:  # a closed-loop group beside the open loop
        return [cells[0], f"- ({r.clients} clients)", *cells[1:4], "-", "-", *cells[4:], "-"]
    achieved = (
        f"{fmt_rate(r.achieved_rate_hz)} ({fmt_pct(r.achieved_rate_hz / r.offered_rate_hz)})"
        if (r.offered_rate_hz)
        else fmt_rate(r.achieved_rate_hz)
    )
    return [
        cells[0],
        achieved,
        f"{r.succeeded:,}",  # its rate is the Achieved column's, less failures: no need to say it twice
        *cells[2:4],
        f"{r.late:,}",
        f"{r.dropped:,}",
        *cells[4:],
        fmt_ms(r.p99_uncorrected_ms or 0.0),
    ]


def table_header(record: RunRecord) -> list[str]:
    return RATE_TABLE_HEADER if rate_sweep(record) else TABLE_HEADER


def _failed_cell(r: LevelRow) -> str:
    total = r.succeeded + r.failed + r.hung
    return f"{r.failed:,} ({fmt_pct(r.failed / total)})" if r.failed else "0"


TABLE_HEADER = ["Concurrency", "Succeeded (rate)", "Failed", "Hung", "p50", "p99"]
# a rate sweep: the offered rate, the achieved one (all completions, % of offered), late and dropped
# arrivals, p99 from the intended start and from the actual start (docs/open-vs-closed.md)
RATE_TABLE_HEADER = [
    "Offered",
    "Achieved",
    "Succeeded",
    "Failed",
    "Hung",
    "Late",
    "Dropped",
    "p50",
    "p99",
    "p99 uncorr.",
]


# --- the verdict in words and the warnings --------------------------------------------------


def verdict_sentence(v: Verdict) -> str:
    """The verdict as one line: the analysis' own sentences, or words built from its fields."""
    if v.sentences:
        return "; ".join(v.sentences)
    parts = []
    rates = v.level_unit == "rate"

    def at(level: float) -> str:
        return f"{words.level_rate(level)} offered" if rates else f"{level} clients"

    if v.peak_level is not None and v.peak_rate is not None:
        parts.append(f"peaked at {fmt_rate(v.peak_rate)} {'at' if rates else 'with'} {at(v.peak_level)}")
    if v.error_onset_level is not None:
        parts.append(f"errors from {at(v.error_onset_level) if rates else v.error_onset_level}")
    if v.saturation_level is not None:
        parts.append(f"saturated at {at(v.saturation_level)}")
    if v.collapse_level is not None:
        parts.append(f"collapsed at {at(v.collapse_level) if rates else v.collapse_level}")
    if v.recovered is True:
        took = f" after {v.time_to_recover_s:.0f} s" if v.time_to_recover_s is not None else ""
        parts.append(f"recovered{took}")
    elif v.recovered is False:
        parts.append("did not recover")
    if v.capacity_under_slo is not None:
        parts.append(f"capacity under the SLO: {at(v.capacity_under_slo)}")
    return "; ".join(parts) if parts else "no verdict (too few levels)"


def usl_line(v: Verdict) -> str | None:
    f = v.usl
    if f is None:
        return None
    peak = f"N* = {f.n_star:.0f}, peak {fmt_rate(f.peak_rate)}" if f.n_star and f.peak_rate else "no peak (κ = 0)"
    on = " on Little's-law concurrency (N = achieved × time in service)" if v.level_unit == "rate" else ""
    return f"USL fit{on}: σ = {f.sigma:.4g}, κ = {f.kappa:.3g}, λ = {f.lam:.4g} Hz/client; {peak}; R² = {f.r2:.3f}"


LITTLE_GAP = 0.2


def warning_lines(record: RunRecord, group: str) -> list[str]:
    """Generator saturation, Little's-law gaps, USL caveats and the analysis' own warnings."""
    out = []
    for s in record.steps:
        if s.generator.saturated and group in s.groups:
            level = f"{words.level_rate(s.level)} offered" if s.rate_hz is not None else f"level {s.level}"
            out.append(
                f"the load generator was saturated at step {s.index} ({level}: "
                f"{s.generator.cpu_cores:.2f} of {s.generator.cores_available} cores); "
                "its numbers measure knee as much as the service"
            )
    v = verdict_for(record, group)
    if v is not None:
        said_little = any("Little" in w for w in v.warnings)
        for c in [] if said_little else v.little:
            if c.gap > LITTLE_GAP:
                out.append(
                    f"Little's law: at {c.level} clients X·(R+Z) = {c.expected_n:.1f}, {c.gap * 100:.0f} % off; "
                    "clients were idle or not all in the service (check think time and client-side limits)"
                )
        out.extend(w for w in v.warnings if w not in out)
        if v.usl is not None:
            out.extend(f"USL: {w}" for w in v.usl.warnings)
    return out


# --- per-interval distributions (long levels) -----------------------------------------------

LONG_LEVEL_INTERVALS = 10


def long_levels(record: RunRecord, group: str) -> list[tuple[StepResult, GroupStats]]:
    """The run is a single long level per group (a soak): its per-interval counts are worth a look."""
    sweep = [s for s in record.steps if s.phase == "sweep" and group in s.groups]
    if len(sweep) != 1:
        return []
    g = sweep[0].groups[group]
    return [(sweep[0], g)] if len(g.series) >= LONG_LEVEL_INTERVALS else []


@dataclass(frozen=True)
class IntervalDistribution:
    interval_s: float
    n: int
    min: float
    p5: float
    median: float
    p95: float
    max: float
    bins: list[tuple[float, float, int]]  # (lo, hi, count)


def interval_distribution(g: GroupStats, n_bins: int = 8) -> IntervalDistribution:
    counts = np.array([p.succeeded for p in g.series], dtype=float)
    lo, hi = float(counts.min()), float(counts.max())
    edges = np.linspace(lo, hi if hi > lo else lo + 1, n_bins + 1)
    hist, _ = np.histogram(counts, bins=edges)
    p5, med, p95 = (float(x) for x in np.percentile(counts, [5, 50, 95]))
    return IntervalDistribution(
        interval_s=g.interval_s,
        n=len(counts),
        min=lo,
        p5=p5,
        median=med,
        p95=p95,
        max=hi,
        bins=[(float(edges[i]), float(edges[i + 1]), int(hist[i])) for i in range(n_bins)],
    )


def text_histogram(d: IntervalDistribution, width: int = 40) -> list[str]:
    top = max(c for _, _, c in d.bins) or 1
    return [f"{lo:8.1f} – {hi:8.1f} │{'█' * round(width * c / top):<{width}} {c}" for lo, hi, c in d.bins]


def distribution_line(d: IntervalDistribution) -> str:
    return (
        f"successes per {d.interval_s:g} s interval over {d.n} intervals: min {d.min:.0f}, p5 {d.p5:.1f}, "
        f"median {d.median:.1f}, p95 {d.p95:.1f}, max {d.max:.0f}"
    )


# --- fixed-work stages (labelled steps) -----------------------------------------------------


@dataclass(frozen=True)
class LabelRow:
    label: str
    group: str
    clients: int
    operations: int
    failed: int
    elapsed_s: float
    ops_per_s: float
    p50_ms: float
    p99_ms: float


def label_rows(record: RunRecord, group: str) -> list[LabelRow]:
    """ops/s and elapsed per label (steps that share a label add up)."""
    out: dict[str, LabelRow] = {}
    for s in record.steps:
        if not s.label or group not in s.groups:
            continue
        g = s.groups[group]
        prev = out.get(s.label)
        ops = g.succeeded + (prev.operations if prev else 0)
        el = g.elapsed_s + (prev.elapsed_s if prev else 0.0)
        out[s.label] = LabelRow(
            label=s.label,
            group=group,
            clients=g.clients,
            operations=ops,
            failed=g.failed + g.hung + (prev.failed if prev else 0),
            elapsed_s=el,
            ops_per_s=ops / el if el > 0 else 0.0,
            p50_ms=g.latency_ms.p50,
            p99_ms=max(g.latency_ms.p99, prev.p99_ms if prev else 0.0),
        )
    return list(out.values())


LABEL_HEADER = ["Label", "Clients", "Operations", "ops/s", "Elapsed", "Failed", "p50", "p99"]


def label_cells(r: LabelRow) -> list[str]:
    return [
        r.label,
        str(r.clients),
        f"{r.operations:,}",
        f"{r.ops_per_s:,.1f}",
        f"{r.elapsed_s:.1f} s",
        f"{r.failed:,}",
        fmt_ms(r.p50_ms),
        fmt_ms(r.p99_ms),
    ]
