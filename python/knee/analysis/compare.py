"""Two runs side by side, level by level: did B (say, the new server version) do better than A?

Levels are matched by (group, phase, direction, label, level, n-th occurrence). At each level:

- **Throughput** is judged from the per-interval series: the rates of the complete intervals of A's
  step and B's step are two samples, and Welch's t-test (unequal variances) asks whether their means
  differ. B is *better* / *worse* when p < `alpha` (default 0.05) **and** the change is at least
  `min_change` (default 2 %): a real but negligible difference is reported as within noise. When a
  step has fewer than 3 complete intervals, the counts are treated as Poisson and the rates compared
  with a z-test (z = (x_b - x_a) / sqrt(n_a / t_a² + n_b / t_b²)).
- **Failures** (failed + hung over all operations) are compared with a two-proportion z-test at the
  same `alpha`.
- The level is *better* when one of them improved and none got worse, *worse* when one got worse
  and none improved, *mixed* when both happened, and *within noise* otherwise.

p99 latency is shown but not judged: a run keeps one p99 per level, so there is no noise estimate. It is
the succeeded operations' p99 (none when nothing succeeded), so failures that come at once never pass for
a faster service; a run recorded before knee kept failures' latency apart (run.json schema 2) is named in
the summary, as its p99 mixes both.
The tests are in `knee.analysis.stats`; `knee.report.compare` renders a Comparison.
"""

from __future__ import annotations

from collections import defaultdict
from typing import Literal

from pydantic import BaseModel, Field

from knee import fmt
from knee.analysis.beside import stress_group
from knee.analysis.run import group_names
from knee.analysis.stats import failures_test, rate_test
from knee.model import SUCCESS_LATENCY_SINCE, GroupStats, RunRecord, StepResult

Judgement = Literal["better", "worse", "same", "unknown"]


class LevelDelta(BaseModel):
    group: str
    phase: str
    direction: str
    label: str
    level: int | float
    clients_a: int | None = None
    clients_b: int | None = None
    rate_a: float | None = None
    rate_b: float | None = None
    change_pct: float | None = None
    rate_p_value: float | None = None
    rate_test: str = ""  # "welch" | "poisson" | ""
    rate: Judgement = "unknown"
    p99_a_ms: float | None = None
    p99_b_ms: float | None = None
    failures_a: int | None = None
    failures_b: int | None = None
    failure_ratio_a: float | None = None
    failure_ratio_b: float | None = None
    failures_p_value: float | None = None
    failures: Judgement = "unknown"
    # the TLS handshakes' mean and the resumed share, where the level's connections shook hands (None elsewhere):
    # shown beside the verdict, not part of it (a handshake's cost is a cause, the rate and failures the effect)
    tls_a_ms: float | None = None
    tls_b_ms: float | None = None
    resumed_a: float | None = None
    resumed_b: float | None = None
    overall: Literal["better", "worse", "mixed", "within noise", "only in A", "only in B"] = "within noise"


class PeakDelta(BaseModel):
    group: str
    peak_level_a: int | float | None = None
    peak_rate_a: float | None = None
    peak_level_b: int | float | None = None
    peak_rate_b: float | None = None
    change_pct: float | None = None


class Comparison(BaseModel):
    run_a: str
    run_b: str
    alpha: float
    min_change: float
    levels: list[LevelDelta] = Field(default_factory=list)
    peaks: list[PeakDelta] = Field(default_factory=list)
    summary: list[str] = Field(default_factory=list)


def _key(s: StepResult) -> tuple[str, str, str, int | float]:
    return (s.phase, s.direction, s.label, s.level)


def _numbered(record: RunRecord) -> dict[tuple[str, str, str, int | float, int], StepResult]:
    seen: dict[tuple[str, str, str, int | float], int] = defaultdict(int)
    out = {}
    for s in record.steps:
        k = _key(s)
        out[(*k, seen[k])] = s
        seen[k] += 1
    return out


def _p99(g: GroupStats) -> float | None:
    """The succeeded operations' p99 (None when nothing succeeded: there is no latency to compare)."""
    return g.latency_ms.p99 if g.latency_ms.count else None


def _tls(g: GroupStats) -> tuple[float | None, float | None]:
    """The handshakes' mean (ms) and the share of them that resumed a session; (None, None) without any."""
    n = g.tls_ms.count
    return (g.tls_ms.mean, g.tls_resumed / n) if n else (None, None)


