"""The run directory: everything a sweep measured, written as it goes, never lost.

    runs/<run-id>/
      scenario.toml          the scenario file as given
      run.json               the RunRecord, rewritten atomically after every step
      steps/<n>.knee         step n's engine ShardResult (lossless, mergeable)
      steps/<n>-<group>.hgrm step n's latency histogram of one group (HdrHistogram V2 deflate)
      report.md, report.html, levels.csv, series.csv   written by knee.report at the end

Every file is written to a temporary name, fsynced and renamed, so a killed knee
leaves either the old or the new version of a file, never half of one.
"""

from __future__ import annotations

import os
import re
import time
from pathlib import Path

from pydantic import ValidationError

from knee.errors import UserError
from knee.model import RunRecord


def atomic_write(path: Path, data: bytes) -> None:
    """Write `data` to `path` so that readers see the old or the new content, never a mix."""
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    with open(tmp, "wb") as f:
        f.write(data)
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, path)
    dir_fd = os.open(path.parent, os.O_RDONLY)
    try:
        os.fsync(dir_fd)
    finally:
        os.close(dir_fd)


class RunDir:
    """One run's directory."""

    def __init__(self, path: Path | str) -> None:
        self.path = Path(path)

    @property
    def record_path(self) -> Path:
        return self.path / "run.json"

    @property
    def scenario_path(self) -> Path:
        return self.path / "scenario.toml"

    @property
    def steps_dir(self) -> Path:
        return self.path / "steps"

    @classmethod
    def create(cls, out: Path, name: str) -> RunDir:
        """A new, empty run directory under `out` named `<UTC time>-<name>` (made unique)."""
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
            return cls(path)
        raise UserError(f"--out {str(out)!r} has too many runs named {stamp}-{slug}; choose another directory")

    def load(self) -> RunRecord:
        try:
            text = self.record_path.read_text()
        except OSError as exc:
            raise UserError(
                f"{str(self.path)!r} is not a run directory (no readable run.json: {exc.strerror}); "
                "pass a directory made by knee sweep"
            ) from exc
        try:
            return RunRecord.model_validate_json(text)
        except ValidationError as exc:
            raise UserError(f"{str(self.record_path)!r} is not a valid run record: {exc.errors()[0]['msg']}") from None

    def save(self, record: RunRecord) -> None:
        atomic_write(self.record_path, record.model_dump_json(indent=2).encode())

    def write_scenario(self, text: str) -> None:
        atomic_write(self.scenario_path, text.encode())

    def write_step(self, index: int, result_bytes: bytes, histograms: dict[str, bytes]) -> None:
        """Save step `index`'s engine result and each group's latency histogram."""
        atomic_write(self.steps_dir / f"{index}.knee", result_bytes)
        for group, data in histograms.items():
            atomic_write(self.steps_dir / f"{index}-{group}.hgrm", data)

    def step_result_bytes(self, index: int) -> bytes:
        return (self.steps_dir / f"{index}.knee").read_bytes()
