"""Reports from a real engine result: a local HTTP server, the Rust engine, its HdrHistogram bytes."""

from __future__ import annotations

import csv
import io
import threading
import time
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

from knee.engine import group_stats, run
from knee.model import RunRecord, StepResult
from knee.report import write_reports
from knee.report.csvout import levels_csv
from knee.report.hgrm import hgrm_path, read_percentiles

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
    spec = {
        "threads": 1,
        "interval_ms": 1000,
        "groups": [
            {
                "name": "main",
                "clients": 2,
                "stop": {"total": TOTAL},
                "timeout_ms": 5000,
                "client": {"kind": "http", "url": server + "/x"},
            }
        ],
    }
    result = run(spec)
    g = group_stats(result)["main"]
    assert g.succeeded == TOTAL
    step = StepResult(index=0, level=2, started_unix=time.time(), elapsed_s=g.elapsed_s, groups={"main": g})
    record = RunRecord(run_id="engine", created_unix=time.time(), status="complete", steps=[step])
    path = hgrm_path(tmp_path, 0, "main")
    path.parent.mkdir()
    path.write_bytes(result.histogram(0, "latency"))

    pts = dict(read_percentiles(tmp_path, 0, "main") or [])
    engine_pts = dict(g.percentiles_ms)
    for q in (50.0, 99.0, 100.0):  # the same histogram, decoded by the Python HdrHistogram port
        assert pts[q] == pytest.approx(engine_pts[q], rel=0.002), q
    row = next(csv.DictReader(io.StringIO(levels_csv(record))))
    assert int(row["succeeded"]) == TOTAL and int(row["failed"]) == 0
    assert abs(float(row["p99_ms"]) - g.latency_ms.p99) <= 1e-5 * g.latency_ms.p99
    paths = write_reports(tmp_path, record)
    assert all(p.stat().st_size > 0 for p in paths)
    assert "Latency distribution per level" in (tmp_path / "report.html").read_text()
