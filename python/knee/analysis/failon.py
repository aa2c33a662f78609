"""`knee compare --fail-on RULE`: the regressions that fail a comparison (exit 3), e.g. `throughput:5%`, `p99:10%`,
`errors:any`.

A rule fails at a level when B is worse than A there beyond noise (the level's judgement of that measure,
knee.analysis.compare) **and** by more than the rule's size:

- `throughput:P%`: B's rate below A's by more than P % of A's;
- `p99:P%`: B's p99 above A's by more than P % of A's;
- `errors:P%`: B's failure ratio ((failed + hung) / all) above A's by more than P percentage points.

`any` (or `0%`) is any size, beyond noise.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from knee.analysis.compare import Comparison, LevelDelta, level_name
from knee.analysis.stats import P99_SAMPLES
from knee.errors import UserError

Measure = Literal["throughput", "p99", "errors"]
MEASURES: tuple[Measure, ...] = ("throughput", "p99", "errors")
FORMS = "throughput:PCT%, p99:PCT% or errors:PCT% (PCT a number, or any), e.g. --fail-on throughput:5%,errors:any"


@dataclass(frozen=True)
class Rule:
    measure: Measure
    size: float  # percent (errors: percentage points); 0 = any
    text: str  # as the user wrote it


def _rule(text: str) -> Rule:
    measure, sep, size = (part.strip() for part in text.partition(":"))
    if not sep or measure.lower() not in MEASURES:
        raise UserError(f"--fail-on {text!r} is not a rule; write {FORMS}")
    if size.lower() == "any":
        return Rule(measure.lower(), 0.0, text)  # type: ignore[arg-type]
    try:
        pct = float(size.removesuffix("%"))
    except ValueError:
        pct = -1.0
    if not 0 <= pct < float("inf"):
        raise UserError(f"--fail-on {text!r}: {size!r} is not a size; write {FORMS}")
    return Rule(measure.lower(), pct, text)  # type: ignore[arg-type]


def parse_rules(values: tuple[str, ...] | list[str]) -> list[Rule]:
    """The rules of every --fail-on given, each a rule or a comma-separated list of them."""
    return [_rule(part) for value in values for part in value.split(",") if part.strip()]


def _breach(rule: Rule, d: LevelDelta) -> str | None:
    """Why `rule` fails at level `d`, or None."""
    if rule.measure == "throughput" and d.rate == "worse" and d.change_pct is not None:
        if -d.change_pct > rule.size:
            return f"rate {d.change_pct:+.1f} % (±{d.noise_pct or 0:.1f} %)"
    elif rule.measure == "p99" and d.p99 == "worse" and d.p99_change_pct is not None:
        if d.p99_change_pct > rule.size:
            return f"p99 {d.p99_change_pct:+.1f} % (±{d.p99_noise_pct or 0:.1f} %)"
    elif rule.measure == "errors" and d.failures == "worse":
        ra, rb = d.failure_ratio_a or 0.0, d.failure_ratio_b or 0.0
        if (rb - ra) * 100 > rule.size:
            return f"failures {ra * 100:.2f} % → {rb * 100:.2f} %"
    return None


def hold(cmp: Comparison, rules: list[Rule]) -> bool:
    """Hold `rules` against the comparison: its `fail_on` and `failed` filled in; True when none failed."""
    cmp.fail_on = [r.text for r in rules]
    cmp.failed = breaches(cmp, rules)
    if rules and not any(d.overall not in ("only in A", "only in B") for d in cmp.levels):
        # a gate with nothing to judge does not pass (a B run that measured no level of A's passed it)
        cmp.failed.append(
            f"--fail-on {', '.join(cmp.fail_on)}: A and B have no level in common, so nothing was compared; run B at "
            "A's levels"
        )
    unjudged = [
        level_name(d) for d in cmp.levels if d.p99_a_ms is not None and d.p99_b_ms is not None and d.p99 == "unknown"
    ]
    for rule in rules:
        if rule.measure == "p99" and unjudged:
            cmp.summary.append(
                f"--fail-on {rule.text}: the p99 was not judged at {', '.join(unjudged)}: fewer than {P99_SAMPLES} "
                "operations per client, so a p99 there is one or two stalls, not a tail; run longer steps"
            )
    return not cmp.failed


def breaches(cmp: Comparison, rules: list[Rule]) -> list[str]:
    """One line per rule that failed: '--fail-on throughput:5%: main at 50 (rate −19.8 % (±9.1 %)); …'."""
    out = []
    for rule in rules:
        found = []
        for d in cmp.levels:
            why = _breach(rule, d)
            if why is not None:
                found.append(f"{d.group} at {level_name(d)}: {why}")
        if found:
            out.append(f"--fail-on {rule.text}: " + "; ".join(found))
    return out
