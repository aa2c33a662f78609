"""The level search's loop (`levels = "auto"`, `rates = "auto"`): ask knee.analysis.search for the next level,
measure it, and believe it only when it is consistent with its neighbours or measured twice; stop when the service
did not come back to rest (docs/analysis.md "The level search", "A level measured twice").

`Searching` is a part of the runner (knee.runner._Runner): it uses the runner's steps, run directory and console.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

from knee import fmt
from knee.analysis.levels import LevelRow, pool, saturated
from knee.analysis.ranout import ran_out_words
from knee.analysis.search import Done, Point, anomaly, next_level
from knee.analysis.slo import met_by
from knee.plan import PlannedStep, search_config, step_seconds

if TYPE_CHECKING:
    from rich.console import Console

    from knee.executor import Interrupts
    from knee.model import RunRecord, StepResult
    from knee.progress import Progress
    from knee.scenario import Scenario, Slo
    from knee.store import RunDir


class Searching:
    """The search's loop, mixed into the runner."""

    scenario: Scenario
    record: RunRecord
    run_dir: RunDir
    console: Console
    intr: Interrupts
    progress: Progress
    group: str
    _ran_one: bool

    def _run(self, planned: PlannedStep, number: int, total: int, repeat_of: int | None = None) -> StepResult:
        raise NotImplementedError  # the runner's

    def _abort(self, step: StepResult) -> bool:
        raise NotImplementedError  # the runner's

    def _sleep(self, seconds: float) -> None: ...

    def _search(self) -> None:
        """levels = "auto": ask the search for the next level, measure it, until the search is done. Its state is
        the steps measured so far (a --resume continues from run.json's)."""
        config = search_config(self.scenario)
        if self.record.search_end:  # resumed after the search had ended (a service that did not come back to rest)
            self.console.print(f"search done: {self.record.search_end}", highlight=False, soft_wrap=True, markup=False)
            return
        sweep = [s for s in self.record.steps if s.phase == "sweep"]
        number = len(sweep)
        with self.progress:
            # resumed while a contradicting level was being measured again: that measurement first
            last = sweep[-1] if sweep else None
            if last is not None and last.repeat_of is None and not any(s.repeat_of == last.index for s in sweep):
                number = self._believe(last, number)
                if number is None:
                    return
            while not self.intr.requested:
                steps = [s for s in self.record.steps if s.phase == "sweep"]
                rows = pool(steps, self.group, "up")
                spent, per_step = self._spent(steps)
                found = next_level(points(rows, self.scenario.slo), config, spent_s=spent, step_s=per_step)
                if isinstance(found, Done):
                    self._end(found.reason)
                    return
                level = int(found.level) if config.integer else _whole(found.level)
                lost = [s for s in steps if s.level == level and s.lost_workers]
                if len(lost) >= 2:  # a level that loses a worker each time is never believed: asked for forever
                    at = fmt.load(level, self.record.level_unit)
                    self._end(f"{at} lost a worker each of the {len(lost)} times it was measured: the search stopped")
                    return
                if self._ran_one or steps:
                    self._sleep(self.scenario.sweep.pause)
                    if self.intr.requested:
                        return
                number += 1
                step = self._searched(PlannedStep(level, reason=found.reason), number)
                if step is None:
                    return
                number = self._believe(step, number)
                if number is None:
                    return

    def _spent(self, steps: list[StepResult]) -> tuple[float, float]:
        """The search's seconds so far (its steps, the pauses between them and the waits for rest before them: a
        budget is the whole search's time) and one level's."""
        settled = sum(s.settle.seconds for s in steps if s.settle is not None)
        spent = sum(s.elapsed_s for s in steps) + self.scenario.sweep.pause * max(0, len(steps) - 1) + settled
        return spent, spent / len(steps) if steps else (step_seconds(self.scenario) or 0.0)

    def _believe(self, step: StepResult, number: int) -> int | None:
        """A level that contradicts both its neighbours is measured again before the search believes it (it is
        superseded when it does not repeat); the steps' number after that, or None when the search ends there."""
        why = self._contradicts(step)
        if why is None:
            return number
        at = fmt.load(step.level, self.record.level_unit)
        budget = search_config(self.scenario).budget_s
        spent, per_step = self._spent([s for s in self.record.steps if s.phase == "sweep"])
        # believed only once measured again: until then (and for good, when the search ends first) it is left out
        step.unconfirmed = True
        self.run_dir.save(self.record)
        if budget is not None and spent + per_step > budget:  # the repeat ran past the budget
            self._end(
                f"the search's budget ({budget:g} s) would be passed by measuring {at} again: it contradicted its "
                f"neighbours ({why}) and is not confirmed, so left out"
            )
            return None
        again = PlannedStep(step.level, reason=f"measuring {at} again: {why}")
        repeat = self._searched(again, number + 1, step)
        done = next((s for s in reversed(self.record.steps) if s.repeat_of == step.index), None)
        if done is not None and done.believed and not done.partial:  # a repeat the analysis can judge by
            step.unconfirmed = False
            step.superseded = self._contradicts(done, without=step) is None  # it did not repeat: left out
        self.run_dir.save(self.record)
        return None if repeat is None else number + 1

    def _searched(self, planned: PlannedStep, number: int, again: StepResult | None = None) -> StepResult | None:
        """Measure one searched level (`again`: the step it measures once more); None when the search ends there
        (Ctrl-C, the abort rule, a service that did not come back to rest)."""
        step = self._run(planned, number, 0, repeat_of=again.index if again is not None else None)
        if step.partial and (self.intr.requested or not step.lost_workers):
            return None
        if self._abort(step):  # the run ends there: its search too, and the report's Search list says why
            at = fmt.load(step.level, self.record.level_unit)
            most = self.scenario.stop.max_failure_ratio
            self._end(f"aborted at {at}: its failure ratio passed stop.max_failure_ratio = {most}")
            return None
        if step.unsettled:
            self._degraded(step)
            return None
        g = step.groups.get(self.group)
        words = ran_out_words(step, g) if g is not None else None
        if words is not None:  # on_exhausted = "stop": every level after it would end at once, and the search
            at = fmt.load(step.level, self.record.level_unit)  # would measure the same level forever
            self._end(f"the step at {at} {words}: no rows are left for the levels after it")
            return None
        return step

    def _degraded(self, step: StepResult) -> None:
        """The service did not come back to rest before `step`: the search ends there (what it would measure next is
        a broken service, not a level of load)."""
        # the level run just before it (the verdict's words): after a ramp to 128, a bisection's 90
        earlier = [s for s in self.record.steps if s.phase == "sweep" and s.index < step.index]
        before = max(earlier, key=lambda s: s.index).level if earlier else None
        after = f" after {fmt.load(before, self.record.level_unit)}" if before is not None else ""
        waited = fmt.duration(step.settle.seconds) if step.settle is not None else ""
        why = step.settle.reason if step.settle is not None else ""
        self._end(
            f"the service did not come back to rest{after} within {waited} ({why}): the search stopped, for the "
            "levels it would measure next would be of a broken service, not of load"
        )

    def _end(self, reason: str) -> None:
        """The search ends for `reason`: recorded (run.json's search_end) and said."""
        self.record.search_end = reason
        self.run_dir.save(self.record)
        self.console.print(f"search done: {reason}", highlight=False, soft_wrap=True, markup=False)

    def _contradicts(self, step: StepResult, without: StepResult | None = None) -> str | None:
        """How `step`'s level contradicts both its neighbours measured so far (docs/analysis.md "A level measured
        twice"), or None."""
        own = points(pool([step], self.group, step.direction, every=True), self.scenario.slo)
        others = [s for s in self.record.steps if s.phase == "sweep" and s is not step and s is not without]
        if not own:
            return None
        return anomaly(
            points(pool(others, self.group, step.direction), self.scenario.slo), own[0], search_config(self.scenario)
        )


def _whole(value: float) -> int | float:
    return int(value) if float(value).is_integer() else value


def points(rows: Sequence[LevelRow], slo: Slo | None = None) -> list[Point]:
    """The search's points from a sweep's pooled levels (analysis.levels.pool): rates, failures, hung
    operations, the rate's noise, the SLO and (open loop) saturation, by the verdict's definitions."""
    return [
        Point(
            level=r.level,
            rate=r.rate,
            failure_ratio=r.failure_ratio,
            hung=r.hung,
            noise=r.noise_hz,
            slo_ok=None if slo is None else met_by(slo, r),
            saturated=saturated(r),
            busy=r.rate * r.mean_latency_ms / 1000.0,
        )
        for r in rows
    ]
