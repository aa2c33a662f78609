"""`knee run TARGET`: one level of load, measured exactly (a better ab / wrk / shell loop)."""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path
from typing import Any

import click

from knee.errors import UserError
from knee.progress_line import LiveLine
from knee.units import parse_duration, parse_header, parse_status_ranges

EPILOG = """\b
Examples:
  knee run http://127.0.0.1:8080/ -c 50 -n 20000
  knee run http://127.0.0.1:8080/ -c 50 -d 30s --new-connection --json out.json
  knee run tcp://127.0.0.1:9000 -c 10 -d 5s --send 'PING\\n' --expect PONG
  knee run -c 8 --iterations 100 --timeout 5s -- curl -sf http://127.0.0.1:8080/
  knee run http://127.0.0.1:8080/ --rate 500 -c 50 -d 30s          (open loop)
  knee run http://127.0.0.1:8080/ --rate 100,200,400 --poisson -d 5s  (one row per rate)
"""


def _duration(key: str, value: str | None) -> float | None:
    return None if value is None else parse_duration(value, key)


@click.command(name="run", epilog=EPILOG, context_settings={"help_option_names": ["-h", "--help"]})
@click.argument("target", nargs=-1, required=True)
@click.option("-c", "--clients", type=click.IntRange(min=1), default=1, show_default=True, help="Concurrent clients.")
@click.option("-n", "--requests", "n", type=click.IntRange(min=1), help="Stop after this many operations in all.")
@click.option("--iterations", type=click.IntRange(min=1), help="Stop after this many operations per client.")
@click.option("-d", "--duration", help="Stop after this long (10s, 2m, 500ms). Default 10s if no -n/--iterations.")
@click.option("--timeout", default="30s", show_default=True, help="An operation still running after this is hung.")
@click.option("--think", default="0s", show_default=True, help="Pause after each operation (closed loop).")
@click.option("--warmup", default="0s", show_default=True, help="Leave operations ending this early out.")
@click.option("--interval", default="1s", show_default=True, help="Granularity of the per-interval counts.")
@click.option("--threads", type=click.IntRange(min=0), default=0, help="Engine threads (0 = one per core).")
@click.option(
    "--rate",
    help="Open loop: operations per second over all clients (e.g. 500), or several (100,200,400) run one "
    "after another; -c is then the number of connections. Latency counts from each intended start.",
)
@click.option("--poisson", is_flag=True, help="Open loop: Poisson arrivals (random gaps) instead of evenly spaced.")
@click.option(
    "--max-in-flight",
    type=click.IntRange(min=1),
    help="Open loop: arrivals beyond this many waiting or running are dropped (counted). Default: no cap.",
)
@click.option("-m", "--method", help="HTTP method (default GET, or POST with a body).")
@click.option("-H", "--header", "headers", multiple=True, help="HTTP header 'Name: value' (repeatable).")
@click.option("-C", "--cookie", "cookies", multiple=True, help="Cookie 'name=value' (repeatable).")
@click.option("--body", help="Request body.")
@click.option("--body-file", type=click.Path(dir_okay=False), help="Request body from a file.")
@click.option("--insecure", "-k", is_flag=True, help="Do not verify TLS certificates.")
@click.option("--new-connection", is_flag=True, help="A new connection per operation (ab without -k).")
@click.option("--expect-status", help="Statuses that count as success, e.g. 200 or 200-299,404 (default 2xx-3xx).")
@click.option("--expect-body", help="Succeed only if the response body contains this text.")
@click.option("--expect-body-regex", help="Succeed only if the response body matches this regex.")
@click.option("--expect-length", type=click.IntRange(min=0), help="Succeed only if the body has this many bytes.")
@click.option("--send", help="tcp: bytes to send after connecting (\\n escapes allowed).")
@click.option("--expect", help="tcp: read until this regex matches the reply.")
@click.option("-e", "--env", "envs", multiple=True, help="exec: NAME=value (repeatable).")
@click.option("--expect-stdout", help="exec: succeed only if stdout matches this regex.")
@click.option("--expect-stderr", help="exec: succeed only if stderr matches this regex.")
@click.option("--expect-file", help="exec: succeed only if this file exists afterwards (PATH or PATH:MIN_BYTES).")
@click.option("--json", "json_path", type=click.Path(dir_okay=False), help="Write the result as JSON to this file.")
@click.option("-q", "--quiet", is_flag=True, help="No live progress.")
def command(target: tuple[str, ...], **opts: Any) -> None:
    """Drive TARGET with N concurrent clients and report exactly what happened.

    TARGET is an http(s):// URL, tcp://host:port, or -- COMMAND ARGS (run without a shell).
    """
    from knee import api, runreport

    run_kwargs, client_kwargs = _split_options(opts)
    tgt: api.Target = target[0] if len(target) == 1 and "://" in target[0] else list(target)
    json_path = opts["json_path"]
    if json_path and not os.access(Path(json_path).resolve().parent, os.W_OK):
        raise UserError(f"--json {json_path!r}: its directory does not exist or cannot be written")
    rates = parse_rates(opts["rate"])
    live = LiveLine(enabled=not opts["quiet"] and sys.stderr.isatty())
    results: list[api.RunResult] = []
    for rate in rates:
        with live:
            result = api.run(tgt, on_snapshot=live.update, rate=rate, **run_kwargs, **client_kwargs)
        results.append(result)
        if len(rates) > 1:
            click.echo(f"{'' if len(results) == 1 else chr(10)}== Rate {rate:g}/s ==")
        click.echo(runreport.render(result))
        if result.interrupted:
            break
    if len(results) > 1:
        click.echo("")
        click.echo(runreport.render_rate_steps(results))
    if json_path:
        doc = runreport.to_json(results[0]) if len(rates) == 1 else runreport.steps_to_json(results)
        Path(json_path).write_text(json.dumps(doc, indent=2) + "\n")
        click.echo(f"\nJSON written to {json_path}")
    if results[-1].interrupted:
        sys.exit(130)


