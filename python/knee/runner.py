"""Run a scenario's plan step by step, keep every result, end with a verdict and a report.

The one runner: `knee run`, `knee sweep`, `knee soak`, `knee demo` and `knee.run()` / `knee.sweep()` come here.

`start_run` (and knee.store's `resume_run`) prepare the run directory and its RunRecord; `execute` runs the plan
(sweep steps, stop rules, recovery probes; a soak: knee.soaking) on an executor and `finish` analyses and writes the
reports. Each step's result is saved before the next one starts, so a killed knee loses at most the step in progress;
`--resume` replays the recorded steps through the same stop rules and runs only what is missing. A scenario's
background groups run in a shard of their own across every step (a baseload that never restarts), cut into a window
per step.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path
from typing import TYPE_CHECKING, Literal

from knee import fmt
from knee._engine import __version__
from knee.analysis.levels import collapse, pool
from knee.analysis.recovery import back, rate_of
from knee.analysis.steady import Settling, steady_state
from knee.engine import ShardResult, Snapshot, group_stats, summary
from knee.errors import UserError
from knee.executor import Interrupts, LocalExecutor, on_hard_exit
from knee.executor.base import BackgroundShard, Executor, StepRun, StoppedBeforeStart
from knee.machine.host import identity
from knee.machine.network import target_hosts
from knee.machine.watch import StepWatch, Watched
from knee.model import Counts, DataUse, GroupStats, RunRecord, Settle, SteadyState, StepResult
from knee.plan import (
    PlannedStep,
    background_spec,
    check_engine,
    engine_spec,
    operations_log,
    probe_step,
    quick,
    step_seconds,
    sweep_plan,
    tls_notes,
)
from knee.progress import Progress
from knee.scenario import Loaded, Scenario
from knee.searching import Searching
from knee.settle import Settler
from knee.soaking import Soaking
from knee.store import RunDir, ends_with_a_status

if TYPE_CHECKING:
    from rich.console import Console

    from knee.live import Live

Status = Literal["complete", "stopped", "aborted"]
EXIT_SLO_FAILED = 3
EXIT_INTERRUPTED = 130


def new_record(loaded: Loaded, run_id: str) -> RunRecord:
    return RunRecord(
        run_id=run_id,
        created_unix=time.time(),
        knee_version=__version__,
        machine=identity(),
        scenario=loaded.record,
        targets=target_hosts(loaded.record),
        measured_group=loaded.scenario.measured_group,
        level_unit="rate" if loaded.scenario.rate_sweep else "clients",
    )


def start_run(
    loaded: Loaded, out: Path | None, name: str, text: str | None = None, shorten: bool = False
) -> tuple[Scenario, RunDir]:
    """Make `out/<run-id>/` (or, without `out`, one that keeps nothing), save the scenario as recorded and an empty
    run.json; return the scenario as it runs. `text`: the file as given, kept without secrets. `shorten`: --quick."""
    if shorten:
        loaded = Loaded(quick(loaded.scenario), quick(loaded.record), loaded.secrets, loaded.source)
    check_engine(loaded.scenario, loaded.source)  # before the run directory: nothing was run
    run_dir = RunDir.create(out, loaded.scenario.name or name, loaded.secrets)
    run_dir.write_scenario(text if text is not None and not loaded.secrets and not shorten else loaded.record.to_toml())
    record = new_record(loaded, run_dir.path.name if run_dir.kept else time.strftime("%Y%m%d-%H%M%S-run"))
    run_dir.save(record)
    return loaded.scenario, run_dir


@dataclass
class Outcome:
    """What `execute` leaves behind: the record, the last step's engine result, the exit code."""

    record: RunRecord
    code: int
    results: list[ShardResult] = field(default_factory=list)  # every step's engine result, in order

    @property
    def interrupted(self) -> bool:
        return self.record.status == "interrupted"