def compare_level(
    group: str, sa: StepResult | None, sb: StepResult | None, alpha: float, min_change: float
) -> LevelDelta:
    ref = sa if sa is not None else sb
    assert ref is not None
    d = LevelDelta(group=group, phase=ref.phase, direction=ref.direction, label=ref.label, level=ref.level)
    a = sa.groups.get(group) if sa is not None else None
    b = sb.groups.get(group) if sb is not None else None
    if a is not None:
        d.clients_a, d.rate_a, d.p99_a_ms = a.clients, a.rate_hz, _p99(a)
        d.failures_a, d.failure_ratio_a = a.failed + a.hung, a.failure_ratio
        d.tls_a_ms, d.resumed_a = _tls(a)
    if b is not None:
        d.clients_b, d.rate_b, d.p99_b_ms = b.clients, b.rate_hz, _p99(b)
        d.failures_b, d.failure_ratio_b = b.failed + b.hung, b.failure_ratio
        d.tls_b_ms, d.resumed_b = _tls(b)
    if a is None or b is None:
        d.overall = "only in A" if b is None else "only in B"
        return d
    if a.rate_hz > 0:
        d.change_pct = (b.rate_hz - a.rate_hz) / a.rate_hz * 100
    d.rate_p_value, d.rate_test = rate_test(a, b)
    big_enough = d.change_pct is None or abs(d.change_pct) >= min_change * 100
    if d.rate_p_value is None:
        d.rate = "unknown"
    elif d.rate_p_value < alpha and big_enough and b.rate_hz != a.rate_hz:
        d.rate = "better" if b.rate_hz > a.rate_hz else "worse"
    else:
        d.rate = "same"
    d.failures_p_value = failures_test(a, b)
    if d.failures_p_value is None:
        d.failures = "unknown"
    elif d.failures_p_value < alpha and b.failure_ratio != a.failure_ratio:
        d.failures = "better" if b.failure_ratio < a.failure_ratio else "worse"
    else:
        d.failures = "same"
    verdicts = {d.rate, d.failures}
    if "better" in verdicts and "worse" in verdicts:
        d.overall = "mixed"
    elif "better" in verdicts:
        d.overall = "better"
    elif "worse" in verdicts:
        d.overall = "worse"
    return d


def _peak(record: RunRecord, group: str) -> tuple[int | None, float | None]:
    sweep = [s for s in record.steps if s.phase == "sweep" and group in s.groups]
    if not sweep:
        return None, None
    best = max(sweep, key=lambda s: s.groups[group].rate_hz)
    return best.groups[group].clients, best.groups[group].rate_hz


def compare_runs(a: RunRecord, b: RunRecord, *, alpha: float = 0.05, min_change: float = 0.02) -> Comparison:
    """Match A's and B's steps level by level and judge each difference against the noise."""
    cmp = Comparison(run_a=a.run_id, run_b=b.run_id, alpha=alpha, min_change=min_change)
    na, nb = _numbered(a), _numbered(b)
    keys = list(na) + [k for k in nb if k not in na]
    groups = group_names(a) + [g for g in group_names(b) if g not in group_names(a)]
    for group in groups:
        for k in keys:
            sa, sb = na.get(k), nb.get(k)
            if (sa is None or group not in sa.groups) and (sb is None or group not in sb.groups):
                continue
            cmp.levels.append(compare_level(group, sa, sb, alpha, min_change))
        if stress_group(a, group) is not None or stress_group(b, group) is not None:
            continue  # a background group has no peak of its own (beside.py): its levels are compared above
        la, ra = _peak(a, group)
        lb, rb = _peak(b, group)
        change = (rb - ra) / ra * 100 if ra and rb is not None else None
        cmp.peaks.append(
            PeakDelta(group=group, peak_level_a=la, peak_rate_a=ra, peak_level_b=lb, peak_rate_b=rb, change_pct=change)
        )
    cmp.summary = _summary(cmp, groups)
    for name, r in (("A", a), ("B", b)):
        if r.schema_version < SUCCESS_LATENCY_SINCE:
            cmp.summary.append(
                f"run {name} ({r.run_id}) was recorded before knee kept failed operations' latency apart: its p99 "
                "mixes failures with successes, so the p99 columns do not compare like with like"
            )
    return cmp


def _summary(cmp: Comparison, groups: list[str]) -> list[str]:
    out = []
    for group in groups:
        rows = [d for d in cmp.levels if d.group == group]
        by: dict[str, list[str]] = defaultdict(list)
        for d in rows:
            by[d.overall].append(level_name(d))
        parts = []
        unmatched = len(by["only in A"]) + len(by["only in B"])
        for word in ("better", "worse", "mixed", "within noise"):
            if by[word]:
                parts.append(f"{word} at {len(by[word])} ({', '.join(by[word])})")
        if unmatched:
            parts.append(f"{unmatched} levels only in one run")
        matched = len(rows) - unmatched
        better, worse = len(by["better"]), len(by["worse"]) + len(by["mixed"])
        if better and not worse:
            head = f"B is better than A at {better} of {matched} levels, worse at none"
        elif worse and not better:
            head = f"B is worse than A at {worse} of {matched} levels, better at none"
        elif better or worse:
            head = f"B is better than A at {better} of {matched} levels and worse at {worse}"
        else:
            head = f"no difference beyond noise at any of {matched} levels"
        out.append(f"{group}: {head}: " + "; ".join(parts) if parts else f"{group}: no levels to compare")
        peak = next((p for p in cmp.peaks if p.group == group), None)
        if peak and peak.peak_rate_a is not None and peak.peak_rate_b is not None:
            ch = f" ({peak.change_pct:+.1f} %)" if peak.change_pct is not None else ""
            out.append(
                f"{group}: peak A {fmt.rate(peak.peak_rate_a)} at {peak.peak_level_a} clients, "
                f"B {fmt.rate(peak.peak_rate_b)} at {peak.peak_level_b} clients{ch}"
            )
    return out


def level_name(d: LevelDelta) -> str:
    name = str(d.level)
    if d.label:
        name += f" {d.label}"
    if d.phase == "recovery":
        name += " rec."
    elif d.direction == "down":
        name += " down"
    return name
