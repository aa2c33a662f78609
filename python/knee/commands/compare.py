"""`knee compare RUN_A RUN_B`: two runs side by side, level by level, judged against the noise."""

from __future__ import annotations

import sys
from pathlib import Path

import click

from knee.analysis.compare import compare_runs
from knee.analysis.failon import hold, parse_rules
from knee.analysis.stats import NOISE_FLOOR
from knee.commands.values import NUMBER
from knee.errors import UserError
from knee.report.compare import comparison_markdown, render_comparison
from knee.report.terminal import make_console
from knee.store import load_run

EXIT_REGRESSION = 3


@click.command(name="compare")
@click.argument("run_a", type=click.Path(path_type=Path))
@click.argument("run_b", type=click.Path(path_type=Path))
@click.option("--json", "as_json", is_flag=True, help="Print the comparison as JSON.")
@click.option("--markdown", is_flag=True, help="Print the comparison as Markdown (a pull request's comment).")
@click.option(
    "--fail-on",
    "fail_on",
    multiple=True,
    metavar="RULE",
    help="Exit 3 when B regressed beyond noise and beyond this size at a level: throughput:PCT%, p99:PCT% or "
    "errors:PCT% (PCT a number or any), e.g. throughput:5%; repeatable or comma-separated.",
)
@click.option(
    "--alpha", type=NUMBER, default=0.05, show_default=True, help="1 − the confidence of the changes' intervals."
)
@click.option(
    "--min-change",
    type=NUMBER,
    default=2.0,
    show_default=True,
    help="Changes smaller than this many percent count as no change even when beyond noise.",
)
@click.option(
    "--noise-floor",
    type=NUMBER,
    default=NOISE_FLOOR * 100,
    show_default=True,
    help="Run-to-run variation of a level's rate and p99 that one step cannot show (a standard deviation, "
    "% of the figure), added to each run's own noise.",
)
def command(
    *,
    run_a: Path,
    run_b: Path,
    as_json: bool,
    markdown: bool,
    fail_on: tuple[str, ...],
    alpha: float,
    min_change: float,
    noise_floor: float,
) -> None:
    """Compare RUN_B with RUN_A (two runs/<run-id> directories): rate, p99 and failures per level, each change
    with its interval, and where B is better or worse beyond noise.

    Exit status: 0 done, 3 a --fail-on rule failed, 2 bad input.
    """
    if as_json and markdown:
        raise UserError("--json and --markdown each print the whole comparison; give one of them")
    if not 0 < alpha < 1:
        raise UserError(f"--alpha {alpha:g} is not a probability; use a value between 0 and 1 such as 0.05")
    if min_change < 0:
        raise UserError(f"--min-change {min_change:g} is negative; use a percentage such as 2")
    if not 0 <= noise_floor < 100:
        raise UserError(f"--noise-floor {noise_floor:g} is not a percentage from 0 to 100; use e.g. 5 (or 0 for none)")
    rules = parse_rules(fail_on)
    cmp = compare_runs(
        load_run(run_a), load_run(run_b), confidence=1 - alpha, floor=noise_floor / 100, min_change=min_change / 100
    )
    passed = hold(cmp, rules)
    if as_json:
        click.echo(cmp.model_dump_json(indent=2))
    elif markdown:
        click.echo(comparison_markdown(cmp), nl=False)
    else:
        render_comparison(cmp, make_console())
    if not passed:
        sys.exit(EXIT_REGRESSION)
