"""A scenario from a target and options: what `knee run TARGET` and `knee sweep TARGET --levels …`
(and `knee.run()` / `knee.sweep()`) describe in one line.

`scenario_table(target, options)` builds the same tables a scenario file holds (one group, "main");
`knee.scenario.from_raw` then fills placeholders and validates them exactly as it does a file, so both
roads share one set of defaults and one set of messages. Messages name the option that set a key
(`knee.scenario.lineopts.OPTION_NAMES`), not the key. `--save-scenario` writes the tables back as TOML.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from knee.errors import UserError
from knee.scenario import profiles
from knee.scenario.data import data_tables
from knee.scenario.httpopts import TLS_OPTIONS, grpc_group, http_clashes, tls_table, ws_group
from knee.scenario.lineopts import Options
from knee.scenario.units import parse_duration, parse_header, unescape
from knee.scenario.urls import host_and_port, scheme_of, split

Target = str | Sequence[str]

_KIND_WORDS = {
    "http": "http(s):// targets",
    "tcp": "tcp:// targets",
    "websocket": "ws(s):// targets",
    "grpc": "grpc(s):// targets",
    "exec": "commands",
    "worker": "worker programs (--worker) and Python flows (--python)",
}
# options that belong to one kind of target: (option name, key in `options`)
_KIND_OPTIONS = {
    "http": (
        ("-m/--method", "method"),
        ("--body", "body"),
        ("--body-file", "body_file"),
        ("--new-connection", "new_connection"),
        ("--http2", "http2"),
        ("--expect-status", "expect_status"),
        ("--expect-body", "expect_body"),
        ("--expect-body-regex", "expect_body_regex"),
        ("--expect-length", "expect_length"),
    ),
    "tcp": (("--send", "send"),),
    "websocket": (
        ("--mode", "mode"),
        ("--binary", "binary"),
        ("--messages", "messages"),
        ("--message-interval", "message_interval"),
        ("--hold", "hold"),
        ("--correlate", "correlate"),
        ("--subprotocol", "subprotocol"),
    ),
    "grpc": (
        ("--proto", "proto"),
        ("-I/--import-path", "import_path"),
        ("--protoset", "protoset"),
        ("--reflect", "reflect"),
        ("--message-file", "message_file"),
        ("--stream-messages", "stream_messages"),
        ("--stream-interval", "stream_interval"),
        ("--deadline", "deadline"),
        ("--expect-message", "expect_message"),
    ),
    "message": (("--message", "message"),),  # what a ws exchange or a gRPC call sends
    "streams": (("--streams", "streams"), ("--connections", "connections")),  # how clients share HTTP/2 connections
    # the opening request's headers and TLS: http(s) and ws(s) targets
    "handshake": (("-H/--header", "headers"), ("-C/--cookie", "cookies"), ("-k/--insecure", "insecure"), *TLS_OPTIONS),
    "route": (("--connect-to", "connect_to"),),  # where its connections go: http(s), ws(s) and grpc(s) targets
    "expect": (("--expect", "expect"),),  # a reply read until it matches: tcp and websocket targets
    "exec": (
        ("--expect-stdout", "expect_stdout"),
        ("--expect-stderr", "expect_stderr"),
        ("--expect-file", "expect_file"),
        ("--bytes-from", "bytes_from"),
    ),
    "worker": (("--processes", "processes"), ("--path", "path"), ("--start-timeout", "start_timeout")),
    # a child process's environment and directory: commands and worker programs (a flow has -e, not --cwd)
    "process": (("-e/--env", "env"), ("--cwd", "cwd")),
    # where connections come from: http and tcp targets
    "connect": (("--source-addr", "source_addr"), ("--connect-timeout", "connect_timeout")),
}
_PROCESS_KINDS = ("exec", "worker")
_CONNECT_KINDS = ("http", "tcp", "websocket", "grpc")
# options shared by several kinds: the kinds, and their words in a message
_SHARED = {
    "process": (_PROCESS_KINDS, "commands and worker programs"),
    "connect": (_CONNECT_KINDS, "http(s)://, tcp://, ws(s):// and grpc(s):// targets"),
    "handshake": (("http", "websocket", "grpc"), "http(s)://, ws(s):// and grpc(s):// targets"),
    "route": (("http", "websocket", "grpc"), "http(s)://, ws(s):// and grpc(s):// targets"),
    "message": (("websocket", "grpc"), "ws(s):// and grpc(s):// targets"),
    "streams": (("http", "grpc"), "http(s):// (with --http2) and grpc(s):// targets"),
    "expect": (("tcp", "websocket"), "tcp:// and ws(s):// targets"),
}


def _given(value: object) -> bool:
    """An option was given: anything but its unset forms (a number 0 is given: `0 == False` must not hide it)."""
    return value is not None and value is not False and value not in ([], "")


def kind_of(target: Target, o: Options | None = None) -> str:
    if o is not None and (o.worker or o.python):
        return "worker"
    if isinstance(target, str):
        scheme = scheme_of(target)
        if scheme in ("http", "https"):
            return "http"
        if scheme in ("tcp", "ws", "wss"):
            return "websocket" if scheme != "tcp" else "tcp"
        if scheme in ("grpc", "grpcs"):
            return "grpc"
    return "exec"


def _pairs(items: Sequence[str | tuple[str, str]], option: str, sep: str) -> dict[str, str]:
    out: dict[str, str] = {}
    for item in items:
        if isinstance(item, tuple):
            name, value = item
        elif sep == ":":
            name, value = parse_header(item)
        else:
            name, s, value = item.partition(sep)
            if not s or not name:
                raise UserError(f"{option} must look like NAME{sep}value (got {item!r})")
        out[name] = value
    return out


def _group(target: Target, o: Options) -> dict[str, Any]:
    kind = kind_of(target, o)
    for other, options in _KIND_OPTIONS.items():
        kinds, words = _SHARED.get(other, ((other,), _KIND_WORDS.get(other, other)))
        if kind in kinds:
            continue
        given = next((name for name, key in options if _given(getattr(o, key))), None)
        if given is not None:
            raise UserError(f"{given} applies to {words} only, not to {_KIND_WORDS[kind]}")
    # where connections come from and how long they may take to open (http and tcp)
    connects: dict[str, Any] = {"source_addr": list(o.source_addr)} if o.source_addr else {}
    if o.connect_timeout is not None:
        connects["connect_timeout"] = o.connect_timeout
    if o.connect_to is not None:  # http, ws and grpc (a tcp target was refused above)
        connects["connect_to"] = o.connect_to
    if kind == "worker":
        return _code_group(target, o)
    if isinstance(target, str) and kind == "http":
        http_clashes(target, o)
        g: dict[str, Any] = {"kind": "http", "url": target}
        if o.headers:
            g["headers"] = _pairs(o.headers, "-H/--header", ":")
        if o.cookies:
            g["cookies"] = _pairs(o.cookies, "-C/--cookie", "=")
        for key in (
            "method",
            "body",
            "body_file",
            "expect_status",
            "expect_body",
            "expect_body_regex",
            "expect_length",
        ):
            if getattr(o, key) is not None:
                g[key] = getattr(o, key)
        for flag in ("insecure", "new_connection", "http2"):
            if getattr(o, flag):
                g[flag] = True
        for key in ("streams", "connections"):
            if getattr(o, key) is not None:
                g[key] = getattr(o, key)
        tls = tls_table(o)
        if tls:
            g["tls"] = tls
        return g | connects
    if isinstance(target, str) and kind == "websocket":
        headers = _pairs(o.headers, "-H/--header", ":") if o.headers else {}
        return ws_group(target, o, headers, _pairs(o.cookies, "-C/--cookie", "=") if o.cookies else {}) | connects
    if isinstance(target, str) and kind == "grpc":
        if o.cookies:
            raise UserError("-C/--cookie applies to http(s):// and ws(s):// targets; send gRPC metadata with -H")
        headers = _pairs(o.headers, "-H/--header", ":") if o.headers else {}
        return grpc_group(target, o, headers) | connects
    if isinstance(target, str) and kind == "tcp":
        try:
            _, host, port = split(target, ("tcp",))
        except ValueError as exc:
            raise UserError(f"TARGET {exc} (got {target!r})") from None
        g = {"kind": "tcp", "addr": host_and_port(host, port)}
        if o.send is not None:
            g["send"] = unescape(o.send)
        if o.expect is not None:
            g["expect"] = o.expect
        return g | connects
    if isinstance(target, str):
        if "://" in target:
            raise UserError(
                f"unsupported target {target!r}: use http://, https://, tcp://host:port, ws://, wss://, grpc://, "
                "grpcs://, or -- COMMAND ARGS for a command"
            )
        target = [target]
    argv = list(target)
    if not argv or not argv[0]:
        raise UserError("no target given: use a URL (http://…, tcp://host:port) or -- COMMAND ARGS")
    g = {"kind": "exec", "argv": argv}
    if o.env:
        g["env"] = _pairs(o.env, "-e/--env", "=")
    for key in ("cwd", "expect_stdout", "expect_stderr", "bytes_from"):
        if getattr(o, key) is not None:
            g[key] = getattr(o, key)
    if o.expect_file:
        path, sep, size = o.expect_file.rpartition(":")
        whole = sep and size.isascii() and size.isdigit()  # "²" is a digit to isdigit(), not to int()
        g["expect_file"] = {"path": path, "min_size": int(size)} if whole else {"path": o.expect_file}
    return g


def _code_group(target: Target, o: Options) -> dict[str, Any]:
    """A worker program (`--worker -- PROGRAM ARGS`) or a Python flow (`--python module:function`)."""
    if o.python and o.worker:
        raise UserError("--python runs knee's own worker: drop --worker (or give --worker -- PROGRAM ARGS instead)")
    g: dict[str, Any]
    if o.python:
        if target:
            raise UserError(
                f"--python runs a flow, not a target: drop {target!r} (the flow reaches the service itself)"
            )
        if o.cwd is not None:
            raise UserError("--cwd is for a --worker program; a --python flow is imported from --path")
        g = {"kind": "python", "function": o.python}
        if o.path is not None:
            g["path"] = o.path
    else:
        argv = [target] if isinstance(target, str) else list(target)
        if not argv or not argv[0]:
            raise UserError("--worker needs the program: --worker -- PROGRAM ARGS (it speaks docs/worker-protocol.md)")
        if o.path is not None:
            raise UserError("--path is where a --python flow is imported from; a --worker program has --cwd")
        g = {"kind": "worker", "argv": argv}
        if o.cwd is not None:
            g["cwd"] = o.cwd
    if o.env:
        g["env"] = _pairs(o.env, "-e/--env", "=")
    if o.processes is not None:
        g["processes"] = o.processes
    if o.start_timeout is not None:
        g["start_timeout"] = o.start_timeout
    return g


def scenario_table(target: Target, o: Options, *, run: bool) -> dict[str, Any]:
    """The scenario's tables for `target` and `o`. `run`: `knee run` (one level, or one step per rate; no
    recovery probe, no stop at collapse), else a one-line sweep."""
    rate_option = "--rate" if run else "--rates"
    profile_option = "--rate-profile" if run else "--ramp"  # knee sweep's rate over time is --ramp
    given = [
        k for k, v in (("-n", o.n), ("--iterations", o.iterations), ("-d/--duration", o.duration)) if v is not None
    ]
    if len(given) > 1:
        raise UserError(f"give only one of -n, --iterations and --duration (got {' and '.join(given)})")
    _bounds_given_alone(o)
    rates = o.rates
    if o.rate_step and o.rate_profile is None:
        raise UserError('--rate-step makes a profile\'s points steps: give --rate-profile too (e.g. "0s:50, 30s:200")')
    if rates is None and o.rate_profile is None:
        if o.poisson:
            raise UserError(f"--poisson shapes an open loop: give {rate_option} too (e.g. {rate_option} 500 --poisson)")
        if o.max_in_flight is not None:
            raise UserError(f"--max-in-flight caps an open loop: give {rate_option} too (e.g. {rate_option} 500)")
    group = _group(target, o)
    sweep: dict[str, Any] = {}
    if o.clients_profile is not None:
        _only_the_clients_profile(o, rate_option)
        group["clients"] = o.clients_profile
    elif rates is not None or o.rate_profile is not None:
        given = rate_option if rates is not None else profile_option
        if o.levels is not None:
            raise UserError(f"--levels and {given} exclude each other: give client levels or arrival rates, not both")
        if rates is not None and o.rate_profile is not None:
            raise UserError(f"{rate_option} and {profile_option} exclude each other: give one rate or a rate over time")
        for option, value in (("--think", o.think), ("--think-on-failure", o.think_on_failure)):
            if value is not None and value not in ("0", "0s", 0, 0.0):
                raise UserError(f"{option} applies to closed loops only (got {value} with {given}): drop one of them")
        group["clients"] = o.clients if o.clients is not None else 1
        if o.rate_profile is not None:
            group["rate"] = {"points": o.rate_profile, "step": True} if o.rate_step else o.rate_profile
        else:
            group["rate"], sweep["rates"] = "level", rates
        if o.poisson:
            sweep["arrival"] = "poisson"
        if o.max_in_flight is not None:
            sweep["max_in_flight"] = o.max_in_flight
    else:
        group["clients"] = "level"
        if o.levels is not None:
            if o.clients is not None:
                raise UserError("-c/--clients and --levels exclude each other: --levels gives the clients of each step")
            sweep["levels"] = o.levels
        else:
            sweep["levels"] = [o.clients if o.clients is not None else 1]
    for key, value in (("timeout", o.timeout), ("think", o.think), ("think_on_failure", o.think_on_failure)):
        if value is not None:
            group[key] = value
    counted = "-n" if o.n is not None else "--iterations" if o.iterations is not None else None
    if counted and o.warmup is not None:
        raise UserError(
            f"--warmup applies to a run for a duration (-d); with {counted} every operation is measured: drop "
            f"--warmup, or give -d instead of {counted}"
        )
    if o.n is not None:
        sweep["total"] = o.n
    elif o.iterations is not None:
        sweep["per_client"] = o.iterations
    else:
        shaped = o.rate_profile or o.clients_profile
        if o.duration is not None or shaped is None or not profiles.ends_of_itself(shaped):
            sweep["duration"] = o.duration if o.duration is not None else "10s"  # a profile's end is its own default
        _warmup_within(o.warmup, o.duration, None if "duration" in sweep else shaped)
    for key in ("warmup", "pause", "interval", "threads", "min_duration", "max_duration", "operations_log"):
        if getattr(o, key) is not None:
            sweep[key] = getattr(o, key)
    if o.settle is not None:
        sweep["settle_wait"] = o.settle
    if o.up_down:
        sweep["direction"] = "up-down"
    table: dict[str, Any] = {"groups": {"main": group}, "sweep": sweep}
    if o.data or o.data_order or o.data_on_exhausted:
        table["data"] = data_tables(o.data, o.data_order, o.data_on_exhausted)
    if o.name:
        table["name"] = o.name
    if run:
        table["stop"] = {"at_collapse": False}
    if run or o.no_recovery:
        table["recovery"] = {"enabled": False}
    search = {
        k: v
        for k, v in (("start", o.start), ("max", o.max_level), ("precision", o.precision), ("budget", o.budget))
        if v is not None
    }
    if search:
        table["search"] = search
    monitor: dict[str, Any] = {k: v for k, v in (("pid", o.monitor_pid), ("name", o.monitor_name)) if v is not None}
    if o.monitor_url:
        monitor["prometheus"] = list(o.monitor_url)
    if o.monitor_metric:
        monitor["metrics"] = list(o.monitor_metric)
    if monitor:
        table["monitor"] = monitor
    slo: dict[str, Any] = {
        k: v for k, v in (("p99_ms", o.slo_p99), ("failure_ratio", o.slo_failure_ratio)) if v is not None
    }
    if o.min_capacity is not None:
        whole = float(o.min_capacity).is_integer()
        slo["min_rate" if o.rates is not None else "min_clients"] = int(o.min_capacity) if whole else o.min_capacity
    if slo:
        table["slo"] = slo
    return table


def _bounds_given_alone(o: Options) -> None:
    """Options that bound another one given without it (the scenario's words named keys the command line has not)."""
    searched = "auto" in (o.levels, o.rates)
    bounds = (("--start", o.start), ("--max-level", o.max_level), ("--precision", o.precision), ("--budget", o.budget))
    for option, value in bounds:
        if value is not None and not searched:
            raise UserError(f"{option} bounds a level search: give --levels auto (or --rates auto), or drop {option}")
    if o.start is not None and o.max_level is not None and float(o.max_level) < float(o.start):
        raise UserError(f"--max-level {o.max_level:g} must not be below --start {o.start:g}")
    for option, value in (("--min-duration", o.min_duration), ("--max-duration", o.max_duration)):
        if value is not None and o.duration != "auto":
            raise UserError(f"{option} bounds -d auto (each level until its rate settles): give -d auto or drop it")
    if o.monitor_metric and not o.monitor_url:
        raise UserError("--monitor-metric names metrics of the --monitor-url endpoints: give --monitor-url URL too")


def _only_the_clients_profile(o: Options, rate_option: str) -> None:
    """--clients-profile gives the clients at every moment, for a duration: no other clients, rates or counts."""
    given = {"-c/--clients": o.clients, rate_option: o.rates, "--rate-profile": o.rate_profile, "--levels": o.levels}
    for name, v in given.items():
        if v is not None:
            raise UserError(
                f"--clients-profile and {name} exclude each other: the profile gives the clients at every moment"
            )
    for name, v in (("-n", o.n), ("--iterations", o.iterations)):
        if v is not None:
            raise UserError(
                f"--clients-profile runs for a duration, not a count of operations (got {name}); give -d, or none to "
                "run the profile to its last point"
            )


def _warmup_within(warmup: str | float | None, duration: str | float | None, profile: str | None) -> None:
    """A warm-up as long as the measured part of the step or longer is a mistake (the step is warm-up + duration;
    a `profile` run to its end holds its warm-up)."""
    if warmup is None or duration == "auto":
        return
    try:
        w = parse_duration(warmup, "--warmup")
        end = profiles.parse(profile).end_s if profile is not None else None
        longer = w >= (end if end is not None else parse_duration(duration or "10s", "-d/--duration")) > 0
    except (UserError, ValueError):
        return  # the scenario's validation says which is not a duration, or what is wrong with the profile
    if longer and end is not None:
        raise UserError(
            f"--warmup {warmup} must be shorter than the profile {profile!r}, which ends at {end:g}s, warm-up "
            "included: shorten --warmup, or give -d"
        )
    if longer:
        given = duration if duration is not None else "10s (the default)"
        raise UserError(
            f"--warmup {warmup} must be shorter than -d/--duration {given}, the part of each step measured after "
            "the warm-up: shorten --warmup or lengthen -d"
        )
