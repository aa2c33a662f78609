"""The JSON Schemas of what knee writes, generated from its models and kept in the repo:

- schemas/run.schema.json: a run directory's run.json (`RunRecord`);
- schemas/knee-run.schema.json: `knee run --json` (`RunJson`, or `RunStepsJson` for several rates).

Regenerate after changing the models:  python -m knee.report.schema
(tests/unit/test_run_schema.py fails when a file and its model drift apart).
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

from pydantic import BaseModel

from knee.model import SCHEMA_VERSION, RunRecord
from knee.report.abtext import JSON_SCHEMA_VERSION, RunJson, RunStepsJson

SCHEMAS = Path(__file__).resolve().parents[3] / "schemas"


def run_schema() -> dict[str, Any]:
    schema = RunRecord.model_json_schema(mode="serialization", by_alias=True)
    return {
        "$schema": "https://json-schema.org/draft/2020-12/schema",
        "description": f"knee run directory's run.json (RunRecord), schema_version {SCHEMA_VERSION}",
        **schema,
    }


def knee_run_schema() -> dict[str, Any]:
    """`knee run --json`: one run document, or one per rate (`rate_steps`)."""

    class KneeRunJson(BaseModel):
        value: RunJson | RunStepsJson

    schema = KneeRunJson.model_json_schema(mode="serialization", by_alias=True)
    defs = schema.pop("$defs", {})
    return {
        "$schema": "https://json-schema.org/draft/2020-12/schema",
        "$id": "knee-run.schema.json",
        "title": "knee run --json",
        "description": f"The result of one `knee run` (schema_version {JSON_SCHEMA_VERSION}): one level of load "
        "against one target, or with several rates (`--rate 100,200,400`) one document per rate in rate_steps.",
        "anyOf": schema["properties"]["value"]["anyOf"],
        "$defs": defs,
    }


def schema_text(schema: dict[str, Any]) -> str:
    return json.dumps(schema, indent=2, sort_keys=True) + "\n"


def main() -> None:
    """Write both schema files (or, with `--print run|knee-run`, print one)."""
    if len(sys.argv) > 2 and sys.argv[1] == "--print":
        print(schema_text(run_schema() if sys.argv[2] == "run" else knee_run_schema()), end="")
        return
    (SCHEMAS / "run.schema.json").write_text(schema_text(run_schema()))
    (SCHEMAS / "knee-run.schema.json").write_text(schema_text(knee_run_schema()))


if __name__ == "__main__":
    main()
