"""analyze(): from a group's steps to a Verdict — the numbers and the verdict in fmt.

Definitions (DESIGN.md; docs/analysis.md says more):
- the sweep is the steps of phase "sweep" in direction "up", pooled per level;
- failure ratio: (failed + hung) ÷ all operations; the sentences say "failed or hung" and give both counts;
- peak: the level with the highest rate (successes ÷ measured seconds) among the levels whose failure
  ratio is at most `onset`; a higher rate reached with errors is said separately; with no such level,
  the highest rate, said to come with errors;
- error onset: the lowest level whose failure ratio exceeds `onset`;
- collapse: the lowest level above the highest rate's level whose rate is below 50 % of that rate or
  whose failure ratio exceeds 50 % (the stop rule's definition, levels.collapse);
- hung: hung operations per level, over all sweep steps (both directions);
- hysteresis: (up − down) / up rate for each level measured both ways;
- recovery and the SLO: see recovery.py and slo.py;
- USL: fitted to the levels up to and including the collapse, leaving out levels
  whose failure ratio exceeds `onset` (their rate is not the service's alone); the
  left-out levels are `usl_left_out`, named in a warning; a fit that explains nothing (its N* far
  beyond the levels, or a shape that contradicts it) is `usl_disowned`, and `usl` is null (_disown);
- shape (closed-loop client sweeps, the fitted group): the curve's shape named with its
  evidence, shape.py;
- which side held the clients (the load side or the service's door), by each level's evidence
  (side.py): the shape and the Little's-law warnings name a limit by it alone;
- a background group (`beside`: its clients do not follow the level, the stress group's do) gets no peak,
  collapse, Little's-law check or fit of its own: its degradation beside the stress levels instead (beside.py).

A rate sweep (steps with an offered `rate_hz`: `[sweep] rates`) has offered rates for
levels, and its open-loop group adds:
- saturation (the knee): the lowest level where the achieved rate falls more than 5 %
  short of the offered one and by more than its count's noise (both judged after the step's first
  operation latency, when operations were in flight at its end: levels.window; a step judged whole
  from its empty start is owed its last latency's arrivals), more than 5 % of arrivals started late
  (> 10 ms after their intended start: every connection was busy), or more than 1 % were dropped;
- the USL is fitted to (N, X) with N = achieved rate × mean time in the service (the
  uncorrected latency), the concurrency the service really had by Little's law.
"""

from __future__ import annotations

from collections.abc import Sequence
from functools import partial
from typing import Any

from knee import fmt
from knee.analysis import little
from knee.analysis.beside import against, why_failed
from knee.analysis.levels import (
    FEW_LATENCIES,
    LevelRow,
    collapse,
    failed_or_hung,
    lag_warnings,
    partial_warnings,
    pool,
    saturated,
    seconds_to_tell,
    sweep_steps,
    too_short_to_tell,
)
from knee.analysis.precision import below_words, bracket, peak_bracket, peak_words
from knee.analysis.ranout import ran_out_warnings
from knee.analysis.recovery import WITHIN, recovery
from knee.analysis.rest import rest
from knee.analysis.shape import name_shape, plateau_pool
from knee.analysis.side import Side, sides
from knee.analysis.slo import capacity
from knee.analysis.uslfit import MIN_POINTS, fit_usl
from knee.errors import UserError
from knee.model import Bracket, Level, LevelUnit, StepResult, TargetHost, USLFit, Verdict
from knee.scenario import Slo

HYSTERESIS_NOTE = 0.10


