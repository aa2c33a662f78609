"""Two runs side by side, level by level: did B (say, the new server version) do better than A, beyond noise?

Levels are matched by (group, phase, direction, label, level, n-th occurrence). At each level (docs/reports.md):

- **Throughput**: each run's rate is the report's (after the ramp of the first operation latency) with its standard
  error from its own per-interval series by batch means (the counting noise of its successes when the step has too
  few intervals); B's change against A's carries a `confidence` interval (default 95 %) that adds, to both runs'
  own noise, a `floor` of run-to-run variation (default 5 % of the rate, a standard deviation per run) that one
  step's series cannot show (`knee.analysis.stats.change`). B is *better* / *worse* when the interval leaves out 0
  **and** the change is at least `min_change` (default 2 %); otherwise there is *no change within noise*.
- **Failures** (failed + hung over all operations) are compared with a two-proportion z-test at alpha = 1 − confidence.
- The level is *better* when one of them improved and none got worse, *worse* when one got worse
  and none improved, *mixed* when both happened, and *no change within noise* otherwise.

p99 carries an interval too (order statistics of its rank over about n ÷ clients independent samples, and twice the
floor), where a level had enough operations per client to judge it (stats.P99_SAMPLES): shown, and held against
`--fail-on p99:…`, but not part of the level's judgement (in a closed loop it moves with the rate, by Little's law).
It is the succeeded operations' p99 (none when nothing succeeded), so failures that come at once never pass for a
faster service; a run recorded before knee kept failures' latency apart (run.json schema 2) is named in the
summary, as its p99 mixes both. Runs whose targets, scenario or machine differ are named first (`knee.analysis.alike`).

A request mix (an http group's named requests, counted apart) is compared request by request at each level where
both runs' group had the same request names (`RequestDelta`): each request's rate (its successes over the seconds
the group measured, with their counting noise: requests have no series of their own) and p99 by the same intervals
and `floor`, its failures by the same z-test; shown beside the group's, not part of the level's judgement.
`knee.analysis.failon` holds the `--fail-on` rules; `knee.report.compare` renders a Comparison.
"""

from __future__ import annotations

import math
from collections import defaultdict
from typing import Final, Literal

from pydantic import BaseModel, Field

from knee import fmt
from knee.analysis.alike import differences
from knee.analysis.beside import stress_group
from knee.analysis.levels import cut_short, measured_s, ran_out_early
from knee.analysis.run import group_names
from knee.analysis.stats import (
    CONFIDENCE,
    NOISE_FLOOR,
    P99_FLOOR,
    Change,
    Estimate,
    change,
    failures_test,
    p99_estimate,
    rate_estimate,
)
from knee.model import SUCCESS_LATENCY_SINCE, GroupStats, Outcomes, RequestStats, RunRecord, StepResult

Judgement = Literal["better", "worse", "same", "unknown"]
SAME: Final = "no change within noise"
ONSET = 0.001  # the failure ratio at which errors have started (the verdict's default, DESIGN.md)


class _Delta(BaseModel):
    """What a level's row and a request's row share: where they stand, and their rates' and p99s' changes, each
    with its interval and judgement, and the failure ratios' test."""

    group: str
    phase: str
    direction: str
    label: str
    level: int | float
    change_pct: float | None = None
    noise_pct: float | None = None  # the change's interval: change_pct ± noise_pct (percentage points)
    rate: Judgement = "unknown"
    p99_a_ms: float | None = None
    p99_b_ms: float | None = None
    p99_change_pct: float | None = None
    p99_noise_pct: float | None = None
    p99: Judgement = "unknown"  # shown and held against --fail-on p99, not part of `overall`
    failures_p_value: float | None = None
    failures: Judgement = "unknown"


class LevelDelta(_Delta):
    """One level of a group, B against A."""

    clients_a: int | None = None
    clients_b: int | None = None
    rate_a: float | None = None
    rate_b: float | None = None
    rate_method: str = ""  # how the runs' noise was estimated: "batch means" (both) or "counting" (either)
    failures_a: int | None = None
    failures_b: int | None = None
    failure_ratio_a: float | None = None
    failure_ratio_b: float | None = None
    # the TLS handshakes' mean and the resumed share, where the level's connections shook hands (None elsewhere):
    # shown beside the verdict, not part of it (a handshake's cost is a cause, the rate and failures the effect)
    tls_a_ms: float | None = None
    tls_b_ms: float | None = None
    resumed_a: float | None = None
    resumed_b: float | None = None
    overall: Literal["better", "worse", "mixed", "no change within noise", "only in A", "only in B"] = SAME

    @property
    def rate_low(self) -> float | None:
        return None if self.change_pct is None or self.noise_pct is None else self.change_pct - self.noise_pct

    @property
    def rate_high(self) -> float | None:
        return None if self.change_pct is None or self.noise_pct is None else self.change_pct + self.noise_pct


