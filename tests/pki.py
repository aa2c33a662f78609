"""A test PKI made with `openssl`, as a grid site has one: a root CA and an intermediate CA, a server certificate
for 127.0.0.1 (RSA, so a full handshake costs what it costs in the field), a client certificate with its key apart,
the same as one proxy-style file (certificate, key and chain), its key encrypted and as PKCS#12, an RFC 3820 proxy
of it (as voms-proxy-init makes: a critical proxyCertInfo extension) in one file, a second CA with
a client certificate of its own, and a hashed CA directory (`openssl rehash`) holding non-certificate files too.
Certificates whose validity must be in the past or end soon are made with `cryptography` (OpenSSL 3.0's `x509`
cannot set the dates), signed by the same intermediate."""

from __future__ import annotations

import datetime as dt
import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path

PASSWORD = "s3cret-key-pass"  # the encrypted key's and the PKCS#12 bundle's
PROXY_SUBJECT = "/DC=org/DC=knee-test/CN=alice/CN=1234567"  # the RFC 3820 proxy's: alice's, and a CN of its own


def _openssl(cwd: Path, *args: str) -> None:
    subprocess.run(["openssl", *args], cwd=cwd, check=True, capture_output=True)


def _ca(d: Path, name: str, signer: str | None = None) -> None:
    subj = f"/DC=org/DC=knee-test/CN=knee test {name}"
    if signer is None:
        _openssl(d, "req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes",
                 "-days", "3", "-subj", subj, "-keyout", f"{name}.key", "-out", f"{name}.pem", "-addext",
                 "basicConstraints=critical,CA:TRUE", "-addext", "keyUsage=critical,keyCertSign,cRLSign")  # fmt: skip
        return
    _leaf(d, name, signer, "basicConstraints=critical,CA:TRUE\nkeyUsage=critical,keyCertSign,cRLSign", subj=subj)


def _leaf(d: Path, name: str, signer: str, ext: str, *, subj: str = "", rsa: bool = False) -> None:
    (d / f"{name}.cnf").write_text(ext + "\n")
    key = ["-newkey", "rsa:2048"] if rsa else ["-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1"]
    subj = subj or f"/DC=org/DC=knee-test/CN={name}"
    _openssl(d, "req", *key, "-nodes", "-subj", subj, "-keyout", f"{name}.key", "-out", f"{name}.csr")
    _openssl(d, "x509", "-req", "-in", f"{name}.csr", "-CA", f"{signer}.pem", "-CAkey", f"{signer}.key",
             "-CAcreateserial", "-days", "2", "-out", f"{name}.pem", "-extfile", f"{name}.cnf")  # fmt: skip


def _dated(d: Path, name: str, signer: str, not_before: dt.datetime, not_after: dt.datetime) -> None:
    """A client certificate with these dates (and its key), signed by `signer`."""
    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.x509.oid import NameOID

    ca_cert = x509.load_pem_x509_certificate((d / f"{signer}.pem").read_bytes())
    ca_key = serialization.load_pem_private_key((d / f"{signer}.key").read_bytes(), None)
    key = ec.generate_private_key(ec.SECP256R1())
    cert = (
        x509.CertificateBuilder()
        .subject_name(x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, name)]))
        .issuer_name(ca_cert.subject)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(not_before)
        .not_valid_after(not_after)
        .sign(ca_key, hashes.SHA256())  # type: ignore[arg-type]
    )
    (d / f"{name}.pem").write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    (d / f"{name}.key").write_bytes(
        key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption())
    )


@dataclass(frozen=True)
class Pki:
    dir: Path

    def path(self, name: str) -> str:
        return str(self.dir / name)

    def ending_soon(self, minutes: float = 3.0) -> tuple[str, str]:
        """A client certificate (CN=soon) that expires `minutes` from now, made now: the PKI is made once per
        session, and a session can outlast a few minutes. Its (certificate, key) paths."""
        now = dt.datetime.now(dt.UTC)
        _dated(self.dir, "soon", "intermediate", now - dt.timedelta(hours=1), now + dt.timedelta(minutes=minutes))
        return self.path("soon.pem"), self.path("soon.key")

    @property
    def proxy_subject(self) -> str:
        """The RFC 3820 proxy's subject as nginx logs it ($ssl_client_s_dn, RFC 2253: last RDN first)."""
        return ",".join(reversed(PROXY_SUBJECT.strip("/").split("/")))

    @property
    def client_subject(self) -> str:
        """The client certificate's subject as nginx logs it ($ssl_client_s_dn, RFC 2253)."""
        return "CN=alice,DC=knee-test,DC=org"


def make_pki(d: Path) -> Pki:
    d.mkdir(parents=True, exist_ok=True)
    _ca(d, "root")
    _ca(d, "intermediate", signer="root")
    names = "IP:127.0.0.1,DNS:localhost,DNS:service.knee.test"  # the last resolves nowhere: connect_to's tests
    _leaf(d, "server", "intermediate", f"subjectAltName={names}\nextendedKeyUsage=serverAuth", rsa=True)
    _leaf(d, "client", "intermediate", "extendedKeyUsage=clientAuth", subj="/DC=org/DC=knee-test/CN=alice")
    chain = (d / "intermediate.pem").read_text()
    (d / "server-chain.pem").write_text((d / "server.pem").read_text() + chain)
    # a proxy-style file: certificate, key and chain in one PEM
    (d / "proxy.pem").write_text((d / "client.pem").read_text() + (d / "client.key").read_text() + chain)
    (d / "client-chain.pem").write_text((d / "client.pem").read_text() + chain)
    _openssl(d, "pkey", "-in", "client.key", "-aes256", "-passout", f"pass:{PASSWORD}", "-out", "client-enc.key")
    _openssl(d, "pkcs12", "-export", "-in", "client.pem", "-inkey", "client.key", "-certfile", "intermediate.pem",
             "-passout", f"pass:{PASSWORD}", "-out", "client.p12")  # fmt: skip
    # a grid proxy as voms-proxy-init makes one (RFC 3820): signed by alice's own key, her subject plus a CN, a
    # critical proxyCertInfo extension; the file holds the proxy, its key, alice's certificate and the chain
    proxy_ext = "keyUsage=critical,digitalSignature,keyEncipherment\nproxyCertInfo=critical,language:id-ppl-inheritAll"
    _leaf(d, "rfc-proxy", "client", proxy_ext, subj=PROXY_SUBJECT)
    (d / "rfc-proxy-file.pem").write_text(
        "".join((d / n).read_text() for n in ("rfc-proxy.pem", "rfc-proxy.key", "client.pem", "intermediate.pem"))
    )
    _ca(d, "other")
    _leaf(d, "rogue", "other", "extendedKeyUsage=clientAuth")
    now = dt.datetime.now(dt.UTC)
    _dated(d, "expired", "intermediate", now - dt.timedelta(days=2), now - dt.timedelta(days=1))
    # a CA directory as /etc/grid-security/certificates is: the CAs, their hashed links, and other files
    cas = d / "certificates"
    cas.mkdir()
    shutil.copy(d / "root.pem", cas / "knee-root.pem")
    shutil.copy(d / "intermediate.pem", cas / "knee-intermediate.pem")
    (cas / "knee-root.signing_policy").write_text('access_id_CA X509 "/DC=org/DC=knee-test/CN=knee test root"\n')
    (cas / "knee-root.namespaces").write_text("TO Issuer ...\n")
    _openssl(d, "rehash", str(cas))
    return Pki(d)
