"""A request mix (an http group's `[[groups.NAME.requests]]`): each request's figures per level, and which one
broke first.

The engine counts each request of a mix apart (`GroupStats.requests`); the verdict stays about the group. Here:

- `request_rows(step, g)`: one `RequestRow` per request name of a step, in the mix's order, its rate over the
  seconds the group measured (`levels.measured_s`);
- `mix_findings`: the request that failed first as the level grew, while another held (its failure ratio over the
  verdict's `onset`, the other's at most that, at the lowest such level), else the request whose p99 grew most
  from the first level to the peak (at least SLOWED times, and APART times the next request's growth). Only for a
  group with a mix of two requests or more.
"""

from __future__ import annotations

from collections.abc import Sequence

from pydantic import ConfigDict

from knee import fmt
from knee.analysis.levels import measured_s
from knee.model import Finding, GroupStats, Level, Outcomes, RequestStats, RunRecord, StepResult, Verdict

SLOWED = 2.0  # a request slowed when its p99 at the peak is at least this many times its p99 at the first level
APART = 1.5  # … and it slowed most when its growth is at least this many times the next request's


class RequestRow(Outcomes):
    """One request of a mix over one step (or a level's pooled steps): its outcomes (`total`, `started` and
    `failure_ratio` are `Outcomes`') and figures."""

    model_config = ConfigDict(frozen=True)

    name: str
    rate_hz: float  # successes per measured second
    failures: dict[str, int]
    p50_ms: float
    p90_ms: float
    p99_ms: float
    max_ms: float
    latency_count: int


def request_row(name: str, r: RequestStats, seconds: float) -> RequestRow:
    lat = r.latency_ms
    return RequestRow(
        name=name,
        succeeded=r.succeeded,
        failed=r.failed,
        hung=r.hung,
        abandoned=r.abandoned,
        rate_hz=r.succeeded / seconds if seconds > 0 else 0.0,
        failures=dict(r.failures),
        p50_ms=lat.p50,
        p90_ms=lat.p90,
        p99_ms=lat.p99,
        max_ms=lat.max,
        latency_count=lat.count,
    )


def request_rows(s: StepResult, g: GroupStats) -> list[RequestRow]:
    """The step's requests of group `g`, in the mix's order (none without a mix)."""
    seconds = measured_s(s, g)
    return [request_row(name, r, seconds) for name, r in g.requests.items()]


def mixed(steps: Sequence[StepResult], group: str) -> list[str]:
    """The request names of `group`'s mix over `steps`, in order of first appearance (empty: no mix)."""
    names: dict[str, None] = {}
    for s in steps:
        g = s.groups.get(group)
        if g is not None:
            names.update(dict.fromkeys(g.requests))
    return list(names)


def _pooled(steps: Sequence[StepResult], group: str) -> dict[Level, dict[str, RequestRow]]:
    """Per level (ascending), each request's counts over the level's steps (their p99 the worst of them)."""
    out: dict[Level, dict[str, RequestRow]] = {}
    for s in sorted(steps, key=lambda s: (s.level, s.index)):
        g = s.groups.get(group)
        if g is None:
            continue
        at = out.setdefault(s.level, {})
        for r in request_rows(s, g):
            was = at.get(r.name)
            if was is None:
                at[r.name] = r
                continue
            at[r.name] = RequestRow(
                name=r.name,
                succeeded=was.succeeded + r.succeeded,
                failed=was.failed + r.failed,
                hung=was.hung + r.hung,
                abandoned=was.abandoned + r.abandoned,
                rate_hz=max(was.rate_hz, r.rate_hz),
                failures={k: was.failures.get(k, 0) + r.failures.get(k, 0) for k in {*was.failures, *r.failures}},
                p50_ms=max(was.p50_ms, r.p50_ms),
                p90_ms=max(was.p90_ms, r.p90_ms),
                p99_ms=max(was.p99_ms, r.p99_ms),
                max_ms=max(was.max_ms, r.max_ms),
                latency_count=was.latency_count + r.latency_count,
            )
    return out


def _names(names: Sequence[str]) -> str:
    return fmt.and_list([f"`{n}`" for n in names])


def failed_first(steps: Sequence[StepResult], group: str, onset: float, unit: str) -> Finding | None:
    """The lowest level where a request's failure ratio is over `onset` while another's is at most `onset`."""
    for level, rows in _pooled(steps, group).items():
        ran = [r for r in rows.values() if r.total]
        bad = [r for r in ran if r.failure_ratio > onset]
        held = [r for r in ran if r.failure_ratio <= onset]
        if not bad or not held:
            continue
        at = fmt.load(level, unit)
        each = ", ".join(f"`{r.name}` {fmt.pct(r.failure_ratio)}" for r in bad + held)
        classes = sorted({k for r in bad for k in r.failures}, key=lambda k: -sum(r.failures.get(k, 0) for r in bad))
        cls = f" ({', '.join(classes)})" if classes else ""
        return Finding(
            kind="mix_failed",
            level=level,
            what=f"{_names([r.name for r in bad])} failed from {at} while {_names([r.name for r in held])} held: "
            f"failed or hung {each}{cls}",
            fix=f"the limit is on {_names([r.name for r in bad])}'s path, not the whole service's: see "
            f"{'its' if len(bad) == 1 else 'their'} failure reasons at {at}",
        )
    return None


def slowed_most(steps: Sequence[StepResult], group: str, peak: Level | None, unit: str) -> Finding | None:
    """The request whose p99 grew most from the first level to the peak (both with successes), when it grew."""
    pooled = _pooled(steps, group)
    if peak is None or peak not in pooled or not pooled:
        return None
    first = next(iter(pooled))
    if first == peak:
        return None
    growth = []
    for name, top in pooled[peak].items():
        low = pooled[first].get(name)
        if low is not None and low.latency_count and top.latency_count and low.p99_ms > 0:
            growth.append((top.p99_ms / low.p99_ms, low, top))
    if len(growth) < 2:
        return None
    growth.sort(key=lambda x: -x[0])
    ratio, low, top = growth[0]
    if ratio < SLOWED or ratio < APART * growth[1][0]:
        return None
    a, b = fmt.load(first, unit), fmt.load(peak, unit)
    others = ", ".join(
        f"`{lo.name}`'s from {fmt.ms(lo.p99_ms)} to {fmt.ms(hi.p99_ms)} (×{r:.2g})" for r, lo, hi in growth[1:]
    )
    return Finding(
        kind="mix_slowed",
        level=peak,
        what=f"`{top.name}` slowed most as the level grew: its p99 went from {fmt.ms(low.p99_ms)} at {a} to "
        f"{fmt.ms(top.p99_ms)} at {b} (×{ratio:.2g}), {others}",
        fix=f"look first at what `{top.name}` waits for in the service (a lock, a pool, the disk)",
    )


def mix_findings(steps: Sequence[StepResult], v: Verdict, unit: str, record: RunRecord) -> list[Finding]:
    """The findings rule (analysis.findings): which request of the group's mix failed first, else slowed most."""
    if len(mixed(steps, v.group)) < 2:
        return []
    found = failed_first(steps, v.group, record.scenario.analysis.onset, unit)
    if found is None:
        found = slowed_most(steps, v.group, v.peak_level, unit)
    return [found] if found is not None else []
