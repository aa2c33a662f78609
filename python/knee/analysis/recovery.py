"""Did the service come back after the load stopped, and how long did it take?

The baseline level is the level (and label) of the recovery probes (steps with phase "recovery"). Its reference
rate is the first sweep measurement at that level and label. The service has recovered at the first probe whose
rate (as the level table gives it: `rate_of`) is within 10 % of the reference, either way (the scenario's
recovery.tolerance; the same test knee sweep uses to stop probing). Time to recover runs from the end of the last
sweep step before the first probe (when the load stopped) — or from the first probe's start when there was no
sweep step — to the end of that probe.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from knee.analysis.levels import window
from knee.model import StepResult

WITHIN = 0.10


@dataclass(frozen=True)
class Recovery:
    recovered: bool | None  # None: no probes, or nothing to compare them with
    time_to_recover_s: float | None
    waited_s: float | None  # from the load stopping to the end of the last probe
    baseline_level: int | float | None
    note: str | None = None  # why recovery could not be judged


def back(rate: float, reference: float, tolerance: float = WITHIN) -> bool:
    """A probe's rate is back: within `tolerance` of the reference rate, either way (the one test the
    sweep's probing and the verdict share)."""
    return abs(rate - reference) <= tolerance * reference


def rate_of(step: StepResult, group: str) -> float:
    """`group`'s rate in `step` as the level table gives it (analysis.levels.window: a step that starts empty is
    judged after its first operation latency): a probe shorter than the step it is compared with, or one whose
    level never settled, read 15 % low on its empty start alone, and a service back at rest "did not recover"."""
    return window(step, step.groups[group]).rate


def recovery(steps: Sequence[StepResult], group: str, tolerance: float = WITHIN) -> Recovery:
    ordered = sorted((s for s in steps if group in s.groups), key=lambda s: s.index)
    probes = [s for s in ordered if s.phase == "recovery"]
    if not probes:
        return Recovery(None, None, None, None)
    out = next((p.groups[group].ran_out for p in probes if p.groups[group].ran_out), None)
    if out is not None:  # a probe without rows measures nothing about the service
        return Recovery(None, None, None, probes[0].level, f"the rows of {out} ran out during the recovery probes")
    baseline = probes[0].level
    sweep = [s for s in ordered if s.phase == "sweep"]
    ref_step = next((s for s in sweep if s.level == baseline and s.label == probes[0].label), None)
    if ref_step is None:
        return Recovery(
            None, None, None, baseline, f"no sweep step at the baseline level {baseline} to compare the probes with"
        )
    reference = rate_of(ref_step, group)
    if reference <= 0:
        return Recovery(None, None, None, baseline, f"the first measurement at level {baseline} had no successes")
    before = [s for s in sweep if s.index < probes[0].index]
    origin = max(s.started_unix + s.elapsed_s for s in before) if before else probes[0].started_unix
    waited = probes[-1].started_unix + probes[-1].elapsed_s - origin
    for p in probes:
        if back(rate_of(p, group), reference, tolerance):
            return Recovery(True, max(0.0, p.started_unix + p.elapsed_s - origin), waited, baseline)
    return Recovery(False, None, waited, baseline)
