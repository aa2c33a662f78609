"""The report's view: everything a report shows, built once from the run record.

`build(record, scenario_text)` computes the numbers and their words; the terminal, Markdown and HTML reports
loop over each group's `Section`s (`group_sections`, the one list of what a group's report holds, in order)
and levels.csv and `knee.sweep()`'s table read its `Row`s. A new section is one entry in `group_sections`.
Numbers are written by `knee.fmt`, the formatter the verdict's sentences use too.
"""

from __future__ import annotations

import json
import time
from dataclasses import dataclass

from knee.analysis.run import group_names
from knee.model import RunRecord
from knee.report.view.levels import (
    LEVEL_COLUMNS,
    OPEN_LOOP_COLUMNS,
    RATE_TABLE_HEADER,
    TABLE_HEADER,
    TRANSFER_HEADER,
    Row,
    level_cell,
    levels_table,
    mix_rows,
    plot_levels,
    row,
    table_cells,
)
from knee.report.view.remote import remote_metrics_table, remote_table
from knee.report.view.requests import data_lines, requests_table
from knee.report.view.section import PAGE_PARTS, Section, Table
from knee.report.view.tables import (
    counters_table,
    handshakes,
    intervals,
    phases_table,
    reasons_table,
    stages_table,
    steps_table,
    workers_table,
)
from knee.report.view.words import (
    between_line,
    finding_line,
    search_lines,
    settle_lines,
    steady_lines,
    usl_line,
    verdict_line,
    verdict_lines,
    warning_lines,
)

__all__ = [
    "LEVEL_COLUMNS",
    "OPEN_LOOP_COLUMNS",
    "PAGE_PARTS",
    "RATE_TABLE_HEADER",
    "TABLE_HEADER",
    "TRANSFER_HEADER",
    "GroupView",
    "ReportView",
    "Row",
    "Section",
    "Table",
    "build",
    "group_sections",
    "level_cell",
    "row",
    "table_cells",
    "usl_line",
    "verdict_line",
    "verdict_lines",
    "warning_lines",
]

MAX_TERMINAL_REASONS = 20  # the terminal's failure reasons; report.md has them all


@dataclass(frozen=True)
class GroupView:
    name: str
    sections: list[Section]  # in the order Markdown and the terminal show them; the page orders them by part
    plot_levels: int  # distinct levels measured (plots of a curve need 2)

    def section(self, key: str) -> Section | None:
        return next((s for s in self.sections if s.key == key), None)


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
    rows: list[Row]  # a row per step x group
    csv_rows: list[Row]  # levels.csv's: each group row followed by its step's request rows (a mix's)
    open_loop: bool  # levels.csv carries the open-loop columns
    scenario_text: str
    machine: list[list[str]]

    @property
    def level_columns(self) -> list[str]:
        return LEVEL_COLUMNS + OPEN_LOOP_COLUMNS if self.open_loop else LEVEL_COLUMNS


def group_sections(record: RunRecord, group: str, rows: list[Row], workers: Table | None) -> list[Section]:
    """What `group`'s report holds, in order: its table, the verdict and the sentences around it, then the
    tables of details (`rows`: the group's level rows; `workers`: the run's per-worker table). A section with
    nothing to show is left out, except the failure reasons, which the page shows as "No failures."."""
    v = next((x for x in record.verdicts if x.group == group), None)
    usl = usl_line(v) if v is not None else None
    between = between_line(record, group)
    measured = group == record.measured_group
    counters = counters_table(record) if measured else None
    sections = [
        Section("table", table=levels_table(record, rows), terminal_title=f"group {group}", page="table"),
        # a request mix: each request's counts, failures and latency per level, under the group's table
        Section(
            "requests",
            "Per request",
            table=requests_table(record, group),
            terminal_title=f"group {group}: per request",
            page="table",
        ),
        Section("verdict", lines=verdict_lines(v) if v is not None else [], style="verdict", page="summary"),
        Section("usl", lines=[usl] if usl is not None else [], page="summary"),
        Section("why", "Why", lines=[finding_line(f) for f in v.findings] if v else [], style="why", page="summary"),
        Section("warnings", lines=warning_lines(record, group, v), style="warning", page="summary"),
        Section("search", "Search", lines=search_lines(record, group) if measured else [], page="table"),
        Section(
            "settle", "Settling between steps", lines=settle_lines(record, group) if measured else [], page="table"
        ),
        Section("steady", "Steady state", lines=steady_lines(record, group) if measured else [], page="table"),
        Section("between", lines=[between] if between else [], page="table"),
        Section("data", "Data that ran out", lines=data_lines(record, group), page="table"),
        Section(
            "reasons",
            "Failure reasons",
            table=reasons_table(record, group),
            terminal_title=f"group {group}: failure reasons",
            terminal_rows=MAX_TERMINAL_REASONS,
            empty="No failures.",
            page="reasons",
        ),
        # the terminal shows the phases when a TLS handshake was among them (its cost is the news); the files always
        Section(
            "phases",
            "Connection times: mean (p99)",
            table=phases_table(record, group),
            terminal_title=f"group {group}: connection times, mean (p99)" if handshakes(record, group) else None,
        ),
        Section("steps", "Timed steps", table=steps_table(record, group), terminal_title=f"group {group}: timed steps"),
        # "Per stage" here, "group NAME per stage" in the terminal: today's titles, kept as they were
        Section("stages", "Per stage", table=stages_table(record, group), terminal_title=f"group {group} per stage"),
        *(
            Section("intervals", "Per-interval distribution", lines=[iv.line], pre=iv.histogram)
            for iv in intervals(record, group)
        ),
        # the terminal has never shown the counters (terminal_title None)
        Section("counters", "Machine and target counters", table=counters, page="machine"),
        Section(
            "workers", "Per worker", table=workers if measured else None, terminal_title="per worker", page="machine"
        ),
        # the target's machines, through their Prometheus exporters ([monitor] prometheus); not on the terminal
        Section("remote", "The target's machines", table=remote_table(record) if measured else None, page="machine"),
        Section(
            "remote_metrics",
            "Metrics of the target's machines",
            table=remote_metrics_table(record) if measured else None,
            page="machine",
        ),
    ]
    return [s for s in sections if s.lines or s.pre or s.table is not None]


def _group_view(record: RunRecord, group: str, rows: list[Row], workers: Table | None) -> GroupView:
    mine = [r for r in rows if r.group == group]
    return GroupView(
        name=group, sections=group_sections(record, group, mine, workers), plot_levels=plot_levels(record, mine)
    )


def build(record: RunRecord, scenario_text: str | None = None) -> ReportView:
    """The report's view of `record` (`scenario_text`: the scenario file as run, if there is one)."""
    names = group_names(record)
    pairs = [(s, s.groups[n]) for s in record.in_level_order() for n in names if n in s.groups]
    rows = [row(s, g) for s, g in pairs]
    csv_rows = [r for (s, g), whole in zip(pairs, rows, strict=True) for r in (whole, *mix_rows(s, g, whole))]
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
        csv_rows=csv_rows,
        open_loop=record.rates,
        scenario_text=scenario_text if scenario_text is not None else record.scenario.to_toml(),
        machine=[[str(k), v if isinstance(v, str) else json.dumps(v)] for k, v in sorted(machine.items())],
    )
