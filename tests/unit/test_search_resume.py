"""The level search resumed (`sweep --resume`): a level that was being measured again when the run stopped is
measured again first; a search that had ended (on a service that did not come back to rest) measures nothing more."""

from __future__ import annotations

import io
from pathlib import Path

from rich.console import Console
from test_analysis_helpers import step

from knee.executor import Interrupts
from knee.model import RunRecord, StepResult
from knee.plan import PlannedStep
from knee.progress import SweepProgress
from knee.scenario import parse_scenario
from knee.searching import Searching
from knee.store import RunDir

SCENARIO = '[groups.main]\nkind = "exec"\nargv = ["true"]\n[sweep]\nlevels = "auto"\nduration = "10s"\n'


class Fake(Searching):
    """The search's loop on a service of a steady 100/s a client, measuring nothing: each level asked for is
    recorded, and the search stops after `budget` of them."""

    def __init__(self, record: RunRecord, path: Path, budget: int) -> None:
        self.scenario = parse_scenario(SCENARIO)
        self.record, self.run_dir = record, RunDir(path)
        self.console = Console(file=io.StringIO())
        self.intr = Interrupts()
        self.progress = SweepProgress(self.console, 1.0, 0.0, record.rates, "main")
        self.group, self._ran_one = "main", True
        self.asked: list[PlannedStep] = []
        self.budget = budget

    def _run(self, planned: PlannedStep, number: int, total: int, repeat_of: int | None = None) -> StepResult:
        self.asked.append(planned)
        if len(self.asked) >= self.budget:
            self.intr.requested = True
        s = step(len(self.record.steps), int(planned.level), int(planned.level) * 1000)
        s.repeat_of = repeat_of
        self.record.steps.append(s)
        return s

    def _abort(self, step: StepResult) -> bool:
        return False

    def _sleep(self, seconds: float) -> None:
        pass


def record(steps: list[StepResult], **kw: object) -> RunRecord:
    return RunRecord(run_id="r", created_unix=0.0, scenario=parse_scenario(SCENARIO), steps=steps, **kw)


def test_a_contradicting_level_cut_short_while_measured_again_is_measured_again_first(tmp_path: Path) -> None:
    # 4 clients read 10/s between 1 at 100/s and 8 at 8 000/s: its repeat was cut short (dropped on resume)
    steps = [step(0, 1, 1000), step(1, 8, 80_000), step(2, 4, 100)]
    fake = Fake(record(steps), tmp_path, budget=2)
    fake._search()
    first = fake.asked[0]
    assert first.level == 4 and first.reason.startswith("measuring 4 clients again"), first
    assert fake.record.steps[2].superseded and fake.record.steps[3].repeat_of == 2


def test_a_search_that_had_ended_measures_nothing_more(tmp_path: Path) -> None:
    steps = [step(0, 1, 1000), step(1, 8, 80_000)]
    fake = Fake(record(steps, search_end="the service did not come back to rest after 8 clients"), tmp_path, 5)
    fake._search()
    assert fake.asked == []


def test_a_contradicting_level_the_budget_leaves_unmeasured_again_is_left_out(tmp_path: Path) -> None:
    """4 clients read 10/s between 1 at 100/s and 8 at 8 000/s, and the search's budget has no room to measure it
    again: it is not believed (it was, and the verdict placed a collapse or an onset on it), and said."""
    from knee.analysis import analyze_run

    text = SCENARIO.replace('duration = "10s"\n', 'duration = "10s"\n[search]\nbudget = "25s"\n')
    steps = [step(0, 1, 1000), step(1, 8, 80_000), step(2, 4, 100)]
    fake = Fake(record(steps), tmp_path, budget=5)
    fake.scenario = fake.record.scenario = parse_scenario(text)
    fake._search()
    assert fake.asked == [] and fake.record.search_end is not None, fake.record.search_end
    assert "is not confirmed, so left out" in fake.record.search_end
    third = fake.record.steps[2]
    assert third.unconfirmed and not third.believed
    (v,) = analyze_run(fake.record)
    assert "4 clients contradicted its neighbours (" in " ".join(v.sentences), v.sentences
    assert any(s.endswith("and was not measured again: not confirmed, left out") for s in v.sentences), v.sentences


