"""TLS files, read and checked before any load and handed to the engine as PEM text in memory.

A group's client certificate is a PEM file holding the certificate, its chain and (when no separate key file is
given) its private key — a grid proxy is such a file — or a PKCS#12 bundle (.p12, .pfx). Without one, an https
group presents `$X509_USER_PROXY` when that is set, as grid clients do. A protected key (encrypted PEM, PKCS#12)
is opened with the group's `tls.password` (a secret) here, with `cryptography`; the engine receives the key
unencrypted in memory (`knee.spec.TlsClient`, made by `knee.plan`), and no file, record or output of knee ever
holds it. On a Dask cluster the engine spec carries it to the workers over Dask's connection, like every secret
(docs/distributed.md).

The CAs to trust are a PEM file (`cacert`) and/or a directory of them (`capath`, read whole, such as a hashed
`/etc/grid-security/certificates`: files that hold no certificate — signing policies, CRLs, namespaces — are
skipped, and a certificate reached through several names counts once).

`check(scenario)` raises `TlsFileError` (the key and a sentence) for a file that cannot be used: unreadable, no
key in it, a key that does not match the certificate, a wrong or missing password, a certificate already expired
or not yet valid, a CA file or directory without a certificate. `identity(tls)` and `cas(tls)` are what the engine
gets; `notes(scenario, planned_s)` the lines a run prints before it starts (which identity it presents, and a warning
when it expires within the run's planned time). Files are read again only when they change.
"""

from __future__ import annotations

import datetime as dt
import functools
import os
import re
from dataclasses import dataclass
from pathlib import Path

from knee.scenario.groups import UrlGroup
from knee.scenario.model import Scenario
from knee.scenario.tls import Tls

PROXY_ENV = "X509_USER_PROXY"
_KEY_BLOCK = re.compile(rb"-----BEGIN ((?:ENCRYPTED |RSA |EC |DSA )?PRIVATE KEY)-----.+?-----END \1-----", re.S)
_PKCS12_SUFFIXES = (".p12", ".pfx")


class TlsFileError(Exception):
    """A TLS file that cannot be used: `key` is the tls table's key at fault (cert, key, password, cacert, capath),
    `message` the sentence that says why and what to do, starting with the file."""

    def __init__(self, key: str, message: str) -> None:
        super().__init__(message)
        self.key = key
        self.message = message


@dataclass(frozen=True)
class Identity:
    """A client certificate and its key, opened."""

    chain_pem: str  # the certificate first, then the rest of its chain, as the file had them
    key_pem: str  # PKCS#8, unencrypted: for the engine only
    subject: str
    not_before: dt.datetime
    not_after: dt.datetime


def cert_source(tls: Tls | None) -> tuple[str, bool] | None:
    """The client certificate's path and whether it came from $X509_USER_PROXY (None: no certificate)."""
    if tls is not None and tls.cert is not None:
        return tls.cert, False
    proxy = os.environ.get(PROXY_ENV)
    return (proxy, True) if proxy else None


def _read(path: str, key: str, what: str) -> bytes:
    try:
        return Path(path).read_bytes()
    except OSError as exc:
        reason = exc.strerror or str(exc)
        raise TlsFileError(key, f"cannot read {what} {path!r} ({reason}); check the path and its permissions") from None


def _stamp(path: str | None) -> tuple[int, int] | None:
    """What says a file changed (mtime, size); None when there is no such file (reading it then says why)."""
    if path is None:
        return None
    try:
        st = os.stat(path)
    except OSError:
        return None
    return st.st_mtime_ns, st.st_size


def _when(t: dt.datetime) -> str:
    return t.strftime("%Y-%m-%d %H:%M UTC")


def _subject(cert: object) -> str:
    return str(cert.subject.rfc4514_string())  # type: ignore[attr-defined]


