"""`knee report RUN_DIR` as its own process: regenerates the reports, and bad input is one line."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest

from knee.model import SCHEMA_VERSION

from conftest import knee_cli
from sample_records import sample_record


def knee(*args: str) -> subprocess.CompletedProcess[str]:
    return knee_cli(*args)


def _run_dir(tmp_path: Path, name: str = "run") -> Path:
    d = tmp_path / name
    d.mkdir()
    record = sample_record(levels=(1, 5, 20, 50, 100, 400, 1000))
    record.verdicts = []  # `knee report` must re-run the analysis, not reuse these
    (d / "run.json").write_text(record.model_dump_json(indent=2))
    return d


def test_report_regenerates_every_file_and_prints_the_table(tmp_path: Path) -> None:
    d = _run_dir(tmp_path)
    proc = knee("report", str(d))
    assert proc.returncode == 0, proc.stderr
    out = proc.stdout
    assert "Concurrency" in out and "Succeeded (rate)" in out
    assert "main: peaked at" in out  # the analysis' verdict, recomputed
    for name in ("report.md", "report.html", "levels.csv", "series.csv"):
        assert f"wrote {d / name}" in out
        assert (d / name).stat().st_size > 0
    assert "peaked at" in (d / "report.html").read_text()
    assert json.loads((d / "run.json").read_text())["verdicts"] == []  # run.json is left as it was


def _one_line_error(proc: subprocess.CompletedProcess[str], *words: str) -> None:
    assert proc.returncode == 2, (proc.stdout, proc.stderr)
    assert "Traceback" not in proc.stderr
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1, proc.stderr
    assert lines[0].startswith("knee: error: ")
    for w in words:
        assert w in lines[0]


def test_missing_directory(tmp_path: Path) -> None:
    _one_line_error(knee("report", str(tmp_path / "nope")), "does not exist", "nope")


def test_not_a_run_directory(tmp_path: Path) -> None:
    _one_line_error(knee("report", str(tmp_path)), "not a run directory", "run.json")
    f = tmp_path / "file.txt"
    f.write_text("x")
    _one_line_error(knee("report", str(f)), "is a file")


@pytest.mark.parametrize(
    ("content", "words"),
    [
        ('{"run_id": "x", ', ("not valid JSON", "line 1")),
        ("[1, 2]", ("JSON list",)),
        ('{"run_id": "x", "created_unix": "yesterday"}', ("does not match the run schema", "created_unix")),
        ('{"run_id": "x", "schema_version": "three"}', ("does not match the run schema", "schema_version")),
        ('{"run_id": "x", "schema_version": null}', ("does not match the run schema", "schema_version")),
        (b"\xff\xfe\x00garbage", ("not text",)),
    ],
)
def test_corrupt_run_json(tmp_path: Path, content: str | bytes, words: tuple[str, ...]) -> None:
    (tmp_path / "run.json").write_bytes(content if isinstance(content, bytes) else content.encode())
    _one_line_error(knee("report", str(tmp_path)), *words)


def test_schema_version_from_the_future(tmp_path: Path) -> None:
    d = _run_dir(tmp_path)
    data = json.loads((d / "run.json").read_text())
    data["schema_version"] = SCHEMA_VERSION + 1
    (d / "run.json").write_text(json.dumps(data))
    _one_line_error(knee("report", str(d)), f"schema_version {SCHEMA_VERSION + 1}", "upgrade knee")
