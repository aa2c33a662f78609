"""A group's sentences: the verdict in words, the USL fit, the warnings, the findings, the baseload between steps."""

from __future__ import annotations

from knee import fmt
from knee.analysis.side import spin
from knee.analysis.soak import headline as soak_headline
from knee.model import Finding, RunRecord, StepResult, Verdict

LITTLE_GAP = 0.2


def verdict_lines(v: Verdict) -> list[str]:
    """The verdict: a headline (`headline`), then its points, the analysis' sentences each split at its top-level
    '; ' (fmt.clauses). A verdict without sentences is one line built from its fields (`verdict_line`)."""
    points = [c for s in v.sentences for c in fmt.clauses(s)]
    if not points:
        return [verdict_line(v)]
    head = headline(v)
    return [head, *points] if head is not None else points


def headline(v: Verdict) -> str | None:
    """The verdict in one sentence, from its fields: what the curve is, its best rate and where, and the levels
    where it broke ('a pool of about 4: 77.0 Hz from 4 clients; errors from 70'). None for a verdict without a
    peak (a background group, stages, nothing succeeded): its first point heads it."""
    if v.soak is not None:
        return soak_headline(v.soak, v.level_unit)
    if v.peak_level is None or v.peak_rate is None:
        return None
    unit = v.level_unit
    shape = v.shape.name if v.shape is not None else None
    low = v.brackets["plateau"].at if "plateau" in v.brackets else None
    if shape == "pool" and v.shape is not None:
        what = f"a pool of about {_count(v.shape.pool_size)}" if v.shape.pool_size else "a fixed pool"
    elif low is not None:
        what = "a plateau"
    elif shape == "connection_limit" and v.shape is not None and v.shape.connections:
        what = f"a connection limit of about {v.shape.connections:,}"
    else:
        what = _SHAPES.get(shape or "", "")
    with_ = "at" if unit == "rate" else "with"
    if v.flat and low is not None:
        best = f"{fmt.rate(v.peak_rate)} from {fmt.load(low, unit)}"
    elif what:
        best = f"{fmt.rate(v.peak_rate)} {with_} {fmt.load(v.peak_level, unit)}"
    else:
        best = f"peaked at {fmt.rate(v.peak_rate)} {with_} {fmt.load(v.peak_level, unit)}"
    bare = fmt.level_rate if unit == "rate" else fmt.level  # the unit is said once, in the best rate's words
    parts = [f"{what}: {best}" if what else best]
    both = v.error_onset_level is not None and v.error_onset_level == v.collapse_level
    for words, level in (
        ("saturated at", v.saturation_level),
        ("errors and collapse at" if both else "errors from", v.error_onset_level),
        ("collapsed at", None if both else v.collapse_level),
        ("did not come back to rest after", v.degraded_after),
    ):
        if level is not None:
            parts.append(f"{words} {bare(level)}")
    if v.error_onset_level is None and v.collapse_level is None:
        parts.append("no errors")
    if v.capacity_under_slo is not None:
        parts.append(f"{bare(v.capacity_under_slo)} under the SLO")
    elif v.slo_passed is False:
        parts.append("no level met the SLO")
    if v.recovered is False:
        parts.append("did not recover")
    return "; ".join(parts)


# The headline's words for a named shape (shape.py) other than a pool
_SHAPES = {
    "retrograde": "retrograde",
    "refusing": "a limit that refuses",
    "connection_limit": "a connection limit",
    "load_side": "held by the load side",
    "rising": "still rising",
    "flat": "flat",
}


def _count(x: float) -> str:
    """A pool's size for a headline: '4', '4.3', '12'."""
    return f"{x:.0f}" if x >= 10 else f"{x:.1f}".removesuffix(".0")


def verdict_line(v: Verdict) -> str:
    """The verdict as one line: the analysis' own sentences, or words built from its fields."""
    if v.sentences:
        return "; ".join(v.sentences)
    unit = v.level_unit
    parts = []
    if v.peak_level is not None and v.peak_rate is not None:
        parts.append(
            f"peaked at {fmt.rate(v.peak_rate)} {'at' if unit == 'rate' else 'with'} {fmt.load(v.peak_level, unit)}"
        )
    for words, level in (
        ("errors from", v.error_onset_level),
        ("saturated at", v.saturation_level),
        ("collapsed at", v.collapse_level),
    ):
        if level is not None:
            parts.append(f"{words} {fmt.load(level, unit)}")
    if v.recovered is True:
        took = f" after {fmt.duration(v.time_to_recover_s)}" if v.time_to_recover_s is not None else ""
        parts.append(f"recovered{took}")
    elif v.recovered is False:
        parts.append("did not recover")
    if v.capacity_under_slo is not None:
        parts.append(f"capacity under the SLO: {fmt.load(v.capacity_under_slo, unit)}")
    return "; ".join(parts) if parts else "no verdict (too few levels)"


def usl_line(v: Verdict) -> str | None:
    f = v.usl
    if f is None:
        d = v.usl_disowned
        return f"no USL model fits this curve: {d.disowned}" if d is not None else None
    if v.flat:
        what = "a fixed pool" if v.shape is not None and v.shape.name == "pool" else "a plateau"
        peak = f"no N*: the curve is {what} (it flattens, it does not turn down)"
    elif f.n_star and f.peak_rate:
        peak = f"N* = {f.n_star:.0f}, peak {fmt.rate(f.peak_rate)}"
    else:
        peak = "no peak (κ = 0)"
    on = " on Little's-law concurrency (N = achieved × time in service)" if v.level_unit == "rate" else ""
    return f"USL fit{on}: σ = {f.sigma:.4g}, κ = {f.kappa:.3g}, λ = {f.lam:.4g} Hz/client; {peak}; R² = {f.r2:.3f}"


