"""A scenario file run at one level: `knee run SCENARIO.toml -c N -n M` (or `--rate R`, `-d D`).

The file's tables stay as written (groups, vars, secrets, monitor, SLO, data …) but for the sweep: the groups that
follow the level get `-c`'s clients (or `--rate`'s arrivals), the stop is `-n`, `--iterations` or `-d` (else the
file's own, else 10 s), and there is no recovery probe and no stop at collapse: what `knee run URL` builds from the
same options (`knee.scenario.oneline.scenario_table`), so both are one step measured the same way.
"""

from __future__ import annotations

from typing import Any

from knee.errors import UserError
from knee.scenario import profiles
from knee.scenario.lineopts import OPTION_NAMES
from knee.scenario.oneline import Options, scenario_table

# the one-line options that apply to a scenario file's run; the others (the target's, think, timeout …) are the
# file's to say
RUN_OPTIONS = frozenset(
    {
        "clients",
        "rates",
        "n",
        "iterations",
        "duration",
        "warmup",
        "interval",
        "threads",
        "poisson",
        "max_in_flight",
        "slo_p99",
        "slo_failure_ratio",
        "min_capacity",
    }
)
_STOP = ("duration", "per_client", "total", "min_duration", "max_duration")
_KEPT = (*_STOP, "settle", "settle_wait", "warmup", "interval", "threads")
_GROUP_STOP = ("per_client", "total", "duration")
# a stand-in for the file's target: scenario_table's load tables do not depend on it
_ANY_URL = "http://127.0.0.1/"


def _follows(group: Any) -> bool:
    return isinstance(group, dict) and (group.get("clients", "level") == "level" or group.get("rate") == "level")


def _profiled(group: Any) -> bool:
    """A group with a rate profile of its own (knee.scenario.profiles): an open loop, whatever the level."""
    return isinstance(group, dict) and group.get("rate") not in (None, "level")


def _profile_ends(group: Any) -> bool:
    """A group whose rate or clients profile ends of itself: its end is the step's, as a stop of its own would be."""
    shaped = [group.get("rate") if _profiled(group) else None, group.get("clients")]
    texts = [v.get("points", "") if isinstance(v, dict) else v for v in shaped if v != "level"]
    return any(isinstance(text, str) and profiles.ends_of_itself(text) for text in texts)


def at_one_level(raw: dict[str, Any], o: Options, given: list[str], source: str) -> dict[str, Any]:
    """The tables of scenario `raw` (from the file `source`) as one step at the level `o` gives. `given`: the
    one-line options given (Options' field names); one that the file says itself is refused."""
    refused = next((g for g in given if g not in RUN_OPTIONS), None)
    if refused is not None:
        flag = next((v for k, v in OPTION_NAMES.items() if k.rsplit(".", 1)[-1] == refused), None)
        raise UserError(
            f"{flag or '--' + refused.replace('_', '-')} is an option of a one-line run (knee run URL); {source} says "
            "it itself: edit the file, or pass --var"
        )
    line = scenario_table(_ANY_URL, o, run=True)
    file_sweep = raw.get("sweep") if isinstance(raw.get("sweep"), dict) else {}
    assert isinstance(file_sweep, dict)
    if file_sweep.get("stages"):
        raise UserError(
            f"{source}: sweep.stages makes a step per stage, and knee run runs one; use knee sweep {source} "
            "(or drop stages)"
        )
    stop_given = any(v is not None for v in (o.n, o.iterations, o.duration))
    sweep = {k: v for k, v in file_sweep.items() if k in _KEPT and not (stop_given and k in _STOP)}
    groups = raw.get("groups") if isinstance(raw.get("groups"), dict) else {}
    assert isinstance(groups, dict)
    ending = [g for g in groups.values() if isinstance(g, dict) and not g.get("background")]
    own_stop = bool(ending) and all(any(k in g for k in _GROUP_STOP) or _profile_ends(g) for g in ending)
    from_line = dict(line["sweep"])
    if not stop_given and (any(k in sweep for k in _STOP) or own_stop):
        from_line.pop("duration", None)  # the file's stop, not the one-line default
    sweep.update(from_line)
    if o.n is not None or o.iterations is not None:
        sweep.pop("warmup", None)  # the file's warm-up is of a run for a duration: a count measures every operation
    measured = line["groups"]["main"]
    followers = [name for name, g in groups.items() if _follows(g)]
    if not followers and (o.clients is not None or o.rates is not None):
        option = "-c/--clients" if o.rates is None else "--rate"
        raise UserError(
            f'{source}: no group follows the level (clients = "level"), so {option} has nothing to set; set '
            'clients = "level" in the group to measure, or drop the option'
        )
    if not followers:  # fixed clients: the step is the groups as they are (a rate profile keeps its arrivals' keys)
        for key in ("levels", "rates", "arrival", "max_in_flight"):
            sweep.pop(key, None)
        if any(_profiled(g) for g in groups.values()):
            sweep.update({k: file_sweep[k] for k in ("arrival", "max_in_flight") if k in file_sweep})
    new_groups = dict(groups)
    for name in followers:
        g = {k: v for k, v in groups[name].items() if k != "rate"}
        connections = groups[name].get("clients")
        keep = "rate" in measured and o.clients is None and isinstance(connections, int)
        g["clients"] = connections if keep else measured["clients"]  # --rate alone keeps the file's connections
        if "rate" in measured:
            g["rate"] = measured["rate"]
        new_groups[name] = g
    table = {k: v for k, v in raw.items() if k not in ("sweep", "stop", "recovery", "search")}
    table["groups"] = new_groups
    table["sweep"] = sweep
    table["stop"] = line["stop"]
    table["recovery"] = line["recovery"]
    slo = {**(raw.get("slo") or {}), **line.get("slo", {})}
    if slo:
        table["slo"] = slo
    return table
