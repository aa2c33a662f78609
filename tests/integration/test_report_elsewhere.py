"""The findings are a pure function of the run record: `knee report RUN_DIR` on a machine whose host lookups
give other answers (here: fail) says what the run said. Whether the target ran on the load machine is
recorded in run.json when the run starts (`targets`), not looked up again when the report is made."""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from knee.demo_target import start_target

# The sweep, in a child process: every step's load side counts as saturated, so the load_side finding appears and
# says whether the service shared the machine with its clients (it did: 127.0.0.1).
SWEEP = """
import sys
import knee.machine.cpu as cpu
cpu.saturated = lambda *judged: True
from knee.cli import main
main(sys.argv[1:])
"""

# `knee report RUN_DIR` in a child process where every host lookup fails (names, addresses, interfaces), then the
# findings of that same analysis as JSON on the last line.
REPORT_ELSEWHERE = """
import json, socket, sys
import psutil

def nowhere(*args, **kwargs):
    raise OSError("no host lookups on this machine")

socket.getaddrinfo = socket.gethostbyname = socket.gethostbyname_ex = socket.gethostbyaddr = nowhere
psutil.net_if_addrs = nowhere

from knee.analysis import analyze_run
from knee.cli import main
from knee.store import RunDir

try:
    main(["report", sys.argv[1]])
except SystemExit as exc:
    assert not exc.code, exc.code
verdicts = analyze_run(RunDir(sys.argv[1]).load())
print(json.dumps({v.group: [f.model_dump(mode="json") for f in v.findings] for v in verdicts}))
"""


@pytest.fixture
def url() -> Iterator[str]:
    with start_target("basic", pool=1000, lam=2000.0, sigma=0.0, kappa=0.0) as t:
        yield t.url + "/ls"


def _python(code: str, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-c", code, *args],
        capture_output=True,
        text=True,
        timeout=120,
        stdin=subprocess.DEVNULL,
    )


def test_report_gives_the_run_time_findings_when_host_lookups_fail(url: str, tmp_path: Path) -> None:
    out = tmp_path / "runs"
    sweep = _python(
        SWEEP,
        *("sweep", url, "--levels", "1,2", "--iterations", "20", "--pause", "0.1s", "--no-recovery"),
        *("--name", "elsewhere", "--out", str(out)),
    )
    assert sweep.returncode == 0, sweep.stderr
    (run,) = [p for p in out.iterdir() if p.is_dir()]
    record = json.loads((run / "run.json").read_text())
    at_run_time = {v["group"]: v["findings"] for v in record["verdicts"]}
    (load_side,) = [f for f in at_run_time["main"] if f["kind"] == "load_side"]
    assert "the service shared the machine with its clients" in load_side["what"]

    report = _python(REPORT_ELSEWHERE, str(run))
    assert report.returncode == 0, report.stderr
    assert json.loads(report.stdout.splitlines()[-1]) == at_run_time
    assert "the service shared the machine with its clients" in (run / "report.md").read_text()
