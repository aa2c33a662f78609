"""The client groups of a scenario: what each kind of client (http, tcp, exec, worker program, Python flow)
is told to do, and the stop and timing every group shares."""

import json
import math
from typing import Annotated, Any, Literal

from pydantic import (
    AfterValidator,
    AliasChoices,
    BeforeValidator,
    Field,
    PrivateAttr,
    ValidationInfo,
    field_validator,
    model_validator,
)

from knee.errors import UserError
from knee.scenario import addresses, grpcproto, profiles
from knee.scenario.data import MixRequest, origin, request_url
from knee.scenario.fields import Count, Duration, Headers, PositiveDuration, PositiveInt, Table, seconds
from knee.scenario.profiles import RateProfile
from knee.scenario.think import Think, ThinkTime, closed_only
from knee.scenario.tls import Tls
from knee.scenario.units import parse_status_ranges
from knee.scenario.urls import check_addr, check_connect_to, check_grpc_url, check_url, check_ws_url


def _clients(value: Any) -> Any:
    if value == "level" or isinstance(value, RateProfile):
        return value
    if isinstance(value, str | dict):  # the clients running over time (knee.scenario.profiles)
        return profiles.parse(value, profiles.CLIENTS)
    if isinstance(value, int) and not isinstance(value, bool):
        if value < 1:
            raise ValueError("must be at least 1")
        return value
    raise ValueError(
        'must be a number of clients (at least 1), "level" (follow the sweep level) or a clients profile like '
        '"0s:1, 60s:40" (docs/load-shapes.md)'
    )


def _rate(value: Any) -> Any:
    if value is None or value == "level" or isinstance(value, RateProfile):
        return value
    if isinstance(value, str | dict):
        return profiles.parse(value)
    if isinstance(value, int | float) and not isinstance(value, bool):  # a constant rate: the profile "0s:R"
        if not 0 < value <= profiles.MAX_RATE_HZ:
            raise ValueError(f"must be a rate above 0 and at most {profiles.MAX_RATE_HZ:,.0f} arrivals per second")
        return profiles.RateProfile(shape="points", points=((0.0, float(value)),))
    raise ValueError(
        'must be "level" (the group\'s arrivals per second follow sweep.rates) or a rate profile like '
        '"0s:10, 60s:400" (docs/load-shapes.md)'
    )


Clients = Annotated[int | Literal["level"] | RateProfile, BeforeValidator(_clients)]


_DEFAULT_TIMEOUT = 30.0  # an operation taking longer is hung (a listen's beyond its hold, a session's exchanges)


class _GroupBase(Table):
    clients: Clients = "level"
    # "level" (follows sweep.rates) or a rate over time (knee.scenario.profiles)
    rate: Annotated[Literal["level"] | RateProfile | None, BeforeValidator(_rate)] = None
    per_client: PositiveInt | None = None
    total: PositiveInt | None = None
    duration: PositiveDuration | None = None
    # baseload: runs as long as the step's other groups, then stops (engine stop `while_others`)
    background: bool = False
    timeout: PositiveDuration = Field(default=_DEFAULT_TIMEOUT, validation_alias=AliasChoices("timeout", "hang_after"))
    think: Think = ThinkTime()  # the same each time, uniform(LEAST, MOST) or exponential(MEAN) (scenario/think.py)
    # a further pause after a failed operation only (a retrying client's back-off), added to think
    think_on_failure: Duration = 0.0

    @model_validator(mode="after")
    def _one_stop(self) -> "_GroupBase":
        given = [k for k in ("per_client", "total", "duration") if getattr(self, k) is not None]
        if len(given) > 1:
            raise ValueError(f"give at most one of per_client, total, duration (got {', '.join(given)})")
        if self.background and given:
            raise ValueError(
                f"background = true runs the group as long as the others, so it takes no {given[0]} of its own; "
                f"remove {given[0]} or background"
            )
        if isinstance(self.clients, RateProfile):
            if self.rate is not None:
                raise ValueError(
                    "clients is a profile (the clients running over time, a closed loop), so the group takes no "
                    "rate; give a number of clients with a rate profile, or drop rate"
                )
            if self.per_client is not None or self.total is not None:
                raise ValueError(
                    f"a clients profile runs for a duration, not a count of operations (got "
                    f"{'per_client' if self.per_client is not None else 'total'}); give duration, or none to run "
                    "the profile to its last point"
                )
        if isinstance(self.rate, RateProfile):
            if self.clients == "level":
                raise ValueError(
                    'clients must be a number of connections with a rate profile (got "level"): its arrivals are '
                    "handed to that many clients, e.g. clients = 50"
                )
            closed_only(self, "", "a rate profile")
        return self

    @property
    def profile(self) -> RateProfile | None:
        """Its rate over time, if it has one."""
        return self.rate if isinstance(self.rate, RateProfile) else None

    @property
    def clients_profile(self) -> RateProfile | None:
        """Its clients running over time (a closed loop), if it has them."""
        return self.clients if isinstance(self.clients, RateProfile) else None

    @property
    def over_time(self) -> RateProfile | None:
        """Its rate or its clients over time, whichever it has."""
        return self.profile or self.clients_profile

    @property
    def follows_level(self) -> bool:
        """Its clients (closed loop) or its arrival rate (open loop) follow the sweep level."""
        return self.clients == "level" or self.rate == "level"

    def client_count(self, level: float) -> int:
        """Its clients in a step at `level` (an open-loop group's clients are its connections)."""
        if isinstance(self.clients, RateProfile):  # the most that ever run at once
            return max(1, math.floor(self.clients.peak_hz + 1e-9))
        return int(level) if self.clients == "level" else self.clients