def analyze(
    steps: Sequence[StepResult],
    group: str,
    *,
    onset: float = 0.001,
    slo: Slo | None = None,
    think_s: float = 0.0,
    think_on_failure_s: float = 0.0,
    fit: bool = True,
    recovery_tolerance: float = WITHIN,
    unit: LevelUnit = "clients",
    target: TargetHost | None = None,
    beside: str | None = None,
    searched: bool = False,
) -> Verdict:
    """The verdict on one group.

    `fit=False` skips the USL (for a group whose clients do not follow the level);
    `recovery_tolerance` is how close to its first rate the baseline level must come back;
    `unit`: the levels are client counts or offered rates (a rate sweep, `RunRecord.level_unit`);
    `target`: where the group's service ran (`RunRecord.targets`), for the evidence of its door (side.py);
    `beside`: the stress group a background group ran beside (beside.stress_group), whose levels its rows are;
    `searched`: the levels were searched (levels = "auto"), so the levels past the SLO's capacity fail nothing (slo.py).
    Steps with different labels (fixed-work stages: store, fetch …) are separate curves.
    """
    labels = list(dict.fromkeys(s.label for s in sweep_steps(steps, group)))
    options: dict[str, Any] = {"onset": onset, "slo": slo, "think_s": think_s, "fit": fit, "unit": unit}
    options["target"] = target
    options["beside"] = beside
    options["think_on_failure_s"] = think_on_failure_s
    options["searched"] = searched
    if len(labels) <= 1:
        v = _curve(steps, group, **options)
    else:
        parts = [(label, _curve([s for s in steps if s.label == label], group, **options)) for label in labels]
        v = _merge(group, parts, slo is not None)
        v.level_unit = unit
    _recovery(v, steps, group, recovery_tolerance)
    rest(v, steps, group)
    return v


def _curve(
    steps: Sequence[StepResult],
    group: str,
    *,
    onset: float,
    slo: Slo | None,
    think_s: float,
    fit: bool,
    unit: LevelUnit = "clients",
    think_on_failure_s: float = 0.0,
    target: TargetHost | None = None,
    beside: str | None = None,
    searched: bool = False,
) -> Verdict:
    """Everything but recovery, for steps of one label."""
    v = Verdict(group=group, level_unit=unit)
    up = pool(steps, group, "up")
    down = pool(steps, group, "down")
    if not up and not down:
        v.warnings.append(f"no sweep step measured group {group!r}: nothing to analyze")
        v.warnings.extend(ran_out_warnings(steps, group, unit))
        v.sentences.append("no measurements")
        return v
    rows = up or down  # a sweep that only went down still has a curve
    if beside is not None:  # a background group: no peak of its own, its degradation beside the stress levels
        _partial(v, steps, group)
        said = partial(why_failed, steps, group)  # the failures' reasons at a level, in words
        against(v, rows, beside, onset=onset, slo=slo, searched=searched, reasons=said)
        if not any(r.open_loop for r in rows):  # its own clients are fixed: Little's law holds for them as for any
            _little(v, rows, (think_s, think_on_failure_s), sides(steps, group, target), beside)
        return v
    _partial(v, steps, group)
    _short(v, rows)
    _peak_onset_collapse(v, rows, onset)
    if any(r.open_loop for r in rows):
        _saturation(v, rows)
        _too_short(v, rows)
        v.warnings.extend(lag_warnings(rows))
    _hung(v, steps, group)
    _hysteresis(v, up, down)
    if slo is not None:
        _slo(v, rows, slo, searched)
    held = sides(steps, group, target)  # which side held the clients, level by level
    _little(v, rows, (think_s, think_on_failure_s), held)
    if fit:
        open_loop = _usl(v, rows, onset)
        if unit == "clients" and not any(r.open_loop for r in rows):
            # The curve's shape, named (shape.py); a pool disowns the USL's N*, which it does not support.
            v.shape = name_shape(rows, held, peak_level=v.peak_level, onset=onset, usl=v.usl, little=v.little)
        _disown(v, rows, open_loop)
        if v.usl is not None:
            top = ("a fixed pool" if v.shape is not None and v.shape.name == "pool" else "a plateau") if v.flat else ""
            v.sentences.append(_usl_sentence(v.usl, open_loop, flat=top))
        elif v.usl_disowned is not None:
            v.sentences.append(f"no USL model fits this curve: {v.usl_disowned.disowned}")
        if v.shape is not None:
            v.sentences.append(v.shape.evidence)
        if "plateau" in v.brackets and (v.shape is None or v.shape.pool_size is None):
            v.sentences.append(plateau_pool(rows, v.peak_rate or 0.0))
    return v