def open_identity(cert: str, key: str | None, password: str | None, *, from_env: bool = False) -> Identity:
    """The certificate in `cert` (PEM or PKCS#12) and its key (in `key`, else in `cert`'s file), checked."""
    from cryptography import x509
    from cryptography.hazmat.primitives import serialization
    from cryptography.hazmat.primitives.serialization import pkcs12

    what = f"the client certificate (${PROXY_ENV})" if from_env else "the client certificate"
    data = _read(cert, "cert", what)
    secret = password.encode() if password is not None else None
    if cert.lower().endswith(_PKCS12_SUFFIXES) or (b"-----BEGIN" not in data and data[:1] == b"\x30"):
        try:
            pkey, leaf, rest = pkcs12.load_key_and_certificates(data, secret)
        except (ValueError, TypeError):
            fix = "give its password (tls.password, --key-password)" if secret is None else "check its password"
            raise TlsFileError(
                "password" if secret is not None else "cert",
                f"{cert!r} cannot be opened as PKCS#12 (a wrong or missing password, or not a PKCS#12 file); {fix}",
            ) from None
        if leaf is None or pkey is None:
            raise TlsFileError("cert", f"{cert!r} holds no certificate with its key; export both into the PKCS#12 file")
        certs = [leaf, *rest]
    else:
        try:
            certs = x509.load_pem_x509_certificates(data)
        except ValueError:
            certs = []
        if not certs:
            raise TlsFileError(
                "cert", f"{cert!r} holds no PEM certificate (no BEGIN CERTIFICATE); give a PEM or PKCS#12 file"
            )
        key_data = _read(key, "key", "the client key") if key is not None else data
        block = _KEY_BLOCK.search(key_data)
        if block is None:
            where, k = (repr(key), "key") if key is not None else (repr(cert), "cert")
            fix = "give the key file too (tls.key, --key)" if key is None else "give the PEM file of the key"
            raise TlsFileError(k, f"{where} holds no private key (no BEGIN PRIVATE KEY); {fix}")
        try:
            pkey = serialization.load_pem_private_key(block.group(0), secret)
        except TypeError:
            if secret is None:
                raise TlsFileError(
                    "key" if key is not None else "cert",
                    f"the key in {key or cert!r} is encrypted; give its password (tls.password, --key-password)",
                ) from None
            pkey = serialization.load_pem_private_key(block.group(0), None)  # not encrypted after all
        except ValueError:
            raise TlsFileError(
                "password" if secret is not None else "key",
                f"the key in {key or cert!r} cannot be opened (a wrong password, or a damaged key); check its password",
            ) from None
    leaf = certs[0]
    cannot = _unsignable(pkey)
    if cannot is not None:
        raise TlsFileError(
            "key" if key is not None else "cert",
            f"the key in {key or cert!r} is {cannot}, which knee's TLS cannot sign with; give an RSA key of 2048 to "
            "4096 bits, an ECDSA key on P-256 or P-384, or an Ed25519 key",
        )
    der = serialization.Encoding.DER
    spki = serialization.PublicFormat.SubjectPublicKeyInfo
    if leaf.public_key().public_bytes(der, spki) != pkey.public_key().public_bytes(der, spki):
        raise TlsFileError(
            "key" if key is not None else "cert",
            f"the key in {key or cert!r} does not belong to the certificate in {cert!r} ({_subject(leaf)}); "
            "give the key of that certificate",
        )
    now = dt.datetime.now(dt.UTC)
    if leaf.not_valid_after_utc <= now:
        renew = " (grid-proxy-init or voms-proxy-init makes a new proxy)" if from_env else ""
        raise TlsFileError(
            "cert", f"{what} {cert!r} ({_subject(leaf)}) expired on {_when(leaf.not_valid_after_utc)}; renew it{renew}"
        )
    if leaf.not_valid_before_utc > now:
        raise TlsFileError(
            "cert",
            f"{what} {cert!r} ({_subject(leaf)}) is not valid before {_when(leaf.not_valid_before_utc)}; "
            "check this machine's clock or the certificate",
        )
    pem = serialization.Encoding.PEM
    return Identity(
        chain_pem="".join(c.public_bytes(pem).decode() for c in certs),
        key_pem=pkey.private_bytes(pem, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()).decode(),
        subject=_subject(leaf),
        not_before=leaf.not_valid_before_utc,
        not_after=leaf.not_valid_after_utc,
    )


