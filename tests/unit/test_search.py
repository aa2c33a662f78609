"""The level search of `levels = "auto"`, driven against curves of known shape (no noise unless asked)."""

from __future__ import annotations

import math
from collections.abc import Callable

import pytest

from knee.analysis.search import Config, Done, Next, Point, brackets, next_level


def usl(sigma: float, kappa: float, lam: float = 100.0) -> Callable[[float], Point]:
    return lambda n: Point(n, lam * n / (1 + sigma * (n - 1) + kappa * n * (n - 1)))


def refusing(limit: int, lam: float = 50.0) -> Callable[[float], Point]:
    """A service that serves `limit` clients and refuses the rest at once."""

    def at(n: float) -> Point:
        served = min(n, limit)
        return Point(n, lam * served, failure_ratio=0.0 if n <= limit else 0.9)

    return at


def pool(size: int, lam: float = 20.0) -> Callable[[float], Point]:
    """A pool of `size` that queues: the rate grows to size × λ and stays."""
    return lambda n: Point(n, lam * min(n, size))


def drive(curve: Callable[[float], Point], config: Config) -> tuple[list[Next], Done]:
    points: list[Point] = []
    chosen: list[Next] = []
    for _ in range(200):
        d = next_level(points, config)
        if isinstance(d, Done):
            return chosen, d
        assert d.level not in [p.level for p in points], f"{d.level} measured twice: {d.reason}"
        chosen.append(d)
        points.append(curve(d.level))
    raise AssertionError("the search never ended")


def test_starts_at_start() -> None:
    d = next_level([], Config(start=3))
    assert isinstance(d, Next) and d.level == 3 and d.kind == "start"


def test_refusing_past_21_locates_the_onset_to_one_client() -> None:
    steps, done = drive(refusing(20), Config(max=256, precision=1, relative=False))
    b = brackets([refusing(20)(s.level) for s in steps])
    assert b["onset"].at == 21 and b["onset"].below == 20
    assert len(steps) <= 12, [s.reason for s in steps]
    assert any("bisecting the error onset between 8 and 32" in s.reason for s in steps)
    assert "located" in done.reason


def test_pool_of_8_is_a_plateau_from_8() -> None:
    steps, _ = drive(pool(8), Config(max=128, precision=1, relative=False))
    b = brackets([pool(8)(s.level) for s in steps])
    assert b["plateau"] == b["plateau"].__class__(7, 8)
    assert "onset" not in b and "collapse" not in b
    assert len(steps) <= 12, [s.reason for s in steps]


def test_pool_without_max_stops_after_two_flat_doublings() -> None:
    steps, done = drive(pool(8), Config())
    assert max(s.level for s in steps) == 32
    assert "stopped growing" in done.reason


@pytest.mark.parametrize(
    ("sigma", "kappa", "collapses"),
    [(0.02, 0.0005, True), (0.1, 0.002, False), (0.0, 0.01, True)],
)
def test_usl_peak_is_bracketed_near_n_star(sigma: float, kappa: float, collapses: bool) -> None:
    curve = usl(sigma, kappa)
    n_star = math.sqrt((1 - sigma) / kappa)
    steps, done = drive(curve, Config(noise=0.0))
    points = [curve(s.level) for s in steps]
    top = max(points, key=lambda p: p.rate)
    # The best integer level is within one client of N*; the search finds it or a level as good within 10 %.
    assert abs(top.level - n_star) <= max(1.0, 0.1 * n_star), (top.level, n_star, [s.reason for s in steps])
    # Past the peak the ramp goes on until a collapse (below half the peak: κ = 0.0005 by 256 clients, κ = 0.01 by
    # 64), or, without a max, two doublings that did not grow (κ = 0.002: 64 and 128 still above half the peak).
    found = brackets(points, Config(noise=0.0))
    assert ("collapse" in found, "stopped growing" in done.reason) == (collapses, not collapses), (found, done.reason)


def test_collapse_is_bisected_to_the_precision() -> None:
    curve = usl(0.0, 0.01)  # N* = 10; below half the peak from about 37 clients
    steps, _ = drive(curve, Config(noise=0.0))
    b = brackets([curve(s.level) for s in steps], Config(noise=0.0))["collapse"]
    assert b.below is not None and b.at - b.below <= max(1, 0.1 * b.at)
    assert any(s.kind == "collapse" for s in steps)


def test_slo_capacity_is_bisected() -> None:
    def slow(n: float) -> Point:
        return Point(n, 10 * n, slo_ok=n <= 13)

    steps, _ = drive(slow, Config(max=64, precision=1, relative=False))
    b = brackets([slow(s.level) for s in steps])
    assert b["slo"] == b["slo"].__class__(13, 14)
    assert any("capacity under the SLO" in s.reason for s in steps)


def test_max_steps_and_budget_end_the_search() -> None:
    steps, done = drive(usl(0.0, 0.0001), Config(max_steps=5))
    assert len(steps) == 5 and "cap of 5" in done.reason
    d = next_level([Point(1, 10.0)], Config(budget_s=60), spent_s=50, step_s=20)
    assert isinstance(d, Done) and "budget" in d.reason


