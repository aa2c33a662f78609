"""Steps whose run ends oddly, each kept or said as it was.

Ctrl-C while a cluster's step has not begun (its workers not yet ready, the service not yet at rest): the step
never started, so there is nothing of it to keep, and the run ends as interrupted with its report (exit 130), where
the Dask executor's "no shard of the step came back" made it a failed run with exit 2 and no report.

A part of the engine that failed in knee itself (a client's task or a runtime thread that panicked: a defect of
knee) was passed over: its operations were neither counted nor said, and the step looked whole. The engine's result
names it (`lost`; crates/engine/src/threads.rs tests the naming), and the step is partial, left out of the verdict
and said in the report.

A full disk (a real one: a tmpfs of the test's own, filled while the second step ran) ended the run with "cannot
write …" before the step just measured was printed: its numbers were lost unsaid. They are printed, then the
sentence says the step was not saved and that run.json holds what was saved before it."""

from __future__ import annotations

import errno
import io
import json
import os
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest
from rich.console import Console

from knee._engine import ShardResult
from knee.errors import UserError
from knee.executor import Interrupts, LocalExecutor
from knee.executor.base import StepRun, StoppedBeforeStart
from knee.runner import EXIT_INTERRUPTED, execute, start_run
from knee.scenario import read_scenario
from knee.spec import EngineSpec
from knee.store import RunDir

SCENARIO = """
[groups.main]
kind = "exec"
argv = ["true"]
[sweep]
levels = [1, 2]
duration = "300ms"
settle_wait = 0
"""


class FirstStepHereThenCtrlC(LocalExecutor):
    """Runs the first step here; the second is stopped before it starts, as a cluster's is when Ctrl-C comes during
    the wait for its workers (knee.executor.dask: every shard says stopped_before_start)."""

    def __init__(self) -> None:
        super().__init__()
        self.steps = 0

    def run_step(self, spec: EngineSpec, interrupts: Interrupts, on_snapshot=None) -> StepRun:  # type: ignore[no-untyped-def]
        self.steps += 1
        if self.steps == 1:
            return super().run_step(spec, interrupts, on_snapshot)
        interrupts.requested = True
        raise StoppedBeforeStart


def test_ctrl_c_before_a_cluster_step_began_ends_the_run_as_interrupted_with_its_report(tmp_path: Path) -> None:
    scenario, run_dir = start_run(read_scenario(SCENARIO, "s.toml"), tmp_path, "s")
    outcome = execute(scenario, run_dir, Console(file=io.StringIO()), executor=FirstStepHereThenCtrlC())
    assert (outcome.code, outcome.record.status) == (EXIT_INTERRUPTED, "interrupted")
    assert [s.level for s in outcome.record.steps] == [1]
    assert (run_dir.path / "report.md").is_file()


HERE_NO_RECOVERY = SCENARIO + "[recovery]\nenabled = false\n"
LOST = (
    'group main\'s client 1 (it failed in knee: "boom", a defect of knee; its operation then in flight and what it '
    "would have run are not counted)"
)


class SecondStepLosesAClient(LocalExecutor):
    """Runs each step here; the second one's result says a client failed in knee, as the engine's does."""

    def __init__(self) -> None:
        super().__init__()
        self.steps = 0

    def run_step(self, spec: EngineSpec, interrupts: Interrupts, on_snapshot=None) -> StepRun:  # type: ignore[no-untyped-def]
        run = super().run_step(spec, interrupts, on_snapshot)
        self.steps += 1
        if self.steps == 2:
            wire = json.loads(run.result.to_bytes())
            assert wire["lost"] == []
            wire["lost"] = [LOST]
            run.result = ShardResult.from_bytes(json.dumps(wire).encode())
        return run


def test_a_client_that_failed_in_knee_makes_its_step_partial_and_is_said(tmp_path: Path) -> None:
    scenario, run_dir = start_run(read_scenario(HERE_NO_RECOVERY, "s.toml"), tmp_path, "s")
    outcome = execute(scenario, run_dir, Console(file=io.StringIO()), executor=SecondStepLosesAClient())
    first, second = [s for s in outcome.record.steps if s.phase == "sweep"]
    assert (first.partial, first.lost_workers, first.believed) == (False, [], True)
    assert (second.partial, second.lost_workers, second.believed) == (True, [LOST], False)
    assert f"step 1 lost {LOST}: its numbers cover the rest only (partial)" in (run_dir.path / "report.md").read_text()


@pytest.fixture
def small_disk(tmp_path: Path) -> Iterator[Path]:
    """A 4 MiB tmpfs of this test's own (mounted, and unmounted after)."""
    if os.geteuid() != 0:
        pytest.skip("mounting a tmpfs needs root")
    where = tmp_path / "disk"
    where.mkdir()
    if subprocess.run(["mount", "-t", "tmpfs", "-o", "size=4m", "tmpfs", str(where)], timeout=30).returncode:
        pytest.skip("this machine does not let the test mount a tmpfs (mount failed)")
    try:
        yield where
    finally:
        if subprocess.run(["umount", str(where)], timeout=30).returncode != 0:
            subprocess.run(["umount", "-l", str(where)], check=True, timeout=30)  # busy: detached, gone when free
            pytest.fail(f"{where} was still in use at the test's end")


class SecondStepFillsTheDisk(LocalExecutor):
    """Runs each step here; while the second one runs, the disk it is to be saved on fills up."""

    def __init__(self, disk: Path) -> None:
        super().__init__()
        self.disk, self.steps = disk, 0

    def run_step(self, spec: EngineSpec, interrupts: Interrupts, on_snapshot=None) -> StepRun:  # type: ignore[no-untyped-def]
        run = super().run_step(spec, interrupts, on_snapshot)
        self.steps += 1
        if self.steps == 2:
            with open(self.disk / "filler", "wb") as f:
                try:
                    while True:
                        f.write(b"x" * 65536)
                        f.flush()
                except OSError as exc:
                    assert exc.errno == errno.ENOSPC
        return run


def test_a_step_measured_on_a_full_disk_is_printed_before_the_run_ends(small_disk: Path) -> None:
    scenario, run_dir = start_run(read_scenario(HERE_NO_RECOVERY, "s.toml"), small_disk, "s")
    out = io.StringIO()
    with pytest.raises(UserError) as said:
        execute(scenario, run_dir, Console(file=out, width=200), executor=SecondStepFillsTheDisk(small_disk))
    assert str(said.value).startswith("step 1 measured (above), not saved: cannot write "), said.value
    assert "No space left on device" in str(said.value) and "run.json holds what was saved before it" in str(said.value)
    run_dir.release()  # the CLI's process ends here, and its lock of the run directory with it
    printed = out.getvalue()
    assert printed.count(" ok (") == 2, printed  # both steps' numbers, the second's before the sentence
    (kept,) = RunDir(run_dir.path).load().steps  # run.json as it was: the first step
    assert kept.index == 0