def _merge(group: str, parts: list[tuple[str, Verdict]], with_slo: bool) -> Verdict:
    """One verdict from per-label curves: their findings in words, prefixed with the label.

    Single-valued fields (peak, onset, collapse, USL, hysteresis) have no meaning across
    operation types and stay empty; hung operations add up; the capacity under the SLO
    is the lowest of the labels' (the service must hold every operation type) and the
    SLO passed only when it passed for every label.
    """
    v = Verdict(group=group)
    for label, p in parts:
        v.sentences.extend(f"{label}: {c}" for s in p.sentences for c in fmt.clauses(s))  # each point labelled
        v.warnings.extend(f"{label}: {w}" for w in p.warnings)
        for level, n in p.hung_by_level.items():
            v.hung_by_level[level] = v.hung_by_level.get(level, 0) + n
        v.little.extend(p.little)
    if with_slo:
        caps = [p.capacity_under_slo for _, p in parts]
        v.capacity_under_slo = None if any(c is None for c in caps) else min(c for c in caps if c is not None)
        v.slo_passed = all(p.slo_passed for _, p in parts)
    return v


def _partial(v: Verdict, steps: Sequence[StepResult], group: str) -> None:
    v.warnings.extend(partial_warnings(steps, group, v.level_unit))  # cut short, a worker lost
    v.warnings.extend(ran_out_warnings(steps, group, v.level_unit))  # ended by its data, not by the service


def _short(v: Verdict, rows: list[LevelRow]) -> None:
    """Steps shorter than a few operation latencies (LevelRow.short): the step and the latency, both named."""
    short = [r for r in rows if r.short]
    if not short:
        return
    w = min(short, key=lambda r: r.step_s / r.latency_s)
    need = FEW_LATENCIES * w.latency_s
    v.warnings.append(
        f"steps short against their operations at {_levels([r.level for r in short], v.level_unit)}: "
        f"{fmt.duration(w.step_s)} against an operation latency of {fmt.ms(w.latency_s * 1000)} "
        f"({w.step_s / w.latency_s:.1f} latencies, at {fmt.load(w.level, v.level_unit)}); each rate is judged after "
        f"the step's first operation latency, on few operations per client: run each step at least {FEW_LATENCIES} "
        f"latencies ({fmt.duration(need)} or more)"
    )


def _peak_onset_collapse(v: Verdict, rows: list[LevelRow], onset: float) -> None:
    unit = v.level_unit
    at = "at" if unit == "rate" else "with"  # "peaked at 900 Hz at 1000/s offered" / "… with 50 clients"
    if len(rows) == 1:
        v.warnings.append(
            f"only one level ({fmt.load(rows[0].level, unit)}) was measured: "
            "no curve, so no peak, collapse or USL model"
        )
    highest = max(rows, key=lambda r: r.rate)  # the raw best: collapse is measured from it (the stop rule's)
    clean = [r for r in rows if r.failure_ratio <= onset and r.rate > 0]
    best = max(clean, key=lambda r: r.rate) if clean else highest  # the peak: the best level without errors
    span = fmt.span(rows[0].level, rows[-1].level, unit)
    if best.rate <= 0:
        v.sentences.append(f"no operation succeeded ({span})")
    elif len(rows) == 1:
        v.peak_level, v.peak_rate = best.level, best.rate
        v.sentences.append(f"{fmt.rate(best.rate)} {at} {fmt.load(best.level, unit)}")
    else:
        v.peak_level, v.peak_rate = best.level, best.rate
        v.brackets["peak"] = b = peak_bracket(rows, best)
        flat = unit == "clients" and b.low is not None and b.high is not None and b.low < b.high == rows[-1].level
        # flat over at least a doubling without errors (search.plateau_start's rule): a top flat only because the
        # levels past it fail is a peak at the limit
        clean_top = [r.level for r in clean if b.low is not None and r.level >= b.low]
        flat = flat and b.low is not None and bool(clean_top) and max(clean_top) >= 2 * b.low
        edge = "" if flat else peak_words(b, unit)
        edge += " (the highest level measured: it may go higher)" if best is rows[-1] else ""
        if not clean:
            edge += f", but with errors at every level (at the peak {failed_or_hung(best, fmt.pct)})"
        if flat and b.low is not None:  # a flat top to the highest level: a plateau, not a point
            v.brackets["plateau"] = p = bracket(rows, _row(rows, b.low) or best)
            before = _row(rows, p.below)
            below = below_words(rows, p, unit, fmt.rate(before.rate) if before is not None else "")
            at_low = _n(rows, b.low) if b.low != best.level else ""
            around = f" ({at_low}{below})".replace("(; ", "(") if at_low or below else ""
            v.sentences.append(
                f"a plateau of {fmt.rate(best.rate)} from {fmt.load(b.low, unit)}{around} to "
                f"{fmt.load(rows[-1].level, unit)}{edge}"
            )
        else:
            v.sentences.append(f"peaked at {fmt.rate(best.rate)} {at} {fmt.load(best.level, unit)}{edge}")
        if highest.rate > best.rate:
            v.sentences.append(
                f"a higher rate, {fmt.rate(highest.rate)} {at} {fmt.load(highest.level, unit)}, came with "
                f"{failed_or_hung(highest, fmt.pct)}"
            )
    first_err = next((r for r in rows if r.failure_ratio > onset), None)
    if first_err is not None:
        v.error_onset_level = first_err.level
        v.brackets["onset"] = b = bracket(rows, first_err)
        before = _row(rows, b.below)
        quiet = "none" if before is None or before.failed + before.hung == 0 else fmt.pct(before.failure_ratio)
        v.sentences.append(
            f"errors from {fmt.load(first_err.level, unit)} ({failed_or_hung(first_err, fmt.pct)}"
            f"{below_words(rows, b, unit, quiet)})"
        )
    elif best.rate > 0:
        v.sentences.append(f"no errors up to {fmt.load(rows[-1].level, unit)}")
    if v.peak_level is None or v.peak_rate is None:
        return
    # measured from the highest rate, which is the peak unless errors came with it
    named = "the peak" if highest is best else f"the highest rate ({fmt.rate(highest.rate)}, with errors)"
    for r in rows:
        why = collapse(r, highest, fmt.rate, fmt.pct, named)
        if why is not None:
            v.collapse_level = r.level
            v.brackets["collapse"] = b = bracket(rows, r)
            before = _row(rows, b.below)
            held = fmt.rate(before.rate) if before is not None else ""
            v.sentences.append(f"collapsed at {fmt.load(r.level, unit)} ({why}{below_words(rows, b, unit, held)})")
            break


