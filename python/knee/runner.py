"""Run a scenario level by level, keep every result, end with a verdict and a report.

`start_run` / `resume_run` prepare the run directory and RunRecord; `execute` runs
the plan (sweep steps, stop rules, recovery probes) and `finish` analyses and
writes the reports. Each step's result is saved before the next one starts, so a
killed knee loses at most the step in progress; `--resume` replays the recorded
steps through the same stop rules and runs only what is missing.
"""

from __future__ import annotations

import os
import platform
import socket
import time
from pathlib import Path
from typing import Literal

from rich.console import Console

from knee import __version__
from knee.analysis import words
from knee.diagnose import preflight
from knee.engine import group_stats, summary
from knee.errors import UserError
from knee.executor import Interrupts, StepRun, run_step
from knee.model import LevelUnit, RunRecord, StepResult
from knee.plan import PlannedStep, engine_spec, probe_step, quick, step_seconds, sweep_plan
from knee.progress import SweepProgress
from knee.scenario import Scenario, parse_scenario, scenario_from_record
from knee.store import RunDir

Status = Literal["complete", "stopped", "aborted"]
EXIT_SLO_FAILED = 3
EXIT_INTERRUPTED = 130
COLLAPSE_RATE_SHARE = 0.5
COLLAPSE_FAILURE_RATIO = 0.5


def start_run(path: Path, out: Path, variables: dict[str, str], shorten: bool = False) -> tuple[Scenario, RunDir]:
    """Validate the scenario file, make `out/<run-id>/`, save the scenario and an empty run.json."""
    try:
        text = path.read_text()
    except OSError as exc:
        raise UserError(f"cannot read scenario {str(path)!r}: {exc.strerror}; check the path") from exc
    return start_run_text(text, path.name, out, variables, shorten)


def start_run_text(
    text: str, source: str, out: Path, variables: dict[str, str], shorten: bool = False
) -> tuple[Scenario, RunDir]:
    """As `start_run`, from the scenario's text (`source` names it in error messages)."""
    scenario = parse_scenario(text, source, variables)
    if shorten:
        scenario = quick(scenario)
    run_dir = RunDir.create(out, scenario.name or Path(source).stem)
    run_dir.write_scenario(text)
    record = RunRecord(
        run_id=run_dir.path.name,
        created_unix=time.time(),
        knee_version=__version__,
        machine=_machine(),
        scenario=scenario.record_dict(),
        measured_group=scenario.measured_group,
    )
    run_dir.save(record)
    return scenario, run_dir


def resume_run(path: Path) -> tuple[Scenario, RunDir]:
    """Reopen a run directory: partial steps are dropped (they run again), complete ones are kept."""
    run_dir = RunDir(path)
    record = run_dir.load()
    if record.status in ("complete", "stopped", "aborted"):
        raise UserError(
            f"--resume {str(path)!r}: this run already ended ({record.status}); start a new one with knee sweep"
        )
    record.steps = [s for s in record.steps if not s.partial]
    record.status = "running"
    record.verdicts = []
    run_dir.save(record)
    return scenario_from_record(record.scenario), run_dir


def execute(scenario: Scenario, run_dir: RunDir, console: Console) -> int:
    """Run what is left of the plan, then analyse and report. Returns the process exit code."""
    record = run_dir.load()
    check = preflight(_clients_by_kind(scenario), _new_connections(scenario))
    for w in check.warnings:
        console.print(f"[yellow]warning:[/] {w}", soft_wrap=True)
    console.print(f"run directory: {run_dir.path}", highlight=False, soft_wrap=True, markup=False)
    with Interrupts() as intr:
        runner = _Runner(scenario, run_dir, record, console, intr)
        runner.sweep()
        if not intr.requested and runner.status != "aborted" and scenario.recovery_enabled():
            runner.recovery()
        record.status = "interrupted" if intr.requested else runner.status
        run_dir.save(record)
        code = finish(record, run_dir, console)
    return EXIT_INTERRUPTED if record.status == "interrupted" else code


def finish(record: RunRecord, run_dir: RunDir, console: Console) -> int:
    """Verdicts into run.json, reports into the run directory, the table on the terminal."""
    from knee.analysis import analyze_run
    from knee.report import render_terminal, write_reports

    record.verdicts = analyze_run(record)
    run_dir.save(record)
    write_reports(run_dir.path, record)
    render_terminal(record, console)
    console.print(f"report: {run_dir.path / 'report.html'}", highlight=False, soft_wrap=True, markup=False)
    if any(v.slo_passed is False for v in record.verdicts):
        console.print("[red]SLO not met[/]")
        return EXIT_SLO_FAILED
    return 0


