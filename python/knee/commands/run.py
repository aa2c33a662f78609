"""`knee run TARGET`: one level of load, measured exactly (a better ab / wrk / shell loop).

It is a one-step plan (one step per rate with `--rate 100,200,400`) run by the same runner as a
sweep; `--out DIR` keeps the same run directory a sweep writes.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import Any

import click

from knee.commands.options import (
    SERVE,
    apply_run_options,
    cluster_options,
    is_scenario_file,
    load_options,
    parse_vars,
    run_scenario_file,
    slo_options,
    target_options,
    targets_options,
    targets_table,
    to_options,
)
from knee.commands.values import at_least
from knee.console import make_console
from knee.errors import UserError
from knee.scenario.address import parse_serve

EPILOG = """\b
Examples:
  knee run http://127.0.0.1:8080/ -c 50 -n 20000
  knee run http://127.0.0.1:8080/ -c 50 -d 30s --new-connection --json out.json
  knee run tcp://127.0.0.1:9000 -c 10 -d 5s --send 'PING\\n' --expect PONG
  knee run -c 8 --iterations 100 --timeout 5s -- curl -sf http://127.0.0.1:8080/
  knee run http://127.0.0.1:8080/ --rate 500 -c 50 -d 30s          (open loop)
  knee run http://127.0.0.1:8080/ --rate 100,200,400 --poisson -d 5s  (one row per rate)
  knee run http://127.0.0.1:8080/ --rate-profile "0s:10, 60s:400" -c 200   (a ramp: where it fell behind)
  knee run http://127.0.0.1:8080/ --clients-profile "0s:1, 60s:40"   (clients ramp: from where no faster)
  knee run http://127.0.0.1:8080/ -c 50 -d 30s --out runs/         (keep a run directory)
  knee run http://127.0.0.1:8080/ -c 50 -d 10m --serve 8089     (watch it at http://127.0.0.1:8089/)
  knee run http://127.0.0.1:8080/ -c 50 -d 30s --slo-p99 200 --slo-failure-ratio 0.01   (CI: exit 3 if missed)
  knee run site.toml -c 20 -n 5000                      (a scenario file's measured group at one level)
  knee run --targets targets.txt -c 20 -d 30s             (vegeta's targets: a request mix)
"""


@click.command(name="run", epilog=EPILOG, context_settings={"help_option_names": ["-h", "--help"]})
@click.argument("target", nargs=-1)
@click.option("-c", "--clients", type=at_least(1), help="Concurrent clients (default 1).")
@click.option(
    "--rate",
    help="Open loop: operations per second over all clients (e.g. 500), or several (100,200,400) run one "
    "after another; -c is then the number of connections. Latency counts from each intended start.",
)
@click.option(
    "--rate-profile",
    help='Open loop with a rate over time: a ramp "0s:10, 60s:400", sine(mean=200, amplitude=100, period=60s) or '
    "spike(base=50, peak=2000, at=30s, hold=10s) (docs/load-shapes.md); -d defaults to its end. A rising one is "
    "judged: where the achieved rate fell behind, where errors started.",
)
@click.option("--rate-step", is_flag=True, help="--rate-profile's points are steps: each rate held until the next.")
@click.option(
    "--clients-profile",
    help='Closed loop with the clients over time: a ramp "0s:1, 60s:40", sine(…) or spike(…) like --rate-profile; '
    "client k runs while the profile is at least k, and one it falls below finishes its operation first. A rising "
    "one is judged: from how many clients it got no faster, where errors started.",
)
@load_options
@target_options
@targets_options
@slo_options
@click.option("--json", "json_path", type=click.Path(dir_okay=False), help="Write the result as JSON to this file.")
@click.option(
    "--out",
    type=click.Path(path_type=Path, file_okay=False),
    help="Keep a run directory under this directory (run.json, reports, histograms), like a sweep's.",
)
@cluster_options
@SERVE
@click.option("-q", "--quiet", is_flag=True, help="No live progress.")
def command(target: tuple[str, ...], **opts: Any) -> None:
    """Drive TARGET with N concurrent clients and report exactly what happened.

    TARGET is an http(s):// URL, tcp://host:port, -- COMMAND ARGS (run without a shell), or a scenario file
    (SCENARIO.toml: its measured group at the level -c or --rate gives); or --targets FILE (vegeta's targets).

    Exit status: 0 done (failures are counted, not an error, unless an SLO limits them), 2 a mistake in what was
    asked, 3 an SLO (--slo-p99, --slo-failure-ratio) was missed, 130 interrupted.
    """
    from knee.analysis.client_ramp import run_client_ramp
    from knee.analysis.ramp import run_ramp
    from knee.analysis.spike import run_spike
    from knee.progress_line import RunProgress
    from knee.report import abtext
    from knee.runner import EXIT_SLO_FAILED, execute, start_run
    from knee.scenario import Source, from_raw
    from knee.scenario.lineopts import OPTION_NAMES
    from knee.scenario.oneline import scenario_table
    from knee.scenario.secrets import parse_secret_options
    from knee.scenario.units import parse_list
    from knee.store import write_json

    tgt: str | list[str] = target[0] if len(target) == 1 and "://" in target[0] else list(target)
    json_path = opts["json_path"]
    if json_path and not os.access(Path(json_path).resolve().parent, os.W_OK):
        raise UserError(f"--json {json_path!r}: its directory does not exist or cannot be written")
    serve = parse_serve(opts["serve"])
    options = to_options(opts, rates=parse_list(opts["rate"], "--rate", whole=False, over_time="--rate-profile"))
    names = dict(OPTION_NAMES, **{"sweep.levels": "-c/--clients", "sweep.rates": "--rate"})
    if opts["clients_profile"] is not None:
        names["groups.main.clients"] = "--clients-profile"
    variables, secrets = parse_vars(opts["variables"]), parse_secret_options(opts["secrets"])
    if opts["targets"] is not None:
        table, found = targets_table(target, options, opts, run=True)
        loaded = from_raw(table, Source("command line", options=names), variables, {**found, **secrets})
    elif is_scenario_file(target):
        loaded = run_scenario_file(target[0], options, variables, secrets)
    else:
        table = scenario_table(tgt, options, run=True)
        loaded = from_raw(table, Source("command line", options=names), variables, secrets)
    apply_run_options(loaded.scenario, opts)  # before the run directory: a refused option leaves none
    scenario, run_dir = start_run(loaded, opts["out"], "run")
    console = make_console()
    several = len(loaded.scenario.levels()) > 1
    progress = RunProgress(loaded.record, live=not opts["quiet"] and sys.stderr.isatty(), headers=several)
    outcome = execute(
        scenario,
        run_dir,
        console,
        cluster=opts["cluster"],
        progress=progress,
        show=False,
        write=run_dir.kept,
        serve=serve,
    )
    steps = outcome.record.steps
    if several:
        click.echo("")
        click.echo(abtext.render_rate_steps(loaded.record, steps))
    # the verdicts over time: a ramp's (rate or clients) and a spike's; without --out nothing was analysed, so
    # they are read here all the same
    judges = (
        ("Ramp", "ramp", run_ramp),
        ("Clients ramp", "client_ramp", run_client_ramp),
        ("Spike", "spike", run_spike),
    )
    for title, key, judge in judges:
        found = [(v.group, getattr(v, key)) for v in outcome.record.verdicts if getattr(v, key) is not None]
        if not outcome.record.verdicts:
            found = [(n, x) for n in loaded.scenario.groups if (x := judge(outcome.record, n)) is not None]
        for name, over_time in found:
            click.echo(f"\n{title} ({name}): " + "; ".join(over_time.sentences))
    checks = [(step, abtext.slo_check(loaded.record, step)) for step in steps]
    if any(check is not None for _, check in checks):
        click.echo("")
    for step, check in checks:
        if check is not None:
            click.echo(abtext.render_slo(loaded.record, step, check, several))
    missed = any(check is not None and not check.met for _, check in checks)
    if run_dir.kept:
        click.echo(f"\nrun directory: {run_dir.path} (report.html, report.md, run.json)")
    if json_path and steps:
        where = str(run_dir.path) if run_dir.kept else None
        doc = (
            abtext.to_json(loaded.record, steps[0], run_dir=where)
            if not several
            else abtext.steps_to_json(loaded.record, steps, where)
        )
        write_json(Path(json_path), doc.model_dump_json(indent=2, by_alias=True) + "\n", loaded.secrets)
        click.echo(f"\nJSON written to {json_path}")
    code = outcome.code or (EXIT_SLO_FAILED if missed else 0)  # with --out, the run's verdict said so already
    if code:
        sys.exit(code)