def _saturation(v: Verdict, rows: list[LevelRow]) -> None:
    """The knee of an open loop: the first offered rate the service did not keep up with."""
    for r in rows:
        if not saturated(r):
            continue
        v.saturation_level = r.level
        v.brackets["saturation"] = b = bracket(rows, r)
        below = _row(rows, b.below)
        told = "too short to tell" if below is not None and too_short_to_tell(below) else "kept up"
        kept = f" ({fmt.level_rate(b.below)} offered: {told})" if b.below is not None else ""
        v.sentences.append(
            f"saturated at {fmt.load(r.level, 'rate')}{kept}: achieved {fmt.rate(r.achieved_rate)} "
            f"({fmt.pct(r.achieved_rate / r.offered_rate if r.offered_rate else 0.0)} of offered), "
            f"{r.late:,} late{f' ({r.lagged:,} of them knee’s own lag)' if r.lagged else ''}, {r.dropped:,} dropped"
        )
        return
    top = max(rows, key=lambda r: r.level)
    v.sentences.append(f"kept up with every offered rate up to {fmt.level_rate(top.level)}")


def _too_short(v: Verdict, rows: list[LevelRow]) -> None:
    """Open-loop levels below the saturation that fell short of the offered rate by more than the saturation's
    share, but within their count's noise (levels.too_short_to_tell): not called saturated, and said so with both
    figures and the step that would tell."""
    unsure = [r for r in rows if too_short_to_tell(r) and (v.saturation_level is None or r.level < v.saturation_level)]
    if not unsure:
        return
    r = unsure[0]
    at = f"at {fmt.load(r.level, 'rate')} " if len(unsure) > 1 else ""
    held = f"; {r.in_flight:.0f} operations still in flight at the end accounted for" if r.in_flight >= 0.5 else ""
    v.warnings.append(
        f"too short to tell whether the service kept up at {_levels([u.level for u in unsure], 'rate')}: {at}"
        f"the achieved rate fell {fmt.rate(r.short_hz)} ({fmt.pct(r.shortfall)}) short of "
        f"the offered one{held}, within its count's noise (±{fmt.rate(r.achieved_noise_hz)} over "
        f"{fmt.duration(r.rate_s / r.steps)}): not called saturated; a step of {fmt.duration(seconds_to_tell(r))} or "
        "more would tell a shortfall this large from noise"
    )


