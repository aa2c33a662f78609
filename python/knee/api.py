"""`knee.run`: one level of load against one target, measured exactly.

    >>> import knee
    >>> r = knee.run("http://127.0.0.1:8080/", clients=50, n=20000)    # doctest: +SKIP
    >>> r.stats.succeeded, r.stats.rate_hz, r.stats.latency_ms.p99      # doctest: +SKIP

TARGET is an `http(s)://` URL, `tcp://host:port`, or a command as a list of
arguments (`["curl", "-s", "http://…"]`, run without a shell).
"""

from __future__ import annotations

import os
import shutil
import socket
import urllib.parse
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from knee import engine
from knee.errors import UserError
from knee.model import GroupStats

Target = str | Sequence[str]


def client_spec(
    target: Target,
    *,
    method: str | None = None,
    headers: Sequence[tuple[str, str]] = (),
    cookies: Sequence[str] = (),
    body: str | None = None,
    body_file: str | None = None,
    insecure: bool = False,
    new_connection: bool = False,
    expect_status: Sequence[tuple[int, int]] | None = None,
    expect_body: str | None = None,
    expect_body_regex: str | None = None,
    expect_length: int | None = None,
    send: str | None = None,
    expect: str | None = None,
    env: Sequence[tuple[str, str]] = (),
    cwd: str | None = None,
    expect_stdout: str | None = None,
    expect_stderr: str | None = None,
    expect_file: str | None = None,
    expect_file_min_size: int = 0,
) -> dict[str, Any]:
    """The engine's client spec (docs/engine-spec.md) for a target and its options."""
    given = {
        "http": [k for k, v in (("method", method), ("headers", headers), ("cookies", cookies), ("body", body),
                                ("body_file", body_file), ("insecure", insecure), ("new_connection", new_connection),
                                ("expect_status", expect_status), ("expect_body", expect_body),
                                ("expect_body_regex", expect_body_regex), ("expect_length", expect_length)) if v],
        "tcp": [k for k, v in (("send", send), ("expect", expect)) if v is not None],
        "exec": [k for k, v in (("env", env), ("cwd", cwd), ("expect_stdout", expect_stdout),
                                ("expect_stderr", expect_stderr), ("expect_file", expect_file)) if v],
    }  # fmt: skip
    kind = _kind(target)
    for other, keys in given.items():
        if other != kind and keys:
            opt = _OPTION_NAMES.get(keys[0], "--" + keys[0].replace("_", "-"))
            raise UserError(f"{opt} applies to {_KIND_WORDS[other]} only, not to {_KIND_WORDS[kind]}")
    if isinstance(target, str):
        scheme = urllib.parse.urlsplit(target).scheme.lower()
        if scheme in ("http", "https"):
            hdrs = list(headers)
            if cookies:
                hdrs.append(("Cookie", "; ".join(cookies)))
            if body is not None and body_file is not None:
                raise UserError("give either --body or --body-file, not both")
            spec: dict[str, Any] = {
                "kind": "http",
                "url": target,
                "method": (method or ("POST" if body is not None or body_file else "GET")).upper(),
                "headers": [list(h) for h in hdrs],
                "insecure": insecure,
                "new_connection": new_connection,
            }
            if body is not None:
                spec["body"] = body
            if body_file is not None:
                spec["body_file"] = body_file
            if expect_status is not None:
                spec["expect_status"] = [list(r) for r in expect_status]
            for key, val in (
                ("expect_body", expect_body),
                ("expect_body_regex", expect_body_regex),
                ("expect_length", expect_length),
            ):
                if val is not None:
                    spec[key] = val
            return spec
        if scheme == "tcp":
            parts = urllib.parse.urlsplit(target)
            if not parts.hostname or not parts.port:
                raise UserError(f"a tcp target must look like tcp://host:port (got {target!r})")
            host = f"[{parts.hostname}]" if ":" in parts.hostname else parts.hostname
            spec = {"kind": "tcp", "addr": f"{host}:{parts.port}"}
            if send is not None:
                spec["send"] = send.encode().decode("unicode_escape")
            if expect is not None:
                spec["expect"] = expect
            return spec
        if "://" in target:
            raise UserError(
                f"unsupported target {target!r}: use http://, https://, tcp://host:port, "
                "or -- COMMAND ARGS for a command"
            )
        target = [target]
    argv = list(target)
    if not argv:
        raise UserError("no target given: use a URL (http://…, tcp://host:port) or -- COMMAND ARGS")
    spec = {"kind": "exec", "argv": argv, "env": [list(e) for e in env]}
    for key, val in (("cwd", cwd), ("expect_stdout", expect_stdout), ("expect_stderr", expect_stderr)):
        if val is not None:
            spec[key] = val
    if expect_file is not None:
        spec["expect_file"] = {"path": expect_file, "min_size": expect_file_min_size}
    return spec