def test_never_past_max() -> None:
    steps, done = drive(usl(0.0, 0.0), Config(max=100))
    assert max(s.level for s in steps) == 100
    assert "highest level allowed (100)" in done.reason


def test_resume_is_the_same_search() -> None:
    """The state is the points: the same points in any order give the same next level."""
    curve = refusing(20)
    cfg = Config(max=256, precision=1, relative=False)
    steps, _ = drive(curve, cfg)
    points = [curve(s.level) for s in steps[:7]]
    assert next_level(points, cfg) == next_level(list(reversed(points)), cfg) == steps[7]


def test_rates_are_not_rounded_to_whole_numbers() -> None:
    def saturating(rate: float) -> Point:
        return Point(rate, min(rate, 437.0), failure_ratio=0.0 if rate <= 437 else 0.5)

    steps, _ = drive(saturating, Config(start=10, integer=False, resolution=0.5))
    b = brackets([saturating(s.level) for s in steps])
    assert b["onset"].below is not None and 437 - 0.1 * 437 <= b["onset"].below <= 437 < b["onset"].at


def test_a_usl_hill_is_placed_by_the_fit_at_n_star() -> None:
    """A USL curve is flat near its peak (±25 % of N* is within 4 % of the peak rate), so rates alone cannot place
    it; past the peak the search fits the USL and measures at its N*, then the peak is placed."""
    sigma, kappa = 0.05, 0.002
    n_star = math.sqrt((1 - sigma) / kappa)  # 21.8
    steps, done = drive(usl(sigma, kappa), Config(max=64))
    near = [s for s in steps if s.kind == "peak" and "N*" in s.reason]
    assert len(near) == 1 and abs(near[0].level - n_star) <= 0.1 * n_star, [s.reason for s in steps]
    assert not any(s.kind == "plateau" for s in steps), [s.reason for s in steps]
    assert len(steps) <= 12 and "located" in done.reason


def limited(limit: int, lam: float = 50.0, busy_error: float = 0.0) -> Callable[[float], Point]:
    """`refusing`, with what a real level past the limit shows: `limit` successes in service (Little's law),
    off by `busy_error` (a share) as a measurement would be."""

    def at(n: float) -> Point:
        served = min(n, limit)
        return Point(n, lam * served, failure_ratio=0.0 if n <= limit else 0.9, busy=served * (1 + busy_error))

    return at


@pytest.mark.parametrize("error", [-0.02, 0.0, 0.02])
def test_the_onset_is_measured_where_the_successes_in_service_place_it(error: float) -> None:
    """Past a limit of 300 the successes in service say 300: two levels (300 and one a precision above) locate the
    onset to 10 %, where bisecting 256…512 takes three; an estimate a little off costs no more."""
    curve = limited(300, busy_error=error)
    steps, _ = drive(curve, Config(max=1024))
    refine = [s for s in steps if s.kind == "onset"]
    b = brackets([curve(s.level) for s in steps])["onset"]
    assert b.below is not None and b.below <= 300 < b.at and b.at - b.below < 0.1 * b.below
    assert len(refine) == 2, [s.reason for s in refine]
    assert "512's successes in service place it near" in refine[0].reason


def test_a_wrong_estimate_still_ends_in_a_bracket_to_the_precision() -> None:
    """An estimate far off (a limit that is not a pool: failures from timeouts) is only a level tried inside the
    bracket: the search still ends with the onset located, each level measured once."""
    truth = refusing(300)

    def misleading(n: float) -> Point:
        return Point(n, truth(n).rate, truth(n).failure_ratio, busy=480.0)

    steps, _ = drive(misleading, Config(max=1024))
    b = brackets([misleading(s.level) for s in steps])["onset"]
    assert b.below is not None and b.below <= 300 < b.at and b.at - b.below < 0.1 * b.below, b
    assert len([s for s in steps if s.kind == "onset"]) <= 6


def test_an_estimate_below_the_limit_is_tried_once_then_bisected() -> None:
    """A pool of 20 whose lowest failing level put 17.26 successes in service (PostgreSQL's: the backends of the
    clients a level abandoned still hold slots): the search measures at the estimate and one level past it, and
    when both are good it bisects; it does not walk up a level at a time (17, 18, 19 and 20 before)."""
    truth = refusing(20)

    def under(n: float) -> Point:
        return Point(n, truth(n).rate, truth(n).failure_ratio, busy=17.26 if n > 20 else float(n))

    steps, _ = drive(under, Config(start=4, max=64))
    onset = [s.level for s in steps if s.kind == "onset"]
    b = brackets([under(s.level) for s in steps])["onset"]
    assert (b.below, b.at) == (20, 21), onset
    assert onset[:3] == [17, 18, 24] and len(onset) <= 6, onset  # 18 good: the estimate is refuted, 18…32 bisected
    assert all(s.reason.startswith("bisecting") for s in steps if s.kind == "onset" and s.level not in (17, 18))