def _hung(v: Verdict, steps: Sequence[StepResult], group: str) -> None:
    for s in sweep_steps(steps, group):
        v.hung_by_level[s.level] = v.hung_by_level.get(s.level, 0) + s.groups[group].hung
    total = sum(v.hung_by_level.values())
    if total:
        first = min(lvl for lvl, n in v.hung_by_level.items() if n)
        v.sentences.append(
            f"{total:,} operation{'s' if total != 1 else ''} hung (from {fmt.load(first, v.level_unit)})"
        )


def _hysteresis(v: Verdict, up: list[LevelRow], down: list[LevelRow]) -> None:
    downs = {r.level: r for r in down}
    for r in up:
        d = downs.get(r.level)
        if d is not None and r.rate > 0:
            v.hysteresis[r.level] = (r.rate - d.rate) / r.rate
    worst = max(v.hysteresis.items(), key=lambda kv: kv[1], default=None)
    if worst is not None and worst[1] > HYSTERESIS_NOTE:
        v.sentences.append(
            f"on the way down it was {fmt.pct(worst[1])} slower at {fmt.load(worst[0], v.level_unit)} "
            "than on the way up"
        )


def _recovery(v: Verdict, steps: Sequence[StepResult], group: str, tolerance: float) -> None:
    rec = recovery(steps, group, tolerance)
    v.recovered, v.time_to_recover_s = rec.recovered, rec.time_to_recover_s
    if rec.note:
        v.warnings.append(f"recovery not judged: {rec.note}")
    elif rec.recovered is True and rec.time_to_recover_s is not None:
        v.sentences.append(f"recovered in {fmt.duration(rec.time_to_recover_s)}")
    elif rec.recovered is False and rec.waited_s is not None:
        v.sentences.append(
            f"did not recover after {fmt.duration(rec.waited_s)} "
            f"(level {rec.baseline_level} stayed more than {fmt.pct(tolerance)} off its first rate)"
        )


def _slo(v: Verdict, rows: list[LevelRow], slo: Slo, searched: bool) -> None:
    v.capacity_under_slo, v.slo_passed = capacity(rows, slo, searched)
    unit = v.level_unit
    if v.capacity_under_slo is None:
        v.sentences.append(f"no level met the SLO ({slo.describe()}), not even {fmt.load(rows[0].level, unit)}")
        return
    above = next((r for r in rows if r.level > v.capacity_under_slo), None)
    broke = f" ({fmt.load(above.level, unit)}: broken)" if above is not None else ""
    if above is not None:
        v.brackets["slo"] = Bracket(at=above.level, below=v.capacity_under_slo)
    overshoot = " (levels the search measured past it do not fail the SLO)" if searched and above is not None else ""
    # every level met it: the capacity is the highest level measured or more, not known to be that
    least = "" if above is not None else "at least "
    every = "" if above is not None else " (every level measured met it)"
    v.sentences.append(
        f"capacity under SLO ({slo.describe()}): {least}{fmt.load(v.capacity_under_slo, unit)}{broke}{overshoot}{every}"
    )


def _little(
    v: Verdict, rows: list[LevelRow], think: tuple[float, float], held: dict[Level, Side], beside: str | None = None
) -> None:
    """`think`: the think time, and the further one after a failure; `beside`: the stress group of a background
    group."""
    v.little = little.check(rows, *think)
    clients = {r.level: r.clients or int(r.level) for r in rows}
    v.warnings.extend(
        little.warning(c, clients[c.level], v.level_unit, held.get(c.level), beside)
        for c in v.little
        if c.gap > little.GAP
    )


