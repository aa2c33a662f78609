"""The report's view: everything a report shows, built once from the run record.

`build(record, scenario_text)` computes the numbers and their words; the terminal, Markdown, HTML and
CSV reports (and `knee.sweep()`'s table) only format a `ReportView`. Numbers are written by `knee.fmt`,
the formatter the verdict's sentences use too.
"""

from __future__ import annotations

import json
import time
from dataclasses import asdict, dataclass, field, fields

from knee import fmt
from knee.analysis.run import group_names
from knee.analysis.stats import IntervalDistribution, interval_distribution
from knee.model import Finding, GroupStats, RunRecord, StepResult, Verdict

LONG_LEVEL_INTERVALS = 10
LITTLE_GAP = 0.2


@dataclass(frozen=True)
class Row:
    """One step x group: the columns of levels.csv, in order (the open-loop ones only in a rate sweep's)."""

    index: int
    label: str
    phase: str
    direction: str
    level: int | float  # clients, or the offered rate (/s) of a rate sweep
    group: str
    clients: int
    started: int
    succeeded: int
    failed: int
    hung: int
    abandoned: int
    rate_hz: float
    failure_ratio: float
    p50_ms: float
    p90_ms: float
    p99_ms: float
    max_ms: float
    bytes_received: int
    transfer_bps: float  # bytes received per measured second
    partial: bool
    generator_cpu_cores: float  # knee and its child processes
    machine_cpu_cores: float
    # open loop (None for a closed-loop group): arrivals per second, completions per second, late and
    # dropped arrivals, and p99 from the actual start (p99_ms counts from the intended start)
    offered_rate_hz: float | None = None
    achieved_rate_hz: float | None = None
    late: int | None = None
    dropped: int | None = None
    p99_uncorrected_ms: float | None = None

    def as_dict(self, open_loop: bool = True) -> dict[str, object]:
        d = asdict(self)
        return d if open_loop else {k: d[k] for k in LEVEL_COLUMNS}


OPEN_LOOP_COLUMNS = ["offered_rate_hz", "achieved_rate_hz", "late", "dropped", "p99_uncorrected_ms"]
LEVEL_COLUMNS = [f.name for f in fields(Row) if f.name not in OPEN_LOOP_COLUMNS]


def row(step: StepResult, g: GroupStats) -> Row:
    o = g.open_loop
    return Row(
        index=step.index,
        label=step.label,
        phase=step.phase,
        direction=step.direction,
        level=step.level,
        group=g.name,
        clients=g.clients,
        started=g.started,
        succeeded=g.succeeded,
        failed=g.failed,
        hung=g.hung,
        abandoned=g.abandoned,
        rate_hz=g.rate_hz,
        failure_ratio=g.failure_ratio,
        p50_ms=g.latency_ms.p50,
        p90_ms=g.latency_ms.p90,
        p99_ms=g.latency_ms.p99,
        max_ms=g.latency_ms.max,
        bytes_received=g.bytes_received,
        transfer_bps=g.bytes_received / g.elapsed_s if g.elapsed_s > 0 else 0.0,
        partial=step.partial,
        generator_cpu_cores=step.generator.load_cores,
        machine_cpu_cores=step.generator.machine_cpu_cores,
        offered_rate_hz=o.offered_rate_hz if o else None,
        achieved_rate_hz=o.achieved_rate_hz if o else None,
        late=o.late if o else None,
        dropped=o.dropped if o else None,
        p99_uncorrected_ms=o.latency_uncorrected_ms.p99 if o else None,
    )


@dataclass(frozen=True)
class Table:
    header: list[str]
    rows: list[list[str]]
    styles: list[str] = field(default_factory=list)  # per row: "", "recovery" or "bad"


@dataclass(frozen=True)
class Intervals:
    """A long single level (a soak): the distribution of its per-interval counts."""

    line: str
    histogram: list[str]
    dist: IntervalDistribution


