"""mode = "soak" (knee.soaking, knee.analysis.soak): what a soak scenario must be, one level held by every group for
sweep.duration; one sentence for each way it is not."""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from knee.scenario.model import Scenario


def check_soak(scenario: Scenario) -> None:
    """mode = "soak": one level (or rate), held for sweep.duration by every group."""
    sw = scenario.sweep
    what = "rates" if sw.rates is not None else "levels"
    if sw.auto_levels:
        raise ValueError(
            f'mode = "soak" holds one level for long: give it (e.g. {what} = [50]), not {what} = "auto"; find '
            "the level with a sweep first"
        )
    if len(sw.level_list()) > 1:
        raise ValueError(
            f'mode = "soak" holds one level for long (got {len(sw.level_list())} {what}); keep one, or run the '
            "others as soaks of their own"
        )
    if not isinstance(sw.duration, float):
        raise ValueError('mode = "soak" runs for sweep.duration: give it (e.g. duration = "2h")')
    if sw.direction != "up" or sw.stages:
        raise ValueError('mode = "soak" is one level: drop sweep.direction and sweep.stages')
    for name, g in scenario.groups.items():
        if g.over_time is not None:
            raise ValueError(
                f"groups.{name}: a soak holds its load constant, and its {'rate' if g.profile else 'clients'} is "
                "a profile; give a number (a ramp or a spike is judged by knee run and knee sweep --ramp)"
            )
        own = next((k for k in ("duration", "per_client", "total") if getattr(g, k) is not None), None)
        if own is not None:
            raise ValueError(
                f"groups.{name}.{own}: every group of a soak runs for the whole soak (sweep.duration); drop it"
            )
