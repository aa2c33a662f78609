"""A group's engine client spec (`knee.spec`): the one place that turns a group's keys into the engine's, for
every kind of group (knee.plan builds the rest of each step's spec around it)."""

from __future__ import annotations

import sys
from collections.abc import Mapping, Sequence
from typing import Any

from knee.scenario import addresses, tlsfiles
from knee.scenario.address import host_port
from knee.scenario.data import DataTable, MixRequest, request_url
from knee.scenario.groups import (
    Group,
    GrpcGroup,
    HttpGroup,
    ProcessGroup,
    PythonGroup,
    TcpGroup,
    UrlGroup,
    WebsocketGroup,
)
from knee.scenario.urls import host_and_port, http_origin
from knee.spec import (
    ClientSpec,
    ExecClient,
    FileCheck,
    GrpcCall,
    HttpClient,
    HttpRequest,
    TcpClient,
    TlsClient,
    WorkerClient,
    WsClient,
)


def client_spec(
    g: Group, scenario_vars: dict[str, str] | None = None, *, record: bool = False, sources: Sequence[DataTable] = ()
) -> ClientSpec:
    """The engine's client spec of a group: the one place that turns a group's keys into the engine's
    (a body makes the default method POST; cookies become one Cookie header; an https group's TLS files become
    PEM text, except in the `record`)."""
    if isinstance(g, HttpGroup):
        headers = _headers(g.headers, g.cookies)
        has_body = g.body is not None or g.body_file is not None
        return HttpClient(
            url=g.url,
            method=(g.method or ("POST" if has_body else "GET")).upper(),
            headers=headers,
            body=g.body,
            body_file=g.body_file,
            insecure=g.insecure,
            new_connection=g.new_connection,
            http2=g.http2,
            streams=g.streams,
            connections=g.connections,
            tls=_tls(g, record),
            expect_status=list(g.expect_status),
            expect_body=g.expect_body,
            expect_body_regex=g.expect_body_regex,
            expect_length=g.expect_length,
            source_addrs=addresses.of_group(g.source_addr),
            connect_timeout_ms=_ms_or_none(g.connect_timeout),
            connect_to=_connect_to(g),
            requests=[_mix_request(g, r) for r in g.requests],
            mix_order=g.mix_order,
        )
    if isinstance(g, GrpcGroup):
        return _grpc(g, record)
    if isinstance(g, TcpGroup):
        sources = addresses.of_group(g.source_addr)
        return TcpClient(
            addr=g.addr,
            send=g.send,
            expect=g.expect,
            source_addrs=sources,
            connect_timeout_ms=_ms_or_none(g.connect_timeout),
        )
    if isinstance(g, WebsocketGroup):
        return WsClient(
            url=g.url,
            headers=_headers(g.headers, g.cookies),
            subprotocols=list(g.subprotocols),
            mode=g.mode,
            message=g.message or "",
            binary=g.binary,
            expect=g.expect,
            correlate=g.correlate,
            messages=g.messages,
            interval_ms=round(g.interval * 1000),
            hold_ms=round((g.hold or 0) * 1000),
            insecure=g.insecure,
            tls=_tls(g, record),
            source_addrs=addresses.of_group(g.source_addr),
            connect_timeout_ms=_ms_or_none(g.connect_timeout),
            connect_to=_connect_to(g),
        )
    if isinstance(g, ProcessGroup):
        if isinstance(g, PythonGroup):
            argv = [sys.executable, "-m", "knee.pyworker", g.function, *(["--path", g.path] if g.path else [])]
            cwd = None
        else:
            argv, cwd = list(g.argv), g.cwd
        return WorkerClient(
            argv=argv,
            env=list(g.env.items()),
            cwd=cwd,
            processes=g.processes,
            vars=dict(scenario_vars or {}),
            operation="${stage}",
            start_timeout_ms=ms(g.start_timeout),
            # by default every source (a background group's own shard: not those whose rows are used once)
            data=list(g.data) if g.data is not None else [d.name for d in sources if not (g.background and d.runs_out)],
        )
    return ExecClient(
        argv=list(g.argv),
        env=list(g.env.items()),
        cwd=g.cwd,
        expect_stdout=g.expect_stdout,
        expect_stderr=g.expect_stderr,
        expect_file=FileCheck(path=g.expect_file.path, min_size=g.expect_file.min_size) if g.expect_file else None,
        bytes_from=g.bytes_from,
    )