@ends_with_a_status
def execute(
    scenario: Scenario,
    run_dir: RunDir,
    console: Console,
    *,
    executor: Executor | None = None,
    cluster: str | None = None,
    progress: Progress | None = None,
    show: bool = True,
    write: bool = True,
    check: Callable[[Scenario], list[str]] | None = None,
    release: Callable[[], None] | None = None,
    serve: tuple[str, int] | None = None,
    live: Live | None = None,
) -> Outcome:
    """Run what is left of the plan, then analyse and report (`show` on the terminal, `write` into the run
    directory). Steps run on `executor`, else where `cluster` or `[cluster]` says, else here; `release()` once the
    steps are over (batch jobs); `serve` (else `[serve]`): where the live page and `/metrics` are (knee.live)."""
    if executor is None and (cluster or scenario.cluster.address or scenario.cluster.jobqueue):
        from knee.executor import connect

        owned = connect(cluster, scenario.cluster, console)
        try:
            return execute(scenario, run_dir, console, executor=owned, progress=progress, show=show, write=write,
                           check=check, release=owned.close, serve=serve)  # fmt: skip
        finally:
            owned.close()
    listen = serve or scenario.serve.listen()
    if live is None and listen is not None:
        from knee.live import served

        again = partial(execute, scenario, run_dir, console, executor=executor, progress=progress, release=release)
        return served(listen, scenario, run_dir, console, partial(again, show=show, write=write, check=check))
    from knee.progress import SweepProgress

    record = run_dir.load()
    on = executor or LocalExecutor()
    where = on.describe()
    # TLS files are read here, where knee runs (a cluster's workers get their contents with the spec).
    identities, expiring = tls_notes(scenario)
    for line in ([f"cluster: {where}"] if where is not None else []) + identities:
        console.print(line, highlight=False, soft_wrap=True, markup=False)
    # The preflight runs where the load comes from: this machine, or every worker of a cluster.
    for w in [*expiring, *(check or on.preflight)(scenario)]:
        console.print(f"[yellow]warning:[/] {w}", soft_wrap=True)
    if run_dir.kept:
        console.print(f"run directory: {run_dir.path}", highlight=False, soft_wrap=True, markup=False)
    record.executor = on.name
    watch = StepWatch(scenario.monitor, console)  # the target's process tree here, its machines' exporters
    display = progress or SweepProgress(
        console, step_seconds(scenario), scenario.sweep.pause, record.rates, record.measured_group
    )
    with Interrupts() as intr:
        runner = _Runner(
            scenario, run_dir, record, console=console, intr=intr, executor=on, progress=display, monitor=watch
        )
        if live is not None:
            runner.progress = live.watch(display, scenario, record, runner.results, watch.remote)
        failed = True
        try:
            if scenario.mode == "soak":  # its groups in one shard, cut interval by interval (knee.soaking)
                runner._soak()
            else:
                runner.start_background()
                runner.sweep()
                if not intr.requested and runner.status != "aborted" and scenario.recovery_enabled():
                    runner.recovery()
            failed = False
        except StoppedBeforeStart:
            failed = False  # Ctrl-C before a cluster's step began: the run is interrupted, and reported as such
        finally:
            try:
                runner.stop_background()
            except UserError:
                if not failed:  # else the first error is the one said (a lost baseload's: its cut's)
                    raise
            finally:
                if release is not None:
                    release()
        record.status = "interrupted" if intr.requested else runner.status
        run_dir.save(record)
        code = finish(record, run_dir, console, show=show, write=write)
        run_dir.release()  # ended: it may be resumed (a failure's lock ends with the process)
    return Outcome(record, EXIT_INTERRUPTED if record.status == "interrupted" else code, runner.results)


