"""`knee compare`'s views of a Comparison (knee.analysis.compare): its tables and lines as text, built once
(`group_tables`, `outcome_lines`, `noise_line`), then formatted for the terminal or as Markdown."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from rich.console import Console
from rich.markup import escape
from rich.table import Table

from knee import fmt
from knee.analysis.compare import Comparison, level_name
from knee.report.markdown import md_cell, md_table
from knee.report.view import Table as ViewTable


def _opt(v: float | None, f: Callable[[float], str]) -> str:
    return "-" if v is None else f(v)


def _failures(n: int | None, ratio: float | None) -> str:
    if n is None:
        return "-"
    return f"{n:,} ({fmt.pct(ratio or 0)})" if n else "0"


def _handshake(mean_ms: float | None, resumed: float | None) -> str:
    """'3.2 ms (40 % resumed)', or '-' without handshakes."""
    if mean_ms is None:
        return "-"
    return f"{fmt.ms(mean_ms)} ({fmt.pct(resumed or 0)} resumed)" if resumed else fmt.ms(mean_ms)


def _hz(x: float) -> str:
    return fmt.rate(x).removesuffix(" Hz")


def _change(pct: float | None, noise: float | None) -> str:
    """'+14.7 ±21.6 %': a change and its interval's half-width, '-' without one."""
    if pct is None:
        return "-"
    return f"{pct:+.1f} %" if noise is None else f"{pct:+.1f} ±{noise:.1f} %"


_SHORT = {"no change within noise": "no change", "only in A": "only A", "only in B": "only B"}
_STYLE = {"better": "green", "worse": "red", "mixed": "yellow"}


@dataclass
class GroupTable:
    """One group's levels as text: the header and a row (with its judgement) a level."""

    group: str
    header: list[str]
    rows: list[list[str]]
    judgements: list[str]  # per row: LevelDelta.overall


def group_tables(cmp: Comparison) -> list[GroupTable]:
    """The comparison's tables, one a group, as both formatters show them."""
    out = []
    for group in dict.fromkeys(d.group for d in cmp.levels):
        rows = [d for d in cmp.levels if d.group == group]
        # the TLS handshake's mean (and the resumed share) when either run's connections shook hands
        tls = any(d.tls_a_ms is not None or d.tls_b_ms is not None for d in rows)
        conf = f"{cmp.confidence * 100:g} %"
        header = ["Level", "Rate A Hz", "Rate B Hz", f"Change ({conf})", "p99 A", "p99 B", "p99 change"]
        header += ["Fail A", "Fail B", *(["TLS A", "TLS B"] if tls else []), "B vs A"]
        table = GroupTable(group, header, [], [])
        for d in rows:
            cells = [
                level_name(d),
                _opt(d.rate_a, _hz),
                _opt(d.rate_b, _hz),
                _change(d.change_pct, d.noise_pct),
                _opt(d.p99_a_ms, fmt.ms),
                _opt(d.p99_b_ms, fmt.ms),
                _change(d.p99_change_pct, d.p99_noise_pct),
                _failures(d.failures_a, d.failure_ratio_a),
                _failures(d.failures_b, d.failure_ratio_b),
            ]
            if tls:
                cells += [_handshake(d.tls_a_ms, d.resumed_a), _handshake(d.tls_b_ms, d.resumed_b)]
            table.rows.append([*cells, _SHORT.get(d.overall, d.overall)])
            table.judgements.append(d.overall)
        out.append(table)
    return out


