"""compare_runs: level by level, better / worse only beyond the noise: each run's own (batch means of its series,
counting noise for a short step) and a floor of run-to-run variation."""

from __future__ import annotations

from rich.console import Console

from knee.analysis import analyze_run
from knee.analysis.compare import compare_runs
from knee.analysis.stats import interval_rates
from knee.model import LatencyStats, RunRecord, StepResult
from knee.report.compare import render_comparison

from sample_records import make_group, sample_record

LEVELS = (1, 5, 20, 50, 100, 400, 1000)


def _by_level(cmp):  # type: ignore[no-untyped-def]
    return {(d.level, d.phase): d for d in cmp.levels}


def test_faster_server_is_better_where_the_difference_is_beyond_noise() -> None:
    a = sample_record(LEVELS, lam=4.0, seed=1, run_id="old")
    b = sample_record(LEVELS, lam=5.2, seed=2, run_id="new")  # 30 % faster everywhere: past the 5 % floor's ±14 %
    cmp = compare_runs(a, b)
    sweep = [d for d in cmp.levels if d.phase == "sweep"]
    assert len(sweep) == len(LEVELS)
    for d in sweep:
        if d.level < 1000:  # the collapsed level has too few successes to tell
            assert d.rate == "better", d
            assert d.change_pct is not None and 20 < d.change_pct < 40
            assert d.noise_pct is not None and d.rate_low is not None and d.rate_low > 0
            assert d.rate_method == "batch means"
    assert not any(d.overall == "worse" for d in cmp.levels)
    assert cmp.summary[0].startswith("B is better than A beyond noise at ")
    peak = cmp.peaks[0]
    assert peak.peak_rate_b is not None and peak.peak_rate_a is not None and peak.peak_rate_b > peak.peak_rate_a


def test_same_server_twice_is_within_noise() -> None:
    a = sample_record(LEVELS, seed=1, run_id="a")
    b = sample_record(LEVELS, seed=7, run_id="b")
    cmp = compare_runs(a, b)
    same = "no change within noise"
    assert all(d.overall == same for d in cmp.levels), [d for d in cmp.levels if d.overall != same]
    assert cmp.summary[0] == f"no change within noise at any of {len(cmp.levels)} levels"
    identical = compare_runs(a, a.model_copy(deep=True))
    assert all(d.change_pct == 0 and d.overall == same for d in identical.levels)


def test_small_but_significant_changes_count_as_noise() -> None:
    a = sample_record(LEVELS, seed=1, lam=40.0, noise=0.002)
    b = sample_record(LEVELS, seed=1, lam=40.0 * 1.01, noise=0.002)  # +1 %, very steady series
    by = _by_level(compare_runs(a, b, floor=0.0))  # no run-to-run floor: the steady series alone
    d = by[(50, "sweep")]
    assert d.rate_low is not None and d.rate_low > 0  # beyond noise…
    assert d.rate == "same"  # …but under --min-change
    assert _by_level(compare_runs(a, b, floor=0.0, min_change=0.005))[(50, "sweep")].rate == "better"
    assert _by_level(compare_runs(a, b, min_change=0.005))[(50, "sweep")].rate == "same"  # within the floor


def test_more_failures_make_a_level_worse() -> None:
    a = sample_record(LEVELS, seed=1, error_from=400)
    b = sample_record(LEVELS, seed=1, error_from=100)  # errors start earlier
    by = _by_level(compare_runs(a, b))
    assert by[(100, "sweep")].failures == "worse"
    assert by[(100, "sweep")].overall == "worse"
    assert by[(20, "sweep")].failures == "same"


