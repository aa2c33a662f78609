"""The target's machines in the report: per step and endpoint, what its Prometheus exporter said (`steps[].remote`,
knee.machine.remote), and the metrics the user named."""

from __future__ import annotations

from knee import fmt
from knee.model import RemoteStats, RunRecord
from knee.report.view.section import Table

REMOTE_HEADER = [
    *("Step", "Level", "Host", "CPU busy", "Load", "Memory used", "Listen drops", "Established", "TIME_WAIT"),
    *("Context switches", "Connections", "Scrapes"),
]
REMOTE_METRICS_HEADER = ["Step", "Level", "Host", "Metric", "Kind", "Mean", "Peak"]


def _or(value: object, text: str) -> str:
    return "" if value is None else text


def _cells(r: RemoteStats) -> list[str]:
    busy = _or(r.cpu_busy, f"{fmt.pct(r.cpu_busy or 0)} (peak {fmt.pct(r.cpu_busy_peak or 0)})")
    memory = ""
    if r.mem_used_mb_peak is not None and r.mem_total_mb:
        memory = f"{fmt.size(r.mem_used_mb_peak * 1e6)} of {fmt.size(r.mem_total_mb * 1e6)}"
    drops = max(r.listen_overflows or 0, r.listen_drops or 0) if r.listen_overflows is not None else None
    connections = _or(r.pg_connections_peak, f"{r.pg_connections_peak}")
    if r.pg_connections_peak is not None and r.pg_max_connections:
        connections += f" of {r.pg_max_connections}"
    scrapes = f"{r.samples}" + (f", {r.failed} failed: {r.error}" if r.failed else "")
    return [
        r.host,
        busy,
        _or(r.load1_peak, f"{r.load1_peak or 0:.2f}"),
        memory,
        _or(drops, f"{drops or 0:,}"),
        _or(r.tcp_established_peak, f"{r.tcp_established_peak or 0:,}"),
        _or(r.time_wait_peak, f"{r.time_wait_peak or 0:,}"),
        _or(r.context_switches_per_s, f"{r.context_switches_per_s or 0:,.0f}/s"),
        connections,
        scrapes,
    ]


def remote_table(record: RunRecord) -> Table | None:
    """Per step and endpoint: the host's CPU, load, memory, sockets, context switches, a database's connections."""
    rows = [[str(s.index), fmt.load(s.level, record.level_unit), *_cells(r)] for s in record.steps for r in s.remote]
    return Table(REMOTE_HEADER, rows) if rows else None


def remote_metrics_table(record: RunRecord) -> Table | None:
    """Per step and endpoint: the metrics the user named (`[monitor] metrics`), a counter's rate, a gauge's value."""
    rows = [
        [str(s.index), fmt.load(s.level, record.level_unit), r.host, name, m.kind, fmt.sig3(m.mean), fmt.sig3(m.peak)]
        for s in record.steps
        for r in s.remote
        for name, m in r.metrics.items()
    ]
    return Table(REMOTE_METRICS_HEADER, rows) if rows else None