class NetworkGroup(_GroupBase):
    """A group whose operations connect to an address (http, tcp, websocket, grpc): the reachability check,
    preflight's connections and `connect_timeout` are theirs."""

    # a connection not open this long after its connect began (TCP connect, then TLS handshake) fails:
    # connect_timeout, or tls "handshake timeout"; None: only timeout applies (the operation is hung)
    connect_timeout: Duration | None = None

    @field_validator("connect_timeout")
    @classmethod
    def _connect_within_timeout(cls, v: float | None, info: ValidationInfo) -> float | None:
        if v is None:
            return v
        if v <= 0:
            raise ValueError("must be more than 0 (or left out: only timeout applies)")
        timeout = info.data.get("timeout")
        if timeout is not None and v >= timeout:
            raise ValueError(
                f"{_fmt_s(v)} is not shorter than timeout ({_fmt_s(timeout)}, --timeout on the command line): an "
                "operation would be hung before it; make it shorter, raise timeout, or leave it out"
            )
        return v


class UrlGroupBase(NetworkGroup):
    """A network group that a URL names (http, websocket, grpc): `connect_to` sends its connections elsewhere."""

    # HOST or HOST:PORT the connections go to instead of the URL's host (and port); the URL's host is still the Host
    # header, the TLS server name (SNI) and the name its certificate must bear: curl's --connect-to and --resolve
    connect_to: Annotated[str, AfterValidator(check_connect_to)] | None = None


def _fmt_s(seconds: float) -> str:
    return f"{seconds:g}s"