class _Runner:
    def __init__(self, scenario: Scenario, run_dir: RunDir, record: RunRecord, console: Console, intr: Interrupts):
        self.scenario = scenario
        self.run_dir = run_dir
        self.record = record
        self.console = console
        self.intr = intr
        self.group = record.measured_group
        self.status: Status = "complete"
        self.unit: LevelUnit = "rate" if scenario.rate_sweep else "clients"
        self._ran_one = False

    def sweep(self) -> None:
        plan = sweep_plan(self.scenario)
        recorded = iter([s for s in self.record.steps if s.phase == "sweep"])
        collapsed: dict[str, int | float] = {}  # label -> level where it collapsed
        stop = self.scenario.stop
        rates = self.scenario.rate_sweep
        progress = SweepProgress(self.console, len(plan), step_seconds(self.scenario), self.scenario.sweep.pause, rates)
        with progress:
            for number, planned in enumerate(plan, 1):
                if self.intr.requested:
                    return
                limit = collapsed.get(planned.label)
                if limit is not None and (planned.direction == "up" or planned.level >= limit):
                    continue
                step = next(recorded, None)
                if step is None:
                    if self._ran_one:
                        self._sleep(self.scenario.sweep.pause)
                        if self.intr.requested:
                            return
                    step = self._run(planned, number, progress)
                    if step.partial:
                        return
                at = words.load(step.level, self.unit)
                if stop.max_failure_ratio is not None and self._ratio(step) > stop.max_failure_ratio:
                    self.status = "aborted"
                    self.console.print(
                        f"[red]aborted:[/] failure ratio {self._ratio(step):.1%} at {at} is over "
                        f"stop.max_failure_ratio = {stop.max_failure_ratio}"
                    )
                    return
                if stop.at_collapse and planned.direction == "up" and self._collapsed(step):
                    collapsed[planned.label] = planned.level
                    self.status = "stopped"
                    self.console.print(f"collapse at {at}: no higher levels (stop.at_collapse)")

    def recovery(self) -> None:
        probe = probe_step(self.scenario)
        base = next(
            (s for s in self.record.steps if s.phase == "sweep" and s.level == probe.level and s.label == probe.label),
            None,
        )
        if base is None or self.group not in base.groups or base.groups[self.group].rate_hz <= 0:
            self.console.print("no recovery probe: the baseline level has no successful operations to compare with")
            return
        target = base.groups[self.group].rate_hz
        rec = self.scenario.recovery
        probes = [s for s in self.record.steps if s.phase == "recovery"]
        if probes and self._within(probes[-1], target):
            return
        spent = sum(s.elapsed_s for s in probes)
        t0 = time.monotonic()
        progress = SweepProgress(self.console, 1, None, 0.0, self.scenario.rate_sweep)
        with progress:
            while spent + (time.monotonic() - t0) < rec.limit and not self.intr.requested:
                step = self._run(probe, 0, progress)
                if step.partial or self._within(step, target):
                    return
                self._sleep(rec.pause)
        if not self.intr.requested:
            self.console.print(f"not recovered within {rec.limit:g} s (recovery.limit)")

    def _run(self, planned: PlannedStep, number: int, progress: SweepProgress) -> StepResult:
        self._ran_one = True
        spec = engine_spec(self.scenario, planned)
        progress.begin(number, planned)
        run = run_step(spec, self.intr, lambda snap: progress.update(snap, self.group))
        step = self._save(planned, run, [g["name"] for g in spec["groups"]])
        progress.end(step, self.group)
        return step

    def _save(self, planned: PlannedStep, run: StepRun, names: list[str]) -> StepResult:
        index = len(self.record.steps)
        histograms: dict[str, bytes] = {}
        for i, name in enumerate(names):
            data = run.result.histogram(i, "latency")
            if data:
                histograms[name] = data
        self.run_dir.write_step(index, run.result.to_bytes(), histograms)
        s = summary(run.result)
        step = StepResult(
            index=index,
            level=planned.level,
            label=planned.label,
            phase=planned.phase,
            direction=planned.direction,
            partial=run.partial,
            started_unix=float(s.get("started_unix") or run.started_unix),
            elapsed_s=float(s.get("elapsed_s", 0.0)),
            groups=group_stats(run.result),
            generator=run.generator,
            rate_hz=float(planned.level) if self.scenario.rate_sweep else None,
        )
        self.record.steps.append(step)
        self.run_dir.save(self.record)
        return step

    def _ratio(self, step: StepResult) -> float:
        g = step.groups.get(self.group)
        return g.failure_ratio if g else 0.0

    def _collapsed(self, step: StepResult) -> bool:
        """DESIGN.md: past the peak, rate below half the peak's or failure ratio over 50 %."""
        ups = [
            s
            for s in self.record.steps
            if s.phase == "sweep" and s.direction == "up" and s.label == step.label and self.group in s.groups
        ]
        if not ups or self.group not in step.groups:
            return False
        peak = max(ups, key=lambda s: s.groups[self.group].rate_hz)
        if step.level <= peak.level:
            return False
        g = step.groups[self.group]
        return (
            g.rate_hz < COLLAPSE_RATE_SHARE * peak.groups[self.group].rate_hz
            or g.failure_ratio > COLLAPSE_FAILURE_RATIO
        )

    def _within(self, step: StepResult, target: float) -> bool:
        g = step.groups.get(self.group)
        return g is not None and abs(g.rate_hz - target) <= self.scenario.recovery.tolerance * target

    def _sleep(self, seconds: float) -> None:
        end = time.monotonic() + seconds
        while not self.intr.requested and (left := end - time.monotonic()) > 0:
            time.sleep(min(0.1, left))


def _clients_by_kind(scenario: Scenario) -> dict[str, int]:
    top = max(scenario.levels())
    out: dict[str, int] = {}
    for g in scenario.groups.values():
        out[g.kind] = out.get(g.kind, 0) + g.client_count(top)
    return out


def _new_connections(scenario: Scenario) -> bool:
    return any(g.kind == "tcp" or getattr(g, "new_connection", False) for g in scenario.groups.values())


def _machine() -> dict[str, object]:
    return {
        "hostname": socket.gethostname(),
        "platform": platform.platform(),
        "python": platform.python_version(),
        "cpus": os.cpu_count(),
        "cores_available": len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count(),
    }
