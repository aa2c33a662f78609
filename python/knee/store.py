"""The run directory: everything a run measured, written as it goes, never lost.

    runs/<run-id>/
      scenario.toml          the scenario as run (secrets as ${placeholders})
      run.json               the RunRecord, rewritten atomically after every step
      steps/<n>.knee         step n's engine ShardResult (lossless, mergeable)
      steps/<n>-<group>.hgrm step n's latency histogram of one group (HdrHistogram V2 deflate)
      steps/between.knee     a continuous baseload's operations outside the steps
      report.md, report.html, levels.csv, series.csv   the reports, written at the end

`RunDir` is the only code that knows these paths. Every file is written to a temporary name,
fsynced and renamed, so a killed knee leaves either the old or the new version of a file, never half
of one; every text goes through the run's `Secrets.scrub` (knee.scenario.secrets) first.
`RunDir.memory()` is a run directory that writes nothing (a `knee run` without `--out`).
"""

from __future__ import annotations

import contextlib
import fcntl
import functools
import json
import os
import re
import time
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Concatenate, ParamSpec, TypeVar

from pydantic import ValidationError

from knee.errors import UserError
from knee.model import SCHEMA_VERSION, RunRecord
from knee.scenario import Scenario, scenario_from_record
from knee.scenario.secrets import NO_SECRETS, Secrets

if TYPE_CHECKING:
    from knee.engine import ShardResult

REPORT_FILES = ("report.md", "report.html", "levels.csv", "series.csv")
S = TypeVar("S")
P = ParamSpec("P")
T = TypeVar("T")


def ends_with_a_status(run: Callable[Concatenate[S, RunDir, P], T]) -> Callable[Concatenate[S, RunDir, P], T]:
    """`run(scenario, run_dir, …)`, and when it ends by an exception (a port taken for --serve, a cluster not
    reached, Ctrl-C before its steps), its run directory's status is final all the same (`RunDir.end_early`)."""

    @functools.wraps(run)
    def ended(scenario: S, run_dir: RunDir, /, *args: P.args, **kwargs: P.kwargs) -> T:
        try:
            return run(scenario, run_dir, *args, **kwargs)
        except BaseException as exc:
            run_dir.end_early(interrupted=isinstance(exc, KeyboardInterrupt))
            raise

    return ended


def atomic_write(path: Path, data: bytes) -> None:
    """Write `data` to `path` so that readers see the old or the new content, never a mix."""
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        with open(tmp, "wb") as f:
            f.write(data)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException as exc:
        tmp.unlink(missing_ok=True)  # a full disk or an interrupt leaves the old file and no half-written one
        if isinstance(exc, OSError):
            said = f"cannot write {str(path)!r} ({exc.strerror})"
            raise UserError(f"{said}; the file keeps what it held before") from None
        raise
    dir_fd = os.open(path.parent, os.O_RDONLY)
    try:
        os.fsync(dir_fd)
    finally:
        os.close(dir_fd)


def write_text(path: Path, text: str, secrets: Secrets) -> None:
    """Write a text file knee produced (a report, the scenario) atomically, `secrets` scrubbed."""
    atomic_write(path, secrets.scrub(text).encode())


def write_json(path: Path, text: str, secrets: Secrets) -> None:
    """Write JSON knee produced (indented by 2) atomically, `secrets` scrubbed inside its strings."""
    atomic_write(path, secrets.scrub_json(text, indent=2).encode())


