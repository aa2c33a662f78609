"""The `tls` table of an https group: the client certificate it presents, the CAs it trusts, its TLS version and
session resumption (docs/scenarios.md, "TLS and client certificates"). The files themselves are read and checked
by `knee.scenario.tlsfiles` before any load."""

from typing import Annotated, Any, Literal

from pydantic import BeforeValidator, Field, model_validator

from knee.scenario.fields import Table


def _version(value: Any) -> Any:
    """1.3, "1.3", "TLSv1.3" → "1.3" (TOML reads an unquoted 1.3 as a number)."""
    if isinstance(value, float | int) and not isinstance(value, bool):
        value = f"{value:.1f}"
    if isinstance(value, str):
        value = value.strip().lower().removeprefix("tlsv").removeprefix("tls")
    return value


class Tls(Table):
    """What an https group's TLS handshake offers and checks."""

    # PEM: the certificate, its chain and (when `key` is not given) its key in one file, as a grid proxy is; or a
    # PKCS#12 bundle (.p12, .pfx). Without it, $X509_USER_PROXY when that is set (knee.scenario.tlsfiles).
    cert: Annotated[str, Field(min_length=1)] | None = None
    key: Annotated[str, Field(min_length=1)] | None = None  # PEM private key, when not in `cert`'s file
    # The key's (or the PKCS#12 bundle's) password: a secret (`${name}`); one written literally becomes a secret of
    # its own, never written anywhere (knee.scenario.secrets).
    password: str | None = None
    cacert: Annotated[str, Field(min_length=1)] | None = None  # PEM file of CA certificates to trust
    capath: Annotated[str, Field(min_length=1)] | None = None  # a directory of them (/etc/grid-security/certificates)
    # Trust webpki's (Mozilla's) roots too; default: yes without cacert/capath, no with them (as curl's --cacert).
    webpki_roots: bool | None = None
    resume: bool = True  # resume sessions (tickets, IDs) on new connections; false: every handshake a full one
    version: Annotated[Literal["1.2", "1.3"] | None, BeforeValidator(_version)] = None

    @model_validator(mode="after")
    def _pairs(self) -> "Tls":
        if self.key is not None and self.cert is None:
            raise ValueError("key needs cert, the certificate it belongs to; add cert")
        return self

    @property
    def trusts_webpki(self) -> bool:
        if self.webpki_roots is not None:
            return self.webpki_roots
        return self.cacert is None and self.capath is None
