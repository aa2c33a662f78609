"""`knee compare`'s terminal view of a Comparison (knee.analysis.compare)."""

from __future__ import annotations

from collections.abc import Callable

from rich.console import Console
from rich.markup import escape
from rich.table import Table

from knee import fmt
from knee.analysis.compare import Comparison, level_name


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


def render_comparison(cmp: Comparison, console: Console) -> None:
    for line in cmp.warnings:
        console.print(f"[yellow]warning:[/] {escape(line)}")
    console.print(f"[bold]A[/] = {escape(cmp.run_a)}   [bold]B[/] = {escape(cmp.run_b)}")
    for group in dict.fromkeys(d.group for d in cmp.levels):
        table = Table(title=f"group {escape(group)}", title_justify="left")
        rows = [d for d in cmp.levels if d.group == group]
        # the TLS handshake's mean (and the resumed share) when either run's connections shook hands
        tls = any(d.tls_a_ms is not None or d.tls_b_ms is not None for d in rows)
        conf = f"{cmp.confidence * 100:g} %"
        header = ["Level", "Rate A Hz", "Rate B Hz", f"Change ({conf})", "p99 A", "p99 B", "p99 change"]
        header += ["Fail A", "Fail B"]
        header += ["TLS A", "TLS B"] if tls else []
        for h in [*header, "B vs A"]:
            table.add_column(h, justify="left" if h in ("Level", "B vs A") else "right")
        for d in rows:
            cells = [
                escape(level_name(d)),
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
            table.add_row(*cells, _SHORT.get(d.overall, d.overall), style=_STYLE.get(d.overall))
        console.print(table)
    for i, line in enumerate(cmp.summary):
        console.print(f"[bold]{escape(line)}[/]" if i == 0 else escape(line))
    for line in cmp.failed:
        console.print(f"[red]failed:[/] {escape(line)}")
    if cmp.fail_on and not cmp.failed:
        console.print(f"passed: --fail-on {escape(','.join(cmp.fail_on))}")
    console.print(
        f"[dim]noise: each change ± its {cmp.confidence * 100:g} % interval, from both runs' per-interval series "
        f"(batch means; counting noise for steps of few intervals) and {cmp.noise_floor * 100:g} % of run-to-run "
        f"variation per run (--noise-floor); failures by a two-proportion z-test; changes under "
        f"{cmp.min_change * 100:g} % ignored[/]"
    )
