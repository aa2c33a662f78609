"""A scenario from a target and options: what `knee run TARGET` and `knee sweep TARGET --levels …`
(and `knee.run()` / `knee.sweep()`) describe in one line.

`scenario_table(target, options)` builds the same tables a scenario file holds (one group, "main");
`knee.scenario.from_raw` then fills placeholders and validates them exactly as it does a file, so both
roads share one set of defaults and one set of messages. Messages name the option that set a key
(`OPTION_NAMES`), not the key. `--save-scenario` writes the tables back as TOML.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from knee.errors import UserError
from knee.scenario import profiles
from knee.scenario.data import data_tables
from knee.scenario.httpopts import TLS_OPTIONS, http_clashes, tls_table
from knee.scenario.units import parse_duration, parse_header
from knee.scenario.urls import scheme_of, split

Target = str | Sequence[str]

# scenario key -> the option that sets it, for messages about a one-line scenario
OPTION_NAMES: dict[str, str] = {
    "groups.main.url": "TARGET",
    "groups.main.addr": "TARGET",
    "groups.main.argv": "COMMAND",
    "groups.main.clients": "-c/--clients",
    "monitor.pid": "--monitor-pid",
    "monitor.name": "--monitor-name",
    "monitor.prometheus": "--monitor-url",
    "monitor.metrics": "--monitor-metric",
    "groups.main.timeout": "--timeout",
    "groups.main.think": "--think",
    "groups.main.think_on_failure": "--think-on-failure",
    "groups.main.method": "-m/--method",
    "groups.main.headers": "-H/--header",
    "groups.main.cookies": "-C/--cookie",
    "groups.main.body": "--body",
    "groups.main.body_file": "--body-file",
    "groups.main.tls.cert": "--cert",
    "groups.main.tls.key": "--key",
    "groups.main.tls.password": "--key-password",
    "groups.main.tls.cacert": "--cacert",
    "groups.main.tls.capath": "--capath",
    "groups.main.tls.webpki_roots": "--webpki-roots",
    "groups.main.tls.resume": "--tls-resume",
    "groups.main.tls.version": "--tls-version",
    "groups.main.http2": "--http2",
    "groups.main.streams": "--streams",
    "groups.main.expect_status": "--expect-status",
    "groups.main.expect_body": "--expect-body",
    "groups.main.expect_body_regex": "--expect-body-regex",
    "groups.main.expect_length": "--expect-length",
    "groups.main.source_addr": "--source-addr",
    "groups.main.connect_timeout": "--connect-timeout",
    "groups.main.send": "--send",
    "groups.main.expect": "--expect",
    "groups.main.env": "-e/--env",
    "groups.main.cwd": "--cwd",
    "groups.main.expect_stdout": "--expect-stdout",
    "groups.main.expect_stderr": "--expect-stderr",
    "groups.main.expect_file": "--expect-file",
    "groups.main.bytes_from": "--bytes-from",
    "groups.main.function": "--python",
    "groups.main.path": "--path",
    "groups.main.processes": "--processes",
    "groups.main.start_timeout": "--start-timeout",
    "sweep.levels": "--levels",
    "sweep.min_duration": "--min-duration",
    "sweep.max_duration": "--max-duration",
    "search.start": "--start",
    "search.max": "--max-level",
    "search.precision": "--precision",
    "search.budget": "--budget",
    "sweep.rates": "--rates",
    "groups.main.rate": "--rate-profile",
    "sweep.duration": "-d/--duration",
    "sweep.total": "-n",
    "sweep.per_client": "--iterations",
    "sweep.warmup": "--warmup",
    "sweep.pause": "--pause",
    "sweep.settle_wait": "--settle",
    "sweep.interval": "--interval",
    "sweep.threads": "--threads",
    "sweep.max_in_flight": "--max-in-flight",
    "slo.p99_ms": "--slo-p99",
    "slo.failure_ratio": "--slo-failure-ratio",
    "slo.min_clients": "--min-capacity",
    "slo.min_rate": "--min-capacity",
}

_KIND_WORDS = {
    "http": "http(s):// targets",
    "tcp": "tcp:// targets",
    "exec": "commands",
    "worker": "worker programs (--worker) and Python flows (--python)",
}
# options that belong to one kind of target: (option name, key in `options`)
_KIND_OPTIONS = {
    "http": (
        ("-m/--method", "method"),
        ("-H/--header", "headers"),
        ("-C/--cookie", "cookies"),
        ("--body", "body"),
        ("--body-file", "body_file"),
        ("-k/--insecure", "insecure"),
        ("--new-connection", "new_connection"),
        *TLS_OPTIONS,
        ("--http2", "http2"),
        ("--streams", "streams"),
        ("--expect-status", "expect_status"),
        ("--expect-body", "expect_body"),
        ("--expect-body-regex", "expect_body_regex"),
        ("--expect-length", "expect_length"),
    ),
    "tcp": (("--send", "send"), ("--expect", "expect")),
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
_CONNECT_KINDS = ("http", "tcp")


@dataclass
class Options:
    """What the command line (or `knee.run` / `knee.sweep` keywords) said about the target and the load.
    Durations are strings with units or numbers of seconds; None means "not given"."""

    clients: int | None = None
    levels: list[int] | str | None = None  # or "auto": the level search
    rates: list[float] | str | None = None  # or "auto"
    start: float | None = None  # a level search's first level (or rate)
    max_level: float | None = None  # a level search's highest level (or rate)
    precision: str | None = None  # "10%" or a number of clients (or /s)
    budget: str | float | None = None  # a level search's total time
    min_duration: str | float | None = None  # -d auto: the least a level runs
    max_duration: str | float | None = None  # and the most
    n: int | None = None
    iterations: int | None = None
    duration: str | float | None = None
    timeout: str | float | None = None
    think: str | float | None = None
    think_on_failure: str | float | None = None
    warmup: str | float | None = None
    pause: str | float | None = None
    settle: str | float | None = None  # the most knee waits before a step for the service to be at rest
    data: list[str] = field(default_factory=list)  # --data NAME=FILE: [[data]] tables
    data_order: str | None = None
    data_on_exhausted: str | None = None
    interval: str | float | None = None
    threads: int | None = None
    operations_log: str | None = None
    poisson: bool = False
    max_in_flight: int | None = None
    rate_profile: str | None = None  # `knee run --rate-profile`: the rate over time (knee.scenario.profiles)
    rate_step: bool = False  # its points are steps
    clients_profile: str | None = None  # `knee run --clients-profile`: the clients over time (a closed loop)
    up_down: bool = False
    no_recovery: bool = False
    slo_p99: float | None = None
    slo_failure_ratio: float | None = None
    min_capacity: float | None = None  # [slo] min_clients, or min_rate with rates
    name: str = ""
    monitor_pid: int | None = None
    monitor_name: str | None = None
    monitor_url: list[str] = field(default_factory=list)  # Prometheus exporters of the target's machines
    monitor_metric: list[str] = field(default_factory=list)
    # the target's own options
    method: str | None = None
    headers: list[str | tuple[str, str]] = field(default_factory=list)
    cookies: list[str] = field(default_factory=list)
    body: str | None = None
    body_file: str | None = None
    insecure: bool = False
    new_connection: bool = False
    cert: str | None = None  # TLS client certificate (PEM or PKCS#12)
    key: str | None = None
    key_password: str | None = None  # a secret: lifted into one when given literally
    cacert: str | None = None
    capath: str | None = None
    webpki_roots: bool = False  # with cacert/capath: trust webpki's roots too
    tls_resume: str | None = None  # "on" | "off"
    tls_version: str | None = None  # "1.2" | "1.3"
    http2: bool = False
    streams: int | None = None
    expect_status: str | None = None
    expect_body: str | None = None
    expect_body_regex: str | None = None
    expect_length: int | None = None
    source_addr: list[str] = field(default_factory=list)  # http and tcp: local addresses to connect from
    connect_timeout: str | float | None = None  # http and tcp: a connection's opening (connect + TLS) limit
    send: str | None = None
    expect: str | None = None
    env: list[str | tuple[str, str]] = field(default_factory=list)
    cwd: str | None = None
    expect_stdout: str | None = None
    expect_stderr: str | None = None
    expect_file: str | None = None
    bytes_from: str | None = None
    # clients that are code: a worker program (the command speaks knee's worker protocol) or a Python flow
    worker: bool = False
    python: str | None = None  # module:function
    path: str | None = None  # where the flow's module is imported from
    processes: int | None = None
    start_timeout: str | float | None = None


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
        if scheme == "tcp":
            return "tcp"
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
    shared_by = {"process": _PROCESS_KINDS, "connect": _CONNECT_KINDS}
    for other, options in _KIND_OPTIONS.items():
        if other == kind or kind in shared_by.get(other, ()):
            continue
        given = next((name for name, key in options if _given(getattr(o, key))), None)
        if given is not None:
            words = {"process": "commands and worker programs", "connect": "http(s):// and tcp:// targets"}.get(
                other, _KIND_WORDS.get(other, other)
            )
            raise UserError(f"{given} applies to {words} only, not to {_KIND_WORDS[kind]}")
    # where connections come from and how long they may take to open (http and tcp)
    connects: dict[str, Any] = {"source_addr": list(o.source_addr)} if o.source_addr else {}
    if o.connect_timeout is not None:
        connects["connect_timeout"] = o.connect_timeout
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
        if o.streams is not None:
            g["streams"] = o.streams
        tls = tls_table(o)
        if tls:
            g["tls"] = tls
        return g | connects
    if isinstance(target, str) and kind == "tcp":
        try:
            _, host, port = split(target, ("tcp",))
        except ValueError as exc:
            raise UserError(f"TARGET {exc} (got {target!r})") from None
        host = f"[{host}]" if ":" in host else host
        g = {"kind": "tcp", "addr": f"{host}:{port}"}
        if o.send is not None:
            g["send"] = o.send.encode().decode("unicode_escape")
        if o.expect is not None:
            g["expect"] = o.expect
        return g | connects
    if isinstance(target, str):
        if "://" in target:
            raise UserError(
                f"unsupported target {target!r}: use http://, https://, tcp://host:port, "
                "or -- COMMAND ARGS for a command"
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
        g["expect_file"] = {"path": path, "min_size": int(size)} if sep and size.isdigit() else {"path": o.expect_file}
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
    given = [
        k for k, v in (("-n", o.n), ("--iterations", o.iterations), ("-d/--duration", o.duration)) if v is not None
    ]
    if len(given) > 1:
        raise UserError(f"give only one of -n, --iterations and --duration (got {' and '.join(given)})")
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
        if o.levels is not None:
            raise UserError("--levels and --rates exclude each other: give client levels or arrival rates, not both")
        if rates is not None and o.rate_profile is not None:
            raise UserError(f"{rate_option} and --rate-profile exclude each other: give one rate or a rate over time")
        for option, value in (("--think", o.think), ("--think-on-failure", o.think_on_failure)):
            if value is not None and value not in ("0", "0s", 0, 0.0):
                raise UserError(
                    f"{option} applies to closed loops only (got {value} with {rate_option}): drop one of them"
                )
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
    if o.n is not None:
        sweep["total"] = o.n
    elif o.iterations is not None:
        sweep["per_client"] = o.iterations
    else:
        shaped = o.rate_profile or o.clients_profile
        if o.duration is not None or shaped is None or not profiles.ends_of_itself(shaped):
            sweep["duration"] = o.duration if o.duration is not None else "10s"  # a profile's end is its own default
        _warmup_within(o.warmup, o.duration)
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


def _warmup_within(warmup: str | float | None, duration: str | float | None) -> None:
    """A warm-up as long as the measured part of the step or longer is a mistake (the step is warm-up + duration)."""
    if warmup is None or duration == "auto":
        return
    try:
        longer = parse_duration(warmup, "--warmup") >= parse_duration(duration or "10s", "-d/--duration") > 0
    except UserError:
        return  # the scenario's validation says which is not a duration
    if longer:
        given = duration if duration is not None else "10s (the default)"
        raise UserError(
            f"--warmup {warmup} must be shorter than -d/--duration {given}, the part of each step measured after "
            "the warm-up: shorten --warmup or lengthen -d"
        )
