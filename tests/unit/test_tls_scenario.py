"""The TLS and HTTP/2 keys of a scenario, checked before any load: the `tls` table and its options, the files
(tests/integration/test_tls.py holds each bad file's sentence against a real run), the expiry warning against the
run's planned time, the password lifted into a secret, and what the engine gets against what is recorded."""

from __future__ import annotations

from pathlib import Path

import pytest

from knee.errors import UserError
from knee.plan import engine_spec, planned_seconds, sweep_plan
from knee.scenario import Source, from_raw, parse_scenario
from knee.scenario.lineopts import OPTION_NAMES
from knee.scenario.oneline import Options, scenario_table
from knee.scenario.tlsfiles import TlsFileError, notes, open_identity
from knee.spec import KEY_WITHHELD, HttpClient

from pki import PASSWORD, Pki


def one_line(url: str, **options: object) -> object:
    table = scenario_table(url, Options(**options), run=False)  # type: ignore[arg-type]
    return from_raw(table, Source("command line", options=OPTION_NAMES))


def test_http2_and_tls_keys_are_checked_with_one_sentence() -> None:
    base = '[groups.main]\nkind = "http"\nclients = 1\nurl = "{url}"\n{extra}\n[sweep]\nduration = "1s"\n'
    bad = [
        ("http://h/", "streams = 4", "streams = 4 multiplexes HTTP/2 only; set http2 = true"),
        ("http://h/", "http2 = true\nstreams = 4\nnew_connection = true", "drop one of them"),
        ("http://h/", '[groups.main.tls]\ncacert = "x"', "tls (client certificate, CAs, TLS version) applies to"),
        ("https://h/", '[groups.main.tls]\nkey = "k.pem"', "key needs cert"),
        ("https://h/", "[groups.main.tls]\nversion = 1.1", "groups.main.tls.version must be '1.2' or '1.3'"),
    ]
    for url, extra, words in bad:
        with pytest.raises(UserError, match=None) as err:
            parse_scenario(base.format(url=url, extra=extra))
        assert words in str(err.value), str(err.value)
    ok = parse_scenario(base.format(url="http://h/", extra="http2 = true\nstreams = 100"))
    assert ok.groups["main"].streams == 100  # type: ignore[union-attr]
    with pytest.raises(UserError, match="--key needs --cert"):
        one_line("https://h/", key="k.pem")
    with pytest.raises(UserError, match="--webpki-roots adds webpki's roots to --cacert/--capath"):
        one_line("https://h/", webpki_roots=True)


def test_the_engine_gets_the_material_and_the_record_keeps_none(pki: Pki) -> None:
    options = {
        "cert": pki.path("client.p12"), "cacert": pki.path("root.pem"), "tls_resume": "off", "tls_version": "1.3",
        "http2": True, "streams": 10, "levels": [20],
    }  # fmt: skip
    with pytest.raises(UserError, match=r"^--key-password: .*cannot be opened as PKCS#12"):
        one_line("https://127.0.0.1:1/", key_password="wrong", **options)
    loaded = one_line("https://127.0.0.1:1/", key_password=PASSWORD, **options)
    step = sweep_plan(loaded.scenario)[0]  # type: ignore[attr-defined]
    ran = engine_spec(loaded.scenario, step).groups[0].client  # type: ignore[attr-defined]
    kept = engine_spec(loaded.record, step, record=True).groups[0].client  # type: ignore[attr-defined]
    assert isinstance(ran, HttpClient) and isinstance(kept, HttpClient)
    assert (ran.http2, ran.streams, ran.tls.resume, ran.tls.version, ran.tls.webpki_roots) == (
        True,
        10,
        False,
        "1.3",
        False,
    )
    assert ran.tls.key_pem is not None and "BEGIN PRIVATE KEY" in ran.tls.key_pem
    assert ran.tls.cert_pem is not None and ran.tls.cert_pem.count("BEGIN CERTIFICATE") == 2  # leaf and intermediate
    assert ran.tls.ca_pem is not None and ran.tls.ca_pem.count("BEGIN CERTIFICATE") == 1
    assert ran.model_dump()["tls"]["key_pem"] == KEY_WITHHELD
    assert (kept.tls.cert_pem, kept.tls.key_pem, kept.tls.ca_pem) == (None, None, None)
    assert kept.tls.resume is False and kept.tls.version == "1.3"
    tls = loaded.record.groups["main"].tls  # type: ignore[attr-defined,union-attr]
    assert tls.password == "${main_tls_password}" and loaded.secrets["main_tls_password"] == PASSWORD  # type: ignore[attr-defined]
    # --webpki-roots with --cacert: both reach the engine (which trusts the two together)
    added = one_line("https://127.0.0.1:1/", key_password=PASSWORD, webpki_roots=True, **options)
    tls_spec = engine_spec(added.scenario, step).groups[0].client.tls  # type: ignore[attr-defined]
    assert tls_spec.webpki_roots is True and tls_spec.ca_pem == ran.tls.ca_pem


