"""TLS with client certificates against nginx (Debian's, `ssl_verify_client on`) and a PKI made with openssl
(tests/pki.py): the right certificate in every form (certificate and key, one proxy-style file, $X509_USER_PROXY,
an encrypted key, PKCS#12), trust by a CA file and a hashed CA directory, the server's refusals grouped, a real TLS
alert, each bad file's one sentence before any load, the handshake timed apart and resumption counted as nginx
counts it. Every count is held against nginx's access log."""

from __future__ import annotations

import contextlib
import csv
import json
import os
import queue
import re
import signal
import socket
import ssl
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

import knee
from knee.errors import UserError

from conftest import knee_cli
from pki import PASSWORD, Pki
from servers import TlsNginx, settled


@pytest.fixture
def server(tls_nginx: TlsNginx) -> TlsNginx:
    return tls_nginx


@pytest.fixture(autouse=True)
def no_proxy(monkeypatch: pytest.MonkeyPatch) -> None:
    """No $X509_USER_PROXY of the machine's own leaks into a test (one sets it itself)."""
    monkeypatch.delenv("X509_USER_PROXY", raising=False)


def served(server: TlsNginx, want: int, listener: str = "tls") -> list[str]:
    """nginx's access log lines of `listener`, once it holds `want` of them (or after waiting a moment)."""
    settled(lambda: len(server.lines(listener)), want)
    return server.lines(listener)


def written(root: Path) -> str:
    return "\n".join(p.read_bytes().decode("utf-8", "replace") for p in root.rglob("*") if p.is_file())