def _connect_to(g: UrlGroup) -> str | None:
    """A group's `connect_to` as the engine takes it, HOST:PORT ([v6]:PORT), the URL's port where it names none."""
    if g.connect_to is None:
        return None
    where = host_port(g)  # connect_to's, the URL's port where it names none
    assert where is not None
    return host_and_port(*where)


def _grpc(g: GrpcGroup, record: bool) -> HttpClient:
    """A grpc group as the engine calls it: an HTTP/2 POST of the method's path, its JSON message the body."""
    m = g.method
    headers = [("content-type", "application/grpc"), ("te", "trailers")]
    if g.deadline is not None:
        headers.append(("grpc-timeout", grpc_timeout(g.deadline)))
    headers.extend(g.headers.items())
    return HttpClient(
        url=http_origin(g.url) + m.path,
        method="POST",
        headers=headers,
        body=g.message_json(),
        insecure=g.insecure,
        http2=True,
        streams=g.streams,
        connections=g.connections,
        tls=_tls(g, record),
        expect_status=[(200, 200)],
        source_addrs=addresses.of_group(g.source_addr),
        connect_timeout_ms=_ms_or_none(g.connect_timeout),
        connect_to=_connect_to(g),
        grpc=GrpcCall(
            descriptors=m.descriptors,
            method=m.path,
            stream_messages=g.stream_messages,
            stream_interval_ms=round(g.stream_interval * 1000),
            expect_message=g.expect_message,
        ),
    )


def grpc_timeout(seconds: float) -> str:
    """A deadline as gRPC's grpc-timeout header writes it: at most 8 digits, in the finest unit that fits."""
    for unit, per_s in (("m", 1000), ("S", 1), ("M", 1 / 60), ("H", 1 / 3600)):
        n = max(1, round(seconds * per_s))
        if n <= 99_999_999:
            return f"{n}{unit}"
    return "99999999H"


def _headers(headers: Mapping[str, str], cookies: Mapping[str, str]) -> list[tuple[str, str]]:
    """Headers as the engine sends them: cookies become one Cookie header."""
    out = list(headers.items())
    if cookies:
        out.append(("Cookie", "; ".join(f"{k}={v}" for k, v in cookies.items())))
    return out


def _mix_request(g: HttpGroup, r: MixRequest) -> HttpRequest:
    """One request of a mix: what it changes from the group's (a body makes its default method POST, as a
    group's does; its cookies go over the group's)."""
    headers = None
    if r.headers is not None or r.cookies is not None:
        cookies = {**g.cookies, **(r.cookies or {})}
        headers = _headers({**g.headers, **(r.headers or {})}, cookies)
    has_body = r.body is not None or r.body_file is not None
    method = r.method or ("POST" if has_body and g.method is None else None)
    return HttpRequest(
        name=r.name,
        weight=r.weight,
        url=request_url(g.url, r.url),
        method=method.upper() if method else None,
        headers=headers,
        body=r.body,
        body_file=r.body_file,
        expect_status=list(r.expect_status) if r.expect_status is not None else None,
        expect_body=r.expect_body,
        expect_body_regex=r.expect_body_regex,
        expect_length=r.expect_length,
    )


def ms(seconds: float) -> int:
    """A duration in the engine's whole milliseconds, at least 1."""
    return max(1, round(seconds * 1000))


def _ms_or_none(seconds: float | None) -> int | None:
    return None if seconds is None else ms(seconds)


def _tls(g: UrlGroup, record: bool) -> TlsClient:
    """The engine's TLS settings of an https (or wss) group: with `record`, as run.json keeps them (no file read, no
    PEM)."""
    t = g.tls
    settings = TlsClient(
        webpki_roots=t.trusts_webpki if t is not None else True,
        resume=t.resume if t is not None else True,
        version=t.version if t is not None else None,
    )
    if record or not tlsfiles.https(g):
        return settings
    return settings.model_copy(update=tlsfiles.pems(t))


def fill_stage(client: ClientSpec, stage: str) -> ClientSpec:
    """`${stage}` in every string of the client spec replaced by the step's stage (fixed-work label); an http
    client's TLS settings (PEM texts, a key no dump but the engine's holds) are kept as they are."""
    tls = getattr(client, "tls", None)
    data = _replace(client.model_dump(exclude={"tls"}), stage)
    if tls is not None:
        data["tls"] = tls
    return type(client).model_validate(data)


def _replace(value: Any, stage: str) -> Any:
    if isinstance(value, dict):
        return {k: _replace(v, stage) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_replace(v, stage) for v in value]
    if isinstance(value, str):
        return value.replace("${stage}", stage)
    return value
