"""Steps ended by data that ran out (a `queue` or `shuffle` source with `on_exhausted = "stop"`): in words.

Such a step is no failure of the service: it ended because the rows did. Its rate is judged over the seconds
until the rows ran out (`levels.measured_s`), so its lower count is no collapse; one that ran out before any
operation ended (none left: earlier steps used every row) has no rate to judge and is left out of the verdict
(`levels.ran_out_early`). Every report marks the step, with the rows it used
(docs/analysis.md, "Data that runs out").
"""

from __future__ import annotations

from collections.abc import Sequence

from knee import fmt
from knee.analysis.levels import measured_s, ran_out, ran_out_early
from knee.model import GroupStats, LevelUnit, StepResult


def ran_out_words(s: StepResult, g: GroupStats) -> str | None:
    """'ran out of users after 5,000 rows (2.10 s into the step)', or None when the group's data did not run out."""
    d = ran_out(s, g)
    if d is None:
        return None
    if d.taken == 0 and d.available == 0 and d.rows:
        return f"ran out of {d.name} at once: earlier steps used all its {d.rows:,} rows"
    rows = f"{d.taken:,} row{'s' * (d.taken != 1)}"
    if d.used and d.used != d.taken:
        rows += f" ({d.used:,} positions used)"
    if d.available and d.available != d.rows:  # earlier steps used some: this one had what they left
        left = "all" if d.taken >= d.available else f"of the {d.available:,}"
        rows += f" ({left} that earlier steps left of its {d.rows:,})"
    when = f", {_seconds(measured_s(s, g))} into the step" if d.exhausted_after_s is not None else ""
    first = f"; {d.first_out}'s part first" if d.first_out else ""
    return f"ran out of {d.name} after {rows}{when}{first}"


def ran_out_warnings(steps: Sequence[StepResult], group: str, unit: LevelUnit) -> list[str]:
    """One sentence per sweep step of `group` that its data ended: judged over the seconds it measured, or left
    out when it measured too little to judge."""
    out = []
    for s in sorted(steps, key=lambda s: s.index):
        g = s.groups.get(group)
        words = ran_out_words(s, g) if g is not None and s.phase == "sweep" else None
        if g is None or words is None:
            continue
        at = fmt.load(s.level, unit)
        if ran_out_early(s, group):
            out.append(f"the step at {at} {words}: no operation ended, so it is left out")
        else:
            out.append(
                f"the step at {at} {words}: it ended because its data did, not because the service failed; its rate "
                f"is over the {_seconds(measured_s(s, g))} it ran"
            )
    return out


def _seconds(x: float) -> str:
    """'2.1 s', '35 s', or under a second '9.81 ms'."""
    return fmt.duration(x) if x >= 1 else fmt.ms(x * 1000)
