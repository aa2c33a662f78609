"""A group's other tables: failure reasons, connection times, timed steps, stages, the machine's and the target's
counters, the workers of a distributed run, and a long level's per-interval distribution."""

from __future__ import annotations

from dataclasses import dataclass

from knee import fmt
from knee.analysis.beside import stress_group
from knee.analysis.stats import IntervalDistribution, interval_distribution
from knee.model import GroupStats, LatencyStats, RunRecord, StepResult
from knee.report.view.levels import level_cell, row
from knee.report.view.section import Table

LONG_LEVEL_INTERVALS = 10


@dataclass(frozen=True)
class Intervals:
    """A long single level (a soak): the distribution of its per-interval counts."""

    line: str
    histogram: list[str]
    dist: IntervalDistribution


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


REASONS_HEADER = ["Level", "Class", "Count", "Reason"]


def reasons_table(record: RunRecord, group: str) -> Table:
    """Failures per level, grouped by reason: one row per (level, class, normalised message)."""
    rows: list[list[str]] = []
    beside = stress_group(record, group)
    for s in record.steps:
        g = s.groups.get(group)
        if g is None:
            continue
        for r in g.reasons:
            rows.append([level_cell(row(s, g), record.rates, beside), r.class_, f"{r.count:,}", r.sample])
    return Table(REASONS_HEADER, rows, kv=True)


PHASES_HEADER = ["Level", "Connections", "Connect", "TLS handshake", "Resumed", "Waiting", "Total"]


def phases_table(record: RunRecord, group: str) -> Table | None:
    """Per level, an operation's phases (ab's "Connection Times", mean and p99): the TCP connect and the TLS
    handshake of the connections opened, how many handshakes resumed a session, the time to the first byte and
    the whole operation. None for a group that neither connected nor waited for a response (exec, workers)."""
    rows: list[list[str]] = []
    beside = stress_group(record, group)

    def cell(st: LatencyStats) -> str:
        return f"{fmt.ms(st.mean)} ({fmt.ms(st.p99)})" if st.count else "–"

    for s in record.steps:
        g = s.groups.get(group)
        if g is None or (g.connect_ms.count == 0 and g.ttfb_ms.count == 0):
            continue
        resumed = f"{g.tls_resumed:,} of {g.tls_ms.count:,}" if g.tls_ms.count else "–"
        rows.append(
            [
                level_cell(row(s, g), record.rates, beside),
                f"{g.connect_ms.count:,}",
                cell(g.connect_ms),
                cell(g.tls_ms),
                resumed,
                cell(g.ttfb_ms),
                cell(g.latency_ms),
            ]
        )
    return Table(PHASES_HEADER, rows) if rows else None


def handshakes(record: RunRecord, group: str) -> bool:
    """The group's operations shook hands (TLS) in some step."""
    return any(s.groups[group].tls_ms.count for s in record.steps if group in s.groups)


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
    beside = stress_group(record, group)
    for s in record.steps:
        g = s.groups.get(group)
        if g is None or not g.steps:
            continue
        level = level_cell(row(s, g), record.rates, beside)
        for name in (n for n in order if n in g.steps):
            st = g.steps[name]
            whole = g.operations_ms  # a step is timed in failed operations too
            share = st.mean * st.count / whole if whole > 0 else 0.0
            rows.append([level, name, f"{st.count:,}", fmt.ms(st.mean), fmt.ms(st.p50), fmt.ms(st.p99), fmt.pct(share)])
        lat = g.latency_ms
        rows.append([level, "(operation)", f"{lat.count:,}", fmt.ms(lat.mean), fmt.ms(lat.p50), fmt.ms(lat.p99), ""])
    return Table(STEPS_HEADER, rows) if rows else None


STAGE_HEADER = ["Stage", "Clients", "Operations", "ops/s", "Elapsed", "Failed", "p50", "p99"]


def stages_table(record: RunRecord, group: str) -> Table | None:
    """ops/s and elapsed per stage (fixed-work labels; steps that share a label add up; p50 and p99 are the highest
    of its steps': the first step's p50 alone was shown)."""
    acc: dict[str, list[float]] = {}
    for s in record.steps:
        if not s.label or group not in s.groups:
            continue
        g = s.groups[group]
        a = acc.setdefault(s.label, [g.clients, 0, 0.0, 0, g.latency_ms.p50, 0.0])
        a[1] += g.succeeded
        a[2] += g.elapsed_s
        a[3] += g.failed + g.hung
        a[4] = max(a[4], g.latency_ms.p50)
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
                    f"{w.generator.load_cores:.2f} of {w.generator.cpu_quota or w.generator.cores_available:g}",
                    "lost" if w.lost else ("saturated" if w.generator.saturated else ""),
                ]
            )
    return Table(WORKERS_HEADER, rows) if rows else None
