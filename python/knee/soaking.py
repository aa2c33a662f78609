"""The soak's loop (mode = "soak", `knee soak`): one level held for the whole duration, written to disk interval by
interval, so that a knee killed mid-soak loses at most its last interval (docs/load-shapes.md "Soak").

The soak's groups run in one shard that lasts until stopped (knee.plan.soak_spec): every interval the runner cuts it
(`BackgroundShard.cut`, the window since the last cut; the clients and their connections go on), appends the window
to the whole (`ShardResult.follow`: the counts add, the series goes on), samples the memory of the monitored target
and of knee, and saves the soak so far as the run's one step, marked partial until its end. At the end it stops the
shard: operations in flight are abandoned, as at any step's end.

`Soaking` is a part of the runner (knee.runner._Runner): it uses the runner's executor, run directory and console.
"""

from __future__ import annotations

import time
from typing import TYPE_CHECKING

import psutil

from knee.engine import ShardResult, Snapshot, group_stats
from knee.executor import on_hard_exit
from knee.executor.base import StepRun
from knee.machine.cpu import CpuMeter
from knee.model import SoakSample, StepResult
from knee.plan import PlannedStep, soak_spec, sweep_plan, sweep_seconds

if TYPE_CHECKING:
    from knee.executor import Interrupts
    from knee.executor.base import Executor
    from knee.machine.watch import StepWatch, Watched
    from knee.model import RunRecord
    from knee.progress import Progress
    from knee.scenario import Scenario
    from knee.store import RunDir

MB = 1e6  # as the target monitor counts (TargetStats.rss_mb_*)


class Soaking:
    """The soak's loop, mixed into the runner."""

    scenario: Scenario
    record: RunRecord
    run_dir: RunDir
    intr: Interrupts
    executor: Executor
    progress: Progress
    monitor: StepWatch | None
    results: list[ShardResult]
    group: str
    _ran_one: bool

    def _save(self, planned: PlannedStep, run: StepRun, watched: Watched = (None, [])) -> StepResult:
        raise NotImplementedError  # the runner's

    def _soak(self) -> None:
        """Hold the scenario's one level for warmup + duration, saving the soak so far after every interval."""
        planned = sweep_plan(self.scenario)[0]
        sweep = self.scenario.sweep
        seconds = sweep.warmup + sweep_seconds(self.scenario)
        window = sweep.interval
        self._ran_one = True
        me = psutil.Process()
        meter = CpuMeter().start()
        samples: list[SoakSample] = []
        whole: ShardResult | None = None
        with self.progress:
            self.progress.begin(1, 1, planned)
            if self.monitor is not None:
                self.monitor.start()
            started = time.time()
            shard = self.executor.start_background(soak_spec(self.scenario, planned))
            t0 = time.monotonic()  # its clients have started: the soak lasts `seconds` from here
            forget = on_hard_exit(shard.stop)  # a second Ctrl-C stops its clients too
            stopped = False
            try:
                n = 0
                while not stopped:
                    n += 1
                    due = min(t0 + n * window, t0 + seconds)
                    while not self.intr.requested and (left := due - time.monotonic()) > 0:
                        time.sleep(min(0.1, left))
                    last = self.intr.requested or due >= t0 + seconds - 1e-6
                    piece = shard.stop() if last else shard.cut()
                    stopped = last
                    if whole is None:
                        whole = piece
                    else:
                        whole.follow(piece)
                    # timed as the series is, from the warm-up's end (a warm-up window's memory is not the soak's)
                    if (measured := time.monotonic() - t0 - sweep.warmup) >= 0:
                        samples.append(self._sample(measured, me))
                    watched = self.monitor.stop() if last and self.monitor is not None else (None, [])
                    partial = not last or self.intr.requested
                    run = StepRun(whole, partial, started, meter.stop(), soak=list(samples))
                    step = self._save_soak(planned, run, watched)
                    self.progress.update(_snapshot(step, piece, time.monotonic() - t0, last))
                    saved = getattr(self.progress, "saved", None)  # the live page's (knee.live.progress)
                    if not last and saved is not None:
                        saved()
            finally:
                if not stopped:  # an error on the way (a cut not answered): its clients end with it
                    shard.stop()
                forget()
            self.progress.end(step)

    def _save_soak(self, planned: PlannedStep, run: StepRun, watched: Watched) -> StepResult:
        """The soak so far as the run's one step: the one saved after the last interval is replaced."""
        if self.record.steps:
            self.record.steps.pop()
            self.results.pop()
        return self._save(planned, run, watched)

    def _sample(self, t_s: float, me: psutil.Process) -> SoakSample:
        """The memory of the monitored target's tree and of knee, now."""
        rss: float | None = None
        fds: int | None = None
        target = self.monitor.target if self.monitor is not None else None
        if target is not None:
            try:
                tree = [target.proc, *target.proc.children(recursive=True)]
            except psutil.Error:  # the target is gone (crashed, restarted): no figure, not a zero
                tree = []
            total_rss, total_fds, seen = 0, 0, 0
            for p in tree:
                try:
                    total_rss += p.memory_info().rss
                    total_fds += p.num_fds()
                    seen += 1
                except psutil.Error:
                    continue
            if seen:
                rss, fds = total_rss / MB, total_fds
        return SoakSample(t_s=round(t_s, 3), target_rss_mb=rss, target_fds=fds, knee_rss_mb=me.memory_info().rss / MB)


def _snapshot(step: StepResult, piece: ShardResult, elapsed_s: float, finished: bool) -> Snapshot:
    """The soak so far as the live view's snapshot: the counts of the step saved, the latency of the last interval."""
    now = group_stats(piece)
    groups = []
    for name, g in step.groups.items():
        last = now.get(name)
        groups.append(
            {
                "name": name,
                "succeeded": g.succeeded,
                "failed": g.failed,
                "hung": g.hung,
                "abandoned": g.abandoned,
                "in_flight": 0,
                "late": g.open_loop.late if g.open_loop is not None else 0,
                "lagged": g.open_loop.lagged if g.open_loop is not None else 0,
                "p50_us": round(last.latency_ms.p50 * 1000) if last is not None else 0,
                "p99_us": round(last.latency_ms.p99 * 1000) if last is not None else 0,
                "failed_by_class": dict(g.failures),
            }
        )
    return Snapshot.model_validate({"elapsed_s": elapsed_s, "finished": finished, "groups": groups})