class HttpGroup(UrlGroupBase):
    kind: Literal["http"]
    url: Annotated[str, AfterValidator(check_url)]
    method: str | None = None  # default: POST when there is a body, else GET (knee.plan)
    headers: Headers = Field(default_factory=dict)
    cookies: dict[str, str] = Field(default_factory=dict)
    body: str | None = None
    body_file: str | None = None
    insecure: bool = False
    new_connection: bool = False
    http2: bool = False  # HTTP/2: ALPN h2 over TLS, prior knowledge (h2c) over http://
    streams: PositiveInt = 1  # HTTP/2: clients per connection (⌈clients / streams⌉ connections)
    connections: PositiveInt | None = None  # HTTP/2: or this many connections (per load machine) for all clients
    tls: Tls | None = None
    expect_status: list[tuple[int, int]] = Field(default_factory=lambda: [(200, 399)])
    expect_body: str | None = None
    expect_body_regex: str | None = None
    expect_length: Count | None = None
    source_addr: addresses.SourceAddrs = Field(default_factory=list)
    # a weighted mix of requests (knee.scenario.data): each operation picks one; their keys go over the group's
    requests: list[MixRequest] = Field(default_factory=list)
    mix_order: Literal["random", "in_turn"] = "random"  # at random by weight, or each the next of the list in turn

    @model_validator(mode="before")
    @classmethod
    def _url_from_requests(cls, data: Any) -> Any:
        """A mix may give its URLs in its requests only: the group's is then the first request's."""
        if isinstance(data, dict) and "url" not in data and isinstance(data.get("requests"), list):
            first = next((r.get("url") for r in data["requests"] if isinstance(r, dict) and r.get("url")), None)
            if isinstance(first, str) and "://" in first:
                return {**data, "url": first}
        return data

    @field_validator("expect_status", mode="before")
    @classmethod
    def _status(cls, v: Any) -> Any:
        if isinstance(v, int) and not isinstance(v, bool):
            return [(v, v)]
        if isinstance(v, str):
            try:
                return parse_status_ranges(v, "value")
            except UserError as exc:
                raise ValueError("must be statuses like 200, 200-299 or 2xx, separated by commas") from exc
        if isinstance(v, list) and all(isinstance(x, int | str) and not isinstance(x, bool) for x in v):
            out: list[tuple[int, int]] = []
            for x in v:
                out.extend(cls._status(x))
            return out
        return v

    @field_validator("expect_status")
    @classmethod
    def _statuses(cls, v: list[tuple[int, int]]) -> list[tuple[int, int]]:
        if any(not 100 <= lo <= hi <= 599 for lo, hi in v):
            raise ValueError("must be HTTP statuses from 100 to 599, like 200, 200-299 or 2xx")
        return v

    @model_validator(mode="after")
    def _consistent(self) -> "HttpGroup":
        if self.body is not None and self.body_file is not None:
            raise ValueError("give either body or body_file, not both")
        if self.connections is not None and (not self.http2 or self.new_connection or self.streams > 1):
            raise ValueError(
                f"connections = {self.connections} shares HTTP/2 connections among the clients: set http2 = true, "
                "and drop new_connection and streams (they say otherwise how connections are shared)"
            )
        if self.streams > 1 and not self.http2:
            raise ValueError(f"streams = {self.streams} multiplexes HTTP/2 only; set http2 = true (or drop streams)")
        if self.streams > 1 and self.new_connection:
            raise ValueError(
                f"streams = {self.streams} shares connections, but new_connection opens one per operation; "
                "drop one of them"
            )
        names = [r.name for r in self.requests]
        if len(set(names)) != len(names):
            dup = next(n for i, n in enumerate(names) if n in names[:i])
            raise ValueError(f"requests: the name {dup!r} is used twice; give every request of the mix its own name")
        weighed = next((f"{r.name!r} has weight = {r.weight:g}" for r in self.requests if r.weight != 1), None)
        if self.mix_order == "in_turn" and (weighed or not self.requests):
            raise ValueError(
                f'mix_order = "in_turn" sends each request of a mix in turn, but {weighed or "the group has none"}; '
                + ('drop the weights, or pick at random by weight (mix_order = "random")' if weighed else "drop it")
            )
        for r in self.requests:
            url = request_url(self.url, r.url)
            if url is not None and origin(url) != origin(self.url):
                raise ValueError(
                    f"requests: {r.name!r} goes to {origin(url)} but the group to {origin(self.url)}; a group's "
                    "requests share one origin: give the other origin a group of its own"
                )
        if self.tls is not None and not self.url.lower().startswith("https://"):
            raise ValueError(
                "tls (client certificate, CAs, TLS version) applies to https:// URLs only; use https:// or drop it"
            )
        return self


class TcpGroup(NetworkGroup):
    kind: Literal["tcp"]
    addr: Annotated[str, AfterValidator(check_addr)]
    send: str | None = None
    expect: str | None = None
    source_addr: addresses.SourceAddrs = Field(default_factory=list)


class WebsocketGroup(UrlGroupBase):
    """A WebSocket client (RFC 6455): `echo` sends `message` on the connection it keeps and waits for the reply;
    `session` is a whole session per operation (connect, handshake, `messages` exchanges `interval` apart, close);
    `listen` holds a connection for `hold`, counting the messages the server pushes (after `message`, if given)."""

    kind: Literal["websocket"]
    url: Annotated[str, AfterValidator(check_ws_url)]
    mode: Literal["echo", "session", "listen"] = "echo"
    message: str | None = None
    binary: bool = False
    expect: str | None = None  # the reply waited for: the first message this regex matches (default: the first)
    correlate: str | None = None  # or the first whose JSON has the message's value at this JSONPath ($.id)
    messages: PositiveInt = 1
    interval: Duration = 0.0
    hold: Duration | None = None
    headers: Headers = Field(default_factory=dict)
    cookies: dict[str, str] = Field(default_factory=dict)
    subprotocols: list[str] = Field(default_factory=list)
    insecure: bool = False
    tls: Tls | None = None
    source_addr: addresses.SourceAddrs = Field(default_factory=list)

    @model_validator(mode="after")
    def _consistent(self) -> "WebsocketGroup":
        if self.mode == "listen" and not self.hold:
            raise ValueError('mode = "listen" holds each connection: give hold, e.g. "10s" (--hold)')
        if self.mode != "listen" and self.hold is not None:
            raise ValueError('hold is how long mode = "listen" holds a connection: set mode = "listen" or drop it')
        if self.message is None and self.mode != "listen":
            raise ValueError(
                f'mode = "{self.mode}" sends a message and waits for its reply: give message (--message on the '
                "command line)"
            )
        if self.mode != "session" and (self.messages != 1 or self.interval):
            raise ValueError(
                'messages and interval belong to a session: set mode = "session" (--mode session) or drop them'
            )
        if self.tls is not None and not self.url.lower().startswith("wss://"):
            raise ValueError("tls (client certificate, CAs, TLS version) applies to wss:// URLs only")
        # An operation lasts at least its hold or its spaced exchanges: a default timeout counts beyond that
        least = self.hold if self.mode == "listen" else (self.messages - 1) * self.interval
        if least and "timeout" not in self.model_fields_set:
            self.timeout = least + _DEFAULT_TIMEOUT
        elif least and least >= self.timeout:
            lasts = f"{self.messages} messages {_fmt_s(self.interval)} apart take at least {_fmt_s(least)}"
            raise ValueError(
                f"{f'hold {_fmt_s(least)}' if self.mode == 'listen' else lasts}, not less than timeout "
                f"({_fmt_s(self.timeout)}): every operation would be hung; raise timeout (--timeout), e.g. to "
                f"{_fmt_s(least + _DEFAULT_TIMEOUT)}, or leave it out (then it counts from the end of that)"
            )
        return self


