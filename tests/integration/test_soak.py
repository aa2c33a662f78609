"""The soak (`knee soak`, mode = "soak"; docs/load-shapes.md): a service built to leak has its memory growth named
within 20 % of what its own /proc shows, nginx has no drift, a soak killed with SIGKILL keeps every interval but its
last on disk (and `knee report` reads them), and mistakes are one sentence each. Shortened: seconds, not hours."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from knee.demo_target import TargetProcess, start_target
from knee.model import RunRecord
from knee.store import RunDir

from conftest import knee_cli
from servers import Leaky, Nginx, free_port, settled, wait_for_port

# Serial (the soaks, not the mistakes): drift is read from measured rates, latencies and memory.
serial = pytest.mark.serial


@pytest.fixture
def leaky(tmp_path: Path) -> Iterator[Leaky]:
    server = Leaky(tmp_path)
    yield server  # (pytest ends it after a failed test too)
    server.stop()


def soak(*args: str, out: Path, timeout: float = 120) -> RunRecord:
    proc = knee_cli("soak", *args, "--interval", "1s", "--out", str(out), timeout=timeout)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "Traceback" not in proc.stderr
    (run_dir,) = out.iterdir()
    return RunDir(run_dir).load()


@serial
@pytest.mark.timeout(180)
def test_a_leaking_service_has_its_memory_growth_named(leaky: Leaky, tmp_path: Path) -> None:
    body = "x" * 10_000  # 100 bodies a second kept: about 1 MB/s, 3.6 GB an hour
    _, rss_before = leaky.kept_and_rss_kb()
    record = soak(
        leaky.url, "--rate", "100", "-c", "20", "-d", "20s", "--method", "POST", "--body", body,
        "--monitor-pid", str(leaky.proc.pid), out=tmp_path / "runs",
    )  # fmt: skip
    kept, rss_after = leaky.kept_and_rss_kb()
    (step,) = record.steps
    g = step.groups["main"]
    assert not step.partial and record.status == "complete"
    # every arrival started (an open loop it kept up with), and the server kept what knee sent
    assert g.started == kept == 2000 and g.succeeded >= 1980, g
    (v,) = record.verdicts
    s = v.soak
    assert s is not None and s.memory is not None, v.sentences
    # its own /proc: the growth over the seconds the load ran
    grown_mb_per_h = (rss_after - rss_before) * 1024 / 1e6 / g.elapsed_s * 3600
    assert s.memory.drifting and s.memory.per_hour == pytest.approx(grown_mb_per_h, rel=0.2), (s.memory, grown_mb_per_h)
    said = "\n".join(v.sentences)
    assert "the target's memory grew" in said and "MB/h" in said, said
    report = (next((tmp_path / "runs").iterdir()) / "report.md").read_text()
    (head,) = [line for line in report.splitlines() if line.startswith("**Verdict:** ")]
    assert head.startswith("**Verdict:** a soak of 20 s at 100/s offered: 100/s; "), head
    assert "; no errors; the target's memory grew " in head and head.endswith(" MB/h"), head
    assert s.throughput is not None and not s.throughput.drifting, s.throughput  # an open loop it kept up with
    assert s.knee_memory is not None and len(step.soak) >= 19, step.soak


@serial
@pytest.mark.timeout(120)
def test_nginx_holds_steady(nginx: Nginx, tmp_path: Path) -> None:
    nginx.clear_log()
    record = soak(nginx.url + "/", "--rate", "200", "-c", "4", "-d", "15s", "--warmup", "2s", out=tmp_path / "runs")
    (step,) = record.steps
    # the memory samples are timed as the series, from the warm-up's end (they counted from its start: the memory
    # panel ran 2 s ahead of the rate's, and the warm-up's windows were in the trend)
    times = [x.t_s for x in step.soak]
    assert times and min(times) >= 0 and max(times) <= step.groups["main"].elapsed_s + 1.5, times
    sent = step.groups["main"].started + step.groups["main"].warmup_ops
    assert settled(lambda: len(nginx.access_lines()), sent) == sent
    (v,) = record.verdicts
    s = v.soak
    assert s is not None and s.throughput is not None and s.p99 is not None, v.sentences
    assert not s.throughput.drifting and not s.p99.drifting, (s.throughput, s.p99)
    assert s.intervals in (14, 15) and not s.bursts and s.failing_intervals == 0, s
    said = v.sentences[0]
    assert said.startswith("soak of 15 s at 200/s offered: throughput 200/s, no drift (within ±"), said
    assert "; p99" in said and v.sentences[1] == "no errors", v.sentences
    report = (RunDir(next((tmp_path / "runs").iterdir())).path / "report.md").read_text()
    assert said.split("; ")[0] in report  # its other clauses are the points below it
    (head,) = [line for line in report.splitlines() if line.startswith("**Verdict:** ")]
    assert head.startswith("**Verdict:** a soak of 15 s at 200/s offered: 200/s; ") and head.endswith("; no errors")
    assert "throughput" not in head and "p99" not in head, head  # (a p50 may move in 15 s: it is said if it does)


@pytest.fixture
def basic() -> Iterator[TargetProcess]:
    with start_target("basic") as t:
        yield t


@serial
@pytest.mark.timeout(120)
def test_a_soak_killed_with_sigkill_keeps_all_but_its_last_interval(basic: TargetProcess, tmp_path: Path) -> None:
    out = tmp_path / "runs"
    before = basic.stats()["requests"]
    proc = subprocess.Popen(
        [sys.executable, "-m", "knee", "soak", basic.url + "/", "-c", "2", "-d", "60s", "--interval", "1s",
         "--out", str(out)],
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, stdin=subprocess.DEVNULL,
    )  # fmt: skip
    try:
        deadline = time.monotonic() + 60
        record = None
        while time.monotonic() < deadline:
            runs = list(out.iterdir()) if out.exists() else []
            if runs and (record := _saved(runs[0])) is not None and len(record.steps[0].groups["main"].series) >= 6:
                break
            time.sleep(0.2)
        time.sleep(0.5)  # mid-interval
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait(timeout=10)
    finally:
        if proc.poll() is None:
            proc.kill()
    (run_dir,) = out.iterdir()
    record = RunDir(run_dir).load()
    (step,) = record.steps
    g = step.groups["main"]
    assert record.status == "running" and step.partial, (record.status, step.partial)
    # what the server saw beyond what is on disk is at most the last interval's operations (and those in flight)
    time.sleep(0.5)  # the killed process's connections closed: the server has counted what it was sent
    served = basic.stats()["requests"] - before
    most = max(p.succeeded + p.failed + p.hung for p in g.series)
    assert g.started <= served <= g.started + most + 2, (g.started, served, most)
    assert len(step.soak) == len(g.series) or abs(len(step.soak) - len(g.series)) <= 1
    # knee report reads the intervals saved, and judges them
    proc2 = knee_cli("report", str(run_dir))
    assert proc2.returncode == 0, proc2.stdout + proc2.stderr
    assert "soak of" in proc2.stdout, proc2.stdout


def _saved(run_dir: Path) -> RunRecord | None:
    try:
        record = RunDir(run_dir).load()
    except Exception:  # written as it is read
        return None
    return record if record.steps else None


@pytest.mark.parametrize(
    ("args", "said"),
    [
        (["http://127.0.0.1:9/", "-c", "5"], "knee soak needs -d/--duration"),
        (
            ["http://127.0.0.1:9/", "-n", "100", "-d", "1m"],
            "a soak runs for a duration, not a count (got -n/--requests)",
        ),
        (["http://127.0.0.1:9/", "--rate", "100,200", "-d", "1m"], "--rate: a soak holds one rate"),
        (["http://127.0.0.1:9/", "-d", "auto"], "-d auto runs a sweep's level until its rate settles; a soak holds"),
    ],
)
def test_mistakes_are_one_sentence(args: list[str], said: str, tmp_path: Path) -> None:
    proc = knee_cli("soak", *args, "--out", str(tmp_path / "runs"), timeout=30)
    assert proc.returncode == 2 and said in proc.stderr and proc.stderr.count("\n") == 1, proc.stderr


@pytest.mark.parametrize(
    ("sweep", "said"),
    [
        ('levels = [5, 10]\nduration = "1m"', 'mode = "soak" holds one level for long (got 2 levels)'),
        ('levels = "auto"\nduration = "1m"', 'not levels = "auto"'),
        ("levels = [5]\nper_client = 10", 'mode = "soak" runs for sweep.duration'),
    ],
)
def test_a_soak_scenario_that_is_not_one_level_held_is_refused(sweep: str, said: str, tmp_path: Path) -> None:
    file = tmp_path / "soak.toml"
    group = 'kind = "http"\nurl = "http://127.0.0.1:9/"\nclients = "level"'
    file.write_text(f'mode = "soak"\n[groups.main]\n{group}\n[sweep]\n{sweep}\n')
    proc = knee_cli("soak", str(file), "--out", str(tmp_path / "runs"), timeout=30)
    assert proc.returncode == 2 and said in proc.stderr and "Traceback" not in proc.stderr, proc.stderr


@serial
@pytest.mark.timeout(120)
def test_the_live_page_draws_the_trends_as_they_form(basic: TargetProcess, tmp_path: Path) -> None:
    import urllib.request

    port = free_port()
    proc = subprocess.Popen(
        [sys.executable, "-m", "knee", "soak", basic.url + "/", "-c", "2", "-d", "12s", "--interval", "1s",
         "--serve", f"127.0.0.1:{port}", "--out", str(tmp_path / "runs")],
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, stdin=subprocess.DEVNULL,
    )  # fmt: skip
    try:
        wait_for_port(port, 30)
        time.sleep(6)  # five intervals saved: the verdict needs three whole ones
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/", timeout=30) as r:
            page = r.read().decode()
        assert proc.poll() is None, "the soak was still running when the page was read"
        # the soak so far, analysed: its figure (the rates, their fitted trends) and its verdict's headline
        assert "The soak: 2 clients for" in page and "fitted Theil–Sen trends" in page, page[-3000:]
        assert "a soak of " in page and "at 2 clients" in page, page[-3000:]
        assert proc.wait(timeout=60) == 0
    finally:
        if proc.poll() is None:
            proc.kill()