@dataclass(frozen=True)
class GroupView:
    name: str
    table: Table
    verdict: str | None
    usl: str | None
    warnings: list[str]
    findings: list[str]  # why it broke: each finding with its fix
    counters: Table | None  # the machine's and the target's counters per level
    reasons: Table  # failures by level and reason: "24 × FATAL: sorry, too many clients already"
    steps: Table | None  # worker clients: the named steps beside the operation's total, per level
    stages: Table | None  # fixed work per stage
    intervals: list[Intervals]
    between: str | None  # a continuous baseload's operations outside the steps
    workers: Table | None  # distributed runs: each worker's part of each step
    plot_levels: int  # distinct levels measured (plots of a curve need 2)


@dataclass(frozen=True)
class ReportView:
    run_id: str
    status: str
    created: str
    knee_version: str
    steps: int
    measured_group: str
    rates: bool
    executor: str
    groups: list[GroupView]
    rows: list[Row]
    open_loop: bool  # levels.csv carries the open-loop columns
    scenario_text: str
    machine: list[list[str]]

    @property
    def level_columns(self) -> list[str]:
        return LEVEL_COLUMNS + OPEN_LOOP_COLUMNS if self.open_loop else LEVEL_COLUMNS


# ---- cells ------------------------------------------------------------------------------------------


TABLE_HEADER = ["Concurrency", "Succeeded (rate)", "Failed", "Hung", "Abandoned", "p50", "p99"]
# a rate sweep: the offered rate, the achieved one (all completions, % of offered), late and dropped
# arrivals, p99 from the intended start and from the actual start (docs/open-vs-closed.md)
RATE_TABLE_HEADER = [
    "Offered",
    "Achieved",
    "Succeeded",
    "Failed",
    "Hung",
    "Abandoned",
    "Late",
    "Dropped",
    "p50",
    "p99",
    "p99 uncorr.",
]
TRANSFER_HEADER = "Transfer"


def level_cell(r: Row, rates: bool) -> str:
    """The level as the table shows it (clients, or a rate sweep's offered rate), with its phase, direction,
    label and partial marks."""
    text = fmt.level_rate(r.level) if rates else str(r.clients)
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


def _failed_cell(r: Row) -> str:
    total = r.succeeded + r.failed + r.hung
    return f"{r.failed:,} ({fmt.pct(r.failed / total)})" if r.failed else "0"


def table_cells(r: Row, rates: bool, transfer: bool) -> list[str]:
    """`Concurrency | Succeeded (rate) | Failed | Hung | Abandoned | p50 | p99` (+ Transfer); a rate sweep's
    (RATE_TABLE_HEADER) adds what was achieved, late and dropped, and the uncorrected p99, and its Succeeded
    is a count beside Achieved (a closed-loop group beside the open loop: '-' for those)."""
    tail = [fmt.transfer(r.transfer_bps)] if transfer else []
    cells = [
        level_cell(r, rates),
        f"{r.succeeded:,} ({fmt.rate(r.rate_hz)})",
        _failed_cell(r),
        f"{r.hung:,}",
        f"{r.abandoned:,}",
        fmt.ms(r.p50_ms),
        fmt.ms(r.p99_ms),
    ]
    if not rates:
        return cells + tail
    if r.achieved_rate_hz is None:  # a closed-loop group beside the open loop
        return [cells[0], f"- ({r.clients} clients)", *cells[1:5], "-", "-", *cells[5:], "-", *tail]
    achieved = (
        f"{fmt.rate(r.achieved_rate_hz)} ({fmt.pct(r.achieved_rate_hz / r.offered_rate_hz)})"
        if r.offered_rate_hz
        else fmt.rate(r.achieved_rate_hz)
    )
    return [
        cells[0],
        achieved,
        f"{r.succeeded:,}",  # its rate is the Achieved column's, less failures: no need to say it twice
        *cells[2:5],
        f"{r.late:,}",
        f"{r.dropped:,}",
        *cells[5:],
        fmt.ms(r.p99_uncorrected_ms or 0.0),
        *tail,
    ]


# ---- the verdict in words and the warnings ----------------------------------------------------------


