"""The clients ramp's verdict (docs/load-shapes.md): a closed loop under a rising clients profile, read interval by
interval, finds in one run what a client sweep finds level by level: where the throughput stopped rising with the
clients, where errors start and where the SLO breaks, each bracketed by the clients the interval began and ended
with.

Per whole interval i (the trailing partial one is left out): the clients n_i the profile ran there (its value,
floored, averaged over the interval: knee.scenario.profiles, the engine runs client k while the profile is at least
k), the achieved rate s_i / dt, errors e_i (failed + hung).

- the peak: the highest achieved rate, read as the median of three neighbouring intervals (one interval's jitter is
  not a peak).
- no faster from: the first interval whose median-of-three rate reaches (1 − CLIENT_RAMP_FLAT) of the peak, where at
  least CLIENT_RAMP_AFTER whole intervals follow it with more clients: more clients there did not make it faster.
  Without them, the rate was still rising at the top of the ramp.
- errors and the SLO: as the rate ramp reads them (knee.analysis.ramp): an interval whose errors are above the
  onset, or which misses the SLO, in it and in the next one too (or that is the last).
"""

from __future__ import annotations

import math
from statistics import median

from knee import fmt
from knee.analysis.ramp import interval_missed, lasting, slo_sentence
from knee.model import ClientRamp, ClientRampPoint, GroupStats, RunRecord, SeriesPoint
from knee.scenario import Slo
from knee.scenario.profiles import RateProfile

CLIENT_RAMP_FLAT = 0.05  # the share of the peak rate within which more clients made it no faster (levels.py's)
CLIENT_RAMP_AFTER = 3  # whole intervals with more clients that must follow before a plateau is called one
_SUBSTEPS = 20  # points an interval's mean clients is read at


def run_client_ramp(record: RunRecord, group: str) -> ClientRamp | None:
    """The clients ramp's verdict on `group` of a run: when its scenario gives it a rising clients profile and one
    step measured it."""
    g = record.scenario.groups.get(group)
    profile = g.clients_profile if g is not None else None
    steps = [s for s in record.steps if s.phase == "sweep" and group in s.groups]
    if profile is None or not profile.rising or len(steps) != 1:
        return None
    sc = record.scenario
    return judge_client_ramp(steps[0].groups[group], profile, sc.sweep.warmup, sc.analysis.onset, sc.slo)


def clients_at(profile: RateProfile, t: float) -> int:
    """The clients the engine runs at `t` seconds from the step's start."""
    return max(0, math.floor(profile.rate_at(t) + 1e-9))


def intervals(g: GroupStats, profile: RateProfile, warmup_s: float = 0.0) -> tuple[list[SeriesPoint], list[float]]:
    """The group's whole intervals and the clients each ran (the profile's, floored, averaged over it)."""
    dt = g.interval_s or 1.0
    whole = [p for p in g.series if p.t + dt <= g.elapsed_s + 1e-6]
    steps = [dt * (k + 0.5) / _SUBSTEPS for k in range(_SUBSTEPS)]
    return whole, [sum(clients_at(profile, warmup_s + p.t + x) for x in steps) / _SUBSTEPS for p in whole]


def judge_client_ramp(
    g: GroupStats, profile: RateProfile, warmup_s: float = 0.0, onset: float = 0.001, slo: Slo | None = None
) -> ClientRamp | None:
    """The verdict on one group's measurement under clients `profile` (the series counts from the measured start,
    `warmup_s` after the profile's 0); None with fewer than two whole intervals."""
    dt = g.interval_s or 1.0
    whole, clients = intervals(g, profile, warmup_s)
    if len(whole) < 2:
        return None
    starts = [warmup_s + p.t for p in whole]
    rates = [p.succeeded / dt for p in whole]
    smooth = [median(rates[max(0, i - 1) : i + 2]) for i in range(len(rates))]
    top = max(range(len(smooth)), key=lambda i: smooth[i])

    def point(i: int) -> ClientRampPoint:
        t = starts[i]
        return ClientRampPoint(
            clients=clients[i],
            low=clients_at(profile, t),
            high=clients_at(profile, t + dt - 1e-6),
            at_s=whole[i].t,
            rate_hz=rates[i],
        )

    ramp = ClientRamp(interval_s=dt, top_clients=max(clients), peak_hz=smooth[top], peak=point(top))
    flat = next(i for i, r in enumerate(smooth) if r >= (1 - CLIENT_RAMP_FLAT) * smooth[top])
    more = [i for i in range(flat + 1, len(whole)) if clients[i] > clients[flat]]
    if len(more) >= CLIENT_RAMP_AFTER:
        ramp.no_faster = point(flat)
    j = lasting([(p.failed + p.hung) > onset * (p.succeeded + p.failed + p.hung) for p in whole])
    if j is not None:
        ramp.errors = point(j)
    if slo is not None and (slo.p99_ms is None or any(p.p99_ms is not None for p in whole)):
        misses = [interval_missed(slo, p) for p in whole]
        k = lasting([bool(m) for m in misses])
        if k is not None:
            ramp.slo_broken, ramp.slo_missed = point(k), misses[k]
    ramp.sentences = _sentences(ramp, slo)
    return ramp


def _clients(p: ClientRampPoint, dt: float) -> str:
    n = f"{fmt.level(round(p.clients, 1))} clients"
    return f"{n} ({p.low}–{p.high} over {fmt.level(dt)}-s intervals)" if p.low != p.high else n


def _sentences(r: ClientRamp, slo: Slo | None) -> list[str]:
    top = f"{fmt.level(round(r.top_clients, 1))} clients"
    if r.no_faster is None:
        out = [f"still faster with more clients at the top of the ramp: {fmt.per_s(r.peak_hz)} at {top}"]
    else:
        out = [f"no faster from {_clients(r.no_faster, r.interval_s)}: a peak of {fmt.per_s(r.peak_hz)}"]
    if r.errors is None:
        out.append(f"no errors up to {top}")
    else:
        out.append(f"errors from {_clients(r.errors, r.interval_s)}")
    where = None if r.slo_broken is None else _clients(r.slo_broken, r.interval_s)
    return out + slo_sentence(slo, where, r.slo_missed, top)