def _unsignable(pkey: object) -> str | None:
    """What `pkey` is, when the engine's TLS (rustls with ring) cannot sign with it: RSA outside 2048–4096 bits, an
    ECDSA curve other than P-256 and P-384, DSA, Ed448 (None: it can)."""
    from cryptography.hazmat.primitives.asymmetric import ec, ed25519, rsa

    if isinstance(pkey, rsa.RSAPrivateKey):
        return None if 2048 <= pkey.key_size <= 4096 else f"an RSA key of {pkey.key_size} bits"
    if isinstance(pkey, ec.EllipticCurvePrivateKey):
        return None if pkey.curve.name in ("secp256r1", "secp384r1") else f"an ECDSA key on {pkey.curve.name}"
    if isinstance(pkey, ed25519.Ed25519PrivateKey):
        return None
    return f"a {type(pkey).__name__.removeprefix('_').removesuffix('PrivateKey')} key"


@functools.lru_cache(maxsize=16)
def _identity_cached(
    cert: str, key: str | None, password: str | None, from_env: bool, stamps: tuple[object, ...]
) -> Identity:
    return open_identity(cert, key, password, from_env=from_env)


def identity(tls: Tls | None) -> Identity | None:
    """The group's client identity (its `cert`, else $X509_USER_PROXY), or None; read again when a file changed.
    $X509_USER_PROXY is presented when it can be (as grid clients do): one that is missing, unreadable or expired is
    not, and `notes` warns (`env_refused`) rather than refusing every https run of a machine whose proxy went stale,
    to servers that may ask for no certificate."""
    source = cert_source(tls)
    if source is None:
        return None
    cert, from_env = source
    key = tls.key if tls is not None else None
    password = tls.password if tls is not None else None
    try:
        return _identity_cached(cert, key, password, from_env, (_stamp(cert), _stamp(key)))
    except TlsFileError as exc:
        if not from_env:
            raise
        env_refused[cert] = exc.message
        return None


env_refused: dict[str, str] = {}  # $X509_USER_PROXY's path -> why it is not presented


def _pem_certificates(data: bytes) -> list[bytes]:
    """The DER of every PEM certificate in `data` (none when it holds none or is not PEM)."""
    from cryptography import x509
    from cryptography.hazmat.primitives.serialization import Encoding

    if b"-----BEGIN CERTIFICATE-----" not in data:
        return []
    try:
        return [c.public_bytes(Encoding.DER) for c in x509.load_pem_x509_certificates(data)]
    except ValueError:
        return []


def _as_pem(ders: list[bytes]) -> str:
    import base64
    import textwrap

    blocks = []
    for der in ders:
        body = "\n".join(textwrap.wrap(base64.b64encode(der).decode(), 64))
        blocks.append(f"-----BEGIN CERTIFICATE-----\n{body}\n-----END CERTIFICATE-----\n")
    return "".join(blocks)


@functools.lru_cache(maxsize=16)
def _cas_cached(cacert: str | None, capath: str | None, stamps: tuple[object, ...]) -> tuple[str, int] | None:
    ders: dict[bytes, None] = {}
    if cacert is not None:
        found = _pem_certificates(_read(cacert, "cacert", "the CA file"))
        if not found:
            raise TlsFileError("cacert", f"{cacert!r} holds no PEM certificate; give a file of PEM CA certificates")
        ders.update(dict.fromkeys(found))
    if capath is not None:
        try:
            names = sorted(os.listdir(capath))
        except OSError as exc:
            raise TlsFileError(
                "capath", f"cannot read the CA directory {capath!r} ({exc.strerror or exc}); check the path"
            ) from None
        before = len(ders)
        for name in names:
            path = os.path.join(capath, name)
            if not os.path.isfile(path):
                continue
            try:
                data = Path(path).read_bytes()
            except OSError:
                continue  # an unreadable file of the directory is skipped, as a non-certificate file is
            ders.update(dict.fromkeys(_pem_certificates(data)))
        if len(ders) == before:
            raise TlsFileError(
                "capath", f"the CA directory {capath!r} holds no PEM certificate; give a directory of CA certificates"
            )
    return (_as_pem(list(ders)), len(ders)) if ders else None