def verdict_line(v: Verdict) -> str:
    """The verdict as one line: the analysis' own sentences, or words built from its fields."""
    if v.sentences:
        return "; ".join(v.sentences)
    unit = v.level_unit
    parts = []
    if v.peak_level is not None and v.peak_rate is not None:
        parts.append(
            f"peaked at {fmt.rate(v.peak_rate)} {'at' if unit == 'rate' else 'with'} {fmt.load(v.peak_level, unit)}"
        )
    if v.error_onset_level is not None:
        parts.append(f"errors from {fmt.load(v.error_onset_level, unit)}")
    if v.saturation_level is not None:
        parts.append(f"saturated at {fmt.load(v.saturation_level, unit)}")
    if v.collapse_level is not None:
        parts.append(f"collapsed at {fmt.load(v.collapse_level, unit)}")
    if v.recovered is True:
        took = f" after {fmt.duration(v.time_to_recover_s)}" if v.time_to_recover_s is not None else ""
        parts.append(f"recovered{took}")
    elif v.recovered is False:
        parts.append("did not recover")
    if v.capacity_under_slo is not None:
        parts.append(f"capacity under the SLO: {fmt.load(v.capacity_under_slo, unit)}")
    return "; ".join(parts) if parts else "no verdict (too few levels)"


def usl_line(v: Verdict) -> str | None:
    f = v.usl
    if f is None:
        return None
    if v.shape is not None and v.shape.name == "pool":
        peak = "no N*: the curve is a fixed pool (it flattens, it does not turn down)"
    elif f.n_star and f.peak_rate:
        peak = f"N* = {f.n_star:.0f}, peak {fmt.rate(f.peak_rate)}"
    else:
        peak = "no peak (κ = 0)"
    on = " on Little's-law concurrency (N = achieved × time in service)" if v.level_unit == "rate" else ""
    return f"USL fit{on}: σ = {f.sigma:.4g}, κ = {f.kappa:.3g}, λ = {f.lam:.4g} Hz/client; {peak}; R² = {f.r2:.3f}"


def warning_lines(record: RunRecord, group: str, v: Verdict | None) -> list[str]:
    """Load-side saturation, Little's-law gaps, USL caveats and the analysis' own warnings."""
    out = []
    for s in record.steps:
        gen = s.generator
        if gen.saturated and group in s.groups:
            out.append(
                f"the load side was saturated at step {s.index} ({fmt.load(s.level, record.level_unit)}: knee "
                f"{gen.cpu_cores:.2f} and its child processes {gen.children_cpu_cores:.2f} of "
                f"{gen.cores_available} cores{gen.others()}); its numbers measure the load generator as much as the "
                "service"
            )
        if s.skewed and s.start_skew_s is not None:
            out.append(
                f"step {s.index}'s shards started {fmt.ms(s.start_skew_s * 1000)} apart, over 5 % of the step: "
                "its workers did not load the service together"
            )
        if s.lost_workers and group in s.groups:
            out.append(
                f"step {s.index} lost {', '.join(s.lost_workers)}: its numbers cover the other workers only (partial)"
            )
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


def finding_line(f: Finding) -> str:
    return f"{f.what}. Fix: {f.fix}" if f.fix else f.what


COUNTERS_HEADER = [
    *("Step", "Level", "Ephemeral ports", "TIME_WAIT", "Listen overflows", "SYN retrans", "Resets", "Memory used")
]
TARGET_HEADER = ["Target CPU", "Target RSS", "Threads", "Open files", "Connections", "Accept queue"]


def counters_table(record: RunRecord) -> Table | None:
    """Per step: the load machine's kernel counters, and the monitored target's process tree when there is one."""
    steps = [s for s in record.steps if s.counters is not None or s.target is not None]
    if not steps:
        return None
    monitored = any(s.target is not None for s in steps)
    rows = []
    for s in steps:
        c = s.counters
        cells = [str(s.index), fmt.load(s.level, record.level_unit)]
        if c is not None:
            cells += [
                f"{c.ephemeral_in_use_peak:,} of {c.ephemeral_ports:,}" if c.ephemeral_in_use_peak else "",
                f"{c.time_wait_peak:,}",
                f"{c.listen_overflows:,}",
                f"{c.syn_retrans:,}",
                f"{c.estab_resets + c.attempt_fails:,}",
                f"{c.mem_used_mb_peak / 1000:.1f} of {c.mem_total_mb / 1000:.1f} GB",
            ]
        else:
            cells += [""] * 6
        if monitored:
            t = s.target
            if t is None:
                cells += [""] * 6
            else:
                queue = ", ".join(
                    f"{ls.port}: {ls.queue_peak}" + (f" of {ls.backlog}" if ls.backlog else "") for ls in t.listen
                )
                conns = t.connections_peak.get("ESTABLISHED", 0)
                cells += [
                    f"{t.cpu_cores_mean:.2f} cores (peak {t.cpu_cores_peak:.2f})",
                    f"{t.rss_mb_peak:.1f} MB",
                    str(t.threads_peak),
                    f"{t.fds_peak:,}",
                    f"{conns:,} established",
                    queue + ("" if t.alive else " (exited)"),
                ]
        rows.append(cells)
    return Table(COUNTERS_HEADER + (TARGET_HEADER if monitored else []), rows)


