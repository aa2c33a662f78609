"""knee's command line from the tests: `knee run --json FILE` (the summary it writes, held against
schemas/knee-run.schema.json), and a mistake's one sentence."""

from __future__ import annotations

import json
import subprocess
import time
from pathlib import Path
from typing import Any

import jsonschema
import pytest

from knee.cli import main

from conftest import REPO, knee_cli

SCHEMA = json.loads((REPO / "schemas" / "knee-run.schema.json").read_text())


def run_json(
    tmp_path: Path, *args: str, timeout: float = 120
) -> tuple[dict[str, Any], subprocess.CompletedProcess[str]]:
    """`knee run -q --json FILE ARGS`, which must succeed: the summary (valid against the schema), and the process."""
    out = tmp_path / f"r{time.monotonic_ns()}.json"
    proc = knee_cli("run", "-q", "--json", str(out), *args, timeout=timeout)
    assert proc.returncode == 0, proc.stderr + proc.stdout
    doc = json.loads(out.read_text())
    jsonschema.validate(doc, SCHEMA)
    return doc, proc


def one_sentence(argv: list[str], capsys: pytest.CaptureFixture[str]) -> str:
    """`knee ARGV` in-process, which must exit 2 with one line on stderr, `knee: error: …` (a traceback would raise
    here): that line's sentence."""
    with pytest.raises(SystemExit) as exit_:
        main(argv)
    err = capsys.readouterr().err
    assert exit_.value.code == 2, err
    (line,) = err.splitlines()
    assert line.startswith("knee: error: "), line
    return line.removeprefix("knee: error: ")