def request_tables(cmp: Comparison) -> list[GroupTable]:
    """A request mix's requests, B against A level by level (one table a group whose mix both runs had)."""
    out = []
    conf = f"{cmp.confidence * 100:g} %"
    for group in dict.fromkeys(d.group for d in cmp.requests):
        header = ["Level", "Request", "Count A", "Count B", f"Rate change ({conf})", "p99 A", "p99 B", "p99 change"]
        table = GroupTable(group, [*header, "Fail A", "Fail B", "B vs A"], [], [])
        for d in (d for d in cmp.requests if d.group == group):
            table.rows.append(
                [
                    level_name(d),
                    d.request,
                    f"{d.count_a:,}",
                    f"{d.count_b:,}",
                    _change(d.change_pct, d.noise_pct),
                    _opt(d.p99_a_ms, fmt.ms),
                    _opt(d.p99_b_ms, fmt.ms),
                    _change(d.p99_change_pct, d.p99_noise_pct),
                    fmt.pct(d.failure_ratio_a),
                    fmt.pct(d.failure_ratio_b),
                    _SHORT.get(d.overall, d.overall),
                ]
            )
            table.judgements.append(d.overall)
        out.append(table)
    return out


def outcome_lines(cmp: Comparison) -> list[str]:
    """After the summary: each --fail-on rule that failed, or that they passed."""
    out = [f"failed: {line}" for line in cmp.failed]
    if cmp.fail_on and not cmp.failed:
        out.append(f"passed: --fail-on {','.join(cmp.fail_on)}")
    return out


def noise_line(cmp: Comparison) -> str:
    return (
        f"noise: each change ± its {cmp.confidence * 100:g} % interval, from both runs' per-interval series "
        f"(batch means; counting noise for steps of few intervals) and {cmp.noise_floor * 100:g} % of run-to-run "
        f"variation per run (--noise-floor); failures by a two-proportion z-test; changes under "
        f"{cmp.min_change * 100:g} % ignored"
    )


def render_comparison(cmp: Comparison, console: Console) -> None:
    for line in cmp.warnings:
        console.print(f"[yellow]warning:[/] {escape(line)}")
    console.print(f"[bold]A[/] = {escape(cmp.run_a)}   [bold]B[/] = {escape(cmp.run_b)}")
    mixes = {t.group: t for t in request_tables(cmp)}
    for t in [x for g in group_tables(cmp) for x in (g, mixes.get(g.group)) if x is not None]:
        title = f"group {t.group}" + (": per request" if "Request" in t.header else "")
        table = Table(title=escape(title), title_justify="left")
        for h in t.header:
            table.add_column(h, justify="left" if h in ("Level", "Request", "B vs A") else "right")
        for row, judgement in zip(t.rows, t.judgements, strict=True):
            table.add_row(*(escape(c) for c in row), style=_STYLE.get(judgement))
        console.print(table)
    for i, line in enumerate(cmp.summary):
        console.print(f"[bold]{escape(line)}[/]" if i == 0 else escape(line))
    for line in outcome_lines(cmp):
        console.print(f"[red]{escape(line)}[/]" if line.startswith("failed:") else escape(line))
    console.print(f"[dim]{escape(noise_line(cmp))}[/]")


def comparison_markdown(cmp: Comparison) -> str:
    """The same as Markdown (a pull request's comment, a CI summary)."""
    out = [f"# knee compare: A = {md_cell(cmp.run_a)}, B = {md_cell(cmp.run_b)}", ""]
    out += [f"- warning: {md_cell(line)}" for line in cmp.warnings] + ([""] if cmp.warnings else [])
    out += [f"**{md_cell(cmp.summary[0])}**", ""] if cmp.summary else []
    mixes = {t.group: t for t in request_tables(cmp)}
    for t in group_tables(cmp):
        out += [f"## Group {md_cell(t.group)}", "", *md_table(ViewTable(t.header, t.rows)), ""]
        if t.group in mixes:
            out += ["### Per request", "", *md_table(ViewTable(mixes[t.group].header, mixes[t.group].rows)), ""]
    out += [f"- {md_cell(line)}" for line in cmp.summary[1:] + outcome_lines(cmp)]
    out += ["", f"_{md_cell(noise_line(cmp))}_", ""]
    return "\n".join(out)
