"""The run directory: atomic writes, unique run ids, readable errors."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from knee.errors import UserError
from knee.model import RunRecord
from knee.store import RunDir, atomic_write

from sample_records import scenario


def test_atomic_write_replaces_and_leaves_no_temp_file(tmp_path: Path) -> None:
    target = tmp_path / "a" / "run.json"
    atomic_write(target, b"one")
    atomic_write(target, b"two")
    assert target.read_bytes() == b"two"
    assert [p.name for p in target.parent.iterdir()] == ["run.json"]


def test_run_dirs_are_unique_and_round_trip(tmp_path: Path) -> None:
    a = RunDir.create(tmp_path, "my sweep/1")
    b = RunDir.create(tmp_path, "my sweep/1")
    assert a.path != b.path
    assert a.path.name.endswith("my-sweep-1")
    assert a.steps_dir.is_dir()
    rec = RunRecord(run_id=a.path.name, created_unix=1.0, scenario=scenario())
    a.save(rec)
    assert json.loads(a.record_path.read_text())["run_id"] == a.path.name
    assert a.load() == rec


def test_loading_a_non_run_directory_is_one_sentence(tmp_path: Path) -> None:
    with pytest.raises(UserError, match="is not a run directory"):
        RunDir(tmp_path).load()
    (tmp_path / "run.json").write_text("{}")
    with pytest.raises(UserError, match="does not match the run schema at run_id"):
        RunDir(tmp_path).load()


def test_a_memory_run_directory_writes_nothing(tmp_path: Path) -> None:
    rd = RunDir.memory()
    rec = RunRecord(run_id="m", created_unix=1.0, scenario=scenario())
    rd.save(rec)
    rd.write_step(0, b"x", {"main": b"y"})
    assert rd.load() is rec and not rd.kept
    with pytest.raises(UserError, match="pass --out DIR"):
        _ = rd.path


def test_a_step_is_skewed_when_its_shards_started_over_5_percent_of_it_apart() -> None:
    from knee.model import StepResult

    def step(skew: float | None, elapsed: float = 10.0) -> StepResult:
        return StepResult(index=0, level=1, started_unix=0.0, elapsed_s=elapsed, groups={}, start_skew_s=skew)

    assert step(0.6).skewed and not step(0.5).skewed and not step(None).skewed and not step(1.0, elapsed=0.0).skewed