def test_the_right_certificate_in_every_form(server: TlsNginx, pki: Pki, tmp_path: Path) -> None:
    """nginx logs every request with the client's subject, and as many as knee started; the key and its password
    are in no file, report or output knee writes."""
    server.clear()
    out, js = tmp_path / "runs", tmp_path / "run.json"
    proc = knee_cli(
        "run", server.url("tls"), "-c", "4", "-n", "200", "-q", "--out", str(out), "--json", str(js),
        "--cert", pki.path("client-chain.pem"), "--key", pki.path("client-enc.key"), "--cacert", pki.path("root.pem"),
        "--key-password", "${pw}", "--secret", f"pw={PASSWORD}",
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    doc = json.loads(js.read_text())
    assert (doc["started"], doc["succeeded"], doc["tls_ms"]["count"]) == (200, 200, 4)
    lines = served(server, 200)
    assert len(lines) == 200 and all(f'200 "{pki.client_subject}" HTTP/1.1' in ln for ln in lines)
    assert "client certificate CN=alice,DC=knee-test,DC=org from" in proc.stdout + proc.stderr
    key_body = Path(pki.path("client.key")).read_text().splitlines()[1]
    everything = written(out) + js.read_text() + proc.stdout + proc.stderr
    assert PASSWORD not in everything and key_body not in everything and "PRIVATE KEY" not in everything
    # The run directory's reports carry the handshakes too: report.md's TLS cell, levels.csv, run.json.
    (run_dir,) = out.iterdir()
    report = (run_dir / "report.md").read_text()
    assert "### Connection times: mean (p99)" in report and "| TLS handshake | Resumed |" in report, report
    ms = r"([\d.]+) ms \([\d.]+ ms\)"  # a cell: mean (p99)
    cells = re.search(rf"^\| 4 \| 4 \| {ms} \| {ms} \| (\d) of 4 \|", report, re.M)
    assert cells and float(cells[2]) > 0, report
    (level,) = csv.DictReader((run_dir / "levels.csv").open())
    assert (level["connections"], level["tls_resumed"]) == ("4", cells[3]), level
    assert float(level["tls_mean_ms"]) > 0 and float(level["tls_p99_ms"]) >= float(level["tls_mean_ms"]) * 0.99
    (step,) = json.loads((run_dir / "run.json").read_text())["steps"]
    assert step["groups"]["main"]["tls_ms"]["count"] == 4

    # One proxy-style file (certificate, key and chain) as $X509_USER_PROXY, the server checked against a hashed
    # CA directory; then PKCS#12 with its password given literally (made a secret of its own, never written).
    server.clear()
    os.environ["X509_USER_PROXY"] = pki.path("proxy.pem")
    try:
        r = knee.run(server.url("tls"), clients=2, n=40, capath=pki.path("certificates"))
    finally:
        del os.environ["X509_USER_PROXY"]
    assert (r.stats.started, r.stats.succeeded) == (40, 40)
    out2 = tmp_path / "p12"
    r = knee.run(
        server.url("tls"), clients=2, n=40, out=out2, cert=pki.path("client.p12"), key_password=PASSWORD,
        cacert=pki.path("root.pem"),
    )  # fmt: skip
    assert (r.stats.started, r.stats.succeeded) == (40, 40)
    assert PASSWORD not in written(out2) and "main_tls_password" in written(out2)
    lines = served(server, 80)
    assert len(lines) == 80 and all(pki.client_subject in ln for ln in lines)


def test_the_servers_refusals_are_grouped_plainly(server: TlsNginx, pki: Pki) -> None:
    """nginx answers 400 to a client without a certificate, or with one from another CA (it does not fail the
    handshake): every failure is grouped under the server's words. A TLS 1.2-only listener refuses a TLS 1.3 client
    with its alert, by name, class tls; a server certificate from a CA knee was not given is knee's refusal."""
    server.clear()
    for cert, key, words in (
        (None, None, "HTTP/1.1 400 Bad Request: 400 No required SSL certificate was sent"),
        (pki.path("rogue.pem"), pki.path("rogue.key"), "HTTP/1.1 400 Bad Request: 400 The SSL certificate error"),
    ):
        r = knee.run(server.url("tls"), clients=2, n=20, cert=cert, key=key, cacert=pki.path("root.pem"))
        s = r.stats
        assert (s.started, s.failed, s.failures) == (20, 20, {"status": 20})
        assert [(x.class_, x.sample, x.count) for x in s.reasons] == [("status", words, 20)]
    assert len(served(server, 40)) == 40
    r = knee.run(server.url("tls12"), clients=1, n=3, cacert=pki.path("root.pem"), tls_version="1.3", check=False)
    assert r.stats.failures == {"tls": 3}
    assert r.stats.reasons[0].sample.endswith("TLS alert from the server: protocol version"), r.stats.reasons
    r = knee.run(server.url("tls12"), clients=1, n=3, check=False)
    assert r.stats.failures == {"tls": 3}
    assert "the server's certificate is not trusted: UnknownIssuer" in r.stats.reasons[0].sample


def test_each_bad_file_is_one_sentence_before_any_load(server: TlsNginx, pki: Pki, tmp_path: Path) -> None:
    server.clear()
    empty = tmp_path / "empty-cas"
    empty.mkdir()
    (empty / "README").write_text("no certificates here\n")
    cases = [
        ({"cert": str(tmp_path / "missing.pem")}, "--cert: cannot read the client certificate"),
        ({"cert": pki.path("client-chain.pem")}, "holds no private key (no BEGIN PRIVATE KEY); give the key file too"),
        ({"cert": pki.path("client.pem"), "key": pki.path("rogue.key")}, "--key: the key in"),
        ({"cert": pki.path("client.pem"), "key": pki.path("client-enc.key")}, "is encrypted; give its password"),
        (
            {"cert": pki.path("client.pem"), "key": pki.path("client-enc.key"), "key_password": "wrong"},
            "--key-password: the key in",
        ),
        ({"cert": pki.path("client.p12"), "key_password": "wrong"}, "cannot be opened as PKCS#12"),
        ({"cert": pki.path("expired.pem"), "key": pki.path("expired.key")}, "expired on"),
        ({"cacert": pki.path("client.key")}, "--cacert: "),
        ({"capath": str(empty)}, "--capath: the CA directory"),
    ]
    for options, words in cases:
        with pytest.raises(UserError) as err:
            knee.run(server.url("tls"), clients=1, n=1, **options)
        message = str(err.value)
        assert words in message and "\n" not in message, (options, message)
    assert "does not belong to the certificate" in _error(
        server, cert=pki.path("client.pem"), key=pki.path("rogue.key")
    )
    assert server.lines("tls") == []  # nothing reached the server


def _error(server: TlsNginx, **options: str) -> str:
    with pytest.raises(UserError) as err:
        knee.run(server.url("tls"), clients=1, n=1, **options)
    return str(err.value)


def test_handshakes_timed_apart_and_resumption_counted_as_nginx_counts(
    server: TlsNginx, pki: Pki, tmp_path: Path
) -> None:
    """A new connection per request: with resumption nearly every handshake is resumed and cheaper, without it
    none is; knee's count of resumed handshakes is nginx's ($ssl_session_reused), and the ab-style text's TLS row
    shows the difference."""
    medians = {}
    for resume in ("on", "off"):
        server.clear()
        js = tmp_path / f"{resume}.json"
        proc = knee_cli(
            "run", server.url("tls"), "-c", "2", "-n", "120", "--new-connection", "--tls-resume", resume, "-q",
            "--cert", pki.path("proxy.pem"), "--cacert", pki.path("root.pem"), "--json", str(js),
        )  # fmt: skip
        assert proc.returncode == 0, proc.stderr
        doc = json.loads(js.read_text())
        lines = served(server, 120)
        reused = sum(1 for ln in lines if ln.split()[1] == "r")
        assert (doc["started"], doc["succeeded"], doc["tls_ms"]["count"], len(lines)) == (120, 120, 120, 120)
        assert doc["tls_resumed"] == reused
        medians[resume] = doc["tls_ms"]["p50"]
        assert f"TLS handshakes:             120  ({120 - reused} full, {reused} resumed)" in proc.stdout
        assert "\nTLS:  " in proc.stdout
        if resume == "on":
            assert reused >= 110
        else:
            assert reused == 0
    assert medians["on"] < medians["off"], medians


def _proxy_verifying_server(pki: Pki, seen: list[str], stop: threading.Event) -> int:
    """An HTTPS server on Python's OpenSSL that requires a client certificate and verifies grid proxies (RFC 3820,
    X509_V_FLAG_ALLOW_PROXY_CERTS, which nginx cannot be told to set): each request answered 200 "ok", the
    client's subject recorded once per connection."""
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    ctx.load_cert_chain(pki.path("server-chain.pem"), pki.path("server.key"))
    ctx.load_verify_locations(pki.path("root.pem"))
    ctx.verify_mode = ssl.CERT_REQUIRED
    ctx.verify_flags |= 0x40  # type: ignore[assignment]  # X509_V_FLAG_ALLOW_PROXY_CERTS
    listener = socket.create_server(("127.0.0.1", 0))
    listener.settimeout(0.1)

    def serve(conn: socket.socket) -> None:
        with conn:
            try:
                tls = ctx.wrap_socket(conn, server_side=True)
            except (ssl.SSLError, OSError):
                return
            cert = tls.getpeercert() or {}
            seen.append(",".join(f"{k}={v}" for rdn in reversed(cert.get("subject", ())) for k, v in rdn))
            buf = b""
            while not stop.is_set():
                while b"\r\n\r\n" not in buf:
                    data = tls.recv(4096)
                    if not data:
                        return
                    buf += data
                buf = buf.split(b"\r\n\r\n", 1)[1]
                tls.sendall(b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok")

    def accept() -> None:
        with listener:
            while not stop.is_set():
                try:
                    conn, _ = listener.accept()
                except TimeoutError:
                    continue
                threading.Thread(target=serve, args=(conn,), daemon=True).start()

    threading.Thread(target=accept, daemon=True).start()
    return int(listener.getsockname()[1])


def test_a_grid_proxy_is_presented_with_its_chain_and_verifies(server: TlsNginx, pki: Pki) -> None:
    """A grid proxy as voms-proxy-init writes it (RFC 3820: signed by the user's own key, a critical proxyCertInfo
    extension; proxy, its key, the user's certificate and the chain in one file) through $X509_USER_PROXY. knee
    presents it whatever its extensions (judging them is the server's): nginx logs the proxy's subject, the user as
    its issuer, and its OpenSSL's refusal of proxies; a server that verifies proxies accepts the chain to the
    root."""
    os.environ["X509_USER_PROXY"] = pki.path("rfc-proxy-file.pem")
    seen: list[str] = []
    stop = threading.Event()
    try:
        # nginx's OpenSSL 3.0 cannot be told to allow proxies: it takes the handshake, logs what it got, and
        # answers 400 "The SSL certificate error" (expected here: the proxy reached the server whole)
        server.clear()
        r = knee.run(server.url("tlsany"), clients=2, n=20, cacert=pki.path("root.pem"), expect_status="400")
        assert (r.stats.started, r.stats.succeeded) == (20, 20), r.stats.reasons
        lines = served(server, 20, "tlsany")
        want = f'400 "{pki.proxy_subject}" "{pki.client_subject}" "FAILED:proxy certificates not allowed, please set'
        assert len(lines) == 20 and all(ln.startswith(want) for ln in lines), lines[:2]

        port = _proxy_verifying_server(pki, seen, stop)
        r = knee.run(f"https://127.0.0.1:{port}/", clients=2, n=20, cacert=pki.path("root.pem"), expect_body="ok")
        assert (r.stats.started, r.stats.succeeded, r.stats.tls_ms.count) == (20, 20, 2), r.stats.reasons
        assert seen == ["commonName=1234567,commonName=alice,domainComponent=knee-test,domainComponent=org"] * 2
    finally:
        stop.set()
        del os.environ["X509_USER_PROXY"]


def test_a_stale_x509_user_proxy_is_not_presented_and_is_said(server: TlsNginx, pki: Pki, tmp_path: Path) -> None:
    """$X509_USER_PROXY naming a proxy that is gone (a reboot cleared /tmp) or expired refused every https run, as
    `--cert: cannot read …` (an option never given), to servers that ask for no certificate: the run goes on
    without it, and says so."""
    server.clear()
    for proxy in (tmp_path / "x509up_u0", Path(pki.path("expired.pem"))):
        env = {**os.environ, "X509_USER_PROXY": str(proxy)}
        proc = knee_cli("run", server.url("tlsany"), "-n", "4", "--cacert", pki.path("root.pem"), env=env)
        assert proc.returncode == 0, proc.stdout + proc.stderr
        said = proc.stdout + proc.stderr
        assert f"$X509_USER_PROXY ({proxy}) is not presented: " in said, said
        assert "give --cert, or a fresh proxy" in said, said
    lines = served(server, 8, "tlsany")
    assert lines == ['200 "-" "-" "NONE"'] * 8  # no certificate presented


def test_a_certificate_that_expires_before_the_planned_end_is_a_warning_as_the_run_starts(
    server: TlsNginx, pki: Pki
) -> None:
    """A run planned for 4 minutes with a certificate valid for 3 more: knee says which certificate it presents and
    warns, before the load, that it expires first: nginx has logged no request when the warning is read, and
    logs some a moment later. The run is then stopped with Ctrl-C (exit 130)."""
    cert, key = pki.ending_soon(minutes=3)
    server.clear()
    proc = subprocess.Popen(
        [sys.executable, "-m", "knee", "run", server.url("tlsany"), "--cert", cert, "--key", key, "-d", "4m",
         "--cacert", pki.path("root.pem")],
        stdout=subprocess.PIPE, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, text=True,
    )  # fmt: skip
    lines: queue.Queue[str] = queue.Queue()
    reader = threading.Thread(target=lambda: [lines.put(ln) for ln in proc.stdout or ()], daemon=True)
    reader.start()
    seen: list[str] = []
    try:
        deadline = time.monotonic() + 30
        while not any("warning:" in ln for ln in seen) and time.monotonic() < deadline:
            with contextlib.suppress(queue.Empty):
                seen.append(lines.get(timeout=0.5))
        served_at_warning = len(server.lines("tlsany"))
        warned_while_running = proc.poll() is None and any("warning:" in ln for ln in seen)
        deadline = time.monotonic() + 10
        while not server.lines("tlsany") and time.monotonic() < deadline:  # the load starts
            time.sleep(0.05)
        served_after = len(server.lines("tlsany"))
    finally:
        proc.send_signal(signal.SIGINT)
        proc.wait(timeout=30)
        reader.join(timeout=10)
    text = "".join(seen) + "".join(lines.queue)
    assert warned_while_running, f"no warning while the 4-minute run went on: {text}"
    assert proc.returncode == 130, text
    assert "group main: client certificate CN=soon from" in text, text
    (warning,) = [ln for ln in text.splitlines() if "warning:" in ln]
    assert "expires at" in warning and "before the run's planned end" in warning, warning
    # said before the load: no request had reached nginx when the warning was read; requests came after it
    assert served_at_warning == 0 and served_after > 0, (served_at_warning, served_after)
    assert text.index("warning:") < text.index("Started operations:"), text


def test_connect_to_sends_the_urls_name_in_the_hello_and_host_as_curls_resolve_does(
    server: TlsNginx, pki: Pki, tmp_path: Path
) -> None:
    """`--connect-to 127.0.0.1` with a URL whose name resolves nowhere (service.knee.test, a name of nginx's
    certificate): nginx logs the URL's name as the TLS server name (SNI) and in Host, as it does for curl --resolve;
    the certificate is checked against that name. `knee import curl` of curl's --resolve replays the same."""
    port = server.ports["tls12"]
    url, root = f"https://service.knee.test:{port}/", pki.path("root.pem")
    want = "service.knee.test|service.knee.test|200"
    server.clear()
    subprocess.run(["curl", "-s", "--resolve", f"service.knee.test:{port}:127.0.0.1", "--cacert", root, url],
                   check=True, capture_output=True, timeout=30)  # fmt: skip
    assert served(server, 1, "tls12") == [want]
    server.clear()
    proc = knee_cli("run", url, "--connect-to", "127.0.0.1", "-c", "2", "-n", "10", "-q", "--cacert", root)
    assert proc.returncode == 0, proc.stderr
    assert served(server, 10, "tls12") == [want] * 10
    out = tmp_path / "curl.toml"
    curl = ("curl", "--resolve", f"service.knee.test:{port}:127.0.0.1", "--cacert", root, url)
    assert knee_cli("import", "curl", "-o", str(out), "--", *curl).returncode == 0
    server.clear()
    proc = knee_cli("run", str(out), "-c", "1", "-n", "5", "-q")
    assert proc.returncode == 0, proc.stderr
    assert served(server, 5, "tls12") == [want] * 5
    # the name alone: it resolves nowhere, one sentence before any load
    proc = knee_cli("run", url, "-n", "1", "--cacert", root)
    assert proc.returncode == 2 and "cannot resolve host 'service.knee.test'" in proc.stderr, proc.stderr
    # another name than the certificate's, connected to the same server: knee checks the URL's name, not the address
    r = knee.run(f"https://other.knee.test:{port}/", clients=1, n=2, cacert=root, connect_to="127.0.0.1", check=False)
    assert r.stats.failures == {"tls": 2}, r.stats.reasons
    assert "NotValidForName" in r.stats.reasons[0].sample and "other.knee.test" in r.stats.reasons[0].sample
