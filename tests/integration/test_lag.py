"""An open loop whose own process lags: knee stopped for 30 ms of every 100 (SIGSTOP, SIGCONT), as a load
machine's other work would hold it off its core. Its arrivals start late although clients are free for them
(nginx answers in well under a millisecond): that lateness is knee's (`lagged`), not the service's, and the
verdict does not call the service saturated for it; it says the load side lagged instead."""

from __future__ import annotations

import contextlib
import csv
import http.client
import io
import re
import signal
import subprocess
import sys
import threading
import time
import urllib.request
from pathlib import Path

import pytest

from knee.store import RunDir

from servers import Nginx, free_port


def _sample(text: str, series: str) -> int:
    """The value of `series` (name and labels) in a /metrics text; 0 where it has none yet."""
    m = re.search(rf"^{re.escape(series)} (\d+)$", text, re.M)
    return int(m.group(1)) if m else 0


def _stutter(proc: subprocess.Popen[str], stopped_s: float, every_s: float) -> None:
    """Stop `proc` for `stopped_s` of every `every_s` until it exits; it is never left stopped."""
    while proc.poll() is None:
        time.sleep(every_s - stopped_s)
        try:
            proc.send_signal(signal.SIGSTOP)
            time.sleep(stopped_s)
        except ProcessLookupError:
            return
        finally:
            if proc.poll() is None:
                proc.send_signal(signal.SIGCONT)


def _scrape(url: str, proc: subprocess.Popen[str], into: list[str]) -> None:
    """Read `url` every 0.2 s until `proc` exits (what it served then, in order)."""
    while proc.poll() is None:
        with contextlib.suppress(OSError, http.client.HTTPException), urllib.request.urlopen(url, timeout=5) as r:
            into.append(r.read().decode())
        time.sleep(0.2)


def _stuttered(*args: str, out: Path, serve: int | None = None) -> tuple[Path, str, list[str]]:
    """`knee sweep ARGS --out OUT` stopped for 30 ms of every 100: its run directory, what it printed and, with
    `serve`, its /metrics as read every 0.2 s while it ran (`--serve 127.0.0.1:SERVE`)."""
    argv = [sys.executable, "-m", "knee", "sweep", *args, "--out", str(out)]
    argv += ["--serve", f"127.0.0.1:{serve}"] if serve else []
    scraped: list[str] = []
    with subprocess.Popen(
        argv, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True
    ) as p:
        threads = [threading.Thread(target=_stutter, args=(p, 0.03, 0.1))]
        if serve:
            threads.append(threading.Thread(target=_scrape, args=(f"http://127.0.0.1:{serve}/metrics", p, scraped)))
        for t in threads:
            t.start()
        said, _ = p.communicate(timeout=120)
        for t in threads:
            t.join()
    assert p.returncode in (0, 3), said
    (run,) = [d for d in out.iterdir() if d.is_dir()]
    return run, said, scraped


@pytest.mark.serial  # lateness is timing
def test_arrivals_late_for_knees_own_lag_are_not_the_services_saturation(nginx: Nginx, tmp_path: Path) -> None:
    port = free_port()
    args = (f"{nginx.url}/", "--rates", "2000", "-c", "20", "-d", "3s", "--no-recovery")
    run, _, scraped = _stuttered(*args, out=tmp_path, serve=port)
    record = RunDir(run).load()
    (step,) = [s for s in record.steps if s.phase == "sweep"]
    o = step.groups["main"].open_loop
    assert o is not None
    # held off its core, knee started many arrivals late, and a client was free for nearly every one
    assert o.late > 0.05 * o.offered and o.lagged >= 0.75 * o.late, o
    (v,) = record.verdicts
    assert v.saturation_level is None, v.sentences
    (warned,) = [w for w in v.warnings if "while a client was free for them" in w]
    assert warned.startswith("at 2000/s offered") and "knee's own scheduling lagged" in warned, warned
    # the levels table and levels.csv say how many of the late were knee's lag
    assert f"| {o.late:,} ({o.lagged:,} knee's lag) |" in (run / "report.md").read_text()
    (row,) = csv.DictReader(io.StringIO((run / "levels.csv").read_text()))
    assert (int(row["late"]), int(row["lagged"])) == (o.late, o.lagged), row
    # and interval by interval: the engine's series counts them where the arrival was meant to start, in run.json
    # and series.csv, and its intervals add up to the step's
    series = step.groups["main"].series
    assert sum(p.lagged for p in series) == o.lagged and sum(p.late for p in series) == o.late, series
    assert sum(p.lagged > 0 for p in series) >= 2 and all(p.lagged <= p.late for p in series), series
    rows = list(csv.DictReader(io.StringIO((run / "series.csv").read_text())))
    swept = [r for r in rows if r["step"] == str(step.index) and r["group"] == "main"]
    assert [(int(r["late"]), int(r["lagged"])) for r in swept] == [(p.late, p.lagged) for p in series], swept
    # and live: /metrics counted them from the engine's snapshot as the step ran (never more than run.json's, never
    # going down), then from run.json once it had ended
    labels = f'group="main",step="{step.index}",level="2000"'
    late = [_sample(t, f"knee_late_arrivals_total{{{labels}}}") for t in scraped]
    lagged = [_sample(t, f"knee_lagged_arrivals_total{{{labels}}}") for t in scraped]
    live = [(a, b) for a, b, t in zip(late, lagged, scraped, strict=True) if f"\nknee_step {step.index}\n" in t]
    assert any(b > 0 for _, b in live), (live, o)
    assert all(b <= a <= o.late and b <= o.lagged for a, b in live), (live, o)
    assert late == sorted(late) and lagged == sorted(lagged), (late, lagged)
    assert late[-1] == o.late and lagged[-1] == o.lagged, scraped[-1]


@pytest.mark.serial  # lateness is timing
def test_a_ramp_says_where_knee_itself_lagged(nginx: Nginx, tmp_path: Path) -> None:
    """A ramp of 500 to 2 000/s that nginx keeps up with, from a knee held off its core 30 % of the time: the ramp's
    verdict locates knee's own lag, and its figure marks it."""
    run, said, _ = _stuttered(f"{nginx.url}/", "--ramp", "0s:500, 4s:2000", "-c", "20", "--settle", "0", out=tmp_path)
    (v,) = RunDir(run).load().verdicts
    assert v.ramp is not None and v.ramp.lagged is not None, v.sentences
    assert v.ramp.lagged.low_hz <= v.ramp.lagged.offered_hz <= v.ramp.lagged.high_hz
    assert any(s.startswith("knee itself lagged from ") for s in v.sentences), v.sentences
    assert "knee itself lagged from" in said and "knee lagged from" in (run / "report.html").read_text()
