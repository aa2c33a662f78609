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


def test_a_write_that_fails_is_one_sentence_and_leaves_no_temp_file(tmp_path: Path) -> None:
    """A write that cannot finish (here its name is a directory's; a full disk the same) leaves no half-written
    temp file beside it and says which file, where it left .run.json.<pid>.tmp and a traceback."""
    (tmp_path / "run.json").mkdir()
    with pytest.raises(UserError, match=r"cannot write '.*/run.json' \(Is a directory\); the file keeps what it held"):
        atomic_write(tmp_path / "run.json", b"two")
    assert [p.name for p in tmp_path.iterdir()] == ["run.json"]


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


def test_a_resumed_run_adds_to_the_baseload_windows_it_saved(tmp_path: Path) -> None:
    """between.knee holds the baseload's windows between steps; a resumed run's runner starts from them (it began with
    none and wrote the file over: run.json counted both sessions' windows, the file one)."""
    import io

    from rich.console import Console

    from knee import spec as ks
    from knee.engine import group_stats
    from knee.executor import Interrupts, LocalExecutor
    from knee.executor.local import run_step
    from knee.progress import SweepProgress
    from knee.runner import _Runner, start_run
    from knee.scenario import read_scenario
    from knee.store import resume_run

    text = '[groups.main]\nkind = "exec"\nargv = ["true"]\n[sweep]\nlevels = [1, 2]\nduration = "1s"\n'
    _, run_dir = start_run(read_scenario(text, "s.toml"), tmp_path, "s")
    assert run_dir.between_result() is None
    spec = ks.EngineSpec(
        groups=[ks.GroupSpec(name="g", clients=1, stop=ks.Total(total=3), client=ks.ExecClient(argv=["true"]))]
    )
    run_dir.write_between(run_step(spec, Interrupts()).result.to_bytes())
    scenario, again = resume_run(run_dir.path)
    console = Console(file=io.StringIO())
    record = again.load()
    progress = SweepProgress(console, 1.0, 0.0, record.rates, record.measured_group)
    runner = _Runner(
        scenario, again, record, console=console, intr=Interrupts(), executor=LocalExecutor(), progress=progress
    )
    assert runner._between is not None and group_stats(runner._between)["g"].succeeded == 3


def test_a_resumed_run_does_not_send_again_the_rows_its_dropped_step_sent(tmp_path: Path) -> None:
    """The step cut short by Ctrl-C runs again on --resume: its queue starts after the rows that step sent, not at
    the same position (40 one-time tokens went out twice)."""
    import io

    from rich.console import Console

    from knee.executor import Interrupts, LocalExecutor
    from knee.model import DataUse, StepResult
    from knee.progress import SweepProgress
    from knee.runner import _Runner, start_run
    from knee.scenario import read_scenario
    from knee.store import resume_run

    (tmp_path / "ids.csv").write_text("id\n" + "".join(f"{i}\n" for i in range(100)))
    text = f'[[data]]\nname = "ids"\nfile = "{tmp_path / "ids.csv"}"\norder = "queue"\n'
    text += '[groups.main]\nkind = "exec"\nargv = ["true", "${ids.id}"]\n[sweep]\nlevels = [1, 2]\nduration = "1s"\n'
    _, run_dir = start_run(read_scenario(text, "s.toml"), tmp_path, "s")
    record = run_dir.load()
    use = [DataUse(name="ids", rows=100, available=100, taken=10, used=10)]
    for i, partial in ((0, False), (1, True)):
        record.steps.append(
            StepResult(index=i, level=i + 1, partial=partial, started_unix=0, elapsed_s=1, groups={}, data=use)
        )
    run_dir.save(record)
    scenario, again = resume_run(run_dir.path)
    record = again.load()
    assert record.rows_spent == {"ids": 10} and len(record.steps) == 1
    console = Console(file=io.StringIO())
    progress = SweepProgress(console, 1.0, 0.0, record.rates, record.measured_group)
    runner = _Runner(
        scenario, again, record, console=console, intr=Interrupts(), executor=LocalExecutor(), progress=progress
    )
    assert runner.record.rows_used() == {"ids": 20}


def test_a_resumed_run_gets_its_run_options_and_a_refused_one_leaves_it_as_it_was(tmp_path: Path) -> None:
    """`knee sweep --resume DIR --ship --cluster …`: the options apply to the scenario that runs (checking them on a
    copy first had left --ship off a resumed run), and one refused leaves the run's status as it was, not "running"."""
    from knee.commands.options import apply_run_options
    from knee.runner import start_run
    from knee.scenario import read_scenario
    from knee.store import resume_run

    text = '[groups.main]\nkind = "exec"\nargv = ["true"]\n[sweep]\nlevels = [1, 2]\nduration = "1s"\n'
    _, run_dir = start_run(read_scenario(text, "s.toml"), tmp_path, "s")
    record = run_dir.load()
    record.status = "interrupted"
    run_dir.save(record)
    opts = {"ship": True, "ship_wheel": None, "cluster": None}
    with pytest.raises(UserError, match="--ship installs knee on a cluster's workers"):
        resume_run(run_dir.path, prepare=lambda s: apply_run_options(s, opts))
    assert RunDir(run_dir.path).load().status == "interrupted"
    opts["cluster"] = "tcp://127.0.0.1:8786"
    scenario, again = resume_run(run_dir.path, prepare=lambda s: apply_run_options(s, opts))
    assert scenario.cluster.ship is True and again.load().status == "running"
