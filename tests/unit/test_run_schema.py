"""The JSON Schemas in schemas/ are generated from the models; damaged documents do not validate.

Files written by a real `knee sweep` and a real `knee run --json` are validated against them in
tests/integration/test_reports_real.py.
"""

from __future__ import annotations

import json
from pathlib import Path

import jsonschema
import pytest

from knee.report.schema import knee_run_schema, run_schema

from sample_records import sample_record

SCHEMAS = Path(__file__).resolve().parents[2] / "schemas"


def validator(name: str) -> jsonschema.protocols.Validator:
    schema = json.loads((SCHEMAS / name).read_text())
    cls = jsonschema.validators.validator_for(schema)
    cls.check_schema(schema)
    return cls(schema)  # type: ignore[no-any-return]


@pytest.mark.parametrize(
    ("name", "schema"), [("run.schema.json", run_schema), ("knee-run.schema.json", knee_run_schema)]
)
def test_schema_files_match_the_models(name: str, schema) -> None:  # type: ignore[no-untyped-def]
    assert json.loads((SCHEMAS / name).read_text()) == schema(), (
        f"schemas/{name} and its model drifted apart; regenerate the schemas with `python -m knee.report.schema`"
    )


@pytest.mark.parametrize(
    "damage",
    [
        lambda d: d.pop("run_id"),
        lambda d: d.update(status="exploded"),
        lambda d: d["steps"][0].pop("groups"),
        lambda d: d["steps"][0]["groups"]["main"].update(succeeded="many"),
        lambda d: d["steps"][0].update(phase="warmup"),
        lambda d: d.pop("scenario"),
    ],
)
def test_a_damaged_run_json_does_not_validate(damage) -> None:  # type: ignore[no-untyped-def]
    data = json.loads(sample_record(levels=(1, 10)).model_dump_json(by_alias=True))
    validator("run.schema.json").validate(data)
    damage(data)
    with pytest.raises(jsonschema.ValidationError):
        validator("run.schema.json").validate(data)
