"""What the waits before the steps found, in the verdict's words (knee.settle; docs/analysis.md "Settling between
steps", "A service that does not come back", "A level measured twice").

The analysis locates points only on steps it believes (`StepResult.believed`): a step that began while the service
had not come back to rest, and a first measurement that did not repeat, are kept in the record and said here.
"""

from __future__ import annotations

from collections.abc import Sequence

from knee import fmt
from knee.analysis.levels import failed_or_hung, pool, sweep_steps
from knee.model import StepResult, Verdict

LONG_SETTLE_S = 5.0  # a wait at least this long gets a sentence of its own: the service took that long to come back


def rest(v: Verdict, steps: Sequence[StepResult], group: str) -> None:
    """The service that did not come back (first in the sentences: every later level depends on it), long waits,
    and the levels measured twice."""
    every = sweep_steps(steps, group, every=True)
    unit = v.level_unit
    for s in every:
        # the first wait's length holds the baseline's probes (no sentence of its own); a first step that began on a
        # service not at rest (a run before it, still served) is said: every level then is of a broken service
        if s.settle is None or (s.index == every[0].index and not s.unsettled):
            continue
        before = [p for p in every if p.index < s.index]
        after = f"after {fmt.load(before[-1].level, unit)}" if before else "before the first level"
        if s.unsettled:
            if any(p.unsettled for p in before):
                continue  # said with the first: one sentence for the steps measured before the service came back
            # the steps from here to the next that began at rest (a fixed sweep goes on; that one is believed)
            later = [p for p in every if p.index >= s.index]
            back = next((i for i, p in enumerate(later) if not p.unsettled), len(later))
            broken = [fmt.load(p.level, unit) for p in later[:back]]
            v.degraded_after = before[-1].level if before else None
            v.sentences.insert(
                0,
                f"{after} the service {_stuck(s)} for the {fmt.duration(s.settle.seconds)} knee waited "
                f"({s.settle.reason}): what was measured after that ({', '.join(broken)}) is of a broken service, not "
                "of load, and locates nothing"
                + (f"; it was back at rest before {fmt.load(later[back].level, unit)}" if back < len(later) else ""),
            )
        elif s.settle.seconds >= LONG_SETTLE_S:  # it did come back, after a while
            v.sentences.append(
                f"{after} the service took {fmt.duration(s.settle.seconds)} to come back to rest ({s.settle.reason})"
            )
    for s in every:
        if s.repeat_of is None:
            continue
        first = next((p for p in every if p.index == s.repeat_of), None)
        if first is None:
            continue
        at = fmt.load(s.level, unit)
        was, again = _outcome(first, group), _outcome(s, group)
        if first.superseded:
            v.sentences.append(f"{at} was measured again: its first measurement ({was}) did not repeat ({again}) "
                               "and is left out")  # fmt: skip
        elif s.partial or not s.believed or first.unconfirmed:  # the repeat cannot say the first was real
            how = (
                "cut short" if s.partial and not s.lost_workers else "short of a worker" if s.lost_workers
                else "run on a service not at rest" if s.unsettled else "the search's last (it ended there)"
            )  # fmt: skip
            v.sentences.append(f"{at} contradicted its neighbours ({was}); measured again, the repeat was {how}: "
                               "not confirmed, left out")  # fmt: skip
        else:
            v.sentences.append(f"{at} contradicted its neighbours twice ({was}; again: {again}): real, kept")
    for s in every:  # the search ended before measuring it again (its budget)
        if s.unconfirmed and not any(p.repeat_of == s.index for p in every):
            at, was = fmt.load(s.level, unit), _outcome(s, group)
            v.sentences.append(f"{at} contradicted its neighbours ({was}) and was not measured again: not confirmed, "
                               "left out")  # fmt: skip


def _stuck(s: StepResult) -> str:
    """How a service that did not come back looked: degraded while idle (a metastable failure: single operations
    slow or failing with no load), or still busy with what the last level left behind."""
    if s.settle is not None and s.settle.probes:
        return "stayed degraded with the load gone (a metastable failure)"
    return "did not come back to rest"


def _outcome(s: StepResult, group: str) -> str:
    rows = pool([s], group, s.direction, every=True)
    if not rows:
        return "nothing measured"
    r = rows[0]
    errors = failed_or_hung(r, fmt.pct) if r.failed + r.hung else "no errors"
    return f"{fmt.rate(r.rate)}, {errors}"
