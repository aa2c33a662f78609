"""`Options`: what the command line (or `knee.run` / `knee.sweep` keywords) says about a target and its load, before
knee.scenario.oneline turns it into a scenario's tables."""

from __future__ import annotations

from dataclasses import dataclass, field


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
    connections: int | None = None  # HTTP/2: connections shared by all the clients (per load machine)
    expect_status: str | None = None
    expect_body: str | None = None
    expect_body_regex: str | None = None
    expect_length: int | None = None
    source_addr: list[str] = field(default_factory=list)  # http and tcp: local addresses to connect from
    connect_timeout: str | float | None = None  # http and tcp: a connection's opening (connect + TLS) limit
    connect_to: str | None = None  # http, ws, grpc: HOST[:PORT] connected to instead of the URL's host
    send: str | None = None
    expect: str | None = None  # tcp: read until it matches; websocket: the reply waited for
    # a websocket target's
    mode: str | None = None  # "echo" | "session"
    message: str | None = None
    binary: bool = False
    messages: int | None = None
    message_interval: str | float | None = None
    hold: str | float | None = None
    correlate: str | None = None  # a JSONPath
    subprotocol: list[str] = field(default_factory=list)
    # a grpc target's
    proto: list[str] = field(default_factory=list)  # .proto files
    import_path: list[str] = field(default_factory=list)  # where their imports are found
    protoset: str | None = None  # a compiled FileDescriptorSet
    reflect: bool = False  # the types from the server's reflection service
    message_file: str | None = None
    stream_messages: int | None = None
    stream_interval: str | float | None = None
    deadline: str | float | None = None
    expect_message: str | None = None
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
    "groups.main.connections": "--connections",
    "groups.main.expect_status": "--expect-status",
    "groups.main.expect_body": "--expect-body",
    "groups.main.expect_body_regex": "--expect-body-regex",
    "groups.main.expect_length": "--expect-length",
    "groups.main.source_addr": "--source-addr",
    "groups.main.connect_timeout": "--connect-timeout",
    "groups.main.connect_to": "--connect-to",
    "groups.main.send": "--send",
    "groups.main.expect": "--expect",
    "groups.main.message": "--message",
    "groups.main.messages": "--messages",
    "groups.main.interval": "--message-interval",
    "groups.main.mode": "--mode",
    "groups.main.hold": "--hold",
    "groups.main.correlate": "--correlate",
    "groups.main.subprotocols": "--subprotocol",
    "groups.main.proto": "--proto",
    "groups.main.include": "-I/--import-path",
    "groups.main.protoset": "--protoset",
    "groups.main.reflect": "--reflect",
    "groups.main.message_file": "--message-file",
    "groups.main.stream_messages": "--stream-messages",
    "groups.main.stream_interval": "--stream-interval",
    "groups.main.deadline": "--deadline",
    "groups.main.expect_message": "--expect-message",
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