def test_a_handful_of_failures_below_the_onset_is_no_change() -> None:
    # 4 of 50 000 against none (one reset that failed 4 clients together): the z-test read p = 0.046, "worse", and
    # --fail-on errors:any failed the build, where both verdicts say "no errors"; 60 of 50 000 (0.12 %) is a change
    from knee.analysis.compare import compare_level

    def one(failed: int) -> StepResult:
        g = make_group("main", 50, 5000.0 - failed / 10, seconds=10, failed=failed, noise=0.0)
        return StepResult(index=0, level=50, started_unix=0.0, elapsed_s=10.0, groups={"main": g})

    assert compare_level("main", one(0), one(4)).failures == "same"
    assert compare_level("main", one(0), one(60)).failures == "worse"
    # the runs' own onset: with onset = 0 (any failure is an error) 40 of 50 000 against none is a change; with
    # onset = 1 %, 60 (0.12 %) is none (both verdicts say no errors)
    assert compare_level("main", one(0), one(40), onset=0.0).failures == "worse"
    assert compare_level("main", one(0), one(60), onset=0.01).failures == "same"
    a, b = (sample_record((1, 10), seed=1, run_id=r) for r in "ab")
    b.steps[1] = one(40).model_copy(update={"level": 10, "index": 1})
    a.steps[1] = one(0).model_copy(update={"level": 10, "index": 1})
    assert _by_level(compare_runs(a, b))[(10, "sweep")].failures == "same"
    b.scenario.analysis.onset = 0.0  # B's run counts any failure: the lower onset is the comparison's
    assert _by_level(compare_runs(a, b))[(10, "sweep")].failures == "worse"


def test_p99_is_the_successes_and_none_where_nothing_succeeded() -> None:
    a = sample_record((1, 10), recovery_probes=0, run_id="a")
    b = sample_record((1, 10), recovery_probes=0, run_id="b")
    g = b.steps[1].groups["main"]
    g.failed, g.latency_ms = g.succeeded, LatencyStats()  # B's level 10: every operation failed (at once)
    g.succeeded = 0
    g.failed_latency_ms = LatencyStats(count=g.failed, p99=0.1)
    by = _by_level(compare_runs(a, b))
    assert by[(10, "sweep")].p99_a_ms == a.steps[1].groups["main"].latency_ms.p99 > 0
    assert by[(10, "sweep")].p99_b_ms is None
    assert not any("recorded before" in line for line in compare_runs(a, b).summary)


def test_a_run_that_timed_failures_with_successes_is_named() -> None:
    a = sample_record((1, 10), recovery_probes=0, run_id="old")
    a.schema_version = 2
    b = sample_record((1, 10), recovery_probes=0, run_id="new")
    summary = compare_runs(a, b).summary
    assert [line for line in summary if "recorded before" in line] == [
        "run A (old) was recorded before knee kept failed operations' latency apart: its p99 mixes failures with "
        "successes, so the p99 columns do not compare like with like"
    ]


def test_levels_only_in_one_run() -> None:
    a = sample_record((1, 10, 100), recovery_probes=0)
    b = sample_record((1, 10, 100, 200), recovery_probes=0)
    by = _by_level(compare_runs(a, b))
    assert by[(200, "sweep")].overall == "only in B"
    assert by[(200, "sweep")].rate_a is None
    assert by[(100, "sweep")].overall != "only in B"
    # levels only B measured stand among A's, in level order (they were listed after A's)
    b = sample_record((1, 5, 10, 50, 100), recovery_probes=0)
    assert [d.level for d in compare_runs(a, b).levels if d.group == "main"] == [1, 5, 10, 50, 100]
    # the recovery probes (at the first level) last, not among the sweep's levels
    a, b = (sample_record((1, 10, 100), recovery_probes=2) for _ in "ab")
    order = [(d.level, d.phase) for d in compare_runs(a, b).levels if d.group == "main"]
    assert order == [(1, "sweep"), (10, "sweep"), (100, "sweep"), (1, "recovery"), (1, "recovery")], order


def test_a_trailing_partial_interval_is_left_out() -> None:
    g = make_group("main", 10, 50.0, seconds=10, seed=1)
    g.elapsed_s = 9.5  # the last interval (t = 9) ran for half a second
    assert len(interval_rates(g)) == 9


def test_rendering_shows_both_runs_side_by_side() -> None:
    a = sample_record((1, 10, 100), seed=1, run_id="old-server")
    b = sample_record((1, 10, 100), lam=5.0, seed=2, run_id="new-server")
    console = Console(record=True, width=240, color_system=None)
    render_comparison(compare_runs(a, b), console)
    text = console.export_text()
    assert "A = old-server" in text and "B = new-server" in text
    for h in ("Rate A Hz", "Rate B Hz", "Change (95 %)", "p99 A", "p99 B", "p99 change", "Fail A", "Fail B", "B vs A"):
        assert h in text
    assert "better" in text
    d = compare_runs(a, b).levels[1]
    assert f"{d.change_pct:+.1f} ±{d.noise_pct:.1f} %" in text
    assert "5 % of run-to-run variation" in text
    assert "TLS A" not in text  # no handshakes in either run: no TLS columns


