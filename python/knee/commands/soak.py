"""`knee soak TARGET -c 50 -d 2h` (or `--rate 200`, or a scenario file with mode = "soak"): one level held for long,
written to disk interval by interval, judged by its trends: throughput and latency drift, error bursts, the
target's memory and descriptors, knee's own memory (knee.analysis.soak, docs/load-shapes.md "Soak")."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import click

from knee.commands import options as o
from knee.commands.values import at_least
from knee.console import make_console
from knee.errors import UserError
from knee.scenario.address import parse_serve

EPILOG = """\b
Examples:
  knee soak http://127.0.0.1:8080/ -c 50 -d 2h --monitor-name gunicorn
  knee soak http://127.0.0.1:8080/ --rate 200 -c 20 -d 8h --interval 30s
  knee soak soak.toml                       (a scenario with mode = "soak")
"""

DEFAULT_INTERVAL = "10s"  # a value per 10 s: 720 over two hours, each of thousands of operations


@click.command(name="soak", epilog=EPILOG, context_settings={"help_option_names": ["-h", "--help"]})
@click.argument("target", nargs=-1)
@click.option("-c", "--clients", type=at_least(1), help="Concurrent clients (default 1); with --rate, connections.")
@click.option("--rate", help="Open loop: operations per second over all clients, held for the whole soak.")
@o.load_options
@o.target_options
@o.slo_options
@click.option("--name", default="", help="Name of the run (names the run directory).")
@o.RUNS_OUT
@o.cluster_options
@o.SERVE
def command(target: tuple[str, ...], **opts: Any) -> None:
    """Hold one level on TARGET for -d (hours, typically) and judge its trends: whether throughput and latency drift
    (a Theil–Sen slope per hour with its 95 % interval), error bursts, the monitored target's memory and open
    descriptors (--monitor-pid, --monitor-name), knee's own memory. Each interval (--interval, default 10s) is on
    disk as soon as it ends: a soak killed mid-way keeps all but its last, and `knee report RUN` reports them.

    Exit status: 0 done, 3 an SLO was missed, 130 interrupted.
    """
    from knee.runner import execute, start_run
    from knee.scenario import Source, from_raw
    from knee.scenario.lineopts import OPTION_NAMES
    from knee.scenario.oneline import scenario_table
    from knee.scenario.secrets import parse_secret_options
    from knee.scenario.units import parse_list

    console = make_console()
    serve = parse_serve(opts["serve"])
    variables, secrets = o.parse_vars(opts["variables"]), parse_secret_options(opts["secrets"])
    if o.is_scenario_file(target):
        given = [k for k in ("clients", "rate", "duration", "n", "iterations") if opts.get(k) is not None]
        loaded, text = o.read_scenario_file(target[0], given, variables, secrets, "knee soak TARGET -c …")
        if loaded.scenario.mode != "soak":
            raise UserError(
                f'{target[0]}: knee soak runs a scenario with mode = "soak" (one level, for sweep.duration); add '
                "the line, or run this one with knee sweep"
            )
        name = Path(target[0]).stem
    else:
        if not target:
            raise UserError("knee soak needs a TARGET (http(s):// URL, tcp://host:port or -- COMMAND) or a scenario")
        for option, key in (("-n/--requests", "n"), ("--iterations", "iterations")):
            if opts[key] is not None:
                raise UserError(f"a soak runs for a duration, not a count (got {option}); give -d, e.g. -d 2h")
        if opts["duration"] is None:
            raise UserError("knee soak needs -d/--duration, how long to hold the load (e.g. -d 2h)")
        if str(opts["duration"]).strip().lower() == "auto":
            raise UserError(
                "-d auto runs a sweep's level until its rate settles; a soak holds the load for a set time: give -d 2h"
            )
        rates = parse_list(opts["rate"], "--rate", whole=False)
        if rates is not None and len(rates) != 1:
            raise UserError(f"--rate: a soak holds one rate (got {opts['rate']}); run the others as soaks of their own")
        clients = opts["clients"]
        options = o.to_options(
            {**opts, "clients": clients if rates else None, "interval": opts["interval"] or DEFAULT_INTERVAL},
            levels=None if rates else [clients or 1],
            rates=rates,
        )
        tgt: str | list[str] = target[0] if len(target) == 1 and "://" in target[0] else list(target)
        table = scenario_table(tgt, options, run=False)
        table.update(mode="soak", recovery={"enabled": False}, stop={"at_collapse": False})
        names = dict(OPTION_NAMES, **{"sweep.levels": "-c/--clients", "sweep.rates": "--rate"})
        loaded = from_raw(table, Source("command line", options=names), variables, secrets)
        text, name = None, opts["name"] or "soak"
    o.apply_run_options(loaded.scenario, opts)  # before the run directory: a refused option leaves none
    scenario, run_dir = start_run(loaded, opts["out"], name, text)
    outcome = execute(scenario, run_dir, console, cluster=opts["cluster"], serve=serve)
    if outcome.code:
        sys.exit(outcome.code)