class RunDir:
    """One run's directory (or, from `memory()`, none: nothing is written). `secrets`: the run's, scrubbed
    from every text it writes (none when the directory is only read, or re-reported by `knee report`)."""

    def __init__(self, path: Path | str | None, secrets: Secrets = NO_SECRETS) -> None:
        self._path = Path(path) if path is not None else None
        self.secrets = secrets
        self._record: RunRecord | None = None  # a memory run directory's record
        self.lock: int | None = None  # the held lock's descriptor (`hold`): this process runs the directory

    @classmethod
    def memory(cls, secrets: Secrets = NO_SECRETS) -> RunDir:
        """A run directory that keeps nothing on disk (its record lives in memory); `secrets`: the run's, scrubbed
        from its steps' records all the same (they are printed)."""
        return cls(None, secrets)

    def release(self) -> None:
        """Let go of the run directory's lock (`hold`)."""
        if self.lock is not None and _HELD.get(self.path.resolve()) == self.lock:
            del _HELD[self.path.resolve()]
            os.close(self.lock)
        self.lock = None

    @property
    def kept(self) -> bool:
        return self._path is not None

    @property
    def path(self) -> Path:
        if self._path is None:
            raise UserError("this run keeps no run directory; pass --out DIR to keep one")
        return self._path

    @property
    def record_path(self) -> Path:
        return self.path / "run.json"

    @property
    def scenario_path(self) -> Path:
        return self.path / "scenario.toml"

    @property
    def steps_dir(self) -> Path:
        return self.path / "steps"

    def report_path(self, name: str) -> Path:
        """One of REPORT_FILES."""
        return self.path / name

    def step_path(self, index: int) -> Path:
        return self.steps_dir / f"{index}.knee"

    def hgrm_path(self, index: int, group: str) -> Path:
        return self.steps_dir / f"{index}-{group}.hgrm"

    @property
    def between_path(self) -> Path:
        return self.steps_dir / "between.knee"

    @classmethod
    def create(cls, out: Path | None, name: str, secrets: Secrets = NO_SECRETS) -> RunDir:
        """A new, empty run directory under `out` named `<UTC time>-<name>` (made unique); without `out`, one that
        keeps nothing (`memory`)."""
        if out is None:
            return cls.memory(secrets)
        slug = re.sub(r"[^A-Za-z0-9_-]+", "-", name).strip("-")[:40] or "run"
        stamp = time.strftime("%Y%m%d-%H%M%S", time.gmtime())
        try:
            out.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            raise UserError(f"--out {str(out)!r} cannot be created ({exc.strerror}); choose another directory") from exc
        for i in range(1000):
            path = out / (f"{stamp}-{slug}" + (f"-{i}" if i else ""))
            try:
                path.mkdir()
            except FileExistsError:
                continue
            (path / "steps").mkdir()
            run_dir = cls(path, secrets)
            run_dir.lock = hold(path)
            return run_dir
        raise UserError(f"--out {str(out)!r} has too many runs named {stamp}-{slug}; choose another directory")

    def load(self) -> RunRecord:
        """The RunRecord in run.json, or a UserError naming the path, what is wrong and the fix."""
        if not self.kept and self._record is not None:
            return self._record
        path = self.path
        if not path.exists():
            raise UserError(f"run directory '{path}' does not exist; pass a directory like runs/<run-id>")
        if not path.is_dir():
            raise UserError(f"'{path}' is a file, not a run directory; pass the directory that holds run.json")
        if not self.record_path.is_file():
            raise UserError(
                f"'{path}' is not a run directory (it has no run.json); pass a directory like runs/<run-id>"
            )
        try:
            data = json.loads(self.record_path.read_text(encoding="utf-8"))
        except UnicodeDecodeError:
            raise UserError(f"'{self.record_path}' is not text (corrupt run.json); restore it or re-run") from None
        except json.JSONDecodeError as exc:
            raise UserError(
                f"'{self.record_path}' is not valid JSON (line {exc.lineno}: {exc.msg}); restore it or re-run"
            ) from None
        except OSError as exc:
            raise UserError(f"cannot read '{self.record_path}': {exc.strerror}; check its permissions") from None
        if not isinstance(data, dict):
            raise UserError(f"'{self.record_path}' holds a JSON {type(data).__name__}, not a run record; restore it")
        version = data.get("schema_version")
        if isinstance(version, int) and version > SCHEMA_VERSION:
            raise UserError(
                f"'{self.record_path}' has schema_version {version} but this knee reads up to {SCHEMA_VERSION}; "
                "upgrade knee to read it"
            )
        try:
            return RunRecord.model_validate(data)
        except ValidationError as exc:
            err = exc.errors()[0]
            where = ".".join(str(x) for x in err["loc"]) or "(top level)"
            raise UserError(
                f"'{self.record_path}' does not match the run schema at {where} ({err['msg']}); "
                "it is damaged or not written by knee"
            ) from None

    def end_early(self, interrupted: bool = False) -> None:
        """A run that stopped before it could say how it ended (an error, Ctrl-C before its steps): its status is
        "failed" (or "interrupted") rather than "running" for ever. A status already final is kept."""
        with contextlib.suppress(UserError):  # a run.json that cannot be read has nothing to end
            record = self.load()
            if record.status == "running":
                record.status = "interrupted" if interrupted else "failed"
                self.save(record)

    def save(self, record: RunRecord) -> None:
        self._record = None if self.kept else record
        if self.kept:
            write_json(self.record_path, record.model_dump_json(indent=2, by_alias=True), self.secrets)

    def write_scenario(self, text: str) -> None:
        if self.kept:
            write_text(self.scenario_path, text, self.secrets)

    def scenario_text(self) -> str | None:
        """The scenario file as run, if the directory has one."""
        if self.kept and self.scenario_path.is_file():
            return self.scenario_path.read_text(encoding="utf-8", errors="replace")
        return None

    def write_step(self, index: int, result_bytes: bytes, histograms: dict[str, bytes]) -> None:
        """Save step `index`'s engine result and each group's latency histogram."""
        if not self.kept:
            return
        atomic_write(self.step_path(index), self._scrubbed(result_bytes))
        for group, data in histograms.items():
            atomic_write(self.hgrm_path(index, group), data)

    def between_result(self) -> ShardResult | None:
        """The baseload's windows between steps as saved (a resumed run adds to them, where it wrote over them)."""
        if not self.kept or not self.between_path.is_file():
            return None
        from knee.engine import ShardResult

        return ShardResult.from_bytes(self.between_path.read_bytes())

    def write_between(self, result_bytes: bytes) -> None:
        if self.kept:
            atomic_write(self.between_path, self._scrubbed(result_bytes))

    def _scrubbed(self, result_bytes: bytes) -> bytes:
        """An engine result as saved: its text (JSON) with the run's secret values scrubbed, as a failure's sample
        may quote what the service or command was sent."""
        if not self.secrets:
            return result_bytes
        return self.secrets.scrub_json(result_bytes.decode()).encode()

    def step_result_bytes(self, index: int) -> bytes:
        return self.step_path(index).read_bytes()

    def histogram(self, index: int, group: str) -> bytes | None:
        """Step `index`'s latency histogram of `group` as saved (HdrHistogram V2 deflate); None when there is none."""
        if not self.kept:
            return None
        try:
            return self.hgrm_path(index, group).read_bytes()
        except OSError:
            return None

    def write_report(self, name: str, text: str) -> Path:
        path = self.report_path(name)
        write_text(path, text, self.secrets)
        return path


