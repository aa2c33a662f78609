"""The careful verdict on hand-built steps: the curve's shape named with its evidence, the USL fitted on
levels without errors, the peak without errors, and hung operations never called failed."""

from __future__ import annotations

import re

import pytest
from test_analysis_helpers import shape_named, step

from knee.analysis import analyze, usl
from knee.model import StepResult
from knee.report.view import usl_line

SERVICE_S = 0.020  # every shaped curve below: 20 ms per operation


def closed_loop(rates: dict[int, float], *, failed: dict[int, int] | None = None) -> list[StepResult]:
    """An up sweep where every client is always in the service (Little's law: latency = clients ÷ rate)."""
    failed = failed or {}
    steps = []
    for i, (n, x) in enumerate(rates.items()):
        f = failed.get(n, 0)
        steps.append(step(i, n, round(x * 10), failed=f, mean_ms=n / (x + f / 10) * 1000))
    return steps


def pool_of(size: int, levels: tuple[int, ...] = (1, 4, 8, 16, 32)) -> list[StepResult]:
    """A fixed pool of `size` with a queue: the rate is min(clients, size) ÷ service time."""
    return closed_loop({n: min(n, size) / SERVICE_S for n in levels})


def test_a_fixed_pool_is_named_with_its_size() -> None:
    v = analyze(pool_of(8), "main")
    assert v.shape is not None and v.shape.name == "pool"
    assert v.shape.pool_size == pytest.approx(8.0, rel=0.01)  # 400 Hz × 20 ms at 1 client
    assert v.sentences[-1] == v.shape.evidence
    assert v.shape.evidence.startswith(
        "a fixed pool with a queue: from 8 to 32 clients the rate stayed within 10 % of its peak (400 Hz) "
        "while the mean latency grew with the clients (20.0 ms → 80.0 ms for 4× the clients); "
        "the pool holds about 8.0 (400 Hz × 20.0 ms at 1 client)"
    )


def test_a_pool_disowns_the_usls_peak() -> None:
    v = analyze(pool_of(8), "main")
    assert v.usl is not None and v.usl.n_star is not None  # the fit stays: only its N* is not a capacity
    n_star = f"{v.usl.n_star:.0f}"
    assert f"the USL's N*={n_star} is not supported by this curve" in v.shape.evidence  # type: ignore[union-attr]
    # The verdict's USL sentence, the report's USL line and its plot quote no N*.
    (said,) = [x for x in v.sentences if x.startswith("USL")]
    assert "N*=" not in said and "no N* (the curve is a fixed pool" in said
    line = usl_line(v)
    assert line is not None and "N* =" not in line and "no N*: the curve is a fixed pool" in line


def test_a_limit_that_refuses_disowns_the_usl() -> None:
    # the nginx with limit_conn: the levels without errors rise in a line (σ, κ ≈ 0, N* far away)
    steps = [step(0, 5, 500), step(1, 10, 1000), step(2, 20, 2000), step(3, 40, 2100, failed=900)]
    v = analyze(steps, "main")
    assert v.shape is not None and v.shape.name == "refusing"
    assert v.usl is None and v.usl_disowned is not None
    assert "no USL model fits this curve: the curve is a limit that refuses: errors, not contention or coherency, " \
        "ended its rise" in v.sentences  # fmt: skip


def test_an_n_star_far_beyond_the_levels_disowns_the_usl() -> None:
    # a curve that bends a little: κ > 0, but N* more than 4× the highest level: nothing measured shows the turn
    sigma, kappa, lam = 0.0, 0.0004, 100.0
    v = analyze(closed_loop({n: usl(n, sigma, kappa, lam) for n in (1, 2, 4, 8, 12)}), "main")
    assert v.usl is None and v.usl_disowned is not None and v.usl_disowned.n_star == pytest.approx(50, rel=0.01)
    assert v.usl_disowned.disowned == (
        "its N* = 50 lies more than 4× beyond the highest level measured (12 clients): "
        "the levels do not show the curve turning down"
    )
    # within 4×, the same curve is a model
    v = analyze(closed_loop({n: usl(n, sigma, kappa, lam) for n in (1, 2, 4, 8, 16)}), "main")
    assert v.usl is not None and v.usl_disowned is None and v.usl.n_star == pytest.approx(50, rel=0.01)


def test_a_pool_measured_from_above_one_client_says_what_it_assumes() -> None:
    shape = shape_named(pool_of(12, levels=(2, 6, 12, 24, 48)), "pool")
    assert shape.pool_size == pytest.approx(12.0, rel=0.01)
    assert "taking the latency at 2 clients, the lowest level, for the service time" in shape.evidence


def test_a_pool_already_full_at_the_lowest_level_is_an_upper_bound() -> None:
    shape = shape_named(pool_of(4, levels=(8, 16, 32)), "pool")
    assert "the pool holds at most about 8.0" in shape.evidence and "measure lower levels" in shape.evidence