def test_the_tls_handshakes_are_shown_beside_the_verdict() -> None:
    """Resumption off (A) against on (B): each level's handshake mean and resumed share, from each run."""
    a = sample_record((1, 10), seed=1, run_id="full")
    b = sample_record((1, 10), seed=1, run_id="resumed")
    for s in a.steps:
        s.groups["main"].tls_ms = LatencyStats(count=400, mean=6.0, p99=9.0)
    for s in b.steps:
        s.groups["main"].tls_ms = LatencyStats(count=400, mean=1.5, p99=2.5)
        s.groups["main"].tls_resumed = 396
    cmp = compare_runs(a, b)
    d = cmp.levels[0]
    assert (d.tls_a_ms, d.resumed_a, d.tls_b_ms, d.resumed_b) == (6.0, 0.0, 1.5, 0.99)
    console = Console(record=True, width=200, color_system=None)
    render_comparison(cmp, console)
    text = console.export_text()
    assert "TLS A" in text and "TLS B" in text, text
    assert "6.00 ms" in text and "1.50 ms (99 % resumed)" in text, text


def test_a_level_where_nothing_succeeded_in_one_run() -> None:
    a = sample_record((1, 10), recovery_probes=0, run_id="a")
    b = sample_record((1, 10), recovery_probes=0, run_id="b")
    g = a.steps[1].groups["main"]
    g.failed, g.succeeded = g.failed + g.succeeded, 0
    for p in g.series:
        p.failed, p.succeeded = p.failed + p.succeeded, 0
    d = _by_level(compare_runs(a, b))[(10, "sweep")]
    assert (d.rate_a, d.change_pct, d.rate, d.failures, d.overall) == (0.0, None, "better", "better", "better")
    back = _by_level(compare_runs(b, a))[(10, "sweep")]
    assert (back.change_pct, back.rate, back.overall) == (-100.0, "worse", "worse")


def test_a_rate_sweep_s_peak_is_at_an_offered_rate() -> None:
    """A rate sweep's group has the same connections at every level: its peak is named by the offered rate (it was
    'at 7 clients' in both runs)."""

    def rates(r):  # type: ignore[no-untyped-def]
        r.level_unit = "rate"
        for s in r.steps:
            s.level = s.level * 10
            s.groups["main"].clients = 7
        r.verdicts = analyze_run(r)  # the verdict's peak is the one compared
        return r

    a = rates(sample_record(LEVELS, lam=4.0, seed=1, run_id="old"))
    b = rates(sample_record(LEVELS, lam=5.2, seed=2, run_id="new"))
    cmp = compare_runs(a, b)
    peak = cmp.peaks[0]
    assert (peak.unit, peak.peak_level_a, peak.peak_level_b) == ("rate", 500, 500), peak
    line = next(x for x in cmp.summary if "peak A" in x)
    assert "at 500/s offered" in line and "clients" not in line, line


def test_the_peaks_compared_are_the_verdicts_and_a_mixed_level_is_named() -> None:
    # A's highest rate came with 45 % failed (at 100): its peak is 50's, the best level before errors start, so
    # B's is +20 %, not -7.7 % against A's failing 1 300/s
    def run(rates: dict[int, tuple[float, int]], run_id: str) -> RunRecord:
        r = sample_record((50, 100), run_id=run_id, recovery_probes=0)
        for s in r.steps:
            rate, failed = rates[int(s.level)]
            s.groups["main"] = make_group("main", int(s.level), rate, seconds=10, failed=failed, noise=0.0)
        r.verdicts = analyze_run(r)
        return r

    a = run({50: (1000.0, 0), 100: (1300.0, 10_600)}, "a")
    b = run({50: (1200.0, 0), 100: (1100.0, 0)}, "b")
    cmp = compare_runs(a, b)
    peak = cmp.peaks[0]
    assert (peak.peak_level_a, peak.peak_level_b) == (50, 50) and round(peak.change_pct or 0) == 20, peak
    # at 100, B is slower (1 100 for 1 300) but fails none of its operations where A failed 45 %: mixed
    assert _by_level(cmp)[(100, "sweep")].overall == "mixed"
    assert cmp.summary[0] == (
        "B is better than A beyond noise in one measure and worse in another at 1 of 2 levels, better at 1, worse at "
        "no other"
    ), cmp.summary[0]


