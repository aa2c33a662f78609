"""Are two runs comparable? What differs between them besides the service's behaviour: the targets they drove,
the scenario's shape (groups, kinds, durations) and the machine they ran on. `knee compare` says these first: a
change of rate between runs against different URLs, with other step lengths or on another machine is not (only)
the service's doing.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from knee.model import RunRecord
from knee.scenario.groups import CommandGroup, PythonGroup, TcpGroup, UrlGroup

# run.json's machine identity (knee.machine.host.identity) that makes a measurement another machine's
MACHINE_KEYS = (("hostname", "host"), ("cpus", "CPUs"), ("cores_available", "cores available"))
# the sweep's keys that set how long (or how much) each step runs
SWEEP_KEYS = ("duration", "per_client", "total", "warmup", "interval")
GROUP_KEYS = ("duration", "per_client", "total", "think")


def _target(group: Any) -> str:
    """What a group drives: its URL, address, command or function."""
    if isinstance(group, UrlGroup):
        return group.url
    if isinstance(group, TcpGroup):
        return f"tcp://{group.addr}"
    if isinstance(group, CommandGroup):
        return " ".join(group.argv)
    if isinstance(group, PythonGroup):
        return group.function
    return ""


def _value(v: Any) -> str:
    """A scenario value as the user wrote it: seconds as '2 s', nothing as 'none'."""
    if v is None:
        return "none"
    if isinstance(v, float):
        return f"{v:g} s"
    return str(v)


def _one(what: str, va: Any, vb: Any) -> list[str]:
    return [] if va == vb else [f"{what} {_value(va)} in A, {_value(vb)} in B"]


def _each(a: RunRecord, b: RunRecord, what: Callable[[str, Any, Any], list[str]]) -> list[str]:
    """`what` of each group both runs have."""
    out: list[str] = []
    for name, ga in a.scenario.groups.items():
        gb = b.scenario.groups.get(name)
        if gb is not None:
            out += what(name, ga, gb)
    return out


def _targets(a: RunRecord, b: RunRecord) -> list[str]:
    def target(name: str, ga: Any, gb: Any) -> list[str]:
        ta, tb = _target(ga), _target(gb)
        if ta != tb:
            return [f"{name}: {ta} in A, {tb} in B"]
        ha, hb = (a.targets or {}).get(name), (b.targets or {}).get(name)
        if ha is not None and hb is not None and (ha.host, ha.port) != (hb.host, hb.port):
            return [f"{name}: {ta} was {ha.host}:{ha.port} in A, {hb.host}:{hb.port} in B"]
        return []

    return _each(a, b, target)


def _scenario(a: RunRecord, b: RunRecord) -> list[str]:
    sa, sb = a.scenario, b.scenario
    out = [f"group {n} only in A" for n in sa.groups if n not in sb.groups]
    out += [f"group {n} only in B" for n in sb.groups if n not in sa.groups]
    out += _one("levels are", a.level_unit, b.level_unit)

    def shape(name: str, ga: Any, gb: Any) -> list[str]:
        found = _one(f"{name}'s kind", ga.kind, gb.kind)
        for key in GROUP_KEYS:
            found += _one(f"{name}'s {key}", getattr(ga, key), getattr(gb, key))
        return found

    out += _each(a, b, shape)
    for key in SWEEP_KEYS:
        out += _one(key, getattr(sa.sweep, key), getattr(sb.sweep, key))
    return out


def _machine(a: RunRecord, b: RunRecord) -> list[str]:
    out: list[str] = []
    for key, word in MACHINE_KEYS:
        va, vb = a.machine.get(key), b.machine.get(key)
        if va is not None and vb is not None:
            out += _one(word, va, vb)
    return out


def differences(a: RunRecord, b: RunRecord) -> list[str]:
    """One warning per kind of difference ('targets differ: main: http://…/ in A, http://…/ in B'), none when the
    two runs drove the same targets with the same scenario's shape on the same machine."""
    out = []
    for kind, found in (
        ("targets differ", _targets(a, b)),
        ("scenario differs", _scenario(a, b)),
        ("machine differs", _machine(a, b)),
    ):
        if found:
            out.append(f"{kind}: " + "; ".join(found))
    return out