def cas(tls: Tls | None) -> tuple[str, int] | None:
    """The CA certificates to trust as one PEM text and their number (None: none given)."""
    if tls is None or (tls.cacert is None and tls.capath is None):
        return None
    return _cas_cached(tls.cacert, tls.capath, (_stamp(tls.cacert), _stamp(tls.capath), _dir_stamp(tls.capath)))


def _dir_stamp(path: str | None) -> object:
    """A directory's files and their stamps (a CA added or renewed changes it)."""
    if path is None:
        return None
    try:
        return tuple((n, _stamp(os.path.join(path, n))) for n in sorted(os.listdir(path)))
    except OSError:
        return None


def https(g: object) -> bool:
    """A group that speaks TLS: an https://, wss:// or grpcs:// URL."""
    return isinstance(g, UrlGroup) and g.url.lower().startswith(("https://", "wss://", "grpcs://"))


def pems(tls: Tls | None) -> dict[str, str | None]:
    """The engine's PEM texts of a TLS table (`cert_pem`, `key_pem`, `ca_pem`: None where not given)."""
    who, trusted = identity(tls), cas(tls)
    return {
        "cert_pem": who.chain_pem if who is not None else None,
        "key_pem": who.key_pem if who is not None else None,
        "ca_pem": trusted[0] if trusted is not None else None,
    }


def check(scenario: Scenario) -> None:
    """Open every https group's client certificate and CAs; the first that cannot be used raises TlsFileError
    (its `key` prefixed with the group's: `groups.main.tls.cert`)."""
    for name, g in scenario.groups.items():
        if not https(g):
            continue
        assert isinstance(g, UrlGroup)
        try:
            identity(g.tls)
            cas(g.tls)
        except TlsFileError as exc:
            raise TlsFileError(f"groups.{name}.tls.{exc.key}", exc.message) from None


def notes(scenario: Scenario, planned_s: float | None) -> tuple[list[str], list[str]]:
    """(what the run's TLS groups present and trust, warnings): a client certificate that expires within the run's
    planned time (`planned_s`; None: not known in advance) is a warning."""
    lines: list[str] = []
    warnings: list[str] = []
    now = dt.datetime.now(dt.UTC)
    for name, g in scenario.groups.items():
        if not https(g):
            continue
        assert isinstance(g, UrlGroup)
        source = cert_source(g.tls)
        who = identity(g.tls)
        trusted = cas(g.tls)
        if source is not None and who is None and source[0] in env_refused:
            warnings.append(
                f"group {name}: ${PROXY_ENV} ({source[0]}) is not presented: {env_refused[source[0]]}; a server that "
                "asks for a client certificate will refuse the handshakes (give --cert, or a fresh proxy)"
            )
        if source is not None and who is not None:
            path, from_env = source
            origin = f"${PROXY_ENV} ({path})" if from_env else path
            left = who.not_after - now
            lines.append(
                f"group {name}: client certificate {who.subject} from {origin}, valid until {_when(who.not_after)} "
                f"({_left(left)} left)"
            )
            if planned_s is not None and left.total_seconds() < planned_s:
                warnings.append(
                    f"group {name}: the client certificate {who.subject} expires at {_when(who.not_after)}, in "
                    f"{_left(left)}, before the run's planned end (about {_left(dt.timedelta(seconds=planned_s))}): "
                    "operations after that will fail; renew it first"
                )
        if trusted is not None:
            t = g.tls
            webpki = " and webpki's roots" if t is not None and t.trusts_webpki else ""
            lines.append(f"group {name}: trusts {trusted[1]} CA certificate(s) given{webpki}")
    return lines, warnings


def _left(d: dt.timedelta) -> str:
    s = max(0, int(d.total_seconds()))
    if s >= 2 * 86400:
        return f"{s // 86400} days"
    if s >= 3600:
        return f"{s // 3600} h {s % 3600 // 60} min"
    return f"{s // 60} min {s % 60} s"
