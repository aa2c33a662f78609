"""Nothing is lost: Ctrl-C keeps a partial step and reports, --resume completes, SIGKILL loses one step at most."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path

import psutil
import pytest

from knee.demo_target import TargetProcess, start_target
from knee.engine import ShardResult
from knee.model import RunRecord
from knee.store import RunDir

from servers import kill_if_running

LEVELS = [2, 4, 8, 16]
SCENARIO = f"""\
[groups.main]
kind = "http"
url = "${{target}}/info"
clients = "level"

[sweep]
levels = {LEVELS}
duration = "1s"

[recovery]
enabled = false
"""


@pytest.fixture(scope="module")
def target() -> Iterator[TargetProcess]:
    with start_target("basic") as t:
        yield t


def knee(*args: str) -> list[str]:
    return [sys.executable, "-m", "knee", *args]


def wait_for(check: Callable[[], bool], timeout: float, what: str) -> None:
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        if check():
            return
        time.sleep(0.05)
    raise AssertionError(f"timed out waiting for {what}")


def run_dir_of(out: Path) -> RunDir:
    runs = [p for p in out.iterdir() if p.is_dir()] if out.exists() else []
    return RunDir(runs[0]) if runs else RunDir(out / "missing")


def steps_saved(out: Path) -> int:
    rd = run_dir_of(out)
    if not rd.record_path.exists():
        return 0
    return len(rd.load().steps)


def inside_the_second_step(out: Path, target: TargetProcess) -> None:
    """Wait until the first step is saved and the second one's clients are at the target: 3 requests in flight at
    once, which neither the first step's 2 clients nor the probes for rest between the steps (one at a time) make.
    A fixed pause after the first step could end between the steps on a busy machine."""
    wait_for(lambda: steps_saved(out) >= 1, 30, "the first step")
    wait_for(lambda: target.stats()["in_flight"] >= 3, 30, "the second step's load")


def start_sweep(tmp_path: Path, target: TargetProcess, text: str = SCENARIO) -> tuple[subprocess.Popen[str], Path]:
    scenario = tmp_path / "s.toml"
    scenario.write_text(text)
    out = tmp_path / "runs"
    cmd = knee("sweep", str(scenario), "--out", str(out), "--var", f"target={target.url}")
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    return proc, out


def shape(record: RunRecord) -> list[tuple[int, str, str, str, bool]]:
    return [(s.level, s.label, s.phase, s.direction, s.partial) for s in record.steps]


def assert_complete(rd: RunDir) -> RunRecord:
    record = rd.load()
    assert record.status == "complete"
    assert [s.level for s in record.steps] == LEVELS
    assert [s.index for s in record.steps] == list(range(len(LEVELS)))
    assert not any(s.partial for s in record.steps)
    for s in record.steps:
        data = (rd.steps_dir / f"{s.index}.knee").read_bytes()
        assert ShardResult.from_bytes(data).summary()
        assert (rd.steps_dir / f"{s.index}-main.hgrm").stat().st_size > 0
    assert record.verdicts and record.verdicts[0].group == "main"
    return record


@pytest.mark.timeout(60)
def test_resume_of_a_run_still_going_is_refused(tmp_path: Path, target: TargetProcess) -> None:
    # It loaded the service twice (each sweep measuring the other's load) and both wrote run.json and the steps.
    proc, out = start_sweep(tmp_path, target)
    try:
        wait_for(lambda: steps_saved(out) >= 1, 30, "the first step")
        rd = run_dir_of(out)
        second = subprocess.run(knee("sweep", "--resume", str(rd.path)), capture_output=True, text=True, timeout=30)
        assert second.returncode == 2, second.stderr
        assert f"is being run by another knee (pid {proc.pid})" in second.stderr, second.stderr
        _, stderr = proc.communicate(timeout=30)
    finally:
        kill_if_running(proc)
    assert proc.returncode == 0, stderr
    assert_complete(rd)


@pytest.mark.timeout(60)
@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGHUP])
def test_sigterm_and_sighup_end_the_step_as_ctrl_c_does(tmp_path: Path, target: TargetProcess, sig: int) -> None:
    # `kill`, a batch system's time limit or a closed SSH session: Python's default ended knee at once, the step
    # lost, no report, run.json left "running".
    proc, out = start_sweep(tmp_path, target)
    try:
        inside_the_second_step(out, target)
        proc.send_signal(sig)
        _, stderr = proc.communicate(timeout=30)
    finally:
        kill_if_running(proc)
    assert proc.returncode == 130, stderr
    assert f"knee: {signal.Signals(sig).name} received: ending this step and writing the report" in stderr
    rd = run_dir_of(out)
    record = rd.load()
    assert record.status == "interrupted" and record.steps[-1].partial, shape(record)
    assert len(record.steps) >= 2 and all(not s.partial for s in record.steps[:-1])
    assert (rd.path / "report.md").is_file()


@pytest.mark.timeout(90)
def test_ctrl_c_keeps_a_partial_step_and_resume_completes(tmp_path: Path, target: TargetProcess) -> None:
    proc, out = start_sweep(tmp_path, target)
    try:
        inside_the_second_step(out, target)
        proc.send_signal(signal.SIGINT)
        stdout, stderr = proc.communicate(timeout=30)
    finally:
        kill_if_running(proc)
    assert proc.returncode == 130, stderr
    rd = run_dir_of(out)
    record = rd.load()
    assert record.status == "interrupted"
    assert record.steps[-1].partial
    assert all(not s.partial for s in record.steps[:-1])
    assert record.steps[-1].level == LEVELS[len(record.steps) - 1]
    assert (rd.path / "report.md").is_file(), "the report is written on interrupt"
    assert "report:" in stdout

    resumed = subprocess.run(knee("sweep", "--resume", str(rd.path)), capture_output=True, text=True, timeout=60)
    assert resumed.returncode == 0, resumed.stderr
    final = assert_complete(rd)

    # the same structure as a run that was never interrupted
    straight_out = tmp_path / "straight"
    straight = subprocess.run(
        knee("sweep", str(tmp_path / "s.toml"), "--out", str(straight_out), "--var", f"target={target.url}"),
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert straight.returncode == 0, straight.stderr
    other = run_dir_of(straight_out)
    assert shape(other.load()) == shape(final)
    assert sorted(p.name for p in other.path.iterdir()) == sorted(p.name for p in rd.path.iterdir())
    assert sorted(p.name for p in other.steps_dir.iterdir()) == sorted(p.name for p in rd.steps_dir.iterdir())


@pytest.mark.timeout(90)
def test_sigkill_loses_at_most_the_step_in_progress(tmp_path: Path, target: TargetProcess) -> None:
    proc, out = start_sweep(tmp_path, target)
    try:
        wait_for(lambda: steps_saved(out) >= 2, 30, "two steps")
        time.sleep(0.3)
        proc.send_signal(signal.SIGKILL)
        proc.communicate(timeout=10)
    finally:
        kill_if_running(proc)
    rd = run_dir_of(out)
    record = rd.load()  # still valid JSON and a valid RunRecord
    assert record.status == "running"
    assert len(record.steps) >= 2
    assert [s.level for s in record.steps] == LEVELS[: len(record.steps)]
    assert not any(s.partial for s in record.steps)
    for s in record.steps:
        assert ShardResult.from_bytes(rd.step_result_bytes(s.index)).summary()
    resumed = subprocess.run(knee("sweep", "--resume", str(rd.path)), capture_output=True, text=True, timeout=60)
    assert resumed.returncode == 0, resumed.stderr
    assert_complete(rd)


def marked(marker: str) -> list[psutil.Process]:
    found = []
    for p in psutil.process_iter(["cmdline"]):
        try:
            if marker in (p.info["cmdline"] or []):
                found.append(p)
        except (psutil.NoSuchProcess, psutil.AccessDenied):
            continue
    return found


@pytest.mark.timeout(60)
@pytest.mark.parametrize("presses", [1, 2])
def test_ctrl_c_leaves_no_client_process(tmp_path: Path, target: TargetProcess, presses: int) -> None:
    marker = f"knee-test-{uuid.uuid4().hex}"
    text = f"""\
[groups.slow]
kind = "exec"
argv = [{sys.executable!r}, "-c", "import time; time.sleep(30)", "{marker}"]
clients = "level"
timeout = "60s"

[sweep]
levels = [3]
duration = "30s"
"""
    proc, out = start_sweep(tmp_path, target, text)
    try:
        wait_for(lambda: len(marked(marker)) >= 3, 20, "three exec clients")
        started = time.monotonic()
        proc.send_signal(signal.SIGINT)
        if presses == 2:
            time.sleep(0.3)
            proc.send_signal(signal.SIGINT)
        proc.communicate(timeout=20)
        took = time.monotonic() - started
    finally:
        kill_if_running(proc)
        for p in marked(marker):  # never leave our own clients behind, whatever happened
            os.kill(p.pid, signal.SIGKILL)
    assert proc.returncode == 130
    assert took < 10
    wait_for(lambda: not marked(marker), 3, "the exec clients to be gone")
    if presses == 1:
        record = run_dir_of(out).load()
        assert record.status == "interrupted"
        assert record.steps and record.steps[-1].partial
