"""run.json's JSON Schema: generated from `RunRecord`, kept in the repo as schemas/run.schema.json.

Regenerate after changing knee/model.py:  python -m knee.report.schema > schemas/run.schema.json
(tests/unit/test_run_schema.py fails when the file and the model drift apart).
"""

from __future__ import annotations

import json
from typing import Any

from knee.model import SCHEMA_VERSION, RunRecord


def run_schema() -> dict[str, Any]:
    schema = RunRecord.model_json_schema(mode="serialization")
    return {
        "$schema": "https://json-schema.org/draft/2020-12/schema",
        "description": f"knee run directory's run.json (RunRecord), schema_version {SCHEMA_VERSION}",
        **schema,
    }


def schema_text() -> str:
    return json.dumps(run_schema(), indent=2, sort_keys=True) + "\n"


if __name__ == "__main__":
    print(schema_text(), end="")
