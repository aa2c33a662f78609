"""Reports from a real engine result: a local HTTP server, the Rust engine, its HdrHistogram bytes."""

from __future__ import annotations

import base64
import csv
import io
import threading
import time
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

import knee
from knee.store import RunDir

TOTAL = 300


class _Handler(BaseHTTPRequestHandler):
    def do_GET(self) -> None:
        time.sleep(0.002)
        self.send_response(200)
        self.send_header("Content-Length", "2")
        self.end_headers()
        self.wfile.write(b"ok")

    def log_message(self, *args: object) -> None:
        pass


@pytest.fixture
def server() -> Iterator[str]:
    srv = ThreadingHTTPServer(("127.0.0.1", 0), _Handler)
    srv.daemon_threads = True
    t = threading.Thread(target=srv.serve_forever, daemon=True)
    t.start()
    yield f"http://127.0.0.1:{srv.server_address[1]}"
    srv.shutdown()
    srv.server_close()
    t.join(5)


def test_reports_of_a_real_engine_run(server: str, tmp_path: Path) -> None:
    """knee.run keeps a run directory; its step histogram decodes (Python's HdrHistogram port) to the
    percentiles the engine put in run.json, and the reports render."""
    from hdrh.histogram import HdrHistogram

    r = knee.run(server + "/x", clients=2, n=TOTAL, threads=1, out=tmp_path)
    assert r.stats.succeeded == TOTAL and r.run_dir is not None
    rd = RunDir(r.run_dir)
    record = rd.load()
    g = record.steps[0].groups["main"]
    h = HdrHistogram.decode(base64.b64encode(rd.hgrm_path(0, "main").read_bytes()), b64_wrap=True)
    for q, ms in g.percentiles_ms:  # the same histogram, decoded by the Python port
        assert h.get_value_at_percentile(q) / 1000.0 == pytest.approx(ms, rel=0.002), q
    row = next(csv.DictReader(io.StringIO(rd.report_path("levels.csv").read_text())))
    assert int(row["succeeded"]) == TOTAL and int(row["failed"]) == 0 and int(row["abandoned"]) == 0
    assert abs(float(row["p99_ms"]) - g.latency_ms.p99) <= 1e-5 * g.latency_ms.p99
    html = rd.report_path("report.html").read_text()
    assert "Latency distribution per level" in html
    # bytes: each response is 2 bytes of body
    assert g.payload_bytes == 2 * TOTAL
