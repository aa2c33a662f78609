"""The engine spec, typed: the Python mirror of `crates/engine/src/spec/` (docs/engine-spec.md).

Every way of running knee builds a `Scenario`, a plan of steps, and one `EngineSpec` per step
(`knee.plan.engine_spec`); this module is the only place that knows the spec's shape. Field names
and defaults are the engine's: `tests/unit/test_boundary.py` holds a spec with every field set
against the engine's own reading of it (`knee._engine.check_spec`), so a key renamed on either
side fails a test instead of silently falling back to a default.
"""

from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, SerializationInfo, field_serializer


class _Spec(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


# ---- stop rules (serde: externally tagged, snake_case) ------------------------------------------


class Total(_Spec):
    """Operations over the whole group."""

    total: int


class PerClient(_Spec):
    """Operations per client."""

    per_client: int


class DurationMs(_Spec):
    """Measured run time (after warm-up)."""

    duration_ms: int


class WhileOthers(_Spec):
    """A background group: runs until every other group of the shard has ended (in a shard of
    background groups only: until `stop()`, with `cut()` windows)."""

    while_others: Literal[True] = True


StopRule = Total | PerClient | DurationMs | WhileOthers


# ---- pacers (serde: internally tagged by "kind") -------------------------------------------------


class PointsProfile(_Spec):
    """A rate over time: (seconds, arrivals per second) points, linear between them or held (`step`)."""

    shape: Literal["points"] = "points"
    points: list[tuple[float, float]]
    step: bool = False


class SineProfile(_Spec):
    """A rate over time: mean_hz + amplitude_hz · sin(2π t / period_s)."""

    shape: Literal["sine"] = "sine"
    mean_hz: float
    amplitude_hz: float
    period_s: float


RateProfile = Annotated[PointsProfile | SineProfile, Field(discriminator="shape")]


class ClosedPacer(_Spec):
    """Closed loop: each client's next operation when its previous one ended (+ think time); with a `profile`, the
    group's client number k (1-based) runs while the profile is at least k (a clients profile)."""

    kind: Literal["closed"] = "closed"
    profile: RateProfile | None = None


class RatePacer(_Spec):
    """Open loop: `rate_hz` arrivals per second over the group, or a rate over time (`profile`, one of the two);
    latency from the intended start."""

    kind: Literal["rate"] = "rate"
    rate_hz: float | None = None
    profile: RateProfile | None = None
    poisson: bool = False
    max_in_flight: int | None = None

    def scaled(self, share: float) -> "RatePacer":
        """The pacer of `share` of the group's clients (a shard): a constant rate in proportion, a profile as it is;
        either's arrivals taken by turns over the whole group's clients (`GroupSpec.group_clients`)."""
        return self.model_copy(update={"rate_hz": None if self.rate_hz is None else self.rate_hz * share})


Pacer = Annotated[ClosedPacer | RatePacer, Field(discriminator="kind")]


# ---- clients (serde: internally tagged by "kind") ------------------------------------------------

# What a client key's place holds in every dump but the engine's (`EngineSpec.to_json`).
KEY_WITHHELD = "<withheld: the key travels to the engine only>"


class TlsClient(_Spec):
    """The TLS side of an https client, PEM texts in memory (knee.scenario.tlsfiles reads and checks the files). The
    private key appears in the JSON the engine reads and nowhere else: any other dump (run.json's step specs,
    --json, a repr) holds KEY_WITHHELD in its place."""

    cert_pem: str | None = Field(default=None, repr=False)
    key_pem: str | None = Field(default=None, repr=False)
    ca_pem: str | None = Field(default=None, repr=False)
    webpki_roots: bool = True
    resume: bool = True
    version: Literal["1.2", "1.3"] | None = None

    @field_serializer("key_pem")
    def _withheld(self, key: str | None, info: SerializationInfo) -> str | None:
        context: Any = info.context
        engine = isinstance(context, dict) and context.get("engine") is True
        return key if key is None or engine else KEY_WITHHELD


class HttpRequest(_Spec):
    """One request of an http group's mix: its name, weight and what it changes from the group's request."""

    name: str
    weight: float = 1.0
    url: str | None = None
    method: str | None = None
    headers: list[tuple[str, str]] | None = None
    body: str | None = None
    body_file: str | None = None
    expect_status: list[tuple[int, int]] | None = None
    expect_body: str | None = None
    expect_body_regex: str | None = None
    expect_length: int | None = None


class GrpcCall(_Spec):
    """An http client's gRPC call: the body is its message as JSON, sent as protobuf by these descriptors."""

    descriptors: str  # a FileDescriptorSet holding the method and its message types, base64
    method: str  # /package.Service/Method
    stream_messages: int = 1  # the body's message, this many times: a client-streaming call's stream
    stream_interval_ms: int = 0  # the pause before each message after the first (0: all at once)
    expect_message: str | None = None  # matched against the JSON of the response's messages, one per line


class HttpClient(_Spec):
    kind: Literal["http"] = "http"
    url: str
    method: str = "GET"
    headers: list[tuple[str, str]] = Field(default_factory=list)
    body: str | None = None
    body_file: str | None = None
    insecure: bool = False
    new_connection: bool = False
    http2: bool = False
    streams: int = 1  # HTTP/2: clients per connection (⌈clients / streams⌉ connections per shard)
    connections: int | None = None  # HTTP/2: or this many connections per shard, shared by the clients
    tls: TlsClient = Field(default_factory=TlsClient)
    expect_status: list[tuple[int, int]] = Field(default_factory=lambda: [(200, 399)])
    expect_body: str | None = None
    expect_body_regex: str | None = None
    expect_length: int | None = None
    source_addrs: list[str] = Field(default_factory=list)
    # connect and TLS handshake together; None: only the group's timeout_ms
    connect_timeout_ms: int | None = None
    connect_to: str | None = None  # HOST:PORT connected to instead of the URL's (which stays the Host and SNI)
    requests: list[HttpRequest] = Field(default_factory=list)  # a weighted mix; empty: the one request above
    mix_order: Literal["random", "in_turn"] = "random"  # at random by weight, or each the next of the list
    grpc: GrpcCall | None = None  # a gRPC call (http2): the body is its JSON message


class TcpClient(_Spec):
    kind: Literal["tcp"] = "tcp"
    addr: str
    send: str | None = None
    expect: str | None = None
    source_addrs: list[str] = Field(default_factory=list)
    connect_timeout_ms: int | None = None


class WsClient(_Spec):
    kind: Literal["websocket"] = "websocket"
    url: str
    headers: list[tuple[str, str]] = Field(default_factory=list)
    subprotocols: list[str] = Field(default_factory=list)
    mode: Literal["echo", "session", "listen"] = "echo"
    message: str = ""
    binary: bool = False
    expect: str | None = None
    correlate: str | None = None
    messages: int = 1
    interval_ms: int = 0
    hold_ms: int = 0
    insecure: bool = False
    tls: TlsClient = Field(default_factory=TlsClient)
    source_addrs: list[str] = Field(default_factory=list)
    connect_timeout_ms: int | None = None
    connect_to: str | None = None


class FileCheck(_Spec):
    path: str
    min_size: int = 0


class ExecClient(_Spec):
    kind: Literal["exec"] = "exec"
    argv: list[str]
    env: list[tuple[str, str]] = Field(default_factory=list)
    cwd: str | None = None
    expect_stdout: str | None = None
    expect_stderr: str | None = None
    expect_file: FileCheck | None = None
    bytes_from: str | None = None


class WorkerClient(_Spec):
    """A long-lived client program speaking knee's worker protocol (docs/worker-protocol.md)."""

    kind: Literal["worker"] = "worker"
    argv: list[str]
    env: list[tuple[str, str]] = Field(default_factory=list)
    cwd: str | None = None
    processes: int = 0  # in all; 0 = one per engine thread
    vars: dict[str, str] = Field(default_factory=dict)  # sent in every process's start message
    operation: str = ""  # sent with every request (a fixed-work stage's name)
    start_timeout_ms: int = 30_000
    data: list[str] = Field(default_factory=list)  # data sources whose rows every operation sends


ClientSpec = Annotated[HttpClient | TcpClient | WsClient | ExecClient | WorkerClient, Field(discriminator="kind")]


# ---- groups and the shard ------------------------------------------------------------------------


class GroupSpec(_Spec):
    name: str
    clients: int
    stop: StopRule
    think_ms: int = 0
    think_random: dict[str, Any] = Field(default_factory=lambda: {"kind": "constant"})  # how each is drawn
    think_on_failure_ms: int = 0
    timeout_ms: int = 30_000
    warmup_ms: int = 0
    client_offset: int = 0
    # the whole group's clients over every shard (None: this shard's, from 0): an open loop's turns go over them all
    group_clients: int | None = None
    pacer: Pacer = Field(default_factory=ClosedPacer)
    client: ClientSpec

    @property
    def background(self) -> bool:
        return isinstance(self.stop, WhileOthers)


class DataSource(_Spec):
    """Rows the groups' templates read (`${NAME.COLUMN}`), one per operation (spec/data.rs `DataSpec`)."""

    name: str
    file: str | None = None
    text: str | None = Field(default=None, repr=False)  # the rows inline (a cluster shard's part)
    format: Literal["csv", "tsv", "jsonl"] | None = None
    order: Literal["circular", "queue", "random", "shuffle"] = "circular"
    on_exhausted: Literal["stop", "stop_client", "recycle"] | None = None
    scope: Literal["run", "client"] = "run"
    ranges: list[tuple[int, int]] | None = None  # positions this shard may use, [start, end)


class EngineSpec(_Spec):
    """One shard: client groups started together."""

    threads: int = 0
    interval_ms: int = 1000
    start_at_unix: float | None = None
    seed: int = 0
    data: list[DataSource] = Field(default_factory=list)
    groups: list[GroupSpec]
    operations_log: str | None = None  # every measured operation written to this file (knee.operations)

    def to_json(self) -> str:
        """The JSON the engine reads (every field, as the engine writes it back): the only dump that holds a TLS
        client's private key."""
        return self.model_dump_json(context={"engine": True})