_KIND_WORDS = {"http": "http(s):// targets", "tcp": "tcp:// targets", "exec": "commands"}
_OPTION_NAMES = {"headers": "-H/--header", "cookies": "-C/--cookie", "env": "-e/--env", "method": "-m/--method"}


def _kind(target: Target) -> str:
    if isinstance(target, str):
        scheme = urllib.parse.urlsplit(target).scheme.lower()
        if scheme in ("http", "https"):
            return "http"
        if scheme == "tcp":
            return "tcp"
    return "exec"


def preflight(client: dict[str, Any], connect_timeout_s: float = 3.0) -> None:
    """Catch what would make every operation fail before any load starts: one sentence each."""
    kind = client["kind"]
    if kind == "exec":
        prog = client["argv"][0]
        if "${" in prog:
            return
        found = shutil.which(prog) if os.sep not in prog else (prog if os.access(prog, os.X_OK) else None)
        if found is None:
            raise UserError(f"command not found or not executable: {prog!r} (check the name and your PATH)")
        return
    if kind == "http":
        parts = urllib.parse.urlsplit(client["url"])
        if not parts.hostname:
            raise UserError(f"bad URL {client['url']!r}: it has no host")
        try:
            port = parts.port or (443 if parts.scheme == "https" else 80)
        except ValueError:
            raise UserError(f"bad URL {client['url']!r}: the port is not a number from 1 to 65535") from None
        host = parts.hostname
        if "body_file" in client and not os.access(client["body_file"], os.R_OK):
            raise UserError(f"--body-file {client['body_file']!r} cannot be read (does it exist?)")
    else:
        host, _, port_s = client["addr"].rpartition(":")
        host, port = host.strip("[]"), int(port_s)
    try:
        infos = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)
    except socket.gaierror as exc:
        raise UserError(f"cannot resolve host {host!r}: {exc.strerror} (check the name)") from None
    family, socktype, proto, _, addr = infos[0]
    with socket.socket(family, socktype, proto) as s:
        s.settimeout(connect_timeout_s)
        try:
            s.connect(addr)
        except ConnectionRefusedError:
            raise UserError(f"connection refused by {host}:{port}: is the service running on that port?") from None
        except TimeoutError:
            raise UserError(
                f"no answer from {host}:{port} within {connect_timeout_s:g} s: is the host reachable?"
            ) from None
        except OSError as exc:
            raise UserError(f"cannot connect to {host}:{port}: {exc.strerror or exc}") from None


@dataclass
class RunResult:
    """What `knee.run` returns: the engine's mergeable result plus the friendly view of it."""

    result: engine.ShardResult
    summary: dict[str, Any]
    stats: GroupStats
    interrupted: bool = False
    spec: dict[str, Any] = field(default_factory=dict)


def shard_spec(
    client: dict[str, Any],
    *,
    clients: int = 1,
    n: int | None = None,
    iterations: int | None = None,
    duration: float | None = None,
    timeout: float = 30.0,
    think: float = 0.0,
    warmup: float = 0.0,
    interval: float = 1.0,
    threads: int = 0,
    name: str = "main",
    rate: float | None = None,
    poisson: bool = False,
    max_in_flight: int | None = None,
) -> dict[str, Any]:
    """A one-group engine spec. Exactly one of n, iterations, duration; none means 10 s.

    `rate` (operations per second over the group) makes it an open loop: `clients` is then the
    number of connections (slots) and latency counts from each operation's intended start.
    """
    given = [k for k, v in (("-n", n), ("--iterations", iterations), ("--duration", duration)) if v is not None]
    if len(given) > 1:
        raise UserError(f"give only one of -n, --iterations and --duration (got {' and '.join(given)})")
    if clients < 1:
        raise UserError(f"--clients must be at least 1 (got {clients})")
    stop: dict[str, int]
    if n is not None:
        if n < 1:
            raise UserError(f"-n must be at least 1 (got {n})")
        stop = {"total": n}
    elif iterations is not None:
        if iterations < 1:
            raise UserError(f"--iterations must be at least 1 (got {iterations})")
        stop = {"per_client": iterations}
    else:
        seconds = 10.0 if duration is None else duration
        if seconds <= 0:
            raise UserError(f"--duration must be more than 0 (got {seconds:g} s)")
        stop = {"duration_ms": round(seconds * 1000)}
    if timeout <= 0:
        raise UserError(f"--timeout must be more than 0 (got {timeout:g} s)")
    if interval <= 0:
        raise UserError(f"--interval must be more than 0 (got {interval:g} s)")
    pacer = open_loop_pacer(rate, poisson=poisson, max_in_flight=max_in_flight, think=think)
    group: dict[str, Any] = {
        "name": name,
        "clients": clients,
        "stop": stop,
        "think_ms": round(think * 1000),
        "timeout_ms": round(timeout * 1000),
        "warmup_ms": round(warmup * 1000),
        "client": client,
    }
    if pacer is not None:
        group["pacer"] = pacer
    return {
        "threads": threads,
        "interval_ms": max(1, round(interval * 1000)),
        "groups": [group],
    }