def _usl(v: Verdict, rows: list[LevelRow], onset: float) -> bool:
    """Fit the USL (`v.usl`) on the levels without errors; True when it is fitted on Little's-law concurrency."""
    if len(rows) == 1:
        return False  # already said: one level, no curve
    unit = v.level_unit
    cut = v.collapse_level if v.collapse_level is not None else rows[-1].level
    failing = [r for r in rows if r.level <= cut and r.failure_ratio > onset]
    points = [r for r in rows if r.level <= cut and r.failure_ratio <= onset and r.level > 0]
    open_loop = all(r.open_loop for r in points)
    if open_loop:  # N by Little's law: the concurrency the service had at each offered rate
        points = [r for r in points if r.concurrency > 0]
    v.usl_left_out = [r.level for r in rows if r not in points]
    if failing:
        v.warnings.append(
            f"the USL fit left out {_levels([r.level for r in failing], unit)}: more than {fmt.pct(onset)} of "
            f"{'its' if len(failing) == 1 else 'their'} operations failed or hung"
        )
    if len(points) < MIN_POINTS:
        past = " up to the collapse" if v.collapse_level is not None else ""
        v.warnings.append(
            f"no USL fit: it needs at least {MIN_POINTS} levels{past} with at most {fmt.pct(onset)} failed or hung "
            f"(got {len(points)})"
        )
        return open_loop
    try:
        if open_loop:
            f = fit_usl([r.concurrency for r in points], [r.rate for r in points])
            f.advice = []  # its levels are concurrencies, which a rate sweep does not set
        else:
            f = fit_usl([r.level for r in points], [r.rate for r in points], left_out=v.usl_left_out)
    except UserError as exc:
        v.warnings.append(f"no USL fit: {exc}")
        return open_loop
    v.usl = f
    return open_loop


def _disown(v: Verdict, rows: list[LevelRow], open_loop: bool) -> None:
    """Move a fit that explains nothing of the curve from `v.usl` to `v.usl_disowned`, with its reason: the curve's
    named shape contradicts it (DISOWNING_SHAPES), or its N* lies more than FAR × the highest level measured (the
    highest concurrency, on Little's-law concurrency). docs/analysis.md, "A fit that explains nothing"."""
    f = v.usl
    if f is None:
        return
    why = DISOWNING_SHAPES.get(v.shape.name) if v.shape is not None else None
    top = max(r.concurrency for r in rows) if open_loop else max(r.level for r in rows)
    if why is None and f.n_star is not None and top > 0 and f.n_star > FAR * top:
        measured = f"a concurrency of {top:.3g} in the service" if open_loop else fmt.load(top, v.level_unit)
        why = (
            f"its N* = {f.n_star:,.0f} lies more than {FAR}× beyond the highest level measured ({measured}): "
            "the levels do not show the curve turning down"
        )
    if why is not None:
        v.usl, v.usl_disowned = None, f.model_copy(update={"disowned": why})


# Shapes whose cause is not contention or coherency: the USL's numbers are no model of them (shape.py names them).
# A pool is not among them: σ and κ describe its flat top, and only its N* is disowned (no sentence, line or plot
# quotes it), unless the N* lies far beyond the levels (FAR), which disowns any fit.
DISOWNING_SHAPES = {
    "refusing": "the curve is a limit that refuses: errors, not contention or coherency, ended its rise",
    "connection_limit": "the service stopped accepting connections: the clients past its limit never reached it, "
    "so the levels are not its concurrency",
    "load_side": "the load side, not the service, set the rate",
}
FAR = 4  # an N* more than this many times the highest level measured is far outside the curve


def _usl_sentence(f: USLFit, open_loop: bool, flat: str = "") -> str:
    """The fit in a sentence; a `flat` top's ("a fixed pool", "a plateau") quotes no N*, which its curve does not
    support."""
    if flat:
        peak = f"no N* (the curve is {flat}: it flattens, it does not turn down)"
    else:
        peak = f"N*={f.n_star:.0f}" if f.n_star is not None else "no peak (κ=0)"
    on = " on N = achieved × time in service (Little's law)" if open_loop else ""
    return f"USL{on}: σ={fmt.num(f.sigma)}, κ={fmt.num(f.kappa)}, {peak}, R²={f.r2:.2f}"


def _n(rows: Sequence[LevelRow], level: int | float) -> str:
    """'7: 350 Hz', the rate at a level."""
    r = _row(rows, level)
    return f"{fmt.level(level)}: {fmt.rate(r.rate)}" if r is not None else fmt.level(level)


def _row(rows: Sequence[LevelRow], level: int | float | None) -> LevelRow | None:
    return next((r for r in rows if r.level == level), None)


def _levels(levels: list[int | float], unit: LevelUnit) -> str:
    """[200, 400] → '200 and 400 clients'; for a rate sweep '200/s and 400/s offered'."""
    if unit == "rate":
        return f"{fmt.and_list([fmt.level_rate(x) for x in levels])} offered"
    return f"{fmt.and_list([fmt.level(x) for x in levels])} clients"
