"""`knee doctor [SCENARIO | TARGET --levels …]`: the preflight of a run or sweep on its own, every finding at
once (what, why, fix) and the machine's values it read; see docs/doctor.md."""

from __future__ import annotations

import json
import sys
from typing import TYPE_CHECKING, Any

import click

from knee.commands.options import is_scenario_file, one_line_sweep, parse_vars, read_scenario_file, sweep_target_options
from knee.errors import UserError

if TYPE_CHECKING:
    from knee.preflight import Load, Preflight
    from knee.scenario import Loaded
    from knee.scenario.oneline import Options

EPILOG = """\b
Examples:
  knee doctor                                            (this machine, for 1000 clients)
  knee doctor http://10.0.0.9:8080/ --levels 50,500,5000 --new-connection
  knee doctor examples/http-sweep.toml --var target=http://127.0.0.1:8080
  knee doctor -c 200 -- psql -h db -c 'select 1'          (runs the command once; --no-probe: don't)
"""

EXIT_FOUND = 1  # a finding that would make the run fail (knee: error: … for bad input stays 2)


@click.command(name="doctor", epilog=EPILOG, context_settings={"help_option_names": ["-h", "--help"]})
@sweep_target_options(
    levels="Client levels of a one-line sweep, e.g. 5,20,50,100 (the largest is checked).",
    rates="Offered rates of a one-line open-loop sweep (/s); -c connections.",
    clients="Concurrent clients, as in knee run (default 1).",
)
@click.option("--no-probe", is_flag=True, help="Do not run an exec command once (it may have side effects).")
@click.option("--json", "as_json", is_flag=True, help="Print the findings and the values read as JSON.")
def command(target: tuple[str, ...], **opts: Any) -> None:
    """Check that this machine can run SCENARIO (a TOML file) or TARGET (http(s):// URL, tcp://host:port, or
    -- COMMAND ARGS, with --levels, --rates or -c) before any load: the target answers, the command runs once,
    and the open-file limit, ephemeral ports, TIME_WAIT reuse, accept backlog and memory fit the largest step.
    Without a target: this machine, for 1000 clients (or the largest of --levels / -c).

    Exit status: 0 no finding would make the run fail, 1 one would, 2 bad input.
    """
    from knee.preflight import DOCTOR_CLIENTS, check_machine, check_scenario, memory_needed
    from knee.scenario.secrets import NO_SECRETS

    one_line, given = one_line_sweep(opts)
    if not target and not one_line.python:
        extra = [g for g in given if g not in ("levels", "clients")]
        if extra or opts["variables"] or opts["secrets"]:
            what = _option(extra[0]) if extra else "--var/--secret"
            raise UserError(f"{what} describes a target: give the TARGET (a URL, or -- COMMAND ARGS) or a SCENARIO")
        levels = one_line.levels if isinstance(one_line.levels, list) else None  # "auto": the search's, unknown
        check = check_machine(int(max(levels or [one_line.clients or DOCTOR_CLIENTS])))
        secrets = NO_SECRETS
    else:
        loaded = _scenario(target, one_line, given, opts)
        secrets = loaded.secrets
        check = check_scenario(loaded.scenario, fix=False, strict=False, probe=not opts["no_probe"])
    checked = check.load.assumed if check.load and check.load.assumed else _describe(check.load)
    if opts["as_json"]:
        doc = {
            "checked": checked,
            "findings": [
                {"check": f.check, "severity": "error" if f.error else "warning", "text": f.text}
                for f in check.findings
            ],
            "machine": check.machine.to_dict(),
            "memory_estimate": [{"what": w, "bytes": b} for w, b in memory_needed(check.load)] if check.load else [],
            "exit": EXIT_FOUND if check.errors else 0,
        }
        click.echo(secrets.scrub_json(json.dumps(doc, indent=2), indent=2))
    else:
        click.echo(secrets.scrub(_text(check, checked)))
    if check.errors:
        sys.exit(EXIT_FOUND)


def _option(key: str) -> str:
    return "--" + key.replace("_", "-")


def _scenario(target: tuple[str, ...], one_line: Options, given: list[str], opts: dict[str, Any]) -> Loaded:
    """The scenario `knee sweep` would run (`knee run`'s, without --levels or --rates), with its secrets."""
    from knee.scenario import Source, from_raw
    from knee.scenario.lineopts import OPTION_NAMES
    from knee.scenario.oneline import scenario_table
    from knee.scenario.secrets import parse_secret_options

    secrets = parse_secret_options(opts["secrets"])
    variables = parse_vars(opts["variables"])
    if is_scenario_file(target):
        return read_scenario_file(target[0], given, variables, secrets, "knee doctor TARGET --levels …")[0]
    tgt: str | list[str] = target[0] if len(target) == 1 and "://" in target[0] else list(target)
    run = one_line.levels is None and one_line.rates is None
    table = scenario_table(tgt, one_line, run=run)
    names = dict(OPTION_NAMES, **({"sweep.levels": "-c/--clients"} if run else {}))
    return from_raw(table, Source("command line", options=names), variables, secrets)


def _describe(load: Load | None) -> str:
    if load is None:
        return ""
    kinds = " and ".join(f"{n} {k}" for k, n in load.clients.items())
    dests = sorted({c.endpoint.label for c in load.connections})
    return f"the largest step, {kinds} client{'s' if load.total != 1 else ''}" + (
        f" to {', '.join(dests)}" if dests else ""
    )


def _text(check: Preflight, checked: str) -> str:
    from knee import fmt
    from knee.preflight import TIME_WAIT_S, memory_needed

    m = check.machine
    lines = [f"checked for: {checked}", ""]
    if check.findings:
        lines.append("findings:")
        lines += [f"  {'error' if f.error else 'warning'}: {f.text}" for f in check.findings]
    else:
        lines.append("no findings")
    lo, hi = m.port_range
    per_s = fmt.sig3(m.ports / TIME_WAIT_S)
    parts = memory_needed(check.load) if check.load else []
    rows = [
        ("open files (ulimit -n)", f"soft {_limit(m.fd_soft)}, hard {_limit(m.fd_hard)}"),
        (
            "ephemeral ports",
            f"{lo}-{hi}, {m.ports} ports ({per_s} new connections/s to one address in TIME_WAIT's {TIME_WAIT_S} s)",
        ),
        ("net.ipv4.tcp_tw_reuse", m.tw_reuse_text),
        ("net.core.somaxconn", "unknown" if m.somaxconn is None else str(m.somaxconn)),
        ("MemAvailable", fmt.size(m.mem_available)),
        ("memory estimate", f"{fmt.size(sum(b for _, b in parts))} ({', '.join(w for w, _ in parts)})"),
        ("cores", str(m.cores)),
    ]
    lines += ["", "machine:"] + [f"  {k:<24} {v}" for k, v in rows]
    return "\n".join(lines)


def _limit(n: int | None) -> str:
    return "unlimited" if n is None else str(n)
