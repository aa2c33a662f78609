"""`knee target`: run the demo service in the foreground (see docs/demo-target.md)."""

from __future__ import annotations

import json
import os
import signal
import tomllib
from pathlib import Path
from typing import Any

import click

from knee.commands.values import NUMBER, Number, one_of
from knee.demo_target import merge, parse_path_spec, to_toml
from knee.errors import UserError

# A port, 0 a free one (the config's words were 'invalid value: integer `99999`, expected u16').
PORT = Number(whole=True, low=0, high=65535)
# CLI option → (config key path, click type, help); numbers are finite (--lambda inf was 'value inf cannot be written
# as TOML').
_OPTIONS: list[tuple[str, tuple[str, ...], Any, str]] = [
    ("--host", ("host",), str, "address to bind (default 127.0.0.1: loopback only)"),
    ("--port", ("port",), PORT, "HTTP port (0: a free one)"),
    ("--tcp-port", ("tcp_port",), PORT, "TCP line-protocol port (0: a free one)"),
    ("--threads", ("threads",), int, "runtime threads (default 1)"),
    ("--lambda", ("lambda",), NUMBER, "single-client rate λ in requests/s (S(1) = 1/λ)"),
    ("--sigma", ("sigma",), NUMBER, "contention σ (0 ≤ σ < 1)"),
    ("--kappa", ("kappa",), NUMBER, "coherency κ (0 ≤ κ < 1)"),
    ("--pool", ("pool",), int, "requests in flight past this get 503 (0: no limit)"),
    ("--workers", ("workers",), int, "serve at most N at once; the others wait in a FIFO queue (0: no limit)"),
    ("--reject-ms", ("reject_ms",), NUMBER, "milliseconds a pool rejection takes"),
    ("--backlog", ("backlog",), int, "listen backlog"),
    ("--max-connections", ("max_connections",), int, "stop accepting past this many open connections (0: no limit)"),
    ("--timeout", ("timeout_s",), NUMBER, "seconds from admission (queueing included) to a 504 (0: none)"),
    ("--hang-after", ("hang_after",), int, "in-flight count past which requests may hang"),
    ("--hang-fraction", ("hang_fraction",), NUMBER, "fraction of requests that hang past --hang-after"),
    ("--new-connection-ms", ("new_connection_ms",), NUMBER, "extra milliseconds on each connection's first request"),
    ("--body-bytes", ("body_bytes",), int, "default response body size"),
    ("--warmup-for", ("warmup_for",), NUMBER, "seconds of slow service from the first request (and each reset)"),
    ("--warmup-factor", ("warmup_factor",), NUMBER, "service-time multiplier during --warmup-for (≥ 1, default 3)"),
    ("--noise", ("noise",), NUMBER, "σ of a per-second log-normal service-time multiplier, median 1 (0: none)"),
    ("--seed", ("seed",), int, "seed of the --noise draws (default 1)"),
    ("--recovery", ("recovery", "mode"), one_of("recover", "slow", "stuck"), "behaviour after an overload"),
    ("--overload-threshold", ("recovery", "threshold"), int, "in-flight count that means overload"),
    ("--overload-after", ("recovery", "after_s"), NUMBER, "seconds of overload before it degrades"),
    ("--degraded-factor", ("recovery", "factor"), NUMBER, "service-time multiplier while degraded"),
    ("--recover-after", ("recovery", "recover_s"), NUMBER, "slow mode: seconds under the threshold to recover"),
    ("--tcp-greeting", ("tcp", "greeting"), str, "line sent after the TCP handshake"),
    ("--tcp-handshake-cost", ("tcp", "handshake_cost"), NUMBER, "TCP handshake cost in request service times"),
    ("--tcp-line-cost", ("tcp", "line_cost"), NUMBER, "cost of each TCP line in request service times"),
]


def _dest(flag: str) -> str:
    return flag.lstrip("-").replace("-", "_") + "_opt"


def _with_config_options(f: Any) -> Any:
    for flag, _, typ, help_text in reversed(_OPTIONS):
        f = click.option(flag, _dest(flag), type=typ, default=None, help=help_text)(f)
    return f


def _load_config_file(path: Path) -> dict[str, Any]:
    try:
        return tomllib.loads(path.read_text())
    except OSError as exc:
        raise UserError(f"--config {path}: cannot read it ({exc.strerror}); give the path of a TOML file") from None
    except tomllib.TOMLDecodeError as exc:
        raise UserError(f"--config {path}: {exc}; fix the TOML there") from None


