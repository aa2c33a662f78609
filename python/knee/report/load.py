"""Read a run directory's run.json for `knee report` / `knee compare`; every mistake is one UserError sentence."""

from __future__ import annotations

import json
from pathlib import Path

from pydantic import ValidationError

from knee.errors import UserError
from knee.model import SCHEMA_VERSION, RunRecord

RUN_FILE = "run.json"


def load_run(run_dir: Path | str) -> RunRecord:
    """The RunRecord in `run_dir/run.json`, or a UserError naming the path, what is wrong and the fix."""
    path = Path(run_dir)
    if not path.exists():
        raise UserError(f"run directory '{path}' does not exist; pass a directory like runs/<run-id>")
    if not path.is_dir():
        raise UserError(f"'{path}' is a file, not a run directory; pass the directory that holds run.json")
    record_path = path / RUN_FILE
    if not record_path.is_file():
        raise UserError(f"'{path}' is not a run directory (it has no {RUN_FILE}); pass a directory like runs/<run-id>")
    try:
        data = json.loads(record_path.read_text(encoding="utf-8"))
    except UnicodeDecodeError:
        raise UserError(f"'{record_path}' is not text (corrupt run.json); restore it or re-run the sweep") from None
    except json.JSONDecodeError as exc:
        raise UserError(
            f"'{record_path}' is not valid JSON (line {exc.lineno}: {exc.msg}); restore it or re-run the sweep"
        ) from None
    except OSError as exc:
        raise UserError(f"cannot read '{record_path}': {exc.strerror}; check its permissions") from None
    if not isinstance(data, dict):
        raise UserError(f"'{record_path}' holds a JSON {type(data).__name__}, not a run record; restore it")
    version = data.get("schema_version")
    if isinstance(version, int) and version > SCHEMA_VERSION:
        raise UserError(
            f"'{record_path}' has schema_version {version} but this knee reads up to {SCHEMA_VERSION}; "
            "upgrade knee to read it"
        )
    try:
        return RunRecord.model_validate(data)
    except ValidationError as exc:
        err = exc.errors()[0]
        where = ".".join(str(x) for x in err["loc"]) or "(top level)"
        raise UserError(
            f"'{record_path}' does not match the run schema at {where} ({err['msg']}); "
            "it is damaged or not written by knee"
        ) from None
