"""`knee compare --fail-on`: the rules' forms and refusals, which levels break them, and the runs' differences that
are said first (knee.analysis.failon, knee.analysis.alike)."""

from __future__ import annotations

import pytest

from knee.analysis.alike import differences
from knee.analysis.compare import compare_runs
from knee.analysis.failon import Rule, breaches, hold, parse_rules
from knee.errors import UserError
from knee.model.resources import TargetHost

from sample_records import sample_record

LEVELS = (1, 10, 50, 100)


def test_rules_one_per_flag_or_comma_separated() -> None:
    assert parse_rules(("throughput:5%",)) == [Rule("throughput", 5.0, "throughput:5%")]
    assert parse_rules(("p99:10%,errors:any", "throughput:2.5")) == [
        Rule("p99", 10.0, "p99:10%"),
        Rule("errors", 0.0, "errors:any"),
        Rule("throughput", 2.5, "throughput:2.5"),
    ]
    assert parse_rules(("Throughput:0%",)) == [Rule("throughput", 0.0, "Throughput:0%")]
    assert parse_rules(()) == []


@pytest.mark.parametrize(
    ("value", "words"),
    [
        ("thruput:5%", "'thruput:5%' is not a rule"),
        ("throughput", "'throughput' is not a rule"),
        ("throughput:fast", "'fast' is not a size"),
        ("p99:-10%", "'-10%' is not a size"),
        ("errors:nan", "'nan' is not a size"),
        ("p99:", "'' is not a size"),
    ],
)
def test_a_bad_rule_is_one_sentence_naming_the_flag_the_value_and_the_forms(value: str, words: str) -> None:
    with pytest.raises(UserError) as err:
        parse_rules((f"throughput:5%,{value}",))
    text = str(err.value)
    assert text.startswith(f"--fail-on {value!r}"), text
    assert words in text and "throughput:PCT%, p99:PCT% or errors:PCT%" in text and "\n" not in text, text
    assert err.value.exit_code == 2


def test_a_regression_fails_beyond_noise_and_beyond_its_size() -> None:
    a = sample_record(LEVELS, lam=5.2, seed=1, run_id="old", recovery_probes=0)
    b = sample_record(LEVELS, lam=4.0, seed=2, run_id="new", recovery_probes=0)  # 23 % slower
    cmp = compare_runs(a, b)
    failed = breaches(cmp, parse_rules(("throughput:5%",)))
    assert len(failed) == 1 and failed[0].startswith("--fail-on throughput:5%: main at 1: rate -2"), failed
    assert breaches(cmp, parse_rules(("throughput:40%",))) == []  # beyond noise, but not by 40 %
    assert hold(cmp, parse_rules(("throughput:5%", "errors:any"))) is False
    assert cmp.fail_on == ["throughput:5%", "errors:any"] and cmp.failed == failed
    # the same runs the other way round: B faster, nothing fails
    assert hold(compare_runs(b, a), parse_rules(("throughput:5%",))) is True


def test_within_noise_nothing_fails_however_small_the_rule() -> None:
    a = sample_record(LEVELS, seed=1, recovery_probes=0)
    b = sample_record(LEVELS, seed=7, recovery_probes=0)
    assert breaches(compare_runs(a, b), parse_rules(("throughput:any,p99:any,errors:any",))) == []


def test_a_gate_with_no_level_in_common_does_not_pass() -> None:
    """B measured none of A's levels (a run that failed before its first step, or other levels): nothing was compared,
    so the gate fails (it passed, exit 0) and says why; without rules the comparison only says so."""
    a = sample_record(LEVELS, seed=1, recovery_probes=0)
    b = sample_record((2, 20), seed=2, recovery_probes=0)
    cmp = compare_runs(a, b)
    assert hold(cmp, parse_rules(("throughput:5%",))) is False
    assert cmp.failed == [
        "--fail-on throughput:5%: A and B have no level in common, so nothing was compared; run B at A's levels"
    ]
    assert hold(compare_runs(a, b), []) is True


def test_errors_and_p99_rules() -> None:
    a = sample_record(LEVELS, seed=1, error_from=1000, recovery_probes=0)
    b = sample_record(LEVELS, seed=1, error_from=50, recovery_probes=0)  # errors from 50 clients
    cmp = compare_runs(a, b)
    [line] = breaches(cmp, parse_rules(("errors:any",)))
    assert line.startswith("--fail-on errors:any: main at 50: failures 0.00 % → 2.") and "main at 100" in line, line
    assert breaches(cmp, parse_rules(("errors:5%",))) == []  # 2 points more: under 5
    fast, slow = sample_record(LEVELS, seed=1, recovery_probes=0), sample_record(LEVELS, seed=1, recovery_probes=0)
    for s in fast.steps + slow.steps:
        s.groups["main"].latency_ms.count = 100_000  # a p99 of few latencies is too uncertain to tell 2×
    for s in slow.steps:
        g = s.groups["main"]
        g.latency_ms.p99 *= 2
        g.percentiles_ms = [(q, v * 2) for q, v in g.percentiles_ms]
    p99 = breaches(compare_runs(fast, slow), parse_rules(("p99:10%",)))
    assert p99 and "main at 1: p99 +100.0 %" in p99[0], p99
    assert breaches(compare_runs(fast, slow), parse_rules(("p99:150%",))) == []
    short = compare_runs(a, b)  # 273 latencies at 10 clients: too few per client for a p99 to be judged
    assert hold(short, parse_rules(("p99:10%",))) is True
    assert short.summary[-1].startswith("--fail-on p99:10%: the p99 was not judged at 1, 10, 50, 100: fewer than 500 ")


def test_differences_name_targets_scenario_and_machine() -> None:
    a = sample_record((1, 10), recovery_probes=0)
    assert differences(a, a.model_copy(deep=True)) == []
    b = sample_record((1, 10, 50), recovery_probes=0)  # other levels are not a difference: they show as "only in B"
    assert differences(a, b) == []
    b.scenario.groups["main"].url = "http://127.0.0.1:9090/obj"
    b.scenario.sweep.duration = 2.0
    b.machine["hostname"] = "laptop"
    b.machine["cpus"] = 8
    assert differences(a, b) == [
        "targets differ: main: http://127.0.0.1:8080/obj in A, http://127.0.0.1:9090/obj in B",
        "scenario differs: duration 10 s in A, 2 s in B",
        "machine differs: host loadgen-1 in A, laptop in B; CPUs 2 in A, 8 in B",
    ]
    c = a.model_copy(deep=True)
    a.targets = {"main": TargetHost(host="127.0.0.1", port=8080, local=True)}
    c.targets = {"main": TargetHost(host="10.0.0.7", port=8080, local=False)}  # the same name, resolved elsewhere
    assert differences(a, c) == [
        "targets differ: main: http://127.0.0.1:8080/obj was 127.0.0.1:8080 in A, 10.0.0.7:8080 in B"
    ]
