"""schemas/run.schema.json: generated from RunRecord, and a real run.json validates against it."""

from __future__ import annotations

import json
from pathlib import Path

import jsonschema
import pytest

from knee.model import GroupStats, RunRecord, StepResult
from knee.report.sample import sample_record
from knee.report.schema import run_schema

SCHEMA = Path(__file__).resolve().parents[2] / "schemas" / "run.schema.json"

# one entry of the engine summary's `groups` list, as docs/engine-spec.md shows it
ENGINE_GROUP = {
    "name": "main",
    "kind": "http",
    "clients": 2,
    "succeeded": 1000,
    "failed": 3,
    "hung": 1,
    "elapsed_s": 10.0,
    "failures": {"status": 3},
    "error_samples": {"status": ["status 503 from http://127.0.0.1:1/x"]},
    "latency_us": {"count": 1003, "min": 10, "mean": 21.0, "stdev": 3.0, "p50": 20, "p90": 25, "p95": 26, "p99": 30},
    "percentiles": [[50.0, 20], [99.0, 30], [100.0, 50]],
    "series": [{"t": 0.0, "succeeded": 100, "failed": 0, "hung": 0}],
    "per_client": [500, 500],
    "hung_clients": [1],
}


def _validator() -> jsonschema.protocols.Validator:
    schema = json.loads(SCHEMA.read_text())
    cls = jsonschema.validators.validator_for(schema)
    cls.check_schema(schema)
    return cls(schema)  # type: ignore[no-any-return]


def test_schema_file_matches_the_model() -> None:
    assert json.loads(SCHEMA.read_text()) == run_schema(), (
        "schemas/run.schema.json and RunRecord drifted apart; regenerate it with "
        "`python -m knee.report.schema > schemas/run.schema.json`"
    )


def test_a_real_run_json_validates() -> None:
    record = sample_record()
    step = StepResult(
        index=len(record.steps),
        level=2,
        started_unix=1.0,
        elapsed_s=10.0,
        groups={"main": GroupStats.from_engine(ENGINE_GROUP)},
    )
    record.steps.append(step)
    data = json.loads(record.model_dump_json(indent=2))
    _validator().validate(data)
    assert RunRecord.model_validate(data) == record


@pytest.mark.parametrize(
    "damage",
    [
        lambda d: d.pop("run_id"),
        lambda d: d.update(status="exploded"),
        lambda d: d["steps"][0].pop("groups"),
        lambda d: d["steps"][0]["groups"]["main"].update(succeeded="many"),
        lambda d: d["steps"][0].update(phase="warmup"),
    ],
)
def test_a_damaged_run_json_does_not_validate(damage) -> None:  # type: ignore[no-untyped-def]
    data = json.loads(sample_record(levels=(1, 10)).model_dump_json())
    damage(data)
    with pytest.raises(jsonschema.ValidationError):
        _validator().validate(data)
