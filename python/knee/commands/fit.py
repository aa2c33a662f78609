"""`knee fit FILE.csv`: fit the Universal Scalability Law to a concurrency,rate table."""

from __future__ import annotations

import json
from pathlib import Path

import click
import numpy as np
from rich.console import Console
from rich.markup import escape
from rich.table import Table

from knee.analysis import fit_usl, usl
from knee.analysis.table import Points, read_points
from knee.console import make_console
from knee.model import USLFit

_NAMES = {"sigma": "σ (contention)", "kappa": "κ (coherency)", "lam": "λ (rate of 1 client)"}


@click.command(name="fit")
@click.argument("file", type=click.Path(path_type=Path, dir_okay=True, exists=False))
@click.option("--group", default=None, help="With a run's levels.csv: the group to fit.")
@click.option("--label", default=None, help="With a run's levels.csv of a staged run: the stage to fit.")
@click.option("--json", "as_json", is_flag=True, help="Print the fit as JSON instead of a table.")
def command(file: Path, group: str | None, label: str | None, as_json: bool) -> None:
    """Fit X(N) = λN / (1 + σ(N−1) + κN(N−1)) to FILE, a CSV of concurrency,rate rows.

    The header is optional and extra columns are ignored; a run's levels.csv works too.
    Prints σ, κ, λ with 95 % confidence intervals, the predicted peak N* and its rate,
    R², warnings with the levels worth adding, and measured against fitted rates.
    """
    points = read_points(file, group, label)
    fit = fit_usl(points.levels, points.rates)
    if as_json:
        click.echo(json.dumps(_as_dict(file, points, fit), indent=2))
    else:
        _print(make_console(highlight=False), file, points, fit)


def _fitted(points: Points, fit: USLFit) -> list[float]:
    return [float(v) for v in usl(np.asarray(points.levels), fit.sigma, fit.kappa, fit.lam)]


def _as_dict(file: Path, points: Points, fit: USLFit) -> dict[str, object]:
    return {
        "file": str(file),
        "points": [
            {"concurrency": n, "rate": x, "fitted": f}
            for n, x, f in zip(points.levels, points.rates, _fitted(points, fit), strict=True)
        ],
        "fit": fit.model_dump(mode="json"),
    }


def _g(x: float) -> str:
    return f"{x:.4g}"


def _print(console: Console, file: Path, points: Points, fit: USLFit) -> None:
    console.print(f"[bold]USL fit[/] of {escape(str(file))} ({len(points.levels)} points)")
    params = Table(show_header=True, box=None, pad_edge=False)
    for h in ("parameter", "value", "95 % interval"):
        params.add_column(h, justify="left" if h == "parameter" else "right")
    for key in ("sigma", "kappa", "lam"):
        lo_hi = fit.ci.get(key)
        ci = f"[{_g(lo_hi[0])}, {_g(lo_hi[1])}]" if lo_hi else "–"
        params.add_row(_NAMES[key], _g(getattr(fit, key)), ci)
    if fit.n_star is not None and fit.peak_rate is not None:
        params.add_row("N* (peak)", f"{fit.n_star:.1f}", "")
        params.add_row("predicted peak rate", _g(fit.peak_rate), "")
    else:
        params.add_row("N* (peak)", "none (κ = 0)", "")
        if fit.sigma > 0:
            params.add_row("rate ceiling λ/σ", _g(fit.lam / fit.sigma), "")
    params.add_row("R²", f"{fit.r2:.4f}", "")
    console.print(params)
    for w in fit.warnings:
        console.print(f"[yellow]warning:[/] {escape(w)}")
    for a in fit.advice:
        console.print(f"[cyan]advice:[/] {escape(a)}")
    table = Table(title="measured vs fitted", title_justify="left")
    for h in (points.level_name, f"measured {points.rate_name}", "fitted", "residual"):
        table.add_column(escape(h), justify="right")
    for n, x, f in zip(points.levels, points.rates, _fitted(points, fit), strict=True):
        table.add_row(f"{n:g}", _g(x), _g(f), f"{x - f:+.3g}")
    console.print(table)
