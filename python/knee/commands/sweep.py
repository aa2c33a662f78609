"""`knee sweep SCENARIO`: run a scenario level by level into a run directory, then report."""

from __future__ import annotations

import sys
from pathlib import Path

import click
from rich.console import Console

from knee.errors import UserError
from knee.sweep import execute, resume_run, start_run


def parse_vars(values: tuple[str, ...]) -> dict[str, str]:
    """`--var name=value` pairs → dict (one sentence per mistake)."""
    out: dict[str, str] = {}
    for item in values:
        name, sep, value = item.partition("=")
        if not sep or not name.strip():
            raise UserError(f"--var must look like name=value (got {item!r})")
        out[name.strip()] = value
    return out


@click.command(name="sweep")
@click.argument("scenario", required=False, type=click.Path(path_type=Path, dir_okay=False))
@click.option(
    "--out",
    type=click.Path(path_type=Path, file_okay=False),
    default=Path("runs"),
    show_default=True,
    help="Directory that receives the run directory <out>/<run-id>/.",
)
@click.option(
    "--resume",
    "resume",
    type=click.Path(path_type=Path, file_okay=False, exists=True),
    default=None,
    help="Continue an interrupted run from its last complete step.",
)
@click.option("--quick", is_flag=True, help="Shortened run (about 1 s per level, small counts) to try a scenario.")
@click.option(
    "--var",
    "variables",
    multiple=True,
    metavar="NAME=VALUE",
    help="Fill ${NAME} in the scenario (overrides [vars]); repeatable.",
)
def command(scenario: Path | None, out: Path, resume: Path | None, quick: bool, variables: tuple[str, ...]) -> None:
    """Run SCENARIO (a TOML file, see docs/scenarios.md) level by level and write a report.

    Exit status: 0 done, 3 the SLO in [slo] was not met, 130 interrupted (resume with --resume).
    """
    console = Console()
    if resume is not None:
        if scenario is not None or quick or variables:
            raise UserError("--resume continues a run as it was started; drop SCENARIO, --quick and --var")
        sc, run_dir = resume_run(resume)
    else:
        if scenario is None:
            raise UserError("knee sweep needs a SCENARIO file (or --resume RUN_DIR); see docs/scenarios.md")
        sc, run_dir = start_run(scenario, out, parse_vars(variables), quick)
    code = execute(sc, run_dir, console)
    if code:
        sys.exit(code)