def warning_lines(record: RunRecord, group: str, v: Verdict | None) -> list[str]:
    """Load-side saturation, Little's-law gaps, USL caveats and the analysis' own warnings."""
    out = []
    for s in record.steps:
        gen = s.generator
        if gen.saturated and group in s.groups:
            spun = spin(s, group)
            why = (
                "its numbers measure the load generator as much as the service"
                if spun is None
                else f"by failing clients that spun ({spun.words()}): see Why"
            )
            out.append(
                f"the load side was saturated at step {s.index} ({fmt.load(s.level, record.level_unit)}: knee "
                f"{gen.cpu_cores:.2f} and its child processes {gen.children_cpu_cores:.2f} of "
                f"{gen.cores_words()}{gen.others()}); {why}"
            )
        if s.skewed and s.start_skew_s is not None:
            out.append(
                f"step {s.index}'s shards started {fmt.ms(s.start_skew_s * 1000)} apart, over 5 % of the step: "
                "its workers did not load the service together"
            )
        if s.lost_workers and group in s.groups:
            out.append(f"step {s.index} lost {'; '.join(s.lost_workers)}: its numbers cover the rest only (partial)")
    if v is not None:
        said_little = any("Little" in w for w in v.warnings)
        for c in [] if said_little else v.little:
            if c.gap > LITTLE_GAP:
                out.append(
                    f"Little's law: at {c.level} clients X·(R+Z) = {c.expected_n:.1f}, {c.gap * 100:.0f} % off; "
                    "clients were idle or not all in the service (check think time and client-side limits)"
                )
        out.extend(w for w in v.warnings if w not in out)
        if v.usl is not None:
            out.extend(f"USL: {w}" for w in v.usl.warnings)
    return out


def finding_line(f: Finding) -> str:
    return f"{f.what}. Fix: {f.fix}" if f.fix else f.what


SETTLE_SAID_S = 0.5  # a wait this long is listed (and one that found connections queued at the service)


def between_line(record: RunRecord, group: str) -> str | None:
    c = record.between.get(group)
    if c is None:
        return None
    return (
        f"outside the steps (pauses, start and end) the baseload started {c.started:,} more operations: "
        f"{c.succeeded:,} succeeded, {c.failed:,} failed, {c.hung:,} hung, {c.abandoned:,} abandoned"
    )


def search_lines(record: RunRecord, group: str) -> list[str]:
    """levels = "auto": each searched step in the order it ran, with why the search chose it, and why it ended."""
    steps = [s for s in record.steps if s.phase == "sweep" and s.reason and group in s.groups]
    out = [f"{n}. {fmt.load(s.level, record.level_unit)}: {s.reason}{_doubted(s)}" for n, s in enumerate(steps, 1)]
    if out and record.search_end:
        out.append(f"done: {record.search_end}")
    return out


def _doubted(s: StepResult) -> str:
    """Why the analysis does not believe a step, after its line: ' (unsettled: …)', ' (superseded: …)'."""
    if s.unsettled:
        return " (began before the service was back at rest: it locates nothing)"
    if s.superseded:
        return " (contradicted its neighbours and did not repeat when measured again: left out)"
    if s.unconfirmed:
        return " (contradicted its neighbours and was not measured again: not confirmed, left out)"
    return ""


def settle_lines(record: RunRecord, group: str) -> list[str]:
    """What knee waited for before the steps (StepResult.settle): each wait that found something, took a while or
    ran out, and the single operations it sent to the service to probe it."""
    out = []
    steps = [s for s in record.steps if s.settle is not None and group in s.groups]
    for s in steps:
        st = s.settle
        assert st is not None
        at = f"before {fmt.load(s.level, record.level_unit)} (step {s.index})"
        if not st.settled:
            out.append(f"{at}: not at rest after {fmt.duration(st.seconds)}: {st.reason}; the step ran unsettled")
        elif st.seconds >= SETTLE_SAID_S or st.queued:
            out.append(f"{at}: settled in {fmt.duration(st.seconds)}: {st.reason}")
    probes = sum(s.settle.probes for s in steps if s.settle is not None)
    if out or probes:
        failed = sum(s.settle.probe_failed for s in steps if s.settle is not None)
        rest = next((s.settle.rest_ms for s in steps if s.settle is not None and s.settle.rest_ms), None)
        at_rest = f" (a single operation at rest: {fmt.ms(rest)})" if rest else ""
        out.append(
            f"knee sent {probes:,} single operation{'s' * (probes != 1)} to see whether the service was at rest"
            f"{at_rest}, {failed:,} of them failed or hung; they are not in the steps' counts"
        )
    return out


def steady_lines(record: RunRecord, group: str) -> list[str]:
    """duration = "auto": per level, the warm-up cut, the rate after it with its 95 % interval, and whether it
    settled before max_duration."""
    out = []
    for s in record.steps:
        st = s.steady
        if st is None or not st.auto or st.group != group:
            continue
        spread = f" ± {fmt.pct(st.half_width_hz / st.rate_hz)}" if st.half_width_hz is not None and st.rate_hz else ""
        cut = f"{st.cut_s:g} s of warm-up cut" if st.cut_s else "no warm-up cut"
        end = "settled" if st.settled else "did not settle by max_duration"
        out.append(
            f"{fmt.load(s.level, record.level_unit)}: {fmt.rate(st.rate_hz)}{spread} over {st.kept_s:g} s "
            f"({cut}; {end} after {s.elapsed_s:.1f} s)"
        )
    return out
