"""The options the commands share: the target's, the load's, vars and secrets (`knee run`, `knee sweep`,
`knee doctor`), a one-line sweep's levels or rates (`knee sweep`, `knee doctor`), and where runs go.

The commands turn them into `knee.scenario.oneline.Options`, then a Scenario: one set of defaults and messages.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Sequence
from dataclasses import fields
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

import click

from knee.commands.values import at_least, between, more_than, one_of
from knee.errors import UserError
from knee.scenario.oneline import Options

if TYPE_CHECKING:
    from knee.scenario import Loaded, Scenario

F = TypeVar("F", bound=Callable[..., Any])

# TLS: the client's certificate and key, and the CAs it trusts (flag, metavar, help)
_TLS_FILES = [
    ("--cert", "FILE", "TLS client certificate: PEM (certificate, chain and, without --key, its key in one file, as a "
     "grid proxy) or PKCS#12 (.p12). Default: $X509_USER_PROXY when set."),
    ("--key", "FILE", "The client certificate's private key (PEM), when not in --cert."),
    ("--key-password", "PASSWORD", "Password of --key (or of a PKCS#12 --cert): a secret, never written; '${NAME}' "
     "with --secret NAME keeps it off the command line."),
    ("--cacert", "FILE", "Trust the CA certificates in this PEM file."),
    ("--capath", "DIR", "Trust the CA certificates in this directory (e.g. /etc/grid-security/certificates)."),
]  # fmt: skip

_TARGET = [
    click.option("-m", "--method", help="HTTP method (default GET, or POST with a body)."),
    click.option(
        "-H", "--header", "headers", multiple=True, help="HTTP header 'Name: value' (repeatable; ws: the handshake's)."
    ),
    click.option("-C", "--cookie", "cookies", multiple=True, help="Cookie 'name=value' (repeatable)."),
    click.option("--body", help="Request body (the method becomes POST unless -m says otherwise)."),
    click.option("--body-file", help="Request body from a file."),
    click.option("--insecure", "-k", is_flag=True, help="Do not verify TLS certificates."),
    *(click.option(flag, metavar=metavar, help=text) for flag, metavar, text in _TLS_FILES),
    click.option(
        "--webpki-roots",
        is_flag=True,
        help="With --cacert/--capath: trust webpki's (Mozilla's) roots too (otherwise only the CAs given).",
    ),
    click.option(
        "--tls-resume",
        type=one_of("on", "off"),
        help="Resume TLS sessions on new connections (on, the default) or make every handshake a full one (off).",
    ),
    click.option("--tls-version", type=one_of("1.2", "1.3"), help="Speak only this TLS version."),
    click.option("--http2", is_flag=True, help="Speak HTTP/2 (ALPN h2 over https://, prior knowledge over http://)."),
    click.option(
        "--streams",
        type=at_least(1),
        help="--http2, grpc: clients per connection (N clients share ⌈N/streams⌉ connections; default 1).",
    ),
    click.option(
        "--connections",
        type=at_least(1),
        help="--http2, grpc: this many connections (per load machine) shared by all the clients, instead of --streams.",
    ),
    click.option("--new-connection", is_flag=True, help="A new connection per operation (ab without -k)."),
    click.option("--expect-status", help="Statuses that count as success, e.g. 200 or 200-299,404 (default 2xx-3xx)."),
    click.option("--expect-body", help="Succeed only if the response body contains this text."),
    click.option("--expect-body-regex", help="Succeed only if the response body matches this regex."),
    click.option("--expect-length", type=at_least(0), help="Succeed only if the body has this many bytes."),
    click.option(
        "--source-addr",
        "source_addr",
        multiple=True,
        metavar="ADDR[-ADDR]",
        help="http/tcp: connect from these local addresses, in turn per client (repeatable, or a range like "
        "127.0.0.2-127.0.0.9): past one address's ~28 000 ephemeral ports.",
    ),
    click.option(
        "--connect-timeout",
        help="http/tcp: a connection not open this long after its connect began (TCP connect and TLS handshake "
        "together) fails (connect_timeout, or tls: handshake timeout) instead of hanging; shorter than --timeout.",
    ),
    click.option(
        "--connect-to",
        metavar="HOST[:PORT]",
        help="http/ws/grpc: connect here instead of the URL's host (and port), which stays the Host header, the TLS "
        "server name (SNI) and the certificate's name, as curl's --connect-to and --resolve: one server of a pool, "
        "or a name DNS does not give yet.",
    ),
    click.option("--send", help="tcp: bytes to send after connecting (\\n escapes allowed)."),
    click.option("--expect", help="tcp: read until this regex matches the reply; ws: the reply to wait for."),
    click.option("--mode", type=one_of("echo", "session", "listen"), help="ws: echo (default), session or listen."),
    click.option("--hold", help="ws --mode listen: how long each connection is held, counting pushed messages."),
    click.option(
        "--correlate", metavar="JSONPATH", help="ws: the reply is the message whose JSON has this path's value."
    ),
    click.option(
        "--message", help="ws: the message each exchange sends (\\n escapes allowed; templates); grpc: the call's JSON."
    ),
    click.option("--binary", is_flag=True, help="ws: send the message as a binary frame, not text."),
    click.option("--messages", type=at_least(1), help="ws --mode session: exchanges per session (1)."),
    click.option("--message-interval", help="ws --mode session: the pause between a reply and the next message."),
    click.option("--subprotocol", multiple=True, help="ws: a subprotocol to offer (repeatable, in order)."),
    click.option("--proto", multiple=True, metavar="FILE", help="grpc: a .proto file with the method (repeatable)."),
    click.option(
        "-I", "--import-path", "import_path", multiple=True, metavar="DIR", help="grpc: where --proto's imports are."
    ),
    click.option("--protoset", metavar="FILE", help="grpc: a compiled descriptor set with the method (protoc -o)."),
    click.option("--reflect", is_flag=True, help="grpc: the method's types from the server's reflection service."),
    click.option("--message-file", metavar="FILE", help="grpc: the call's message, JSON, from this file."),
    click.option("--stream-messages", type=at_least(1), help="grpc: messages a client-streaming call sends (1)."),
    click.option("--stream-interval", help="grpc --stream-messages: the pause before each message after the first."),
    click.option("--deadline", help="grpc: the call's deadline, sent as grpc-timeout (e.g. 500ms)."),
    click.option("--expect-message", metavar="REGEX", help="grpc: succeed only if the response's JSON matches."),
    click.option("-e", "--env", "env", multiple=True, help="exec: NAME=value (repeatable)."),
    click.option("--cwd", help="exec: run the command in this directory."),
    click.option("--expect-stdout", help="exec: succeed only if stdout matches this regex."),
    click.option("--expect-stderr", help="exec: succeed only if stderr matches this regex."),
    click.option("--expect-file", help="exec: succeed only if this file exists afterwards (PATH or PATH:MIN_BYTES)."),
    click.option("--bytes-from", help="exec: the operation's payload is its stdout ('stdout') or this file's size."),
    click.option("--worker", is_flag=True, help="The command is a worker program speaking docs/worker-protocol.md."),
    click.option("--python", metavar="MODULE:FUNCTION", help="Clients are a Python flow: this function, run by knee."),
    click.option("--path", help="--python: the directory the flow's module is imported from."),
    click.option("--processes", type=at_least(0), help="--worker/--python: processes (0 = one per core)."),
    click.option("--start-timeout", help="--worker/--python: how long a process may take to answer start (30s)."),
]

_POSITIVE = more_than(0)
_AUTO = "--levels auto / --rates auto: "

_SEARCH = [
    click.option("--max-level", type=_POSITIVE, help=_AUTO + "the highest level (clients, or /s) the search may try."),
    click.option(
        "--start", type=_POSITIVE, help=_AUTO + "the first level the search tries (default 1 client, or 10/s)."
    ),
    click.option(
        "--precision",
        help=_AUTO + "how closely to locate each point, a share of the level (default 10%) or a number of clients "
        "(or /s).",
    ),
    click.option("--budget", help=_AUTO + "the search's total time at most (e.g. 30m)."),
    click.option("--min-duration", help="-d auto: the least a level runs (default 10s)."),
    click.option("--max-duration", help="-d auto: the most a level runs (default 2m)."),
]

_LOAD = [
    click.option("-n", "--requests", "n", type=at_least(1), help="Stop after this many operations in all."),
    click.option(
        "--data",
        "data",
        multiple=True,
        metavar="NAME=FILE",
        help="Rows for the request's ${NAME.COLUMN} templates: a CSV/TSV file with a header, or JSON Lines; each "
        "operation takes a row (repeatable).",
    ),
    click.option(
        "--data-order",
        type=one_of("circular", "queue", "random", "shuffle"),
        help="How --data rows are handed out (default circular; queue and shuffle use each row once).",
    ),
    click.option(
        "--data-on-exhausted",
        type=one_of("stop", "stop_client", "recycle"),
        help="When a queue or shuffle has used every row: stop the step (default), stop that client, or start again.",
    ),
    click.option("--iterations", type=at_least(1), help="Stop after this many operations per client."),
    click.option(
        "-d",
        "--duration",
        help="Stop after this long (10s, 2m, 500ms), or 'auto': until the rate has settled. Default 10s if no "
        "-n/--iterations.",
    ),
    click.option("--timeout", help="An operation still running after this is hung (default 30s)."),
    click.option(
        "--think",
        help="Pause after each operation (closed loop): a duration (2s), uniform(1s,3s) or exponential(2s), drawn for "
        "each pause around its mean.",
    ),
    click.option(
        "--think-on-failure",
        metavar="DURATION",
        help="A further pause after a failed operation only, as a retrying client backs off (closed loop; e.g. "
        "100ms). Without it a client whose operations fail at once retries in a tight loop.",
    ),
    click.option("--warmup", help="Leave operations ending this early out."),
    click.option("--interval", help="Granularity of the per-interval counts (default 1s)."),
    click.option("--threads", type=at_least(0), help="Engine threads (0 = one per core)."),
    click.option(
        "--operations-log",
        metavar="FILE",
        help="Write every operation (start, latency, outcome, class, request, bytes) to FILE as it goes; a run of "
        "several steps writes FILE.stepN each (read with knee.read_operations).",
    ),
    click.option("--poisson", is_flag=True, help="Open loop: Poisson arrivals (random gaps) instead of evenly spaced."),
    click.option(
        "--max-in-flight",
        type=at_least(1),
        help="Open loop: arrivals beyond this many waiting or running are dropped (counted).",
    ),
    click.option("--monitor-pid", type=at_least(1), help="Sample this process tree (the target) per step."),
    click.option("--monitor-name", metavar="NAME", help="Sample the process tree of the process named NAME."),
    click.option(
        "--monitor-url",
        "monitor_url",
        multiple=True,
        metavar="URL",
        help="Scrape this Prometheus exporter (node_exporter, postgres_exporter …) of the target's machines each "
        "second of each step, e.g. http://db:9100/metrics (repeatable).",
    ),
    click.option(
        "--monitor-metric",
        "monitor_metric",
        multiple=True,
        metavar="NAME",
        help="Keep this metric of the --monitor-url endpoints too (repeatable).",
    ),
    click.option("--var", "variables", multiple=True, metavar="NAME=VALUE", help="Fill ${NAME} (repeatable)."),
    click.option(
        "--secret",
        "secrets",
        multiple=True,
        metavar="NAME[=VALUE]",
        help="Fill ${NAME} with a value knee never writes anywhere (without =VALUE: from $NAME). Repeatable.",
    ),
]


SLO = [
    click.option("--slo-p99", type=_POSITIVE, help="SLO: p99 latency limit in ms."),
    click.option("--slo-failure-ratio", type=between(0, 1), help="SLO: failure ratio limit (0.01 = 1 %)."),
    click.option(
        "--min-capacity",
        type=_POSITIVE,
        help="SLO: the capacity under it the service must reach, in clients (/s with --rates); [slo] min_clients "
        "or min_rate. Without it a searched sweep (auto) misses the SLO only when no level met it.",
    ),
]


def slo_options(f: F) -> F:
    """--slo-p99, --slo-failure-ratio and --min-capacity: missed, the command exits 3 (`knee sweep`, `knee run`)."""
    return _apply(SLO, f)


CLUSTER = click.option(
    "--cluster",
    metavar="ADDRESS",
    help="Run the steps on a Dask cluster: tcp://host:8786 (a scheduler), local:N (N worker processes), or "
    "batch jobs knee asks for and releases: slurm:JOBS, htcondor:JOBS, pbs:JOBS, sge:JOBS (each job's cores, "
    "memory … from [cluster]); see docs/distributed.md. Default: this machine (or the scenario's [cluster]).",
)

SHIP = [
    click.option(
        "--ship",
        is_flag=True,
        help="With --cluster: install this knee (its wheel: dist/ of the checkout, or this installation's) on every "
        "worker that lacks it or has another version or build; the workers need only Python and Dask. See "
        "docs/distributed.md.",
    ),
    click.option(
        "--ship-wheel",
        type=click.Path(path_type=Path, dir_okay=False),
        metavar="FILE",
        help="--ship this wheel of knee (this knee's version), e.g. dist/knee-*.whl from make wheel.",
    ),
]


def cluster_options(f: F) -> F:
    """--cluster, --ship and --ship-wheel (`knee sweep`, `knee run`)."""
    return _apply([CLUSTER, *SHIP], f)


def apply_run_options(scenario: Scenario, opts: dict[str, Any]) -> None:
    """--ship / --ship-wheel onto the scenario's `[cluster] ship`, refused without a cluster to ship to; and
    --operations-log (sweep.operations_log) refused with a cluster, or where it cannot be written: before any load."""
    ship = str(opts["ship_wheel"]) if opts["ship_wheel"] else bool(opts["ship"])
    fix = "the cluster too (--cluster tcp://host:8786)"
    scenario.cluster.ship_with(ship, elsewhere=bool(opts["cluster"]), named="--ship", fix=fix)
    log = scenario.sweep.operations_log
    if log is not None and (opts["cluster"] or scenario.cluster.address or scenario.cluster.jobqueue):
        raise UserError("--operations-log writes where the engine runs: not with a cluster yet; drop one of them")
    if log is not None and not os.access(Path(log).resolve().parent, os.W_OK):
        raise UserError(f"--operations-log {log!r}: its directory does not exist or cannot be written; fix the path")


SERVE = click.option(
    "--serve",
    metavar="[HOST:]PORT",
    help="While the run goes, serve a live page and Prometheus /metrics on this port (host 127.0.0.1 unless given; "
    "0: any free port); see docs/live.md. Default: the scenario's [serve] address, else none.",
)


TARGETS = [
    click.option(
        "--targets",
        type=click.Path(path_type=Path, dir_okay=False),
        metavar="FILE",
        help="The requests of a vegeta targets file, instead of TARGET: each target a request of the mix, weight 1 "
        "(docs/scenarios.md, Importing recordings).",
    ),
    click.option(
        "--targets-format",
        type=one_of("http", "json"),
        default="http",
        show_default=True,
        help="--targets: vegeta's http format ('METHOD URL' lines, headers, @body) or json (one object a line).",
    ),
]


def targets_options(f: F) -> F:
    """--targets FILE and --targets-format (`knee run`, `knee sweep`)."""
    return _apply(TARGETS, f)


def targets_table(
    target: tuple[str, ...], o: Options, opts: dict[str, Any], *, run: bool
) -> tuple[dict[str, Any], dict[str, str]]:
    """The tables of a one-line run or sweep whose requests are the targets of --targets FILE, and the values of
    the secrets the targets' credentials became. A body written to a file goes beside --save-scenario's file, or into
    <out>/bodies/ (a kept run's), so that the scenario saved and a --resume find it."""
    from knee.importers.build import bodies_dir_for
    from knee.importers.targets import read_targets, with_targets
    from knee.scenario.oneline import scenario_table

    if target:
        raise UserError("give TARGET or --targets FILE, not both: the targets file names the URLs")
    said = next(
        (
            flag
            for flag, key in (("-m/--method", "method"), ("--body", "body"), ("--body-file", "body_file"))
            if getattr(o, key) is not None
        ),
        None,
    )
    if said is not None:
        raise UserError(f"{said}: the targets file gives each target's method and body; drop {said.split('/')[0]}")
    path: Path = opts["targets"]
    targets = read_targets(path, opts["targets_format"])
    save: Path | None = opts.get("save_scenario")
    out: Path | None = opts["out"]
    keep = Path(bodies_dir_for(save)) if save is not None else (out.resolve() / "bodies" if out is not None else None)
    return with_targets(scenario_table(targets[0].url, o, run=run), targets, str(path), keep)


def given_options(o: Options) -> list[str]:
    """The names of the `Options` given (not left unset)."""
    return [f.name for f in fields(o) if getattr(o, f.name) not in (None, False, [], "")]


def run_scenario_file(file: str, o: Options, variables: dict[str, str], secrets: dict[str, str]) -> Loaded:
    """`knee run SCENARIO.toml -c N …`: the scenario in `file` as one step at the level `o` gives
    (knee.scenario.onelevel)."""
    import tomllib

    from knee.scenario import Source, from_raw
    from knee.scenario.messages import not_toml
    from knee.scenario.onelevel import at_one_level

    path = Path(file)
    try:
        text = path.read_text()
    except OSError as exc:
        raise UserError(f"cannot read scenario {str(path)!r}: {exc.strerror}; check the path") from None
    try:
        raw = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise not_toml(path.name, exc) from None
    table = at_one_level(raw, o, given_options(o), path.name)
    return from_raw(table, Source(path.name, text), variables, secrets)


RUNS_OUT = click.option(
    "--out",
    type=click.Path(path_type=Path, file_okay=False),
    default=Path("runs"),
    show_default=True,
    help="Directory that receives the run directory <out>/<run-id>/.",
)


def _apply(decorators: Sequence[Callable[[Any], Any]], f: F) -> F:
    out: Any = f
    for d in reversed(decorators):
        out = d(out)
    return out


def target_options(f: F) -> F:
    return _apply(_TARGET, f)


def load_options(f: F) -> F:
    return _apply(_LOAD, f)


def sweep_target_options(*, levels: str, rates: str, clients: str) -> Callable[[F], F]:
    """TARGET, --levels, --rates and -c, then the load's and the target's options: a one-line sweep (read with
    `one_line_sweep`). The help of the first three is the command's own."""
    decorators = [
        click.argument("target", nargs=-1),
        click.option("--levels", help=levels),
        click.option("--rates", help=rates),
        click.option("-c", "--clients", type=at_least(1), help=clients),
        *_SEARCH,
        *_LOAD,
        *_TARGET,
    ]
    return lambda f: _apply(decorators, f)


def one_line_sweep(o: dict[str, Any]) -> tuple[Options, list[str]]:
    """The options of `sweep_target_options` as a one-line sweep's `Options`, and the names of those given (a
    scenario file takes none of them: `read_scenario_file`)."""
    from knee.scenario.units import parse_list

    one_line = to_options(
        o,
        levels=parse_list(o["levels"], "--levels", whole=True, auto=True),
        rates=parse_list(o["rates"], "--rates", whole=False, auto=True, over_time="--ramp"),
    )
    return one_line, given_options(one_line)


def to_options(o: dict[str, Any], **extra: Any) -> Options:
    """The parsed click options as `Options` (keys it does not know are ignored)."""
    fields = set(Options.__dataclass_fields__)
    values: dict[str, Any] = {k: (list(v) if isinstance(v, tuple) else v) for k, v in o.items() if k in fields}
    values.update(extra)
    return Options(**values)


def parse_vars(values: tuple[str, ...]) -> dict[str, str]:
    """`--var name=value` pairs → dict (one sentence per mistake)."""
    from knee.errors import UserError

    out: dict[str, str] = {}
    for item in values:
        name, sep, value = item.partition("=")
        if not sep or not name.strip():
            raise UserError(f"--var must look like name=value (got {item!r})")
        out[name.strip()] = value
    return out


def is_scenario_file(target: tuple[str, ...]) -> bool:
    """TARGET is one scenario file (a .toml path), not a URL or a command."""
    return len(target) == 1 and target[0].endswith(".toml") and "://" not in target[0]


def read_scenario_file(
    file: str, given: list[str], variables: dict[str, str], secrets: dict[str, str], usage: str
) -> tuple[Loaded, str]:
    """The scenario in `file` and its text. `given`: one-line options also given (a mistake: the file says
    it itself); `usage` shows the one-line form in that message, e.g. "knee sweep TARGET --levels …"."""
    from knee.scenario import read_scenario

    if given:
        raise UserError(
            f"--{given[0].replace('_', '-')} is an option of a one-line {usage.split()[1]} ({usage}); "
            "a scenario file says it itself: edit the file, or pass --var"
        )
    path = Path(file)
    try:
        text = path.read_text()
    except OSError as exc:
        raise UserError(f"cannot read scenario {str(path)!r}: {exc.strerror}; check the path") from None
    return read_scenario(text, path.name, variables, secrets), text
