"""Clients profiles (docs/load-shapes.md): a closed loop whose clients follow a profile over time, against `knee
target` with a known pool, end to end: each interval's throughput is its clients' (the engine runs client k while
the profile is at least k), the clients ramp's verdict finds the pool, the target's own count equals knee's, and a
bad profile is one sentence before any load.

That the engine never runs more clients than the profile says at any moment, and none while it is at 0, is an
engine test over real sockets (crates/engine/tests/it/pacer.rs); the profile's arithmetic, its unit tests.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from knee.analysis.client_ramp import clients_at
from knee.demo_target import TargetProcess, start_target
from knee.model import RunRecord
from knee.scenario import profiles
from knee.store import RunDir

from conftest import knee_cli
from servers import free_port, sent, settled

POOL = 8  # the target's workers
PER_S = 50.0  # each worker's operations a second (20 ms each)


@pytest.fixture(scope="module")
def pool_of_8() -> Iterator[TargetProcess]:
    """`knee target` serving at most 8 at once, 20 ms each (a capacity of 400/s); the others wait their turn."""
    with start_target(lam=PER_S, sigma=0.0, kappa=0.0, workers=POOL, pool=0, timeout_s=5.0) as t:
        yield t


def run(tmp_path: Path, url: str, *args: str, code: int = 0) -> tuple[RunRecord, str]:
    out = tmp_path / "runs"
    proc = knee_cli("run", url, "-q", "--out", str(out), *args, timeout=90)
    assert proc.returncode == code, proc.stdout + proc.stderr
    (run_dir,) = [p for p in out.iterdir() if p.is_dir()]
    return RunDir(run_dir).load(), proc.stdout


@pytest.mark.serial
def test_a_clients_ramp_finds_the_pool_and_each_interval_is_its_clients(
    pool_of_8: TargetProcess, tmp_path: Path
) -> None:
    """A ramp from 1 to 20 clients over 16 s against a pool of 8 at 50/s each: every interval's throughput is
    min(clients, 8) × 50/s (clients from the profile, floored), the verdict says no faster from about 8 clients with
    a peak of about 400/s, no errors; `knee run` prints it, run.json and report.md hold it, and the target counted
    every operation knee started."""
    before = pool_of_8.stats()["requests"]
    record, stdout = run(tmp_path, pool_of_8.url + "/", "--clients-profile", "0s:1, 16s:20", "--timeout", "5s")
    (step,) = record.steps
    g = step.groups["main"]
    assert g.clients == 20
    profile = profiles.parse("0s:1, 16s:20", profiles.CLIENTS)
    checked = 0
    for p in g.series:
        if p.t + g.interval_s > g.elapsed_s:
            continue
        # the pool's share of the clients the profile ran over the interval, read at 20 points of it
        at = [p.t + g.interval_s * (k + 0.5) / 20 for k in range(20)]
        want = sum(min(clients_at(profile, t), POOL) for t in at) / 20 * PER_S * g.interval_s
        assert abs(p.succeeded - want) <= 0.12 * want + 2, (p.t, p.succeeded, want)
        checked += 1
    assert checked >= 15, g.series
    (v,) = [v for v in record.verdicts if v.group == "main"]
    ramp = v.client_ramp
    assert ramp is not None and ramp.no_faster is not None, v.sentences
    assert 7 <= ramp.no_faster.clients <= 10, ramp
    assert ramp.no_faster.low <= POOL + 1 and ramp.no_faster.high >= POOL - 1, ramp
    assert abs(ramp.peak_hz - POOL * PER_S) <= 0.08 * POOL * PER_S, ramp
    assert ramp.errors is None, ramp
    assert v.sentences[0] == ramp.sentences[0] and v.sentences[0].startswith("no faster from"), v.sentences
    assert "Clients ramp (main): no faster from" in stdout, stdout
    run_dir = next((tmp_path / "runs").iterdir())
    assert '"no_faster"' in (run_dir / "run.json").read_text()
    assert "no faster from" in (run_dir / "report.md").read_text()
    assert settled(lambda: pool_of_8.stats()["requests"] - before, sent(record)) == sent(record)


@pytest.mark.serial
def test_a_clients_profile_in_a_scenario_falls_and_rises_again(pool_of_8: TargetProcess, tmp_path: Path) -> None:
    """Steps of 4, 0 and 2 clients in a scenario file (clients = {points = …, step = true}): the intervals at 0 run
    nothing, the others their clients' rate; the scenario as run keeps the profile as written."""
    scenario = tmp_path / "steps.toml"
    scenario.write_text(
        f'[groups.main]\nkind = "http"\nurl = "{pool_of_8.url}/"\n'
        'clients = {points = "0s:4, 2s:0, 3s:2", step = true}\nduration = "5s"\ntimeout = "5s"\n'
    )
    out = tmp_path / "runs"
    proc = knee_cli("run", str(scenario), "-q", "--out", str(out), timeout=60)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    record = RunDir(next(out.iterdir())).load()
    g = record.steps[0].groups["main"]
    by_second = {round(p.t): p.succeeded for p in g.series if p.t + g.interval_s <= g.elapsed_s}
    assert abs(by_second[1] - 4 * PER_S) <= 0.12 * 4 * PER_S, by_second
    assert by_second[2] <= 4, by_second  # only the operations the 4 retiring clients had begun before 2 s
    assert abs(by_second[4] - 2 * PER_S) <= 0.12 * 2 * PER_S, by_second
    assert record.scenario.groups["main"].model_dump()["clients"] == {"points": "0s:4, 2s:0, 3s:2", "step": True}


BAD = [
    (["--clients-profile", "0s:1, 2x:3"], "--clients-profile: '0s:1, 2x:3': a point's time '2x' is not a duration"),
    (["--clients-profile", "0s:1, 5s:-2"], "the number of clients at 5s is -2, below 0"),
    (["--clients-profile", "0s:0, 5s:0"], "every number of clients is 0, so no client would ever run"),
    (["--clients-profile", "0s:1, 5s:9", "-c", "4"], "--clients-profile and -c/--clients exclude each other"),
    (["--clients-profile", "0s:1, 5s:9", "--rate", "50"], "--clients-profile and --rate exclude each other"),
    (
        ["--clients-profile", "0s:1, 5s:9", "-n", "100"],
        "--clients-profile runs for a duration, not a count of operations (got -n)",
    ),
]


@pytest.mark.parametrize(("args", "says"), BAD)
def test_a_bad_clients_profile_is_one_sentence_and_exit_2(args: list[str], says: str) -> None:
    """Refused before any load (nothing listens at the URL): exit 2, one line naming the flag, value and fix."""
    proc = knee_cli("run", f"http://127.0.0.1:{free_port()}/", "-q", *args, timeout=30)
    assert proc.returncode == 2, proc.stdout + proc.stderr
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and says in lines[0], proc.stderr
    assert "Traceback" not in proc.stderr
