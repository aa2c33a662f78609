"""`knee demo`: start the demo service, sweep it for 2½ to 3 minutes, say where the report is."""

from __future__ import annotations

import sys
from pathlib import Path

import click

from knee.commands.options import RUNS_OUT
from knee.console import make_console
from knee.executor import on_hard_exit
from knee.runner import execute, start_run
from knee.scenario import read_scenario

DEMO_PROFILE = "srm-fast"

# 2½ to 3 minutes (README): the level search (levels = "auto", about ten levels between 5 and 1200 clients) x (8 s + 1 s
# warm-up + 1 s pause), up to 30 s of waiting for an overloaded service to come back to rest, then up to 20 s of
# recovery probes.
DEMO_SCENARIO = """\
name = "demo"
description = "knee demo: a sweep of the demo service (knee target --profile ${profile})"

[groups.main]
kind = "http"
url = "${target}/files/list"
clients = "level"
timeout = "5s"

[sweep]
levels = "auto"
duration = "8s"
warmup = "1s"
pause = "1s"

[search]
start = 5
max = 1200
budget = "3m"

[recovery]
probe = "4s"
limit = "20s"
pause = "1s"

[analysis]
onset = 0.001
"""


@click.command(name="demo")
@RUNS_OUT
@click.option("--profile", default=DEMO_PROFILE, show_default=True, help="The demo service's profile.")
@click.option("--quick", is_flag=True, help="About 10 seconds instead of 2½ to 3 minutes.")
def command(out: Path, profile: str, quick: bool) -> None:
    """Start `knee target` on a free port, sweep it with a built-in scenario, and write the report."""
    from knee.demo_target import start_target

    console = make_console()
    with start_target(profile) as target:
        forget = on_hard_exit(target.stop)  # a second Ctrl-C must not leave the service running
        try:
            console.print(f"demo service ({profile}) at {target.url}", highlight=False, soft_wrap=True)
            variables = {"target": target.url, "profile": profile}
            loaded = read_scenario(DEMO_SCENARIO, "demo.toml", variables)
            scenario, run_dir = start_run(loaded, out, "demo", DEMO_SCENARIO, shorten=quick)
            code = execute(scenario, run_dir, console).code
        finally:
            forget()
    if code:
        sys.exit(code)