def build_table(
    profile: str | None, config: Path | None, flags: dict[str, Any], paths: tuple[str, ...]
) -> dict[str, Any]:
    """profile < config file < command-line flags."""
    table: dict[str, Any] = _load_config_file(config) if config else {}
    over: dict[str, Any] = {}
    for flag, keys, _, _ in _OPTIONS:
        value = flags.get(_dest(flag))
        if value is None:
            continue
        node = over
        for k in keys[:-1]:
            node = node.setdefault(k, {})
        node[keys[-1]] = value
    for spec in paths:
        path, entry = parse_path_spec(spec)
        over.setdefault("paths", {})[path] = entry
    if profile is not None:
        over["profile"] = profile
    return merge(table, over)


def _write_ready(path: Path, doc: dict[str, Any]) -> None:
    tmp = path.with_name(path.name + ".tmp")
    try:
        tmp.write_text(json.dumps(doc))
        os.replace(tmp, path)
    except OSError as exc:
        said = f"--ready-file {path}: cannot write it ({exc.strerror})"
        raise UserError(f"{said}; give a path in a writable directory") from None


def _list_profiles() -> None:
    from knee import _engine

    profiles = _engine.target_profiles()
    width = max(len(n) for n, _ in profiles)
    for name, desc in profiles:
        click.echo(f"{name:<{width}}  {desc}")


@click.command(name="target")
@click.option("--profile", "-p", default=None, help="a named profile (see --list-profiles)")
@click.option("--list-profiles", is_flag=True, help="list the profiles and exit")
@click.option("--config", "config", type=click.Path(path_type=Path), default=None, help="a TOML config file")
@_with_config_options
@click.option("--no-keep-alive", is_flag=True, default=None, help="close every HTTP connection after one response")
@click.option("--path", "paths", multiple=True, help="per-path cost, e.g. /copy=cost:2,bytes:10485760 (repeatable)")
@click.option("--ready-file", type=click.Path(path_type=Path), default=None, help="write the addresses here as JSON")
@click.option("--quiet", "-q", is_flag=True, help="print nothing but errors")
def command(**opts: Any) -> None:
    """Run the demo service: a real HTTP + TCP server whose throughput follows the USL.

    It listens until Ctrl-C or SIGTERM. Every GET/POST path is a request; GET /admin/stats
    has the server's own counts, POST /admin/reset ends a degraded state.
    """
    if opts.pop("list_profiles"):
        _list_profiles()
        return
    ready_file: Path | None = opts.pop("ready_file")
    quiet: bool = opts.pop("quiet")
    no_keep_alive = opts.pop("no_keep_alive")
    table = build_table(opts.pop("profile"), opts.pop("config"), opts, opts.pop("paths"))
    if no_keep_alive:
        table["keep_alive"] = False
    from knee import _engine

    try:
        server = _engine.TargetServer(to_toml(table))
    except (ValueError, OSError) as exc:
        raise UserError(str(exc)) from None

    # From here on SIGINT and SIGTERM only stop the server, wherever they land (even before the
    # ready file is written): the loop below then sees it stopped and prints the totals.
    def on_signal(signum: int, frame: Any) -> None:
        server.stop()

    previous = {s: signal.signal(s, on_signal) for s in (signal.SIGINT, signal.SIGTERM)}
    try:
        _serve(server, ready_file, quiet)
    finally:
        for s, handler in previous.items():
            signal.signal(s, handler)
        server.stop()
        server.wait(5.0)


def _serve(server: Any, ready_file: Path | None, quiet: bool) -> None:
    info = json.loads(server.config_json())
    cfg, model = info["config"], info["model"]
    host = server.host()
    shown = f"[{host}]" if ":" in host else host
    url = f"http://{shown}:{server.http_port()}"
    if ready_file is not None:
        _write_ready(
            ready_file,
            {
                "pid": os.getpid(),
                "host": host,
                "http_port": server.http_port(),
                "tcp_port": server.tcp_port(),
                "url": url,
                "tcp_addr": f"{shown}:{server.tcp_port()}",
                "profile": cfg["name"],
                "model": model,
            },
        )
    if not quiet:
        peak = ""
        if model.get("peak_clients"):
            peak = f"; peak ≈ {model['peak_rate']:.0f} req/s at {model['peak_clients']} clients"
        click.echo(f"knee target '{cfg['name']}' on {url} and tcp {shown}:{server.tcp_port()}{peak}; Ctrl-C stops it")

    while not server.wait(0.2):
        pass
    if not quiet:
        stats = json.loads(server.stats())
        click.echo(
            f"knee target stopped: {stats['served']} served, {stats['rejected_pool']} rejected by the pool, "
            f"{stats['timed_out']} timed out, {stats['hung']} hung"
        )