class RequestDelta(_Delta):
    """One request of a mix at one level, B against A (both runs' group had the same request names there)."""

    request: str
    count_a: int = Field(description="operations that ended (succeeded + failed + hung)")
    count_b: int
    rate_a: float = Field(description="successes per measured second")
    rate_b: float
    failure_ratio_a: float = 0.0
    failure_ratio_b: float = 0.0
    overall: Literal["better", "worse", "mixed", "no change within noise"] = SAME


class PeakDelta(BaseModel):
    group: str
    # the step's level: clients, or the offered rate of a rate sweep (`unit`)
    unit: Literal["clients", "rate"] = "clients"
    peak_level_a: int | float | None = None
    peak_rate_a: float | None = None
    peak_level_b: int | float | None = None
    peak_rate_b: float | None = None
    change_pct: float | None = None


class Comparison(BaseModel):
    run_a: str
    run_b: str
    confidence: float = CONFIDENCE
    noise_floor: float = NOISE_FLOOR
    min_change: float
    # what differs between the runs besides the service (targets, scenario, machine): said before anything else
    warnings: list[str] = Field(default_factory=list)
    levels: list[LevelDelta] = Field(default_factory=list)
    requests: list[RequestDelta] = Field(default_factory=list, description="a request mix's requests, level by level")
    peaks: list[PeakDelta] = Field(default_factory=list)
    summary: list[str] = Field(default_factory=list)
    fail_on: list[str] = Field(default_factory=list)  # the --fail-on rules held against it (knee.analysis.failon)
    failed: list[str] = Field(default_factory=list)  # the rules that failed, with the levels where they did


def _key(s: StepResult) -> tuple[str, str, str, int | float]:
    return (s.phase, s.direction, s.label, s.level)


def _numbered(record: RunRecord) -> dict[tuple[str, str, str, int | float, int], StepResult]:
    """The steps the analysis believes (not superseded by a measurement again, not run on a service still busy with
    the last level), numbered where a level was measured more than once."""
    seen: dict[tuple[str, str, str, int | float], int] = defaultdict(int)
    out = {}
    for s in record.steps:
        if not s.believed:
            continue
        k = _key(s)
        out[(*k, seen[k])] = s
        seen[k] += 1
    return out


def _in_level_order(keys: list[tuple[str, str, str, int | float, int]]) -> list[tuple[str, str, str, int | float, int]]:
    """The sweep's steps by level (up, then down from the top), the stages of a level in their order, recovery
    probes last: a level only B measured stands among A's, not after them all."""
    labels = list(dict.fromkeys(k[2] for k in keys))

    def order(k: tuple[str, str, str, int | float, int]) -> tuple[int, int, float, int, int]:
        phase, direction, label, level, n = k  # _key's order
        down = direction == "down"
        return (phase != "sweep", down, -level if down else level, labels.index(label), n)

    return sorted(keys, key=order)


def _p99(g: GroupStats) -> float | None:
    """The succeeded operations' p99 (None when nothing succeeded: there is no latency to compare)."""
    return g.latency_ms.p99 if g.latency_ms.count else None


def _tls(g: GroupStats) -> tuple[float | None, float | None]:
    """The handshakes' mean (ms) and the share of them that resumed a session; (None, None) without any."""
    n = g.tls_ms.count
    return (g.tls_ms.mean, g.tls_resumed / n) if n else (None, None)


def _judge(c: Change | None, min_change: float, higher_is_better: bool = True) -> Judgement:
    """Better or worse when the interval leaves out 0 and the change is at least `min_change` (a share)."""
    if c is None:
        return "unknown"
    if (c.low > 0 or c.high < 0) and abs(c.pct) >= min_change * 100:
        return "better" if (c.pct > 0) == higher_is_better else "worse"
    return "same"