def parse_rates(value: str | None) -> list[float | None]:
    """`--rate 500` or `--rate 100,200,400` → the rates to run in order; no --rate → [None] (closed loop)."""
    if value is None:
        return [None]
    rates: list[float | None] = []
    for part in value.split(","):
        try:
            r = float(part.strip().removesuffix("/s"))
        except ValueError:
            raise UserError(
                f"--rate {value!r}: {part.strip()!r} is not a number; use operations per second, e.g. 500 or 100,200"
            ) from None
        if not (0 < r < float("inf")):
            raise UserError(f"--rate {value!r}: every rate must be a positive number of operations per second")
        rates.append(r)
    return rates


def _split_options(o: dict[str, Any]) -> tuple[dict[str, Any], dict[str, Any]]:
    run_kwargs = {
        "clients": o["clients"],
        "n": o["n"],
        "iterations": o["iterations"],
        "duration": _duration("--duration", o["duration"]),
        "timeout": parse_duration(o["timeout"], "--timeout"),
        "think": parse_duration(o["think"], "--think"),
        "warmup": parse_duration(o["warmup"], "--warmup"),
        "interval": parse_duration(o["interval"], "--interval"),
        "threads": o["threads"],
        "poisson": o["poisson"],
        "max_in_flight": o["max_in_flight"],
    }
    expect_file, min_size = None, 0
    if o["expect_file"]:
        path, sep, size = o["expect_file"].rpartition(":")
        if sep and size.isdigit():
            expect_file, min_size = path, int(size)
        else:
            expect_file = o["expect_file"]
    env = []
    for e in o["envs"]:
        name, sep, value = e.partition("=")
        if not sep or not name:
            raise UserError(f"--env must look like NAME=value (got {e!r})")
        env.append((name, value))
    client_kwargs = {
        "method": o["method"],
        "headers": [parse_header(h) for h in o["headers"]],
        "cookies": list(o["cookies"]),
        "body": o["body"],
        "body_file": o["body_file"],
        "insecure": o["insecure"],
        "new_connection": o["new_connection"],
        "expect_status": parse_status_ranges(o["expect_status"]) if o["expect_status"] else None,
        "expect_body": o["expect_body"],
        "expect_body_regex": o["expect_body_regex"],
        "expect_length": o["expect_length"],
        "send": o["send"],
        "expect": o["expect"],
        "env": env,
        "expect_stdout": o["expect_stdout"],
        "expect_stderr": o["expect_stderr"],
        "expect_file": expect_file,
        "expect_file_min_size": min_size,
    }
    return run_kwargs, client_kwargs
