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


def test_a_probe_cut_short_before_it_could_be_slow_proves_nothing() -> None:
    """A probe given 50 ms by the wait's end, for an operation whose rest takes up to 100 ms, "hung": the step was
    called not at rest on it (and the search ended there). Only a probe slower than rest counts."""
    from test_analysis_helpers import step

    from knee.model import GroupStats, Settle

    class Hangs(Still):
        def _probe(self, planned: PlannedStep, left_s: float) -> GroupStats:
            return step(0, 1, 0, hung=1).groups["main"]

    s = Hangs(Pending(0, 0, 0))
    s.baseline_ms = 100.0
    settle = Settle(seconds=0.0, settled=True)
    import time

    note = s._rest(PlannedStep(2), settle, time.monotonic() + 0.05)
    assert settle.settled and "cut short" in note, (settle, note)
    settle = Settle(seconds=0.0, settled=True)
    s.baseline_ms = 10.0  # 500 ms without an answer, where rest answers in 10: not at rest
    assert s._rest(PlannedStep(2), settle, time.monotonic() + 0.5) == "" and not settle.settled


def test_only_connections_to_the_service_s_address_are_knee_s(monkeypatch) -> None:  # type: ignore[no-untyped-def]
    """The census matched the port alone: any program's connection to another host's port 443 counted as knee's, and
    a wait for rest could run out on someone else's downloads."""
    import socket

    from knee.machine import sockets

    target, other = socket.inet_pton(socket.AF_INET, "127.0.0.1"), socket.inet_pton(socket.AF_INET, "192.0.2.7")
    found = [
        sockets._Sock(2, 40001, 0, 0, 1, (target, target + bytes(12), 443)),  # SYN_SENT to the service
        sockets._Sock(4, 40002, 0, 0, 2, (target, other + bytes(12), 443)),  # FIN_WAIT1 to another host's 443
    ]
    monkeypatch.setattr(sockets, "_diag", lambda states: iter(found))
    assert sockets.packed_addresses("127.0.0.1", 443) == (target,)
    assert sockets.pending(443, False, (target,)).connections == 1
    assert sockets.pending(443, False).connections == 2  # unresolved: every connection to the port
