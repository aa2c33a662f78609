"""The record's shapes: the outcome counts are defined once, the engine mirror stays strict, and a step keeps
the engine spec it ran, so `knee run`'s report reads the record rather than the planner."""

from __future__ import annotations

import subprocess
import sys

import pytest
from pydantic import ValidationError

from knee.analysis.levels import LevelRow
from knee.engine import GroupSnapshot
from knee.model import Counts, GroupStats, Outcomes, StepResult, WorkerShare
from knee.model.engine_summary import EngineGroup
from knee.plan import PlannedStep, engine_spec
from knee.report import abtext

from sample_records import make_group, scenario

SHAPES = [Counts, GroupStats, WorkerShare, LevelRow, EngineGroup, GroupSnapshot]


@pytest.mark.parametrize("shape", SHAPES, ids=lambda s: s.__name__)
def test_every_shape_with_outcome_counts_reuses_the_one_definition(shape: type[Outcomes]) -> None:
    assert issubclass(shape, Outcomes)
    own = {
        name
        for klass in shape.__mro__
        if klass not in Outcomes.__mro__
        for name in vars(klass).get("__annotations__", {})
    }
    assert not own & set(Outcomes.model_fields), f"{shape.__name__} declares the outcome counts again"


def test_counts_add_and_the_accounting_identity() -> None:
    c = Counts()
    c.add(
        GroupStats(
            name="g", clients=1, succeeded=5, failed=2, hung=1, abandoned=1, warmup_ops=3, elapsed_s=1.0, rate_hz=5.0
        )
    )
    c.add(Outcomes(succeeded=1))
    assert (c.succeeded, c.failed, c.hung, c.abandoned, c.warmup_ops) == (6, 2, 1, 1, 3)
    assert c.started == 10 and c.total == 9 and c.failure_ratio == pytest.approx(3 / 9)


def test_the_engine_mirror_requires_every_field_even_a_shared_one() -> None:
    snap = {
        "name": "g",
        "succeeded": 1,
        "failed": 0,
        "hung": 0,
        "abandoned": 0,
        "in_flight": 2,
        "late": 0,
        "lagged": 0,
        "p50_us": 1,
        "p99_us": 2,
        "failed_by_class": {},
    }
    assert GroupSnapshot.model_validate(snap).started == 1
    with pytest.raises(ValidationError, match="missing abandoned"):
        GroupSnapshot.model_validate({k: v for k, v in snap.items() if k != "abandoned"})


def test_a_step_keeps_its_spec_and_the_run_report_reads_it() -> None:
    sc = scenario(levels=(3,))
    spec = engine_spec(sc, PlannedStep(3)).model_dump(mode="json")
    step = StepResult(
        index=0, level=3, started_unix=0.0, elapsed_s=10.0, groups={"main": make_group("main", 3, 2.0)}, spec=spec
    )
    assert abtext.to_json(sc, step).spec == spec
    assert abtext.target(sc, "main", step) == "GET http://127.0.0.1:8080/obj"
    old = StepResult.model_validate({k: v for k, v in step.model_dump(mode="json").items() if k != "spec"})
    assert old.spec is None and abtext.to_json(sc, old).spec == {}


def test_the_run_report_does_not_import_the_planner() -> None:
    code = "import sys, knee.report.abtext; print(sorted(m for m in sys.modules if m in ('knee.plan', 'knee.runner')))"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "[]"
