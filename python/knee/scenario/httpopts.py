"""The options of an http(s), ws(s) or grpc(s) target on the command line that need more than a key each: those that
exclude each other, said in the options' own words (the scenario's checks speak of its keys), the group's `tls` table,
and a websocket or grpc target's group."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from knee.errors import UserError
from knee.scenario.units import unescape

if TYPE_CHECKING:
    from knee.scenario.lineopts import Options

# the http target's TLS options
TLS_OPTIONS = (
    ("--cert", "cert"),
    ("--key", "key"),
    ("--key-password", "key_password"),
    ("--cacert", "cacert"),
    ("--capath", "capath"),
    ("--webpki-roots", "webpki_roots"),
    ("--tls-resume", "tls_resume"),
    ("--tls-version", "tls_version"),
)


def http_clashes(url: str, o: Options) -> None:
    """Options of an http(s) target that exclude each other, in the options' words (the scenario's own checks
    speak of its keys)."""
    if o.body is not None and o.body_file is not None:
        raise UserError("give either --body or --body-file, not both")
    if o.connections is not None and not o.http2:
        raise UserError(f"--connections {o.connections} shares HTTP/2 connections: add --http2 (or drop --connections)")
    if o.streams is not None and o.streams > 1 and not o.http2:
        raise UserError(f"--streams {o.streams} multiplexes HTTP/2 only: add --http2 (or drop --streams)")
    if o.streams is not None and o.streams > 1 and o.new_connection:
        raise UserError(
            f"--streams {o.streams} shares connections, but --new-connection opens one per operation: drop one"
        )
    _tls_clashes(url, o, "https://")


def _tls_clashes(url: str, o: Options, secure: str) -> None:
    given = [flag for flag, key in TLS_OPTIONS if getattr(o, key) not in (None, False)]
    if given and not url.lower().startswith(secure):
        verb, them = ("applies", "it") if len(given) == 1 else ("apply", "them")
        raise UserError(f"{', '.join(given)} {verb} to {secure} URLs only: use {secure} (or drop {them})")


def ws_group(url: str, o: Options, headers: dict[str, str], cookies: dict[str, str]) -> dict[str, Any]:
    """A ws(s):// target's group from its options (-H and -C already parsed)."""
    _tls_clashes(url, o, "wss://")
    if o.mode not in (None, "echo", "session", "listen"):
        raise UserError(f"--mode must be echo, session or listen (got {o.mode!r})")
    if (o.mode == "listen") != (o.hold is not None):
        raise UserError("--mode listen holds each connection for --hold D: give both (or neither)")
    if o.message is None and o.mode != "listen":
        raise UserError(
            f"{url} needs --message: each operation sends it and waits for the reply (--expect REGEX: the reply "
            "that matches)"
        )
    session = (o.messages is not None, o.message_interval is not None)
    if any(session) and o.mode != "session":
        given = "--messages" if session[0] else "--message-interval"
        raise UserError(f"{given} sets a session's messages: add --mode session (or drop {given})")
    g: dict[str, Any] = {"kind": "websocket", "url": url}
    if o.message is not None:
        g["message"] = unescape(o.message)
    for key, value in (
        ("mode", o.mode),
        ("hold", o.hold),
        ("expect", o.expect),
        ("correlate", o.correlate),
        ("messages", o.messages),
        ("interval", o.message_interval),
        ("headers", headers),
        ("cookies", cookies),
        ("subprotocols", list(o.subprotocol)),
        ("binary", o.binary),
        ("insecure", o.insecure),
        ("tls", tls_table(o)),
    ):
        if value not in (None, False, [], {}):
            g[key] = value
    return g


def grpc_group(url: str, o: Options, headers: dict[str, str]) -> dict[str, Any]:
    """A grpc(s):// target's group from its options (-H, its metadata, already parsed)."""
    _tls_clashes(url, o, "grpcs://")
    if not o.proto and o.protoset is None and not o.reflect:
        raise UserError(
            f"{url} needs the method's types: --proto FILE (with -I DIR for its imports), --protoset FILE or "
            "--reflect (from the server's reflection service)"
        )
    if o.message is not None and o.message_file is not None:
        raise UserError("give either --message or --message-file, not both")
    g: dict[str, Any] = {"kind": "grpc", "url": url}
    for key, value in (
        ("proto", list(o.proto)),
        ("include", list(o.import_path)),
        ("protoset", o.protoset),
        ("reflect", o.reflect),
        ("message", o.message),
        ("message_file", o.message_file),
        ("stream_messages", o.stream_messages),
        ("stream_interval", o.stream_interval),
        ("deadline", o.deadline),
        ("expect_message", o.expect_message),
        ("streams", o.streams),
        ("connections", o.connections),
        ("headers", headers),
        ("insecure", o.insecure),
        ("tls", tls_table(o)),
    ):
        if value not in (None, False, [], {}):
            g[key] = value
    return g


def tls_table(o: Options) -> dict[str, Any]:
    """The group's `tls` table from --cert, --key, --key-password, --cacert, --capath, --webpki-roots, --tls-resume
    and --tls-version (empty when none is given)."""
    tls: dict[str, Any] = {
        key: value
        for key, value in (
            ("cert", o.cert),
            ("key", o.key),
            ("password", o.key_password),
            ("cacert", o.cacert),
            ("capath", o.capath),
            ("version", o.tls_version),
        )
        if value is not None
    }
    if o.webpki_roots:
        if o.cacert is None and o.capath is None:
            raise UserError("--webpki-roots adds webpki's roots to --cacert/--capath: give one of them too")
        tls["webpki_roots"] = True
    if o.tls_resume is not None:
        tls["resume"] = o.tls_resume == "on"
    if o.key is not None and o.cert is None:
        raise UserError("--key needs --cert, the certificate the key belongs to")
    return tls