# ---- the parts of a group's section --------------------------------------------------------------------


REASONS_HEADER = ["Level", "Class", "Count", "Reason"]


def reasons_table(record: RunRecord, group: str) -> Table:
    """Failures per level, grouped by reason: one row per (level, class, normalised message)."""
    rows: list[list[str]] = []
    for s in record.steps:
        g = s.groups.get(group)
        if g is None:
            continue
        for r in g.reasons:
            rows.append([level_cell(row(s, g), record.rates), r.class_, f"{r.count:,}", r.sample])
    return Table(REASONS_HEADER, rows)


STEPS_HEADER = ["Level", "Step", "Count", "Mean", "p50", "p99", "Share of the time"]


def steps_table(record: RunRecord, group: str) -> Table | None:
    """The named steps the client program timed (connect, auth, fetch …), beside the operation, per level."""
    rows: list[list[str]] = []
    # One order for every level: the order the names first appear in the run (engine threads merge
    # their steps in the order they met them, which differs from level to level).
    order: dict[str, None] = {}
    for s in record.steps:
        if group in s.groups:
            order.update(dict.fromkeys(s.groups[group].steps))
    for s in record.steps:
        g = s.groups.get(group)
        if g is None or not g.steps:
            continue
        level = level_cell(row(s, g), record.rates)
        for name in (n for n in order if n in g.steps):
            st = g.steps[name]
            whole = g.latency_ms.mean * g.latency_ms.count
            share = st.mean * st.count / whole if whole > 0 else 0.0
            rows.append([level, name, f"{st.count:,}", fmt.ms(st.mean), fmt.ms(st.p50), fmt.ms(st.p99), fmt.pct(share)])
        lat = g.latency_ms
        rows.append([level, "(operation)", f"{lat.count:,}", fmt.ms(lat.mean), fmt.ms(lat.p50), fmt.ms(lat.p99), ""])
    return Table(STEPS_HEADER, rows) if rows else None


STAGE_HEADER = ["Stage", "Clients", "Operations", "ops/s", "Elapsed", "Failed", "p50", "p99"]


def stages_table(record: RunRecord, group: str) -> Table | None:
    """ops/s and elapsed per stage (fixed-work labels; steps that share a label add up)."""
    acc: dict[str, list[float]] = {}
    for s in record.steps:
        if not s.label or group not in s.groups:
            continue
        g = s.groups[group]
        a = acc.setdefault(s.label, [g.clients, 0, 0.0, 0, g.latency_ms.p50, 0.0])
        a[1] += g.succeeded
        a[2] += g.elapsed_s
        a[3] += g.failed + g.hung
        a[5] = max(a[5], g.latency_ms.p99)
    if not acc:
        return None
    rows = [
        [
            label,
            str(int(a[0])),
            f"{int(a[1]):,}",
            f"{a[1] / a[2]:,.1f}" if a[2] > 0 else "0",
            f"{a[2]:.1f} s",
            f"{int(a[3]):,}",
            fmt.ms(a[4]),
            fmt.ms(a[5]),
        ]
        for label, a in acc.items()
    ]
    return Table(STAGE_HEADER, rows)


def long_levels(record: RunRecord, group: str) -> list[tuple[StepResult, GroupStats]]:
    """The run is a single long level per group (a soak): its per-interval counts are worth a look."""
    sweep = [s for s in record.steps if s.phase == "sweep" and group in s.groups]
    if len(sweep) != 1:
        return []
    g = sweep[0].groups[group]
    return [(sweep[0], g)] if len(g.series) >= LONG_LEVEL_INTERVALS else []