def test_open_loop_saturation_is_measured_at_the_achieved_rate() -> None:
    """An open loop past a capacity of 437/s achieves 437/s: the search tries it, then closes the bracket."""

    def capacity(r: float) -> Point:
        return Point(r, min(r, 437.0), saturated=r > 437.0)

    steps, _ = drive(capacity, Config(start=10, max=5000, integer=False, open_loop=True))
    b = brackets([capacity(s.level) for s in steps], Config(open_loop=True))["saturation"]
    assert b.below is not None and b.below <= 437 < b.at and b.at - b.below < 0.1 * b.below
    assert len([s for s in steps if s.kind == "saturation"]) == 2


def test_one_hung_operation_below_the_onset_does_not_end_the_ramp() -> None:
    """Hung operations count in the failure ratio, as the verdict counts them: one in 1 601 (0.06 %, under the 0.1 %
    onset) is not a bad level (the search narrowed an 'error onset' between 8 and 16 that the verdict did not have)."""
    points = [Point(1, 100), Point(2, 200), Point(8, 800), Point(16, 1600, failure_ratio=1 / 1601, hung=1)]
    d = next_level(points, Config(max=256))
    assert isinstance(d, Next) and d.level > 16 and d.kind == "ramp", d
    assert "onset" not in brackets(points)


def test_a_search_started_past_the_onset_goes_down_to_a_clean_level_and_narrows_it() -> None:
    """`start = 50`, errors from 31: the first level is bad, so the search measures lower until a level is clean,
    then narrows the onset (it ended there, 'every point located', with the onset's bracket open below)."""
    steps, done = drive(refusing(30), Config(start=50, max=256, precision=1, relative=False))
    assert [s.level for s in steps][:2] == [50, 25] and steps[1].kind == "onset"
    assert "50, the lowest level so far, is past a bound (errors): down to 25" in steps[1].reason
    b = brackets([refusing(30)(s.level) for s in steps])
    assert (b["onset"].below, b["onset"].at) == (30, 31), [s.reason for s in steps]
    assert "located" in done.reason


def test_errors_from_the_first_level_do_not_end_the_search_at_one_level() -> None:
    """0.3 % of failures at every level (a flaky endpoint, above the 0.1 % onset) and a peak at 16 that falls past
    it: the onset is at 1 client, and the ramp goes on to the peak and past it (it stopped at level 1)."""

    def flaky(n: float) -> Point:
        return Point(n, 100.0 * min(n, 16) * (1.0 if n <= 16 else 16 / n), failure_ratio=0.003)

    steps, _ = drive(flaky, Config(max=256))
    levels = [s.level for s in steps]
    assert len(levels) > 4 and max(levels) >= 64, [s.reason for s in steps]
    b = brackets([flaky(x) for x in levels])
    assert b["onset"].below is None and b["onset"].at == 1
    assert 14 <= b["peak"].at <= 18, b


def test_a_flat_top_whose_noise_creeps_up_stops_after_two_doublings() -> None:
    """A pool of 16, flat past it but for noise that puts each new level 0.1 % above the last: the ramp stops two
    doublings past the first level measured on the top (it went on while each level's noise made it the highest, to
    2 199 023 255 552 clients, the cap of 40 levels)."""

    def creeping(n: float) -> Point:
        rate = 100.0 * n if n <= 16 else 1600.0 * (1 + 0.001 * math.log2(n / 16))
        return Point(n, rate, noise=rate * 0.02)

    steps, done = drive(creeping, Config())
    assert max(s.level for s in steps) == 128, [s.reason for s in steps]  # 4 × 32, the first level on the top
    assert "stopped growing" in done.reason


def test_the_search_calls_rates_the_same_as_the_verdict_does_whatever_settle_says() -> None:
    """[sweep] settle = 0.15 (auto levels end sooner) made the search call rates 12 % apart the same, and stop
    narrowing a peak the verdict (5 %) still saw as one."""
    from knee.analysis.precision import NOISE
    from knee.plan import search_config
    from knee.scenario import parse_scenario

    text = '[groups.main]\nkind = "exec"\nargv = ["true"]\n[sweep]\nlevels = "auto"\nduration = "auto"\nsettle = 0.15\n'
    assert search_config(parse_scenario(text)).noise == NOISE == 0.05


def test_going_below_the_first_level_always_moves_down_even_with_a_small_factor() -> None:
    """factor 1.1 from 5: 5 / 1.1 rounds back to 5, and the search ended with the onset open below; it steps down
    by the resolution at least."""
    steps, _ = drive(refusing(3), Config(start=5, factor=1.1, precision=1, relative=False))
    assert [s.level for s in steps][:3] == [5, 4, 3], [s.reason for s in steps]
    b = brackets([refusing(3)(s.level) for s in steps])
    assert (b["onset"].below, b["onset"].at) == (3, 4)
