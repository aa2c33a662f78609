"""The wait for rest (knee.settle): connections that stay in the service's accept queue are no rest, however long
they stay unchanged; connections the service holds open and that do not move are (the probe judges them)."""

from __future__ import annotations

import knee.settle as settle_module
from knee.machine.sockets import Pending
from knee.plan import PlannedStep
from knee.scenario import parse_scenario
from knee.settle import Settler

SCENARIO = '[groups.main]\nkind = "exec"\nargv = ["true"]\n[sweep]\nlevels = [1, 2]\nduration = "1s"\n'


class Still(Settler):
    """A service whose sockets never change: `left` is what the census finds every time."""

    def __init__(self, left: Pending) -> None:
        super().__init__(parse_scenario(SCENARIO), "main", None, 1.0, lambda: False)
        self.left, self.probing = left, False

    def _pending(self) -> Pending:
        return self.left


def test_a_queue_that_does_not_move_is_not_rest(monkeypatch) -> None:  # type: ignore[no-untyped-def]
    monkeypatch.setattr(settle_module, "STALL_S", 0.2)
    # 60 connections queued at a service that stopped accepting: taken as rest after 2 s still, "kept by the service"
    queued = Still(Pending(connections=0, held=60, queued=60)).wait(PlannedStep(2), 0.6)
    assert not queued.settled and "60 connections were still queued" in queued.reason, queued
    held = Still(Pending(connections=0, held=3, queued=0)).wait(PlannedStep(2), 0.6)
    assert held.settled and "unchanged for 0.2 s (the service keeps them open)" in held.reason, held


def test_a_first_step_begun_on_a_service_not_at_rest_is_said() -> None:
    """The verdict skipped the first step's wait: a service still busy with a run before it (its first wait ran out)
    had every level left out of the analysis with nothing said."""
    from test_analysis_helpers import step

    from knee.analysis.rest import rest
    from knee.model import Settle, Verdict

    steps = [step(0, 1, 100), step(1, 2, 200)]
    steps[0].settle = Settle(seconds=30.0, settled=False, reason="60 connections were still queued at the service")
    v = Verdict(group="main")
    rest(v, steps, "main")
    assert v.sentences and v.sentences[0].startswith("before the first level the service did not come back"), v
    steps[0].settle = Settle(seconds=9.0, settled=True, reason="at rest")  # a first wait of baseline probes: unsaid
    v = Verdict(group="main")
    rest(v, steps, "main")
    assert v.sentences == []
