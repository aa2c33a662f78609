"""The level table: one `Row` per step x group (the columns of levels.csv; with a request mix, one more per step x
request, `request_rows`) and its cells as the reports show them (`Concurrency | Succeeded (rate) | Failed | Hung |
Abandoned | p50 | p99`, or a rate sweep's)."""

from __future__ import annotations

from dataclasses import asdict, dataclass, fields, replace

from knee import fmt
from knee.analysis.beside import stress_group
from knee.analysis.levels import cut_short, measured_s, ran_out, ran_out_early, window
from knee.analysis.mix import request_rows
from knee.model import GroupStats, RunRecord, StepResult
from knee.report.view.section import Table


@dataclass(frozen=True)
class Row:
    """One step x group (or, `request` set, one request of the group's mix in the step): the columns of levels.csv,
    in order (the open-loop ones only in a rate sweep's). A request's row leaves the columns it has no figure of
    empty (None): its bytes and connection phases are the group's alone."""

    index: int
    label: str
    phase: str
    direction: str
    level: int | float  # clients, or the offered rate (/s) of a rate sweep
    group: str
    request: str  # "" for the group's whole row; a mix's request name for its own
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
    bytes_received: int | None
    transfer_bps: float | None  # bytes received per measured second
    # an operation's phases (the reports' "Connection times"; None when it had none): the connections opened and
    # their TCP connect, the TLS handshakes that resumed a session and the handshakes' time, the time to the
    # first byte
    connections: int | None
    connect_mean_ms: float | None
    connect_p99_ms: float | None
    tls_resumed: int | None
    tls_mean_ms: float | None
    tls_p99_ms: float | None
    ttfb_mean_ms: float | None
    ttfb_p99_ms: float | None
    partial: bool
    superseded: bool  # measured again without repeating it: left out of the verdict and the fit (`knee fit` too)
    # the analysis locates points on the step (not superseded, not run on a service that had not come back to rest,
    # no worker lost, not ended before it measured): the verdict's and `knee fit`'s rows
    believed: bool
    ran_out: str  # the data source whose running out ended the step ("": none did)
    rows_used: int | None  # the rows that source handed out in the step (None: none ran out)
    generator_cpu_cores: float  # knee and its child processes
    machine_cpu_cores: float
    # open loop (None for a closed-loop group): arrivals per second, completions per second, late (of them
    # lagged: knee's own lag, issued while a client was free) and dropped arrivals, and p99 from the actual start
    # (p99_ms counts from the intended start)
    offered_rate_hz: float | None = None
    achieved_rate_hz: float | None = None
    late: int | None = None
    lagged: int | None = None
    dropped: int | None = None
    p99_uncorrected_ms: float | None = None
    concurrency: float | None = None  # in the service, by Little's law (achieved × the mean actual-start latency)

    def as_dict(self, open_loop: bool = True) -> dict[str, object]:
        d = asdict(self)
        return d if open_loop else {k: d[k] for k in LEVEL_COLUMNS}


OPEN_LOOP_COLUMNS = [
    "offered_rate_hz",
    "achieved_rate_hz",
    "late",
    "lagged",
    "dropped",
    "p99_uncorrected_ms",
    "concurrency",
]
LEVEL_COLUMNS = [f.name for f in fields(Row) if f.name not in OPEN_LOOP_COLUMNS]
# the columns the engine counts per group only: a request's row leaves them empty
GROUP_ONLY_COLUMNS = [
    *["bytes_received", "transfer_bps", "connections", "connect_mean_ms", "connect_p99_ms", "tls_resumed"],
    *["tls_mean_ms", "tls_p99_ms", "ttfb_mean_ms", "ttfb_p99_ms", "achieved_rate_hz", "late", "lagged", "dropped"],
    *["p99_uncorrected_ms", "concurrency"],
]


def row(step: StepResult, g: GroupStats) -> Row:
    """The step's rates are the verdict's: judged after the first operation latency when operations were in flight
    at its end (knee.analysis.levels.window)."""
    o = g.open_loop
    w = window(step, g)
    rate = w.rate
    achieved = (w.succeeded + w.failed + w.hung) / w.seconds if w.seconds > 0 else 0.0
    return Row(
        index=step.index,
        label=step.label,
        phase=step.phase,
        direction=step.direction,
        level=step.level,
        group=g.name,
        request="",
        clients=g.clients,
        started=g.started,
        succeeded=g.succeeded,
        failed=g.failed,
        hung=g.hung,
        abandoned=g.abandoned,
        rate_hz=rate,
        failure_ratio=g.failure_ratio,
        p50_ms=g.latency_ms.p50,
        p90_ms=g.latency_ms.p90,
        p99_ms=g.latency_ms.p99,
        max_ms=g.latency_ms.max,
        bytes_received=g.bytes_received,
        transfer_bps=g.bytes_received / seconds if (seconds := measured_s(step, g)) > 0 else 0.0,
        connections=g.connect_ms.count,
        connect_mean_ms=g.connect_ms.mean if g.connect_ms.count else None,
        connect_p99_ms=g.connect_ms.p99 if g.connect_ms.count else None,
        tls_resumed=g.tls_resumed if g.tls_ms.count else None,
        tls_mean_ms=g.tls_ms.mean if g.tls_ms.count else None,
        tls_p99_ms=g.tls_ms.p99 if g.tls_ms.count else None,
        ttfb_mean_ms=g.ttfb_ms.mean if g.ttfb_ms.count else None,
        ttfb_p99_ms=g.ttfb_ms.p99 if g.ttfb_ms.count else None,
        partial=step.partial,
        superseded=step.superseded,
        believed=step.believed and not ran_out_early(step, g.name) and not cut_short(step, g.name),
        ran_out=g.ran_out or "",
        rows_used=used.taken if (used := ran_out(step, g)) is not None else None,
        generator_cpu_cores=step.generator.load_cores,
        machine_cpu_cores=step.generator.machine_cpu_cores,
        offered_rate_hz=o.offered_rate_hz if o else None,
        achieved_rate_hz=achieved if o else None,
        late=o.late if o else None,
        lagged=o.lagged if o else None,
        dropped=o.dropped if o else None,
        p99_uncorrected_ms=o.latency_uncorrected_ms.p99 if o else None,
        # none where no operation succeeded (their time in the service is unknown), as the verdict leaves them out
        concurrency=achieved * o.latency_uncorrected_ms.mean / 1000.0 if o and o.latency_uncorrected_ms.count else None,
    )