def load_run(path: Path | str) -> RunRecord:
    """The RunRecord of a run directory (`knee report`, `knee compare`)."""
    return RunDir(path).load()


LOCK_FILE = ".lock"


_HELD: dict[Path, int] = {}  # the run directories this process holds, by resolved path: their locks' descriptors


def hold(path: Path) -> int:
    """Lock run directory `path` for this process (its descriptor; the lock ends with the process, or `release`):
    one knee at a time runs it. A second `--resume` of a run still going loaded the service twice, each measuring
    the other's load, and both wrote run.json and steps/N.knee (the last writer's steps kept). Refused in one
    sentence. This process holding it already (the Python API resuming what it ran): the same lock."""
    key = path.resolve()
    if key in _HELD:
        return _HELD[key]
    lock = path / LOCK_FILE
    try:
        fd = os.open(lock, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o644)
    except OSError as exc:
        raise UserError(f"{str(path)!r} cannot be locked ({exc.strerror}): is the run directory writable?") from None
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        pid = os.read(fd, 32).decode(errors="replace").strip() or "?"
        os.close(fd)
        raise UserError(
            f"{str(path)!r} is being run by another knee (pid {pid}): let it end, or stop it (Ctrl-C keeps its "
            "steps), then --resume"
        ) from None
    os.ftruncate(fd, 0)
    os.write(fd, f"{os.getpid()}\n".encode())
    _HELD[key] = fd
    return fd


def resume_run(
    path: Path, secrets: dict[str, str] | None = None, prepare: Callable[[Scenario], None] | None = None
) -> tuple[Scenario, RunDir]:
    """Reopen a run directory: partial steps are dropped (they run again), complete ones are kept. `prepare` (the
    command's run options) sees the scenario before the run is marked running again, and may refuse it."""
    run_dir = RunDir(path)
    record = run_dir.load()
    lock = hold(path)
    if record.scenario.mode == "soak":  # its trends are of one unbroken run
        raise UserError(f"--resume {str(path)!r}: a soak is not continued; `knee report {path}` reports what it saved")
    if record.status in ("complete", "stopped", "aborted") and not any(s.partial for s in record.steps):
        raise UserError(
            f"--resume {str(path)!r}: this run already ended ({record.status}); start a new one with knee sweep"
        )
    loaded = scenario_from_record(record.scenario, secrets)
    if prepare is not None:
        prepare(loaded.scenario)
    run_dir = RunDir(path, loaded.secrets)
    run_dir.lock = lock
    for d in (d for s in record.steps if s.partial for d in s.data):  # the rows the dropped steps sent are spent
        record.rows_spent[d.name] = record.rows_spent.get(d.name, 0) + d.used
    record.steps = [s for s in record.steps if not s.partial]
    record.status = "running"
    record.verdicts = []
    run_dir.save(record)
    return loaded.scenario, run_dir
