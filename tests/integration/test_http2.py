"""HTTP/2 against nginx (Debian's 1.22: `listen … ssl http2` on its TLS listener, `listen … http2` for h2c):
clients are streams over ⌈clients / streams⌉ connections; counts equal nginx's access log exactly at 1 and 100
streams per connection, in closed and open loop and in a sweep, and through the GOAWAY nginx sends every 50
requests of a connection (`keepalive_requests 50`). Over a Dask cluster: tests/integration/test_distributed.py."""

from __future__ import annotations

import json
from pathlib import Path

import knee

from conftest import knee_cli
from pki import Pki
from servers import TlsNginx, sent, settled


def log(server: TlsNginx, listener: str, want: int) -> list[str]:
    settled(lambda: len(server.lines(listener)), want)
    return server.lines(listener)


def connections(lines: list[str]) -> int:
    return len({ln.split()[0] for ln in lines})


def test_streams_over_shared_tls_connections_count_exactly(tls_nginx: TlsNginx, pki: Pki, tmp_path: Path) -> None:
    tls = {"cert": pki.path("proxy.pem"), "cacert": pki.path("root.pem")}
    for clients, streams, n, conns in ((4, 1, 400, 4), (200, 100, 4000, 2)):
        tls_nginx.clear()
        r = knee.run(tls_nginx.url("tls"), clients=clients, n=n, http2=True, streams=streams, threads=2, **tls)
        s = r.stats
        assert (s.started, s.succeeded, s.connect_ms.count, s.tls_ms.count) == (n, n, conns, conns), s.reasons
        lines = log(tls_nginx, "tls", n)
        assert len(lines) == n and all(ln.endswith("HTTP/2.0") and pki.client_subject in ln for ln in lines)
        assert connections(lines) == conns
    # and the same over h2c (prior knowledge, no TLS)
    for clients, streams, n, conns in ((4, 1, 400, 4), (200, 100, 4000, 2)):
        tls_nginx.clear()
        r = knee.run(tls_nginx.url("h2c"), clients=clients, n=n, http2=True, streams=streams, threads=2)
        s = r.stats
        assert (s.started, s.succeeded, s.connect_ms.count, s.tls_ms.count) == (n, n, conns, 0), s.reasons
        lines = log(tls_nginx, "h2c", n)
        assert len(lines) == n and all(ln.endswith("HTTP/2.0") for ln in lines)
        assert connections(lines) == conns
    # the ab-style text says how the clients were spread
    proc = knee_cli("run", tls_nginx.url("h2c"), "--http2", "--streams", "10", "-c", "20", "-n", "200", "-q")
    assert proc.returncode == 0, proc.stderr
    assert "Clients:                    20 (HTTP/2, 10 streams per connection)" in proc.stdout


def test_h2c_open_loop_and_a_sweep_count_exactly(tls_nginx: TlsNginx, tmp_path: Path) -> None:
    tls_nginx.clear()
    r = knee.run(tls_nginx.url("h2c"), clients=20, rate=400, duration="1s", http2=True, streams=10)
    s = r.stats
    assert s.open_loop is not None and s.failed == 0 and s.succeeded >= 300
    assert len(log(tls_nginx, "h2c", s.started)) == s.started + s.warmup_ops
    tls_nginx.clear()
    out = tmp_path / "runs"
    proc = knee_cli(
        "sweep", tls_nginx.url("h2c"), "--http2", "--streams", "10", "--levels", "5,40", "-d", "0.5s",
        "--no-recovery", "--out", str(out),
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    (run,) = out.iterdir()
    record = knee.store.RunDir(run).load()
    assert len(log(tls_nginx, "h2c", sent(record))) == sent(record) > 0
    assert "### Connection times: mean (p99)" in (run / "report.md").read_text()


def test_goaway_mid_run_loses_nothing(tls_nginx: TlsNginx, tmp_path: Path) -> None:
    """nginx ends every connection with GOAWAY after 50 requests: the streams it did not take are sent again on a
    new connection, so knee's started is nginx's count exactly and nothing fails."""
    tls_nginx.clear()
    js = tmp_path / "r.json"
    proc = knee_cli(
        "run", tls_nginx.url("goaway"), "--http2", "--streams", "10", "-c", "40", "-n", "3000", "-q", "--json", str(js)
    )
    assert proc.returncode == 0, proc.stderr
    doc = json.loads(js.read_text())
    assert (doc["started"], doc["succeeded"], doc["failed"]) == (3000, 3000, 0), doc["reasons"]
    lines = log(tls_nginx, "goaway", 3000)
    assert len(lines) == 3000
    assert connections(lines) == doc["connect_ms"]["count"] >= 3000 // 50
