"""analyze_run(): one verdict per group of a run, with the scenario's analysis settings.

From `record.scenario` (the scenario as run): analysis.onset, slo, recovery.tolerance, each
group's think time and whether the levels were searched (a search's overshoot fails no SLO); the
level unit from `record.level_unit`. Only the measured group (whose clients follow the level) gets a
USL fit; a background group beside it (its clients fixed) is judged against the measured group's
levels, without a peak of its own (beside.py).
"""

from __future__ import annotations

import re

from knee.analysis.beside import stress_group
from knee.analysis.client_ramp import run_client_ramp
from knee.analysis.findings import endpoint, findings
from knee.analysis.ramp import run_ramp
from knee.analysis.soak import run_soak
from knee.analysis.spike import run_spike
from knee.analysis.verdict import analyze
from knee.model import RunRecord, Verdict


def group_names(record: RunRecord) -> list[str]:
    """The run's groups, the measured group first, then in order of first appearance."""
    names: list[str] = []
    for s in sorted(record.steps, key=lambda s: s.index):
        names.extend(n for n in s.groups if n not in names)
    if record.measured_group in names:
        names.remove(record.measured_group)
        names.insert(0, record.measured_group)
    return names


def analyze_run(record: RunRecord) -> list[Verdict]:
    """One verdict per group, with the scenario's analysis.onset, slo, recovery.tolerance and think times;
    each carries its findings (why it broke: analysis.findings; the machine's and the target's in the
    measured group's)."""
    sc = record.scenario
    verdicts = [
        analyze(
            record.steps,
            name,
            onset=sc.analysis.onset,
            slo=sc.slo,
            think_s=sc.groups[name].think.mean if name in sc.groups else 0.0,
            think_on_failure_s=sc.groups[name].think_on_failure if name in sc.groups else 0.0,
            fit=name == record.measured_group,
            recovery_tolerance=sc.recovery.tolerance,
            unit=record.level_unit,
            target=endpoint(record) if name == record.measured_group else None,
            beside=stress_group(record, name),
            searched=sc.sweep.auto_levels,
        )
        for name in group_names(record)
    ]
    for v in verdicts:
        if record.scenario.mode == "soak":
            _soak(record, v)
        _ramp(record, v)
        v.spike = run_spike(record, v.group)
        if v.spike is not None:
            v.sentences[:0] = v.spike.sentences
        v.findings = findings(record, v)
    return verdicts


def _soak(record: RunRecord, v: Verdict) -> None:
    """A soak (mode = "soak"): one level held for long, judged by its trends (soak.py); what a sweep's verdict says
    of its one level (a peak that "may go higher", "only one level") is not said of it."""
    v.soak = run_soak(record, v.group)
    if v.soak is not None:
        v.sentences = v.soak.sentences
        v.warnings = [w for w in v.warnings if "level" not in w]
        v.little = []


def _ramp(record: RunRecord, v: Verdict) -> None:
    """A group under a rate profile: its offered rate is not its level (the level is its connections), so no
    saturation is read from the level; a rising profile gets the ramp's verdict (ramp.py), its sentences first."""
    g = record.scenario.groups.get(v.group)
    if g is not None and g.clients_profile is not None:
        # the step's level is the profile's peak, which ran only at the top: what the sweep's verdict says of the
        # level ("322 Hz with 20 clients") is not what ran, and the clients ramp's verdict says it interval by interval
        v.client_ramp = r = run_client_ramp(record, v.group)
        if r is not None:
            peak = re.compile(rf"\b{g.client_count(0)} clients").search
            v.sentences = r.sentences + [s for s in v.sentences if not peak(s)]
            v.warnings = [w for w in v.warnings if not peak(w)]  # "only one level (20 clients)", Little's law's
            v.little = []
            v.peak_rate, v.peak_level = r.peak_hz, round((r.no_faster or r.peak).clients, 1)
            v.saturation_level = None
        return
    if g is None or g.profile is None:
        return
    v.saturation_level = None
    v.brackets.pop("saturation", None)
    v.sentences = [s for s in v.sentences if not s.startswith(("saturated at", "kept up with every offered rate"))]
    v.ramp = run_ramp(record, v.group)
    if v.ramp is not None:
        v.sentences[:0] = v.ramp.sentences