def compare_level(
    group: str,
    sa: StepResult | None,
    sb: StepResult | None,
    *,
    confidence: float = CONFIDENCE,
    floor: float = NOISE_FLOOR,
    min_change: float = 0.02,
    onset: float = ONSET,
) -> LevelDelta:
    ref = sa if sa is not None else sb
    assert ref is not None
    d = LevelDelta(group=group, phase=ref.phase, direction=ref.direction, label=ref.label, level=ref.level)
    a = sa.groups.get(group) if sa is not None else None
    b = sb.groups.get(group) if sb is not None else None
    if a is not None:
        d.clients_a, d.p99_a_ms = a.clients, _p99(a)
        d.failures_a, d.failure_ratio_a = a.failed + a.hung, a.failure_ratio
        d.tls_a_ms, d.resumed_a = _tls(a)
    if b is not None:
        d.clients_b, d.p99_b_ms = b.clients, _p99(b)
        d.failures_b, d.failure_ratio_b = b.failed + b.hung, b.failure_ratio
        d.tls_b_ms, d.resumed_b = _tls(b)
    if a is None or b is None or sa is None or sb is None:
        d.rate_a = rate_estimate(sa, a).value if sa is not None and a is not None else None
        d.rate_b = rate_estimate(sb, b).value if sb is not None and b is not None else None
        d.overall = "only in A" if b is None else "only in B"
        return d
    ra, rb = rate_estimate(sa, a), rate_estimate(sb, b)
    d.rate_a, d.rate_b = ra.value, rb.value
    d.rate_method = "batch means" if ra.method == rb.method == "batch means" else "counting"
    rc = change(ra, rb, confidence, floor)
    if rc is not None:
        d.change_pct, d.noise_pct = rc.pct, rc.noise_pct
    if rc is not None:
        d.rate = _judge(rc, min_change)
    else:  # nothing succeeded in A: B is better when its successes are more than its own noise
        d.rate = "better" if rb.value > 2 * rb.se else "same"
    pa, pb = p99_estimate(a, confidence), p99_estimate(b, confidence)
    if pa is not None and pb is not None:
        pc = change(pa, pb, confidence, floor * P99_FLOOR)
        if pc is not None:
            d.p99_change_pct, d.p99_noise_pct = pc.pct, pc.noise_pct
        d.p99 = _judge(pc, min_change, higher_is_better=False)
    d.failures_p_value = failures_test(a, b)
    d.failures = "unknown" if d.failures_p_value is None else _failures(a, b, d.failures_p_value, confidence, onset)
    d.overall = _overall(d.rate, d.failures)
    return d


def _failures(a: Outcomes, b: Outcomes, p: float, confidence: float, onset: float = ONSET) -> Judgement:
    """B's failures against A's: a change beyond noise (`p`) where either run's failure ratio passes the onset of
    errors (`[analysis] onset`, 0.1 % by default). At or below it both verdicts say "no errors", and the test counts
    each failure as independent: 4 of 50 000 against none (one reset that failed 4 clients together) read z = 2,
    "worse". With `onset = 0` any failure is an error, and a change in them is judged."""
    if p >= 1 - confidence or b.failure_ratio == a.failure_ratio or max(a.failure_ratio, b.failure_ratio) <= onset:
        return "same"
    return "better" if b.failure_ratio < a.failure_ratio else "worse"


def _overall(*judged: Judgement) -> Literal["better", "worse", "mixed", "no change within noise"]:
    if "better" in judged and "worse" in judged:
        return "mixed"
    if "better" in judged:
        return "better"
    return "worse" if "worse" in judged else SAME


def _request_rate(s: StepResult, g: GroupStats, r: RequestStats) -> Estimate:
    """A request's successes per second the group measured, with their counting noise (√n over the seconds)."""
    seconds = measured_s(s, g)
    if seconds <= 0:
        return Estimate(0.0, 0.0, math.inf, "counting")
    return Estimate(r.succeeded / seconds, math.sqrt(r.succeeded) / seconds, math.inf, "counting")


