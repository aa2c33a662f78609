"""`knee sweep SCENARIO` or `knee sweep TARGET --levels …`: run a sweep level by level into a run
directory, then report."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

import click

from knee.commands.options import (
    RUNS_OUT,
    SERVE,
    apply_run_options,
    cluster_options,
    is_scenario_file,
    one_line_sweep,
    parse_vars,
    read_scenario_file,
    slo_options,
    sweep_target_options,
    targets_options,
    targets_table,
)
from knee.console import make_console
from knee.errors import UserError
from knee.scenario.address import parse_serve

if TYPE_CHECKING:
    from knee.scenario.lineopts import Options

EPILOG = """\b
Examples:
  knee sweep http://127.0.0.1:8080/ --levels auto --max-level 200 -d 10s
  knee sweep examples/http-sweep.toml --var target=http://127.0.0.1:8080
  knee sweep http://127.0.0.1:8080/ls --levels 5,20,50,100 -d 2m
  knee sweep --levels 5,20,50 -d 20m --timeout 1h -- lcg-ls -b -D srmv2 '$dir'
  knee sweep http://127.0.0.1:8080/ --rates 100,200,400 -c 50 -d 30s --slo-p99 200
  knee sweep http://127.0.0.1:8080/ --levels 5,50,500 -d 1m --save-scenario ls.toml
  knee sweep --resume runs/20261122-101500-ls
  knee sweep examples/http-sweep.toml --var target=http://127.0.0.1:8080 --serve 8089
  knee sweep --targets targets.txt --levels 5,20,50 -d 30s       (vegeta's targets: a request mix)
"""


@click.command(name="sweep", epilog=EPILOG, context_settings={"help_option_names": ["-h", "--help"]})
@sweep_target_options(
    levels="Client levels of a one-line sweep, e.g. 5,20,50,100, or auto: knee searches for the peak, the error "
    "onset and the collapse (--max-level, --precision, --budget).",
    rates="Offered rates of a one-line open-loop sweep (/s), e.g. 100,200,400, or auto (the saturation); "
    "-c connections.",
    clients="Open loop (--rates): the connections.",
)
@click.option(
    "--ramp",
    "rate_profile",
    metavar="PROFILE",
    help='One continuous open-loop run under a rising rate, e.g. "0s:10, 120s:400" (-c connections, default 1; '
    "docs/load-shapes.md): the verdict says where the achieved rate fell behind and where errors started.",
)
@targets_options
@click.option("--pause", help="Pause between levels (default 0s).")
@click.option(
    "--settle",
    metavar="MAX",
    help="Before each level, wait at most this long for the service to be back at rest: knee's connections of the "
    "last level closed, the target's listen queue empty, a probe as fast as at the start (default 30s; 0 turns it "
    "off).",
)
@click.option("--up-down", is_flag=True, help="After the highest level, the same levels back down (hysteresis).")
@click.option("--no-recovery", is_flag=True, help="No recovery probes after the sweep (default: probe level one).")
@slo_options
@click.option("--name", default="", help="Name of the run (names the run directory).")
@click.option(
    "--save-scenario",
    type=click.Path(path_type=Path, dir_okay=False),
    help="Write the one-line sweep as a scenario file (TOML) and stop; `knee sweep FILE` then runs the same plan.",
)
@RUNS_OUT
@click.option(
    "--resume",
    "resume",
    type=click.Path(path_type=Path, file_okay=False, exists=True),
    default=None,
    help="Continue an interrupted run from its last complete step.",
)
@cluster_options
@SERVE
@click.option("--quick", is_flag=True, help="Shortened run (about 1 s per level, small counts) to try a scenario.")
def command(target: tuple[str, ...], **opts: Any) -> None:
    """Run a sweep level by level and write a report: from SCENARIO (a TOML file, see docs/scenarios.md), or
    from a TARGET (http(s):// URL, tcp://host:port, or -- COMMAND ARGS) with --levels or --rates.

    Exit status: 0 done, 3 the SLO was not met, 130 interrupted (resume with --resume).
    """
    from knee.runner import execute, start_run
    from knee.scenario import Source, from_raw
    from knee.scenario.lineopts import OPTION_NAMES
    from knee.scenario.oneline import scenario_table
    from knee.scenario.secrets import parse_secret_options
    from knee.store import resume_run

    console = make_console()
    serve = parse_serve(opts["serve"])
    secrets = parse_secret_options(opts["secrets"])
    variables = parse_vars(opts["variables"])
    one_line, given = one_line_sweep(opts)
    if opts["resume"] is not None:
        if target or opts["quick"] or variables or given or opts["save_scenario"] or opts["targets"]:
            raise UserError("--resume continues a run as it was started; drop SCENARIO or TARGET and its options")
        # applied before the run is marked running again: a refused option leaves it as it was
        scenario, run_dir = resume_run(opts["resume"], secrets, prepare=lambda s: apply_run_options(s, opts))
    else:
        names = {**OPTION_NAMES, "groups.main.rate": "--ramp"}
        if opts["targets"] is not None:
            _needs_levels(one_line)
            table, found = targets_table(target, one_line, opts, run=False)
            loaded = from_raw(table, Source("command line", options=names), variables, {**found, **secrets})
            text, name = None, one_line.name or Path(opts["targets"]).stem
        elif is_scenario_file(target):
            loaded, text = read_scenario_file(target[0], given, variables, secrets, "knee sweep TARGET --levels …")
            name = Path(target[0]).stem
        else:
            if not target and not one_line.python:
                raise UserError(
                    "knee sweep needs a SCENARIO file, or a TARGET with --levels (or --rates); see knee sweep --help"
                )
            _needs_levels(one_line)
            tgt: str | list[str] = target[0] if len(target) == 1 and "://" in target[0] else list(target)
            table = scenario_table(tgt, one_line, run=False)
            loaded = from_raw(table, Source("command line", options=names), variables, secrets)
            text, name = None, one_line.name or "sweep"
        if opts["save_scenario"] is not None:
            save = opts["save_scenario"]
            try:
                save.write_text(loaded.record.to_toml())
            except OSError as exc:
                raise UserError(f"--save-scenario {str(save)!r}: cannot write it ({exc.strerror})") from None
            click.echo(f"scenario written to {save}; run it with: knee sweep {save}")
            return
        apply_run_options(loaded.scenario, opts)  # before the run directory: a refused option leaves none
        scenario, run_dir = start_run(loaded, opts["out"], name, text, shorten=opts["quick"])
    outcome = execute(scenario, run_dir, console, cluster=opts["cluster"], serve=serve)
    if outcome.code:
        sys.exit(outcome.code)


def _needs_levels(one_line: Options) -> None:
    if one_line.levels is None and one_line.rates is None and one_line.rate_profile is None:
        raise UserError(
            "a one-line sweep needs --levels (client counts, e.g. 5,20,50), --rates (/s) or --ramp (a rate over "
            'time, e.g. "0s:10, 120s:400")'
        )