def test_a_service_not_at_rest_is_said_after_the_level_run_just_before(tmp_path: Path) -> None:
    """After a ramp to 128 the search bisects at 90, and the next step finds the service not at rest: the search's
    end names 90, as the verdict does (it named 128, the highest level so far)."""
    from knee.model import Settle

    steps = [step(0, 1, 1000), step(1, 128, 9000), step(2, 90, 8000)]
    fake = Fake(record(steps), tmp_path, budget=5)
    stuck = step(3, 100, 100)
    stuck.settle = Settle(seconds=30.0, settled=False, reason="12 connections still open")
    fake.record.steps.append(stuck)
    fake._degraded(stuck)
    assert fake.record.search_end is not None
    assert "did not come back to rest after 90 clients within 30 s" in fake.record.search_end, fake.record.search_end


def test_a_level_that_loses_a_worker_every_time_ends_the_search(tmp_path: Path) -> None:
    """A worker killed each time at 8 clients: the step is partial and not believed, so the search asked for 8
    again and again (max_steps counts the levels believed): it stops after the second loss, and says why."""

    class Losing(Fake):
        def _run(self, planned: PlannedStep, number: int, total: int, repeat_of: int | None = None) -> StepResult:
            s = super()._run(planned, number, total, repeat_of)
            if s.level == 8:
                s.partial, s.lost_workers = True, ["tcp://10.0.0.7:8786 (its process was killed)"]
            return s

    fake = Losing(record([]), tmp_path, budget=50)
    fake._search()
    assert [p.level for p in fake.asked] == [1, 2, 8, 8], [p.reason for p in fake.asked]
    assert fake.record.search_end == "8 clients lost a worker each of the 2 times it was measured: the search stopped"


def test_an_abort_by_max_failure_ratio_is_the_search_s_end(tmp_path: Path) -> None:
    """stop.max_failure_ratio ended a search with no reason recorded (no 'done:' line in the report)."""

    class Failing(Fake):
        def _abort(self, step: StepResult) -> bool:
            return step.level >= 8

    fake = Failing(record([]), tmp_path, budget=50)
    fake.scenario = fake.record.scenario = parse_scenario(SCENARIO + "[stop]\nmax_failure_ratio = 0.2\n")
    fake._search()
    assert [p.level for p in fake.asked] == [1, 2, 8]
    assert fake.record.search_end == "aborted at 8 clients: its failure ratio passed stop.max_failure_ratio = 0.2"


def test_a_repeat_short_of_a_worker_confirms_nothing(tmp_path: Path) -> None:
    """4 clients read 10/s between 1 and 8 (its repeat measured again first, on resume), and the repeat lost a
    worker: the first stays unconfirmed and left out, and the verdict says so (the first was believed, beside
    'not confirmed')."""
    from knee.analysis import analyze_run

    class Losing(Fake):
        def _run(self, planned: PlannedStep, number: int, total: int, repeat_of: int | None = None) -> StepResult:
            s = super()._run(planned, number, total, repeat_of)
            if repeat_of is not None:
                s.partial, s.lost_workers = True, ["tcp://10.0.0.7:8786 (its process was killed)"]
            return s

    steps = [step(0, 1, 1000), step(1, 8, 80_000), step(2, 4, 100)]
    fake = Losing(record(steps), tmp_path, budget=2)
    fake._search()
    assert fake.asked[0].reason.startswith("measuring 4 clients again")
    first = fake.record.steps[2]
    assert first.unconfirmed and not first.superseded and not first.believed
    (v,) = analyze_run(fake.record)
    assert any("the repeat was short of a worker: not confirmed, left out" in s for s in v.sentences), v.sentences