def open_loop_pacer(
    rate: float | None, *, poisson: bool = False, max_in_flight: int | None = None, think: float = 0.0
) -> dict[str, Any] | None:
    """The engine's open-loop pacer for `rate` (None: closed loop, and no open-loop option given)."""
    if rate is None:
        if poisson:
            raise UserError("--poisson shapes an open loop: give --rate too (e.g. --rate 500 --poisson)")
        if max_in_flight is not None:
            raise UserError("--max-in-flight caps an open loop: give --rate too (e.g. --rate 500)")
        return None
    if not (rate > 0 and rate != float("inf")):
        raise UserError(f"--rate must be a positive number of operations per second (got {rate:g})")
    if max_in_flight is not None and max_in_flight < 1:
        raise UserError(f"--max-in-flight must be at least 1 (got {max_in_flight})")
    if think > 0:
        raise UserError(f"--think applies to closed loops only (got {think:g} s with --rate): drop one of them")
    pacer: dict[str, Any] = {"kind": "rate", "rate_hz": float(rate), "poisson": poisson}
    if max_in_flight is not None:
        pacer["max_in_flight"] = max_in_flight
    return pacer


def run(
    target: Target,
    *,
    clients: int = 1,
    n: int | None = None,
    iterations: int | None = None,
    duration: float | None = None,
    timeout: float = 30.0,
    think: float = 0.0,
    warmup: float = 0.0,
    interval: float = 1.0,
    threads: int = 0,
    rate: float | None = None,
    poisson: bool = False,
    max_in_flight: int | None = None,
    check: bool = True,
    on_snapshot: Callable[[dict[str, Any]], None] | None = None,
    **client_options: Any,
) -> RunResult:
    """Drive `target` with `clients` closed-loop clients and return what happened.

    `rate` (operations per second) runs an open loop instead: arrivals at that rate (constant,
    or Poisson with `poisson`), handed to `clients` connections, at most `max_in_flight`
    waiting or running; latency counts from each arrival's intended start (docs/open-vs-closed.md).

    Stops after `n` operations in all, `iterations` per client, or `duration` seconds
    (10 s if none is given). `timeout`: an operation still running after it is hung.
    `check`: refuse to start (UserError) if the target cannot be reached at all.
    On Ctrl-C the partial result is returned with `interrupted=True`.
    """
    client = client_spec(target, **client_options)
    spec = shard_spec(
        client,
        clients=clients,
        n=n,
        iterations=iterations,
        duration=duration,
        timeout=timeout,
        think=think,
        warmup=warmup,
        interval=interval,
        threads=threads,
        rate=rate,
        poisson=poisson,
        max_in_flight=max_in_flight,
    )
    if check:
        preflight(client)
    interrupted = False
    try:
        result = engine.run(spec, on_snapshot=on_snapshot)
    except KeyboardInterrupt as exc:
        result = exc.knee_result  # type: ignore[attr-defined]
        interrupted = True
    except ValueError as exc:  # the engine refused the spec or the machine's limits
        raise UserError(str(exc)) from None
    summary = engine.summary(result)
    stats = GroupStats.from_engine(summary["groups"][0], float(summary.get("interval_s", interval)))
    return RunResult(result=result, summary=summary, stats=stats, interrupted=interrupted, spec=spec)