def mix_rows(step: StepResult, g: GroupStats, whole: Row) -> list[Row]:
    """A request mix's rows of the step (none without a mix): the group's row `whole` with each request's counts,
    rate and latency, its bytes and connection phases left empty (the engine counts them per group)."""
    return [
        replace(
            whole,
            request=r.name,
            started=r.started,
            succeeded=r.succeeded,
            failed=r.failed,
            hung=r.hung,
            abandoned=r.abandoned,
            rate_hz=r.rate_hz,
            failure_ratio=r.failure_ratio,
            p50_ms=r.p50_ms,
            p90_ms=r.p90_ms,
            p99_ms=r.p99_ms,
            max_ms=r.max_ms,
            **dict.fromkeys(GROUP_ONLY_COLUMNS),
        )
        for r in request_rows(step, g)
    ]


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


def level_cell(r: Row, rates: bool, beside: str | None = None) -> str:
    """The level as the table shows it (clients, or a rate sweep's offered rate), with its phase, direction,
    label and partial marks. A background group's row in a client sweep (`beside`: the stress group it ran
    beside) shows its own clients and the stress level: '4 (beside stress at 2)' (a rate sweep's shows the
    offered rate, and its clients beside it)."""
    text = fmt.level_rate(r.level) if rates else str(r.clients)
    marks = []
    if beside is not None and not rates:
        marks.append(f"beside {beside} at {fmt.level(r.level)}")
    if r.label:
        marks.append(r.label)
    if r.phase == "recovery":
        marks.append("recovery probe")
    elif r.direction == "down":
        marks.append("down")
    if r.partial:
        marks.append("partial")
    if r.ran_out:
        marks.append(f"ran out of {r.ran_out}")
    return f"{text} ({', '.join(marks)})" if marks else text


def _failed_cell(r: Row) -> str:
    total = r.succeeded + r.failed + r.hung
    return f"{r.failed:,} ({fmt.pct(r.failed / total)})" if r.failed else "0"


def table_cells(r: Row, rates: bool, transfer: bool, beside: str | None = None) -> list[str]:
    """`Concurrency | Succeeded (rate) | Failed | Hung | Abandoned | p50 | p99` (+ Transfer); a rate sweep's
    (RATE_TABLE_HEADER) adds what was achieved, late and dropped, and the uncorrected p99, and its Succeeded
    is a count beside Achieved (a closed-loop group beside the open loop: '-' for those). `beside`: the stress
    group a background group's row ran beside (level_cell)."""
    tail = [fmt.transfer(r.transfer_bps or 0.0)] if transfer else []
    cells = [
        level_cell(r, rates, beside),
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
        late_cell(r.late or 0, r.lagged or 0),
        f"{r.dropped:,}",
        *cells[5:],
        fmt.ms(r.p99_uncorrected_ms or 0.0),
        *tail,
    ]


def late_cell(late: int, lagged: int) -> str:
    """'1,275 (1,226 knee's lag)': the late arrivals, and those of them issued while a client was free."""
    return f"{late:,} ({lagged:,} knee's lag)" if lagged else f"{late:,}"


def plot_levels(record: RunRecord, rows: list[Row]) -> int:
    """Distinct levels a group's sweep measured (plots of a curve need 2)."""
    return len({r.level if record.rates else r.clients for r in rows if r.phase == "sweep"})


def levels_table(record: RunRecord, rows: list[Row]) -> Table:
    """One group's table: a row per step (recovery probes dim, steps with most operations failing red); a
    background group's rows name the stress level they ran beside."""
    transfer = any(r.bytes_received for r in rows)
    beside = stress_group(record, rows[0].group) if rows else None
    header = list(RATE_TABLE_HEADER if record.rates else TABLE_HEADER) + ([TRANSFER_HEADER] if transfer else [])
    return Table(
        header,
        [table_cells(r, record.rates, transfer, beside) for r in rows],
        ["recovery" if r.phase == "recovery" else ("bad" if r.failure_ratio > 0.5 else "") for r in rows],
    )