class GrpcGroup(UrlGroupBase):
    """A gRPC call per operation, over knee's own HTTP/2 client: the method the URL names (grpc:// speaks h2c,
    grpcs:// TLS), its types from `proto` files (imports from `include`, or each file's directory) or a compiled
    `protoset`; `message` (JSON, templated) sent `stream_messages` times on a client- or bidirectional-streaming
    method. A call succeeds when its grpc-status is OK (and `expect_message` matches its response's JSON)."""

    kind: Literal["grpc"]
    url: Annotated[str, AfterValidator(check_grpc_url)]
    proto: list[str] = Field(default_factory=list)
    include: list[str] = Field(default_factory=list)
    protoset: str | None = None
    reflect: bool = False  # the types from the server's reflection service
    message: str | dict[str, Any] = "{}"
    message_file: str | None = None
    stream_messages: Annotated[int, Field(ge=1, le=100_000)] = 1  # the engine's bound: a call's stream is in memory
    stream_interval: Duration = 0.0  # the pause before each message after the first (0: all at once)
    deadline: Duration | None = None  # sent as grpc-timeout: the server may give up on the call then
    expect_message: str | None = None
    headers: dict[str, str] = Field(default_factory=dict)  # metadata
    insecure: bool = False
    streams: PositiveInt = 1  # clients per HTTP/2 connection (⌈clients / streams⌉ connections)
    connections: PositiveInt | None = None  # or this many connections (per load machine) for all the clients
    tls: Tls | None = None
    source_addr: addresses.SourceAddrs = Field(default_factory=list)
    _method: grpcproto.Method | None = PrivateAttr(default=None)

    @field_validator("proto", "include", mode="before")
    @classmethod
    def _one_or_more(cls, v: Any) -> Any:
        return [v] if isinstance(v, str) else v

    @model_validator(mode="after")
    def _consistent(self) -> "GrpcGroup":
        if [bool(self.proto), self.protoset is not None, self.reflect].count(True) != 1:
            raise ValueError(
                "give the method's types: proto (.proto files, --proto), protoset (a compiled descriptor set, "
                "--protoset) or reflect = true (the server's reflection service, --reflect), one of them"
            )
        if self.stream_interval and self.stream_messages < 2:
            raise ValueError("stream_interval spaces a stream's messages: give stream_messages too (or drop it)")
        if 0 < self.stream_interval < 0.001:
            raise ValueError(f"stream_interval {self.stream_interval * 1000:g}ms is below 1 ms: give 1ms or more")
        spaced = (self.stream_messages - 1) * self.stream_interval
        if self.timeout is not None and spaced >= self.timeout:
            raise ValueError(
                f"stream_messages {self.stream_messages}, stream_interval {self.stream_interval:g}s: a call takes at "
                f"least {spaced:g}s, not less than timeout ({self.timeout:g}s): every call would be hung; raise "
                "timeout (--timeout) or send fewer messages"
            )
        if self.connections is not None and self.streams > 1:
            raise ValueError("give connections or streams, not both: each says how the clients share connections")
        if self.message_file is not None and self.message != "{}":
            raise ValueError("give either message or message_file, not both")
        if self.tls is not None and not self.url.lower().startswith("grpcs://"):
            raise ValueError("tls (client certificate, CAs, TLS version) applies to grpcs:// URLs only")
        for name in self.headers:
            if name.lower() in ("content-type", "te", "grpc-timeout"):
                raise ValueError(f"headers {name!r} is gRPC's own (knee sets it; grpc-timeout from deadline): drop it")
        return self

    def resolve(self) -> tuple[str, str] | None:
        """Find the method in its files and check the message against it (kept for `method`): None, or the key
        at fault and a sentence saying why (before any load; a run's record is read without its files)."""
        key = "proto" if self.proto else "protoset" if self.protoset else "reflect"
        try:
            m = grpcproto.find(self)
        except ValueError as exc:
            return key, str(exc)
        key = "message_file" if self.message_file else "message"
        try:
            grpcproto.check_message(m, self.message_json())
        except ValueError as exc:
            return key, str(exc)
        if self.stream_messages > 1 and not m.client_streaming:
            return "stream_messages", (
                f"is {self.stream_messages}, but {m.path} takes one message (it is not client-streaming): drop it"
            )
        self._method = m
        return None

    def message_json(self) -> str:
        """The message as the engine sends it: JSON text (a table written as JSON, a file's text)."""
        if self.message_file is not None:
            try:
                with open(self.message_file, encoding="utf-8") as f:
                    return f.read()
            except OSError as exc:
                raise ValueError(f"message_file {self.message_file!r} cannot be read ({exc.strerror})") from None
        if isinstance(self.message, str):
            return self.message
        try:  # a TOML table: its dates and times as RFC 3339 text, as protobuf's JSON writes a Timestamp
            return json.dumps(self.message, default=lambda v: v.isoformat() if hasattr(v, "isoformat") else str(v))
        except (TypeError, ValueError) as exc:
            raise ValueError(f"message cannot be written as JSON ({exc})") from None

    @property
    def method(self) -> grpcproto.Method:
        """The method, its types and descriptors (found when the scenario was read; UserError when they cannot be
        found now)."""
        if self._method is None:
            bad = self.resolve()
            if bad is not None:
                raise UserError(f"{bad[0]} {bad[1]}")
        assert self._method is not None
        return self._method