def finish(record: RunRecord, run_dir: RunDir, console: Console, show: bool = True, write: bool = True) -> int:
    """Verdicts into run.json, reports into the run directory (`write`), the table on the terminal (`show`)."""
    if not (show or write):  # knee run without --out: nobody reads a verdict (and analysis costs start-up)
        return 0
    from rich.markup import escape

    from knee.analysis import analyze_run
    from knee.analysis.slo import not_met
    from knee.analysis.steady import as_the_rule_ended
    from knee.report import render_terminal, write_reports

    as_the_rule_ended(record)  # duration = "auto": a level's record says what the live rule decided
    record.verdicts = analyze_run(record)
    run_dir.save(record)
    if write and run_dir.kept:
        write_reports(run_dir, record)
    if show:
        render_terminal(record, console)
        if write and run_dir.kept:
            console.print(
                f"report: {run_dir.report_path('report.html')}", highlight=False, soft_wrap=True, markup=False
            )
    missed = next((v for v in record.verdicts if v.slo_passed is False), None)
    if missed is not None:
        sc = record.scenario
        if show and sc.slo is not None:  # a searched run misses it only with no capacity, or one below min_clients
            cap, broken = missed.capacity_under_slo, "slo" in missed.brackets
            why = not_met(sc.slo, cap, sc.sweep.auto_levels, record.level_unit, broken)
            console.print(f"[red]SLO not met[/]: {escape(why)}", highlight=False, soft_wrap=True)
        return EXIT_SLO_FAILED
    return 0