def test_a_plateau_needs_twice_the_clients() -> None:
    # flat from 8 to 12 clients only (1.5×): not enough of a plateau to call it a pool; 8 to 16 is
    v = analyze(pool_of(8, levels=(1, 4, 8, 12)), "main")
    assert v.shape is None or v.shape.name != "pool"
    v = analyze(pool_of(8, levels=(1, 4, 8, 16)), "main")
    assert v.shape is not None and v.shape.name == "pool"


def test_retrograde_cites_the_usl() -> None:
    levels = [1, 5, 10, 20, 40, 60, 80, 100]
    steps = [step(i, n, round(usl(float(n), 0.05, 0.002, 10.0) * 100), elapsed=100.0) for i, n in enumerate(levels)]
    shape = shape_named(
        steps,
        "retrograde",
        "retrograde: past its peak (73.8 Hz with 20 clients) the rate fell to 38.8 Hz at 100 clients "
        "(53 % of the peak) without errors: contention and coherency, the USL's shape (σ=0.05, κ=0.002)",
    )
    assert shape.pool_size is None


def test_refusing_names_the_level_and_the_failure_ratio() -> None:
    steps = [
        step(0, 10, 1000),
        step(1, 20, 2000),
        step(2, 40, 2100, failed=30),  # errors start next to the peak …
        step(3, 80, 2000, failed=1996, hung=4),  # … and rise sharply
    ]
    shape_named(
        steps,
        "refusing",
        "a limit that refuses: errors start at 40 clients, next to the peak (200 Hz with 20 clients), "
        "and rise sharply (at 80 clients 50 % failed or hung: 1,996 failed, 4 hung)",
    )


def test_a_falling_rate_with_errors_dominating_is_refusing_not_retrograde() -> None:
    steps = closed_loop({1: 50.0, 4: 200.0, 8: 400.0, 16: 200.0}, failed={16: 3000})
    shape_named(steps, "refusing")


def test_errors_from_the_lowest_level_are_no_refusing_limit_nor_retrograde() -> None:
    # errors from the first level: no limit that starts refusing; the rate falls, but errors dominate it
    steps = [step(0, 10, 1000, failed=10), step(1, 20, 2000, failed=30), step(2, 40, 1500, failed=300)]
    assert analyze(steps, "main").shape is None


def _load_side(saturated: bool) -> list[StepResult]:
    # the rate stops at 8 clients but the latency stays at 20 ms: the clients were not all in the service
    steps = [
        step(0, 1, 500, mean_ms=20.0),
        step(1, 4, 2000, mean_ms=20.0),
        step(2, 8, 4000, mean_ms=20.0),
        step(3, 16, 4100, mean_ms=21.0),
    ]
    g = steps[3].generator
    g.cpu_cores, g.children_cpu_cores, g.cores_available, g.saturated = 1.5, 0.4, 2, saturated
    return steps


def test_flat_latency_with_a_flat_rate_names_no_side_without_evidence() -> None:
    # The clients never reached the service, but neither knee's CPU, its ports nor a waiting connect says where
    # they were: the curve is named flat, and no side is blamed (tests/unit/test_analysis_side.py has the sides).
    shape = shape_named(
        _load_side(saturated=False),
        "flat",
        "the rate stopped growing: from 8 to 16 clients the rate grew only 2.5 % (400 Hz → 410 Hz) "
        "while the mean latency stayed flat (20.0 ms → 21.0 ms), so the added clients never reached the service; "
        "nothing measured says where they waited: knee was not saturated",
    )
    assert "load side" not in shape.evidence and "load generator" not in shape.evidence


def test_a_saturated_load_side_is_cited() -> None:
    shape = shape_named(
        _load_side(saturated=True),
        "load_side",
        "the limit points at the load side: from 8 to 16 clients the rate grew only 2.5 % (400 Hz → 410 Hz) "
        "while the mean latency stayed flat (20.0 ms → 21.0 ms)",
    )
    assert shape.evidence.endswith("; knee and its child processes used 1.90 of 2 cores at 16 clients (saturated)")


def test_still_rising() -> None:
    shape_named(
        closed_loop({1: 50.0, 2: 95.0, 4: 180.0, 8: 300.0}),
        "rising",
        "still rising at the highest level: 300 Hz with 8 clients, 67 % above 180 Hz with 4 clients",
    )


def test_too_few_levels_or_nothing_identifiable_name_no_shape() -> None:
    assert analyze(pool_of(8, levels=(8, 32)), "main").shape is None  # two levels: no curve to name
    # rose, then fell 14 %: neither a plateau of 2×, nor falling below 85 % of the peak, nor rising
    assert analyze(closed_loop({1: 50.0, 2: 100.0, 4: 140.0, 6: 120.0}), "main").shape is None


def test_no_shape_for_a_rate_sweep_or_without_a_fit() -> None:
    assert analyze(pool_of(8), "main", unit="rate").shape is None
    assert analyze(pool_of(8), "main", fit=False).shape is None


# ---- the USL without the levels that had errors --------------------------------------------------------


