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