def test_steps_the_analysis_does_not_believe_are_not_compared() -> None:
    """A's first measurement of 20, superseded by a measurement again, is not matched with B's 20 (B was 'better by
    +200 %' there, and A's real 20 was 'only in A'); nor is a step whose data ran out before any operation ended."""
    a = sample_record(LEVELS, seed=1, run_id="a")
    b = sample_record(LEVELS, seed=2, run_id="b")
    slow = next(s for s in sample_record(LEVELS, lam=1.3, seed=3).steps if s.level == 20 and s.phase == "sweep")
    slow.superseded = True
    a.steps.insert(next(i for i, s in enumerate(a.steps) if s.level == 20), slow)
    empty = next(s for s in b.steps if s.level == 50 and s.phase == "sweep")
    empty.groups["main"] = make_group("main", 50, 0.0, seconds=int(empty.elapsed_s))
    empty.groups["main"].ran_out = "ids"
    by = _by_level(compare_runs(a, b))
    assert by[(20, "sweep")].overall == "no change within noise", by[(20, "sweep")]
    assert by[(50, "sweep")].overall == "only in A", by[(50, "sweep")]
    assert [d.overall for d in compare_runs(a, b).levels].count("only in A") == 1


def test_a_step_cut_short_by_ctrl_c_is_not_judged() -> None:
    """B interrupted 1 s into level 100, none of its operations ended (their latency is longer): the step is kept,
    partial, and the verdict leaves it out; compare judged its 0 Hz as 'worse −100 %'."""
    a = sample_record((1, 10, 100), seed=1, run_id="a")
    b = sample_record((1, 10, 100), seed=2, run_id="b")
    step = next(s for s in b.steps if s.level == 100 and s.phase == "sweep")
    g = step.groups["main"]
    step.partial = True
    g.succeeded = g.failed = g.hung = 0
    g.abandoned, g.elapsed_s, g.rate_hz = 100, 1.0, 0.0
    cmp = compare_runs(a, b)
    d = next(d for d in cmp.levels if d.level == 100 and d.phase == "sweep")
    assert d.rate != "worse" and d.overall != "worse" and d.rate_b is None, d
    assert not any("worse" in line for line in cmp.summary), cmp.summary


def test_stages_have_no_peak_taken_across_them() -> None:
    """A fixed-work scenario's stages (labels): the verdict merges them and names no one peak, and compare took the
    highest rate over every stage, one stage's in A against another's in B, and no label named."""
    from sample_records import fixed_work_record

    a, b = fixed_work_record(seed=4), fixed_work_record(seed=5)
    assert {s.label for s in a.steps} > {""} or len({s.label for s in a.steps}) > 1
    cmp = compare_runs(a, b)
    assert all(p.peak_rate_a is None and p.peak_rate_b is None for p in cmp.peaks), cmp.peaks
    assert not any(": peak A " in line for line in cmp.summary), cmp.summary


def test_the_fallback_peak_is_the_highest_rate_where_every_level_has_errors() -> None:
    """A record without verdicts whose every level failed above the onset: the peak is the highest rate, as the
    verdict's rule has it (none was given)."""
    a, b = (sample_record((1, 10, 100), seed=s, run_id=r) for s, r in ((1, "a"), (2, "b")))
    for r in (a, b):
        r.verdicts = []
        for s in r.steps:
            g = s.groups["main"]
            g.failed = g.succeeded  # half of every level's operations failed
    (peak,) = [p for p in compare_runs(a, b).peaks if p.group == "main"]
    assert peak.peak_rate_a is not None and peak.peak_rate_b is not None, peak