class ExpectFile(Table):
    path: str
    min_size: Annotated[int, Field(ge=0)] = 1


class ExecGroup(_GroupBase):
    kind: Literal["exec"]
    argv: Annotated[list[str], Field(min_length=1)]
    env: dict[str, str] = Field(default_factory=dict)
    cwd: str | None = None
    expect_stdout: str | None = None
    expect_stderr: str | None = None
    expect_file: ExpectFile | None = None
    bytes_from: Annotated[str, Field(min_length=1)] | None = None  # "stdout" or a file path: the payload's size


class WorkerGroup(_GroupBase):
    """A client program in any language speaking knee's worker protocol (docs/worker-protocol.md)."""

    kind: Literal["worker"]
    argv: Annotated[list[str], Field(min_length=1)]
    env: dict[str, str] = Field(default_factory=dict)
    cwd: str | None = None
    processes: Annotated[int, Field(ge=0)] = 0  # in all; 0 = one per engine thread (one per core)
    start_timeout: Annotated[float, BeforeValidator(seconds), Field(gt=0)] = 30.0
    # the [[data]] sources whose rows each operation takes and sends (`data` on the run line); None: every one
    data: list[str] | None = None


class PythonGroup(_GroupBase):
    """A flow: a Python function `module:name` run by knee's own worker (knee.pyworker), many clients per
    process, one process per core by default."""

    kind: Literal["python"]
    function: Annotated[str, Field(pattern=r"^[A-Za-z_][\w.]*:[A-Za-z_]\w*$")]
    path: str | None = None  # where to import the module from (default: the current directory)
    env: dict[str, str] = Field(default_factory=dict)
    processes: Annotated[int, Field(ge=0)] = 0
    start_timeout: Annotated[float, BeforeValidator(seconds), Field(gt=0)] = 30.0
    data: list[str] | None = None  # as WorkerGroup's: the flow's ctx.data


# the groups addressed by a URL, whose scheme says TLS or not (https, wss, grpcs)
UrlGroup = HttpGroup | WebsocketGroup | GrpcGroup
# the groups that run a program: one process per operation (exec) or long-lived ones speaking the worker protocol
CommandGroup = ExecGroup | WorkerGroup
# the groups whose clients live in worker processes (a program's, or knee's own for a Python flow)
ProcessGroup = WorkerGroup | PythonGroup

Group = Annotated[
    HttpGroup | TcpGroup | WebsocketGroup | GrpcGroup | ExecGroup | WorkerGroup | PythonGroup,
    Field(discriminator="kind"),
]