def test_the_usl_leaves_out_levels_with_errors_and_names_them() -> None:
    levels = [1, 5, 10, 20, 40, 60, 80, 100]
    steps = [step(i, n, round(usl(float(n), 0.05, 0.002, 10.0) * 100), elapsed=100.0) for i, n in enumerate(levels)]
    # 200 and 400 clients: 0.5 % failed or hung, and rates that would pull the fit off the curve
    steps.append(step(8, 200, 5000, failed=20, hung=5, elapsed=100.0))
    steps.append(step(9, 400, 5000, failed=25, elapsed=100.0))
    v = analyze(steps, "main")
    assert v.collapse_level is None
    assert v.usl_left_out == [200, 400]
    assert "the USL fit left out 200 and 400 clients: more than 0.1 % of their operations failed or hung" in v.warnings
    assert v.usl is not None
    assert v.usl.sigma == pytest.approx(0.05, rel=0.05)
    assert v.usl.kappa == pytest.approx(0.002, rel=0.05)


def test_the_usl_onset_follows_the_analysis_onset() -> None:
    steps = closed_loop({1: 50.0, 4: 190.0, 8: 350.0, 16: 500.0, 32: 400.0}, failed={32: 20})  # 0.5 % at 32
    assert analyze(steps, "main").usl_left_out == [32]
    assert analyze(steps, "main", onset=0.01).usl_left_out == []


def test_too_few_levels_without_errors_say_why_there_is_no_fit() -> None:
    steps = closed_loop({1: 50.0, 4: 190.0, 8: 350.0, 16: 500.0}, failed={8: 10, 16: 40})
    v = analyze(steps, "main")
    assert v.usl is None and v.usl_left_out == [8, 16]
    assert "the USL fit left out 8 and 16 clients: more than 0.1 % of their operations failed or hung" in v.warnings
    assert "no USL fit: it needs at least 3 levels with at most 0.1 % failed or hung (got 2)" in v.warnings


# ---- the peak without errors ---------------------------------------------------------------------------


def test_the_peak_is_the_best_level_without_errors() -> None:
    steps = [step(0, 100, 1000), step(1, 200, 2000), step(2, 400, 2500, failed=300, hung=4), step(3, 800, 1900)]
    v = analyze(steps, "main")
    assert (v.peak_level, v.peak_rate) == (200, pytest.approx(200.0))
    assert v.sentences[0] == "peaked at 200 Hz with 200 clients"
    assert "a higher rate, 250 Hz with 400 clients, came with 11 % failed or hung: 300 failed, 4 hung" in v.sentences


def test_with_errors_at_every_level_the_peak_says_so() -> None:
    steps = [step(0, 10, 1000, failed=10), step(1, 20, 2000, failed=30, hung=2), step(2, 40, 1500, failed=300)]
    v = analyze(steps, "main")
    assert v.peak_level == 20
    assert v.sentences[0] == (
        "peaked at 200 Hz with 20 clients, but with errors at every level "
        "(at the peak 1.6 % failed or hung: 30 failed, 2 hung)"
    )
    assert not any(s.startswith("a higher rate") for s in v.sentences)


# ---- hung operations are never called failed -----------------------------------------------------------


def test_hung_operations_are_never_called_failed() -> None:
    steps = [
        step(0, 100, 4000),
        step(1, 200, 8000),
        step(2, 400, 7752, failed=244, hung=4),  # 3.1 % failed or hung
        step(3, 800, 1000, failed=500, hung=700),  # 55 %: a collapse
    ]
    v = analyze(steps, "main")
    assert "errors from 400 clients (3.1 % failed or hung: 244 failed, 4 hung; 200: none)" in v.sentences
    assert "collapsed at 800 clients (55 % failed or hung: 500 failed, 700 hung; 400: 775 Hz)" in v.sentences
    for text in [*v.sentences, *v.warnings]:
        assert not re.search(r"% (of operations )?failed(?! or hung)", text), text


def test_a_plateau_not_named_a_pool_is_sized_as_one_and_quotes_no_n_star() -> None:
    # a flat top from 4 clients whose latency did not grow in proportion (a queue in front of it): not the pool
    # rule's, but still a plateau, sized as a pool of its rate × the single-client latency, and never an N*
    levels = {1: (100.0, 10.0), 2: (190.0, 10.5), 4: (200.0, 20.0), 8: (202.0, 24.0), 16: (199.0, 30.0)}
    steps = [
        step(i, lvl, round(rate * 10), mean_ms=mean, p99_ms=mean * 2)
        for i, (lvl, (rate, mean)) in enumerate(levels.items())
    ]
    v = analyze(steps, "main")
    assert "plateau" in v.brackets and (v.shape is None or v.shape.name != "pool"), v.sentences
    assert "the plateau is what a pool of about 2.0 gives (202 Hz × 10.0 ms at 1 client)" in v.sentences, v.sentences
    (usl,) = [x for x in v.sentences if x.startswith("USL")]
    assert "N*=" not in usl and "no N* (the curve is a plateau" in usl, usl