def compare_requests(
    group: str,
    sa: StepResult,
    sb: StepResult,
    *,
    confidence: float = CONFIDENCE,
    floor: float = NOISE_FLOOR,
    min_change: float = 0.02,
    onset: float = ONSET,
) -> list[RequestDelta]:
    """Each request of the group's mix at one level, B against A: none unless both had the same request names."""
    a, b = sa.groups.get(group), sb.groups.get(group)
    if a is None or b is None or not a.requests or set(a.requests) != set(b.requests):
        return []
    out = []
    for name, ra in a.requests.items():
        rb = b.requests[name]
        d = RequestDelta(group=group, phase=sa.phase, direction=sa.direction, label=sa.label, level=sa.level,
                         request=name, count_a=ra.total, count_b=rb.total, rate_a=0.0, rate_b=0.0)  # fmt: skip
        ea, eb = _request_rate(sa, a, ra), _request_rate(sb, b, rb)
        d.rate_a, d.rate_b = ea.value, eb.value
        rc = change(ea, eb, confidence, floor)
        if rc is not None:
            d.change_pct, d.noise_pct = rc.pct, rc.noise_pct
            d.rate = _judge(rc, min_change)
        d.p99_a_ms = ra.latency_ms.p99 if ra.latency_ms.count else None
        d.p99_b_ms = rb.latency_ms.p99 if rb.latency_ms.count else None
        pa, pb = p99_estimate(ra, confidence, a.clients), p99_estimate(rb, confidence, b.clients)
        if pa is not None and pb is not None:
            pc = change(pa, pb, confidence, floor * P99_FLOOR)
            if pc is not None:
                d.p99_change_pct, d.p99_noise_pct = pc.pct, pc.noise_pct
            d.p99 = _judge(pc, min_change, higher_is_better=False)
        d.failure_ratio_a, d.failure_ratio_b = ra.failure_ratio, rb.failure_ratio
        d.failures_p_value = failures_test(ra, rb)
        if d.failures_p_value is not None:
            d.failures = _failures(ra, rb, d.failures_p_value, confidence, onset)
        d.overall = _overall(d.rate, d.failures)
        out.append(d)
    return out


def _left_out(s: StepResult, group: str) -> bool:
    """Step `s` has no rate of group `group` to judge, and the analysis leaves it out: its data ran out before any
    operation ended, or it was cut short (Ctrl-C) before its operations could end."""
    return ran_out_early(s, group) or cut_short(s, group)


def _peak(record: RunRecord, group: str) -> tuple[int | float | None, float | None]:
    """The group's peak as its verdict gives it (the best level before errors start, repeated levels pooled), else
    (a record without one) the believed sweep step with the highest rate, as the table shows rates
    (`rate_estimate`): its level (clients, or a rate sweep's offered rate) and rate. The highest rate of any step
    was often one with 45 % failed, and the change between two runs' peaks then ran the wrong way."""
    v = next((v for v in record.verdicts if v.group == group), None)
    if v is not None and v.peak_level is not None and v.peak_rate is not None:
        return v.peak_level, v.peak_rate
    if any(s.label for s in record.steps):
        return None, None  # stages (a fixed-work scenario's): one stage's peak against another's would say nothing
    onset = record.scenario.analysis.onset
    steps = [s for s in record.steps if s.phase == "sweep" and group in s.groups and s.believed]
    steps = [s for s in steps if not _left_out(s, group)]
    # the peak is before errors start, as the verdict has it (else, errors at every level, the highest rate)
    clean = [s for s in steps if s.groups[group].failure_ratio <= onset] or steps
    rates = [(rate_estimate(s, s.groups[group]).value, s) for s in clean]
    if not rates:
        return None, None
    rate, best = max(rates, key=lambda r: r[0])
    return best.level, rate


def compare_runs(
    a: RunRecord,
    b: RunRecord,
    *,
    confidence: float = CONFIDENCE,
    floor: float = NOISE_FLOOR,
    min_change: float = 0.02,
) -> Comparison:
    """Match A's and B's steps level by level and judge each difference against the noise."""
    cmp = Comparison(run_a=a.run_id, run_b=b.run_id, confidence=confidence, noise_floor=floor, min_change=min_change)
    cmp.warnings = differences(a, b)
    # where errors start, as each run's verdict has it: the lower of the two (a run that counts any failure an error)
    onset = min(a.scenario.analysis.onset, b.scenario.analysis.onset)
    na, nb = _numbered(a), _numbered(b)
    keys = _in_level_order(list(na) + [k for k in nb if k not in na])
    groups = group_names(a) + [g for g in group_names(b) if g not in group_names(a)]
    for group in groups:
        for k in keys:
            sa, sb = (s if s is not None and not _left_out(s, group) else None for s in (na.get(k), nb.get(k)))
            if (sa is None or group not in sa.groups) and (sb is None or group not in sb.groups):
                continue
            cmp.levels.append(
                compare_level(group, sa, sb, confidence=confidence, floor=floor, min_change=min_change, onset=onset)
            )
            if sa is not None and sb is not None:
                cmp.requests += compare_requests(
                    group, sa, sb, confidence=confidence, floor=floor, min_change=min_change, onset=onset
                )
        if stress_group(a, group) is not None or stress_group(b, group) is not None:
            continue  # a background group has no peak of its own (beside.py): its levels are compared above
        la, ra = _peak(a, group)
        lb, rb = _peak(b, group)
        change_pct = (rb - ra) / ra * 100 if ra and rb is not None else None
        cmp.peaks.append(
            PeakDelta(
                group=group,
                unit=a.level_unit,
                peak_level_a=la,
                peak_rate_a=ra,
                peak_level_b=lb,
                peak_rate_b=rb,
                change_pct=change_pct,
            )
        )
    cmp.summary = _summary(cmp, groups)
    for name, r in (("A", a), ("B", b)):
        if r.schema_version < SUCCESS_LATENCY_SINCE:
            cmp.summary.append(
                f"run {name} ({r.run_id}) was recorded before knee kept failed operations' latency apart: its p99 "
                "mixes failures with successes, so the p99 columns do not compare like with like"
            )
    return cmp


