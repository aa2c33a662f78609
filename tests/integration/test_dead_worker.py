"""A worker that dies on a request, behind kept connections: gunicorn's threaded workers, one of which exits on
every tenth request it reads (a crash, an out-of-memory kill). knee sends a GET that met a kept connection closed
before any answer again on a new one, as RFC 9112 §9.3.1 allows and as browsers do: another worker answers, so
the crash is hidden as a success, and the server read the request twice. knee counts those requests (`resent`),
says them under the run and names them in a finding; what the server read lies from what knee started to that
plus `resent` (a request written to a kept connection the dying worker held idle was never read)."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from knee.store import RunDir

from conftest import knee_cli
from servers import free_port, sent, wait_for_port

APP = """
import os

served = 0


def app(environ, start_response):
    global served
    served += 1
    crash = served % 10 == 0
    with open({log!r}, "a") as f:  # one line per request read, before the answer (or the crash)
        f.write("crash\\n" if crash else "read\\n")
    if crash:
        os._exit(1)  # the worker dies on the request: no answer, its connections closed
    start_response("200 OK", [("Content-Type", "text/plain"), ("Content-Length", "2")])
    return [b"ok"]
"""


@pytest.fixture
def dying(tmp_path: Path) -> Iterator[tuple[str, Path]]:
    """gunicorn, two gthread workers of one thread each keeping connections alive 30 s; the URL and its log."""
    log = tmp_path / "requests.log"
    (tmp_path / "dyingapp.py").write_text(APP.format(log=str(log)))
    port = free_port()
    proc = subprocess.Popen(
        [sys.executable, "-m", "gunicorn", "-w", "2", "-k", "gthread", "--threads", "1", "--keep-alive", "30",
         "-b", f"127.0.0.1:{port}", "--chdir", str(tmp_path), "dyingapp:app"],
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True,
    )  # fmt: skip
    try:
        wait_for_port(port, 20)
        yield f"http://127.0.0.1:{port}/", log
    finally:
        os.killpg(proc.pid, signal.SIGKILL)  # the arbiter and its workers: the group this test started
        proc.wait(timeout=10)


def _read(log: Path) -> tuple[int, int]:
    """Requests the workers read, and of them those they died on."""
    lines = log.read_text().split()
    return len(lines), lines.count("crash")


def test_requests_sent_again_after_a_worker_died_are_counted_said_and_found(
    dying: tuple[str, Path], tmp_path: Path
) -> None:
    url, log = dying
    js = tmp_path / "run.json"
    proc = knee_cli("run", url, "-c", "2", "-n", "60", "--json", str(js))
    assert proc.returncode == 0, proc.stdout + proc.stderr
    doc = json.loads(js.read_text())
    read, crashes = _read(log)
    started = doc["started"] + doc["warmup_ops"]
    assert crashes >= 4, (read, crashes, doc["resent"])  # 60 requests over two workers: six crashes or so
    # the crashes were hidden: each request went again to a worker that answered
    assert doc["succeeded"] + doc["failed"] == 60 and doc["succeeded"] >= 60 - crashes, doc
    # the server read more than knee started, and no more than knee says it may have
    assert started < read <= started + doc["resent"], (started, read, doc["resent"])
    assert re.search(rf"^Sent again: +{doc['resent']} +\(", proc.stdout, re.M), proc.stdout

    out = tmp_path / "runs"
    log.write_text("")
    proc = knee_cli("sweep", url, "--levels", "1,2", "-d", "2s", "--no-recovery", "--out", str(out))
    assert proc.returncode in (0, 3), proc.stdout + proc.stderr
    (run,) = [p for p in out.iterdir() if p.is_dir()]
    record = RunDir(run).load()
    resent = sum(g.resent for s in record.steps for g in s.groups.values())
    read, crashes = _read(log)
    assert crashes >= 2 and sent(record) < read <= sent(record) + resent, (sent(record), read, resent)
    (v,) = record.verdicts
    (found,) = [f for f in v.findings if f.kind == "resent"]
    assert found.level == 1 and "closed kept connections before answering" in found.what, found
    assert "workers that died" in found.fix
