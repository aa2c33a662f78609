"""`knee compare RUN_A RUN_B`: two runs side by side, level by level, judged against the noise."""

from __future__ import annotations

from pathlib import Path

import click

from knee.analysis.compare import compare_runs
from knee.errors import UserError
from knee.report.compare import render_comparison
from knee.report.terminal import make_console
from knee.store import load_run


@click.command(name="compare")
@click.argument("run_a", type=click.Path(path_type=Path))
@click.argument("run_b", type=click.Path(path_type=Path))
@click.option("--json", "as_json", is_flag=True, help="Print the comparison as JSON.")
@click.option("--alpha", type=float, default=0.05, show_default=True, help="Significance level of the noise tests.")
@click.option(
    "--min-change",
    type=float,
    default=2.0,
    show_default=True,
    help="Rate changes smaller than this many percent count as noise even when significant.",
)
def command(run_a: Path, run_b: Path, as_json: bool, alpha: float, min_change: float) -> None:
    """Compare RUN_B with RUN_A (two runs/<run-id> directories): rate, p99 and failures per level,
    and where B is better or worse beyond noise."""
    if not 0 < alpha < 1:
        raise UserError(f"--alpha {alpha:g} is not a probability; use a value between 0 and 1 such as 0.05")
    if min_change < 0:
        raise UserError(f"--min-change {min_change:g} is negative; use a percentage such as 2")
    cmp = compare_runs(load_run(run_a), load_run(run_b), alpha=alpha, min_change=min_change / 100)
    if as_json:
        click.echo(cmp.model_dump_json(indent=2))
    else:
        render_comparison(cmp, make_console())
