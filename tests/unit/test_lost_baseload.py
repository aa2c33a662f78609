"""A baseload whose window cannot be cut after a step (a cluster's worker holding part of it died: "the worker left
the cluster") stops the run, as docs/distributed.md says; the step just measured is saved first, partial and naming
what was lost, where it was thrown away with the error."""

from __future__ import annotations

import io
import json
from pathlib import Path

import pytest
from rich.console import Console

from knee.engine import ShardResult
from knee.errors import UserError
from knee.executor import LocalExecutor
from knee.executor.dask_background import LostPart
from knee.executor.local import Background
from knee.runner import execute, start_run
from knee.scenario import read_scenario
from knee.spec import EngineSpec

SCENARIO = """
[groups.main]
kind = "exec"
argv = ["true"]
clients = "level"
[groups.base]
kind = "exec"
argv = ["true"]
clients = 1
background = true
[sweep]
levels = [1, 2]
duration = "300ms"
settle_wait = 0
"""


class LostAfterTheFirstStep(Background):
    """A real baseload here whose second cut (the first step's window) fails as a lost Dask worker's does: all of it
    lost, or (`hand_over`) one part lost and the others' windows handed over with the error (LostPart)."""

    cuts = 0
    hand_over = False

    def cut(self) -> ShardResult:
        LostAfterTheFirstStep.cuts += 1
        window = super().cut()
        if LostAfterTheFirstStep.cuts == 2 and self.hand_over:
            raise LostPart("the baseload on Dask worker w2 did not answer cut", window)
        if LostAfterTheFirstStep.cuts == 2:
            raise UserError("the baseload's shard on tcp://127.0.0.1:1 did not answer: the worker left the cluster")
        return window

    def stop(self) -> ShardResult:
        super().stop()
        raise UserError("the baseload on Dask worker w1 did not answer stop")


class Here(LocalExecutor):
    def __init__(self, hand_over: bool = False) -> None:
        super().__init__()
        self.hand_over = hand_over

    def start_background(self, spec: EngineSpec) -> Background:
        LostAfterTheFirstStep.cuts = 0
        background = LostAfterTheFirstStep(spec)
        background.hand_over = self.hand_over
        return background


def test_the_step_measured_before_the_baseload_was_lost_is_kept(tmp_path: Path) -> None:
    scenario, run_dir = start_run(read_scenario(SCENARIO, "s.toml"), tmp_path, "s")
    # the error said is the cut's, the first, not the stop's that followed it
    with pytest.raises(UserError, match="the worker left the cluster"):
        execute(scenario, run_dir, Console(file=io.StringIO()), executor=Here())
    record = json.loads((run_dir.path / "run.json").read_text())
    assert record["status"] == "failed"
    (step,) = record["steps"]
    assert step["level"] == 1 and step["partial"], step
    assert step["lost_workers"] == [
        "the baseload's window: the baseload's shard on tcp://127.0.0.1:1 did not answer: the worker left the cluster"
    ]
    assert step["groups"]["main"]["succeeded"] > 0


def test_the_parts_of_a_baseload_that_answered_are_in_the_step(tmp_path: Path) -> None:
    # the surviving parts had been cut (their windows handed over), then thrown away with the lost part's error:
    # what they ran during the step was in neither the step nor the time between steps, though the server saw it
    scenario, run_dir = start_run(read_scenario(SCENARIO, "s.toml"), tmp_path, "s")
    with pytest.raises(UserError, match="w2 did not answer cut"):
        execute(scenario, run_dir, Console(file=io.StringIO()), executor=Here(hand_over=True))
    (step,) = json.loads((run_dir.path / "run.json").read_text())["steps"]
    assert step["partial"] and step["groups"]["base"]["succeeded"] > 0, step["groups"].keys()