class _Runner(Searching, Soaking):
    def __init__(
        self,
        scenario: Scenario,
        run_dir: RunDir,
        record: RunRecord,
        *,
        console: Console,
        intr: Interrupts,
        executor: Executor,
        progress: Progress,
        monitor: StepWatch | None = None,
    ) -> None:
        self.scenario = scenario
        self.monitor = monitor
        self.run_dir = run_dir
        self.record = record
        self.console = console
        self.intr = intr
        self.executor = executor
        self.progress = progress
        self.group = record.measured_group
        self.status: Status = "complete"
        self.results: list[ShardResult] = []
        self._ran_one = False
        self._bg: BackgroundShard | None = None
        self._between: ShardResult | None = run_dir.between_result()  # a resumed run's windows add to the saved
        self._forget_bg: Callable[[], object] | None = None
        target = (record.targets or {}).get(self.group)
        self.settler = Settler(scenario, self.group, target, scenario.sweep.settle_wait, lambda: intr.requested)
        # one step (knee run): nothing after it to probe against a baseline, so none is measured
        self.settler.probing = scenario.sweep.auto_levels or len(sweep_plan(scenario)) > 1
        for s in record.steps:  # a resumed run keeps the baseline of its first step
            self.settler.learn(s)

    # ---- the continuous baseload ------------------------------------------------------------

    def start_background(self) -> None:
        spec = background_spec(self.scenario)
        if spec is not None:
            self._bg = self.executor.start_background(spec)
            self._forget_bg = on_hard_exit(self._bg.stop)  # a second Ctrl-C stops its clients too

    def _cut_between(self) -> None:
        """The baseload's window since its last cut belongs to no step (a pause, the start)."""
        if self._bg is not None:
            self._add_between(self._bg.cut())

    def _add_between(self, window: ShardResult) -> None:
        if self._between is None:
            self._between = window
        else:
            self._between.merge(window)
        for name, g in group_stats(window).items():
            self.record.between.setdefault(name, Counts()).add(g)
        self.run_dir.write_between(self._between.to_bytes())

    def stop_background(self) -> None:
        if self._bg is not None:
            self._add_between(self._bg.stop())
            self._bg = None
            if self._forget_bg is not None:
                self._forget_bg()
            self.run_dir.save(self.record)

    # ---- steps ------------------------------------------------------------------------------

    def sweep(self) -> None:
        if self.scenario.sweep.auto_levels:
            self._search()
            return
        plan = sweep_plan(self.scenario)
        # Steps recorded before a --resume, by what they measured (a dropped partial step leaves a gap).
        recorded: dict[tuple[float, str, str], StepResult] = {
            (s.level, s.label, s.direction): s for s in self.record.steps if s.phase == "sweep"
        }
        collapsed: dict[str, int | float] = {}  # label -> level where it collapsed
        stop = self.scenario.stop
        with self.progress:
            for number, planned in enumerate(plan, 1):
                if self.intr.requested:
                    return
                limit = collapsed.get(planned.label)
                if limit is not None and (planned.direction == "up" or planned.level >= limit):
                    continue
                step = recorded.pop((planned.level, planned.label, planned.direction), None)
                if step is None:
                    if self._ran_one:
                        self._sleep(self.scenario.sweep.pause)
                        if self.intr.requested:
                            return
                    step = self._run(planned, number, len(plan))
                    # Cut short by Ctrl-C: the sweep ends; a step that lost a worker is kept (partial, the worker named)
                    if step.partial and (self.intr.requested or not step.lost_workers):
                        return
                if self._abort(step):
                    return
                at = fmt.load(step.level, self.record.level_unit)
                if stop.at_collapse and planned.direction == "up" and self._collapsed(step):
                    collapsed[planned.label] = planned.level
                    self.status = "stopped"
                    self.console.print(f"collapse at {at}: no higher levels (stop.at_collapse)")

    def _abort(self, step: StepResult) -> bool:
        """stop.max_failure_ratio: the step failed too much, the sweep ends (aborted)."""
        most = self.scenario.stop.max_failure_ratio
        ratio = self._ratio(step)
        if most is None or ratio <= most:
            return False
        self.status = "aborted"
        at = fmt.load(step.level, self.record.level_unit)
        self.console.print(
            f"[red]aborted:[/] failure ratio {fmt.pct(ratio)} at {at} is over stop.max_failure_ratio = {most}"
        )
        return True

    def recovery(self) -> None:
        probe = probe_step(self.scenario)
        base = next(
            (s for s in self.record.steps if s.phase == "sweep" and s.level == probe.level and s.label == probe.label),
            None,
        )
        if base is None or self.group not in base.groups or rate_of(base, self.group) <= 0:
            self.console.print("no recovery probe: the baseline level has no successful operations to compare with")
            return
        target = rate_of(base, self.group)
        rec = self.scenario.recovery
        probes = [s for s in self.record.steps if s.phase == "recovery"]
        if probes and self._within(probes[-1], target):
            return
        spent = sum(s.elapsed_s for s in probes)
        t0 = time.monotonic()
        with self.progress:
            while spent + (time.monotonic() - t0) < rec.limit and not self.intr.requested:
                step = self._run(probe, 0, 1)
                if step.partial or self._within(step, target):
                    return
                out = step.groups[self.group].ran_out if self.group in step.groups else None
                if out is not None:
                    self.console.print(f"recovery not probed further: the rows of {out} ran out")
                    return
                self._sleep(rec.pause)
        if not self.intr.requested:
            # the verdict's "did not recover after N s" counts from the load's end, the limit the probes' time
            self.console.print(f"not recovered within recovery.limit ({fmt.duration(rec.limit)} of probes)")

    def _run(self, planned: PlannedStep, number: int, total: int, repeat_of: int | None = None) -> StepResult:
        self._ran_one = True
        spec = engine_spec(self.scenario, planned, continuous=True, used=self.record.rows_used())
        spec = spec.model_copy(update={"operations_log": operations_log(self.scenario, self.record.next_index())})
        settled = self.settler.before(planned, self.console, again=repeat_of is not None)
        self.progress.begin(number, total, planned)
        self._cut_between()
        settle = self._settling(planned)
        if self.monitor is not None:
            self.monitor.start()
        try:
            run = self.executor.run_step(spec, self.intr, settle or self.progress.update)
        finally:
            watched = self.monitor.stop() if self.monitor is not None else (None, [])
        if self._bg is not None:
            try:
                window = self._bg.cut()
                run.background_lead_s = max(0.0, run.result.started_unix - window.started_unix)
                run.result.merge(window)
            except UserError as exc:  # a baseload's part is lost (its worker with it); the step measured is not
                if (window := getattr(exc, "window", None)) is not None:  # the parts that answered: their windows
                    run.result.merge(window)
                run.partial, run.lost = True, [*run.lost, f"the baseload's window: {exc}"]
                self._save(planned, run, watched, settled, repeat_of)
                raise
        step = self._save(planned, run, watched, settled, repeat_of)
        self.progress.end(step)
        return step

    def _settling(self, planned: PlannedStep) -> Callable[[Snapshot], bool] | None:
        """duration = "auto" (a sweep step whose measured group runs for the sweep's duration): the live view, and
        True once the level has settled, which ends the step."""
        if not self._auto_duration(planned):
            return None
        sweep = self.scenario.sweep
        settling = Settling(sweep.duration_bounds()[0], sweep.settle)

        def on_snapshot(snapshot: Snapshot) -> bool:
            self.progress.update(snapshot)
            measured = snapshot.group(self.group)
            return measured is not None and settling.add(snapshot.elapsed_s, measured.succeeded)

        return on_snapshot

    def _auto_duration(self, planned: PlannedStep) -> bool:
        """duration = "auto" decides when this step ends: a sweep step whose measured group runs for the sweep's
        duration (no stop of its own, not a baseload)."""
        g = self.scenario.groups[self.group]
        own_stop = g.duration is not None or g.per_client is not None or g.total is not None
        return self.scenario.sweep.duration == "auto" and planned.phase == "sweep" and not own_stop and not g.background

    def _steady(self, planned: PlannedStep, groups: dict[str, GroupStats]) -> SteadyState | None:
        g = groups.get(self.group)
        if g is None or planned.phase != "sweep":
            return None
        return steady_state(g, self.scenario.sweep.settle, auto=self._auto_duration(planned))

    def _save(
        self,
        planned: PlannedStep,
        run: StepRun,
        watched: Watched = (None, []),
        settle: Settle | None = None,
        repeat_of: int | None = None,
    ) -> StepResult:
        index = self.record.next_index()
        used = self.record.rows_used()
        s = summary(run.result, self.run_dir.secrets)
        histograms = {g.name: data for i, g in enumerate(s.groups) if (data := run.result.histogram(i, "latency"))}
        groups = {g.name: GroupStats.from_engine(g, s.interval_s) for g in s.groups}
        step = StepResult(
            index=index,
            level=planned.level,
            label=planned.label,
            phase=planned.phase,
            direction=planned.direction,
            partial=run.partial or bool(run.lost) or bool(s.lost),
            # many machines: the earliest shard's start on the driver's clock (the merged result's is a worker's own)
            started_unix=run.started_unix if run.workers else (s.started_unix or run.started_unix),
            elapsed_s=s.elapsed_s,
            groups=groups,
            reason=planned.reason,
            steady=self._steady(planned, groups),
            generator=run.generator,
            counters=run.counters,
            target=watched[0],
            remote=watched[1],
            workers=run.workers,
            start_skew_s=run.start_skew_s,
            lost_workers=[*run.lost, *s.lost],  # workers, and parts of knee that failed (a defect of knee)
            settle=settle,
            repeat_of=repeat_of,
            data=[DataUse.from_engine(d, run.first_out.get(d.name)) for d in s.data],
            soak=run.soak,
            background_lead_s=run.background_lead_s,
            spec=engine_spec(self.record.scenario, planned, record=True, used=used).model_dump(mode="json"),
        )
        self.record.steps.append(step)
        self.results.append(run.result)
        try:
            self.run_dir.write_step(index, run.result.to_bytes(), histograms)
            self.run_dir.save(self.record)
        except UserError as exc:  # a full disk: what was measured is said before the run ends, not lost unsaid
            self.progress.end(step)
            raise UserError(
                f"step {index} measured (above), not saved: {exc}; run.json holds what was saved before it"
            ) from None
        return step

    def _ratio(self, step: StepResult) -> float:
        g = step.groups.get(self.group)
        return g.failure_ratio if g else 0.0

    def _collapsed(self, step: StepResult) -> bool:
        """The verdict's definition of collapse (analysis.levels.collapse), on the levels measured so far."""
        rows = pool([s for s in self.record.steps if s.label == step.label], self.group, "up")
        row = next((r for r in rows if r.level == step.level), None)
        if not rows or row is None:
            return False
        peak = max(rows, key=lambda r: r.rate)
        return collapse(row, peak, fmt.rate, fmt.pct) is not None

    def _within(self, step: StepResult, target: float) -> bool:
        ok = self.group in step.groups
        return ok and back(rate_of(step, self.group), target, self.scenario.recovery.tolerance)

    def _sleep(self, seconds: float) -> None:
        end = time.monotonic() + seconds
        while not self.intr.requested and (left := end - time.monotonic()) > 0:
            time.sleep(min(0.1, left))