def _changed(d: LevelDelta | RequestDelta) -> str:
    """'50 (−19.8 % ±9.1 %)': a level and its change in rate with the interval."""
    if d.change_pct is None or d.noise_pct is None:
        return level_name(d)
    return f"{level_name(d)} ({d.change_pct:+.1f} % ±{d.noise_pct:.1f} %)"


def _head(rows: list[LevelDelta]) -> str:
    """The answer over `rows`: 'no change within noise at any of 3 levels', or where B is better and worse."""
    matched = [d for d in rows if d.overall not in ("only in A", "only in B")]
    better = sum(d.overall == "better" for d in matched)
    worse = sum(d.overall == "worse" for d in matched)
    mixed = sum(d.overall == "mixed" for d in matched)
    n = len(matched)
    if not n:
        return "no levels in common to compare"
    if mixed:  # one measure better, another worse: neither answer alone
        return (
            f"B is better than A beyond noise in one measure and worse in another at {mixed} of {n} levels, "
            f"better at {better or 'no other'}, worse at {worse or 'no other'}"
        )
    if better and not worse:
        return f"B is better than A beyond noise at {better} of {n} levels, worse at none"
    if worse and not better:
        return f"B is worse than A beyond noise at {worse} of {n} levels, better at none"
    if better or worse:
        return f"B is better than A beyond noise at {better} of {n} levels and worse at {worse}"
    return f"{SAME} at any of {n} levels" if n > 1 else f"{SAME} at the one level"


def _summary(cmp: Comparison, groups: list[str]) -> list[str]:
    """The answer first (over every group), then each group's levels by judgement and its peaks."""
    out = [_head(cmp.levels)]
    for group in groups:
        rows = [d for d in cmp.levels if d.group == group]
        by: dict[str, list[LevelDelta]] = defaultdict(list)
        for d in rows:
            by[d.overall].append(d)
        parts = [
            f"{word} at {len(by[word])} ({', '.join(_changed(d) for d in by[word])})"
            for word in ("better", "worse", "mixed", SAME)
            if by[word]
        ]
        unmatched = len(by["only in A"]) + len(by["only in B"])
        if unmatched:
            parts.append(f"{unmatched} level{'s' if unmatched != 1 else ''} only in one run")
        out.append(f"{group}: " + "; ".join(parts) if parts else f"{group}: no levels to compare")
        out += _request_summary(cmp, group)
        peak = next((p for p in cmp.peaks if p.group == group), None)
        if peak and peak.peak_rate_a is not None and peak.peak_rate_b is not None:
            ch = f" ({peak.change_pct:+.1f} %)" if peak.change_pct is not None else ""
            out.append(
                f"{group}: peak A {fmt.rate(peak.peak_rate_a)} at {fmt.load(peak.peak_level_a or 0, peak.unit)}, "
                f"B {fmt.rate(peak.peak_rate_b)} at {fmt.load(peak.peak_level_b or 0, peak.unit)}{ch}"
            )
    return out


def _request_summary(cmp: Comparison, group: str) -> list[str]:
    """Per request of the group's mix: 'main `write`: worse at 2 (1, 2); no change within noise at 1'."""
    out = []
    for name in dict.fromkeys(d.request for d in cmp.requests if d.group == group):
        by: dict[str, list[RequestDelta]] = defaultdict(list)
        for d in cmp.requests:
            if d.group == group and d.request == name:
                by[d.overall].append(d)
        parts = [
            f"{word} at {len(by[word])} ({', '.join(_changed(d) for d in by[word])})"
            for word in ("better", "worse", "mixed", SAME)
            if by[word]
        ]
        out.append(f"{group} `{name}`: " + "; ".join(parts))
    return out


def level_name(d: LevelDelta | RequestDelta) -> str:
    name = str(d.level)
    if d.label:
        name += f" {d.label}"
    if d.phase == "recovery":
        name += " rec."
    elif d.direction == "down":
        name += " down"
    return name
