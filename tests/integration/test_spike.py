"""The spike's verdict against `knee target` (docs/load-shapes.md): a baseload of 10 clients through a spike of
arrivals three times its service's capacity. Its fall, its return and the failures between are read from the
per-interval series, the return where the series shows it by the rule the docs state, and the counts are the
server's."""

from __future__ import annotations

import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from knee.analysis.series_latency import percentile_ms
from knee.analysis.spike import SPIKE_P99_SLACK, SPIKE_P99_Z, SPIKE_RATE_SLACK
from knee.demo_target import TargetProcess, start_target
from knee.model import GroupStats, RunRecord, Spike
from knee.store import RunDir

from conftest import knee_cli
from servers import settled

# Alone: the fall and the return are read from measured rates and each interval's p99, held to the verdict's noise
# band (the highest p99 before plus 10 %, or what its count of successes reads by chance). Beside two other serial
# tests a CI run's baseload came back to its rate but with its p99 above the 10 % band to the run's end.
pytestmark = pytest.mark.alone


@pytest.fixture(scope="module")
def capacity_1000() -> Iterator[TargetProcess]:
    """20 workers, 20 ms each (a capacity of 1 000/s); the others wait their turn, up to 2 s."""
    with start_target(lam=50.0, sigma=0.0, kappa=0.0, workers=20, pool=0, timeout_s=2.0) as t:
        yield t


def run_spike(target: TargetProcess, tmp_path: Path, spike: str, tail: str = "") -> subprocess.CompletedProcess[str]:
    """`knee run` of a baseload of 10 clients (background) beside a group `spike` (its clients and rate lines), and
    `tail` (more tables) after them."""
    scenario = tmp_path / "spike.toml"
    scenario.write_text(
        f'''[groups.base]\nkind = "http"\nurl = "{target.url}/base"\nclients = 10\nbackground = true\n
[groups.spike]\nkind = "http"\nurl = "{target.url}/spike"\n{spike}\n{tail}'''
    )
    return knee_cli("run", str(scenario), "--out", str(tmp_path / "runs"), timeout=90)


def seen_back(base: GroupStats, s: Spike, lead: float) -> tuple[float, list[tuple[float, float, float | None]]]:
    """The return, read from the series by the rule docs/load-shapes.md states, apart from the verdict's code: the
    seconds from the spike's end to the first whole interval whose rate is at least the lowest rate before less
    5 % of their mean and whose p99 is at most the highest p99 before plus 10 % or the before's latencies' percentile
    at 99 % plus 1.96 standard errors of a rank among the interval's successes (its p99's chance), the next one too
    (an interval whose queued operations still end slow is not back); and the intervals after the end, to show.
    (Two CI runs read a p99 one bucket above the 10 % band, 25.6 ms against 24.8, in intervals of some 500
    successes: the band alone called the return late, or never.) The baseload's series starts `lead` seconds before
    the step, whose start the profile counts from."""
    dt = base.interval_s
    end = lead + s.at_s + s.hold_s
    whole = [p for p in base.series if p.t + dt <= base.elapsed_s + 1e-6]
    before = [p for p in whole if p.t + dt <= lead + s.at_s + 1e-6]
    rates = [p.succeeded / dt for p in before]
    floor = min(rates) - SPIKE_RATE_SLACK * sum(rates) / len(rates)
    ceiling = max(p.p99_ms or 0.0 for p in before) * (1 + SPIKE_P99_SLACK)
    after = [p for p in whole if p.t >= end - 1e-6]

    def noise(n: int) -> float:
        return percentile_ms(before, min(100.0, 100.0 * (0.99 + SPIKE_P99_Z * (0.99 * 0.01 / n) ** 0.5))) or 0.0

    ok = [
        p.succeeded / dt >= floor and p.p99_ms is not None and p.p99_ms <= max(ceiling, noise(p.succeeded))
        for p in after
    ]
    seen = next(p.t for i, p in enumerate(after) if ok[i] and (i + 1 == len(after) or ok[i + 1])) - end
    return seen, [(p.t, p.succeeded / dt, p.p99_ms) for p in after]