def test_expiry_within_the_planned_time_is_a_warning(pki: Pki) -> None:
    cert, key = pki.ending_soon(minutes=3)
    loaded = one_line(
        "https://127.0.0.1:1/", cert=cert, key=key, levels=[1, 2, 4, 8], duration="2m", no_recovery=True
    )  # fmt: skip
    s = loaded.scenario  # type: ignore[attr-defined]
    assert len(sweep_plan(s)) == 4 and planned_seconds(s) == 480
    lines, warnings = notes(s, planned_seconds(s))
    assert lines[0].startswith("group main: client certificate CN=soon from ")
    assert len(warnings) == 1 and "expires at" in warnings[0] and "before the run's planned end" in warnings[0]
    assert notes(s, 10.0)[1] == []


def test_the_preflight_counts_http2_connections_not_streams() -> None:
    from knee.machine.network import Endpoint
    from knee.preflight.scenario import load_of

    ep = Endpoint("127.0.0.1", 80, "127.0.0.1")
    for streams, connections in ((100, 10), (1, 1000)):
        loaded = one_line("http://127.0.0.1:1/", http2=True, streams=streams, levels=[1000])
        load = load_of(loaded.scenario, {"main": ep})  # type: ignore[attr-defined]
        assert [c.clients for c in load.connections] == [connections]


def test_the_connect_timeout_key_reaches_the_engine_and_is_checked_against_timeout() -> None:
    text = '[groups.main]\nkind = "tcp"\naddr = "127.0.0.1:1"\nclients = 1\ntotal = 5\nconnect_timeout = "{v}"\n'
    scenario = parse_scenario(text.format(v="1.5s"))
    (step,) = sweep_plan(scenario)[:1]
    assert engine_spec(scenario, step).groups[0].client.connect_timeout_ms == 1500  # type: ignore[union-attr]
    with pytest.raises(UserError) as err:
        parse_scenario(text.format(v="45s"))
    assert "groups.main.connect_timeout: 45s is not shorter than timeout (30s, --timeout on" in str(err.value)


def test_clashing_http_options_are_said_in_the_options_words() -> None:
    """The scenario's own checks speak of its keys (streams = 4, http2 = true); on the command line the same clash
    is said with the options the user typed."""
    bad = [
        ({"streams": 4}, "--streams 4 multiplexes HTTP/2 only: add --http2 (or drop --streams)"),
        ({"streams": 4, "http2": True, "new_connection": True}, "--streams 4 shares connections, but --new-connection"),
        ({"body": "x", "body_file": "f"}, "give either --body or --body-file, not both"),
        ({"cert": "c.pem"}, "--cert applies to https:// URLs only: use https:// (or drop it)"),
        ({"cacert": "r.pem", "tls_version": "1.3"}, "--cacert, --tls-version apply to https:// URLs only"),
    ]
    for options, words in bad:
        with pytest.raises(UserError) as err:
            one_line("http://127.0.0.1:1/", **options)
        assert str(err.value).startswith(words), str(err.value)
    # an option of another kind of target is refused even when its value is 0 (== False in Python)
    with pytest.raises(UserError, match="--connect-timeout applies to http"):
        one_line("/bin/true", connect_timeout=0)


def _self_signed(tmp_path: Path, name: str, key: object) -> tuple[str, str]:
    """A self-signed certificate of `key` and the key, as PEM files under `tmp_path`."""
    import datetime as dt

    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.x509.oid import NameOID

    subject = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, name)])
    now = dt.datetime.now(dt.UTC)
    cert = (
        x509.CertificateBuilder()
        .subject_name(subject)
        .issuer_name(subject)
        .public_key(key.public_key())  # type: ignore[attr-defined]
        .serial_number(1)
        .not_valid_before(now - dt.timedelta(hours=1))
        .not_valid_after(now + dt.timedelta(days=1))
        .sign(key, hashes.SHA256())  # type: ignore[arg-type]
    )
    cert_path, key_path = tmp_path / f"{name}.pem", tmp_path / f"{name}.key"
    cert_path.write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    key_path.write_bytes(
        key.private_bytes(  # type: ignore[attr-defined]
            serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
        )
    )
    return str(cert_path), str(key_path)


def test_a_key_the_engines_tls_cannot_sign_with_is_one_sentence_naming_the_file(tmp_path: Path) -> None:
    """An RSA key under 2048 bits or an ECDSA key on P-521 passed the key's checks and failed as the first step
    started (the run directory made), with "tls.key_pem: its key cannot sign …", naming neither file nor reason."""
    from cryptography.hazmat.primitives.asymmetric import ec, rsa

    refused = {
        "rsa1024": (rsa.generate_private_key(public_exponent=65537, key_size=1024), "an RSA key of 1024 bits"),
        "p521": (ec.generate_private_key(ec.SECP521R1()), "an ECDSA key on secp521r1"),
    }
    for name, (key, what) in refused.items():
        cert, key_path = _self_signed(tmp_path, name, key)
        with pytest.raises(TlsFileError, match=f"the key in '{key_path}' is {what}, which knee's TLS cannot sign"):
            open_identity(cert, key_path, None)
    for name, key in {
        "rsa2048": rsa.generate_private_key(65537, 2048),
        "p256": ec.generate_private_key(ec.SECP256R1()),
    }.items():
        cert, key_path = _self_signed(tmp_path, name, key)
        assert open_identity(cert, key_path, None).subject == f"CN={name}"