def intervals(record: RunRecord, group: str) -> list[Intervals]:
    out = []
    for _, g in long_levels(record, group):
        d = interval_distribution(g)
        line = (
            f"successes per {d.interval_s:g} s interval over {d.n} intervals: min {d.min:.0f}, p5 {d.p5:.1f}, "
            f"median {d.median:.1f}, p95 {d.p95:.1f}, max {d.max:.0f}"
        )
        top = max(c for _, _, c in d.bins) or 1
        hist = [f"{lo:8.1f} – {hi:8.1f} │{'█' * round(40 * c / top):<40} {c}" for lo, hi, c in d.bins]
        out.append(Intervals(line, hist, d))
    return out


WORKERS_HEADER = ["Step", "Worker", "Host", "Clients", "Succeeded (rate)", "Failed", "Hung", "Load CPU", "Note"]


def workers_table(record: RunRecord) -> Table | None:
    rows = []
    for s in record.steps:
        for w in s.workers:
            rows.append(
                [
                    str(s.index),
                    w.worker,
                    w.host,
                    str(w.clients),
                    f"{w.succeeded:,} ({fmt.rate(w.rate_hz)})",
                    f"{w.failed:,}",
                    f"{w.hung:,}",
                    f"{w.generator.load_cores:.2f} of {w.generator.cores_available}",
                    "lost" if w.lost else ("saturated" if w.generator.saturated else ""),
                ]
            )
    return Table(WORKERS_HEADER, rows) if rows else None


def between_line(record: RunRecord, group: str) -> str | None:
    c = record.between.get(group)
    if c is None:
        return None
    return (
        f"outside the steps (pauses, start and end) the baseload started {c.started:,} more operations: "
        f"{c.succeeded:,} succeeded, {c.failed:,} failed, {c.hung:,} hung, {c.abandoned:,} abandoned"
    )


def _group_view(record: RunRecord, group: str, rows: list[Row], workers: Table | None) -> GroupView:
    v = next((x for x in record.verdicts if x.group == group), None)
    mine = [r for r in rows if r.group == group]
    transfer = any(r.bytes_received for r in mine)
    header = list(RATE_TABLE_HEADER if record.rates else TABLE_HEADER) + ([TRANSFER_HEADER] if transfer else [])
    table = Table(
        header,
        [table_cells(r, record.rates, transfer) for r in mine],
        ["recovery" if r.phase == "recovery" else ("bad" if r.failure_ratio > 0.5 else "") for r in mine],
    )
    return GroupView(
        name=group,
        table=table,
        verdict=verdict_line(v) if v is not None else None,
        usl=usl_line(v) if v is not None else None,
        warnings=warning_lines(record, group, v),
        findings=[finding_line(f) for f in v.findings] if v is not None else [],
        counters=counters_table(record) if group == record.measured_group else None,
        reasons=reasons_table(record, group),
        steps=steps_table(record, group),
        stages=stages_table(record, group),
        intervals=intervals(record, group),
        between=between_line(record, group),
        workers=workers if group == record.measured_group else None,
        plot_levels=len({r.level if record.rates else r.clients for r in mine if r.phase == "sweep"}),
    )


def build(record: RunRecord, scenario_text: str | None = None) -> ReportView:
    """The report's view of `record` (`scenario_text`: the scenario file as run, if there is one)."""
    names = group_names(record)
    rows = [row(s, s.groups[n]) for s in record.steps for n in names if n in s.groups]
    workers = workers_table(record)
    machine = dict(record.machine)
    machine.setdefault("knee_version", record.knee_version or "unknown")
    return ReportView(
        run_id=record.run_id,
        status=record.status,
        created=time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime(record.created_unix)),
        knee_version=record.knee_version or "?",
        steps=len(record.steps),
        measured_group=record.measured_group,
        rates=record.rates,
        executor=record.executor,
        groups=[_group_view(record, n, rows, workers) for n in names],
        rows=rows,
        open_loop=record.rates,
        scenario_text=scenario_text if scenario_text is not None else record.scenario.to_toml(),
        machine=[[str(k), v if isinstance(v, str) else json.dumps(v)] for k, v in sorted(machine.items())],
    )