def test_a_baseload_through_a_spike_falls_and_comes_back(capacity_1000: TargetProcess, tmp_path: Path) -> None:
    before = capacity_1000.stats()["requests"]
    # 1 200 arrivals a second for 3 s: the 300 connections' backlog drains within about a second of the spike's
    # end on an idle machine, and the step runs 7 s past it (a busy one drains slower: 1 500/s took 2–4 s)
    spike = 'clients = 300\nrate = "spike(base=0, peak=1200, at=4s, hold=3s)"'
    proc = run_spike(capacity_1000, tmp_path, spike, '[sweep]\nduration = "14s"\n')
    assert proc.returncode == 0, proc.stdout + proc.stderr
    (run_dir,) = (tmp_path / "runs").iterdir()
    record = RunDir(run_dir).load()
    (step,) = record.steps
    base = step.groups["base"]
    (v,) = [v for v in record.verdicts if v.group == "base"]
    s = v.spike
    assert s is not None, v.sentences
    assert (s.spiking, s.at_s, s.hold_s, s.peak_hz) == ("spike", 4.0, 3.0, 1200.0)
    # 10 clients of 20 ms: about 500/s before; the spike's 300 in flight queue ahead of them at 20 workers
    assert 300 < s.before.rate_hz < 520, s
    assert s.fall > 0.5 and s.during is not None and s.during.p99_ms is not None, s
    assert s.before.p99_ms is not None and s.during.p99_ms > 5 * s.before.p99_ms, s
    dt = base.interval_s
    seen, rates = seen_back(base, s, step.background_lead_s)
    assert s.recovered_s is not None and s.recovered_low_s is not None, v.sentences
    assert s.recovered_s == pytest.approx(seen) and s.recovered_low_s == pytest.approx(max(0.0, seen - dt)), (s, rates)
    # back within 4 s of the spike's end, on a busy machine too (1 s on an idle one, 3 s in a CI run)
    assert s.recovered_s <= 4, (s, rates)
    assert s.after is not None and s.after.rate_hz > 0.9 * s.before.rate_hz
    assert s.failures == {"base": {}, "spike": {}}, s
    assert v.sentences[: len(s.sentences)] == s.sentences
    assert s.sentences[0].startswith("through the spike (spike from 0/s to 1,200/s at 4 s for 3 s): base fell from ")
    assert f"Spike (base): {'; '.join(s.sentences)}" in proc.stdout
    assert s.sentences[1] in (run_dir / "report.md").read_text()
    # the report's per-interval figure shades the spike and draws each interval's p99
    html = (run_dir / "report.html").read_text()
    assert "the spike of spike" in html and "p99 per interval, ms (right)" in html
    # a spike from base 0 offers nothing before its start (a rate-0 stretch is waited through), then its integral
    spiked = step.groups["spike"]
    assert [p.offered for p in spiked.series if p.t < s.at_s] == [0, 0, 0, 0]
    assert spiked.open_loop is not None and spiked.open_loop.offered == 3600
    assert_counted(capacity_1000, before, record)


def assert_counted(target: TargetProcess, before: int, record: RunRecord) -> None:
    """Every operation the run's groups started (in the step, between steps, and the probes) is one the target
    counted since `before`."""
    (step,) = record.steps
    between = record.between.get("base")
    started = sum(g.started + g.warmup_ops for g in step.groups.values()) + record.probes
    started += (between.started + between.warmup_ops) if between is not None else 0
    assert settled(lambda: target.stats()["requests"] - before, started) == started


def test_a_baseload_through_a_spike_of_clients_falls_and_comes_back(
    capacity_1000: TargetProcess, tmp_path: Path
) -> None:
    """The issue's spike: 10 clients of baseload, then 200 clients for 5 s (a clients profile: a closed loop). They
    share the 20 workers in turn, so the baseload falls to about 10/210 of what it had; the spike's clients retire
    at its end once their operation is done, and the baseload is back within one interval of where its series
    shows it. With a warm-up of 2 s: the profile counts from the step's start, the spiking group's series from the
    warm-up's end, the baseload's (it has none) from the step's start (the verdict put the spike 2 s early)."""
    before = capacity_1000.stats()["requests"]
    spike = 'clients = "spike(base=0, peak=200, at=4s, hold=5s)"'
    proc = run_spike(capacity_1000, tmp_path, spike, '[sweep]\nwarmup = "2s"\n')
    assert proc.returncode == 0, proc.stdout + proc.stderr
    record = RunDir(next((tmp_path / "runs").iterdir())).load()
    (step,) = record.steps
    base, spiked = step.groups["base"], step.groups["spike"]
    (v,) = [v for v in record.verdicts if v.group == "base"]
    s = v.spike
    assert s is not None, v.sentences
    assert (s.of, s.at_s, s.hold_s, s.base_hz, s.peak_hz) == ("clients", 4.0, 5.0, 0.0, 200.0), s
    assert s.sentences[0].startswith("through the spike (spike from 0 to 200 clients at 4 s for 5 s): base fell from")
    assert 300 < s.before.rate_hz < 520, s
    assert 0.8 < s.fall < 0.97, s  # 10 of 210 clients in turn: about 1 − 10/210
    # the spike's clients ran only while it held: nothing succeeded before 4 s or after 9 s and a few ms
    dt = base.interval_s
    assert all(p.succeeded == 0 for p in spiked.series if p.t + 2 + dt <= 4.0 or p.t + 2 >= 9.5), spiked.series
    assert 0 <= step.background_lead_s < 0.5, step.background_lead_s
    seen, rates = seen_back(base, s, step.background_lead_s)
    assert s.recovered_s is not None and s.recovered_s == pytest.approx(seen), (s, rates)
    assert s.failures == {"base": {}, "spike": {}}, s
    assert_counted(capacity_1000, before, record)
