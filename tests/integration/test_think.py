"""Think times drawn as people's are: the same each time, uniform between two durations, or exponential around a
mean. nginx logs when it answered each request ($msec) on which connection: one client a connection, the gaps
between a connection's requests are the client's think time plus its request's time."""

from __future__ import annotations

import itertools
import json
import statistics
from collections import defaultdict
from pathlib import Path

import pytest

from conftest import knee_cli
from servers import nginx_conf, nginx_with

CONF = nginx_conf(
    "$connection $msec",
    """    server {{
        listen 127.0.0.1:{port};
        location / {{ default_type text/plain; return 200 "ok\\n"; }}
    }}
""",
)


def _gaps(log: Path) -> list[float]:
    """Milliseconds between each connection's successive answers."""
    times: dict[str, list[float]] = defaultdict(list)
    for line in log.read_text().splitlines():
        conn, msec = line.split()
        times[conn].append(float(msec) * 1000)
    return [b - a for t in times.values() for a, b in itertools.pairwise(t)]


@pytest.mark.serial  # the gaps between requests are timings
def test_think_times_are_constant_uniform_or_exponential_as_asked(tmp_path: Path) -> None:
    with nginx_with(CONF, tmp_path) as port:
        url, log = f"http://127.0.0.1:{port}/", tmp_path / "access.log"
        shapes = {}
        for think in ("50ms", "uniform(20ms, 80ms)", "exponential(50ms)"):
            log.write_text("")
            out = tmp_path / think[:3]
            proc = knee_cli("run", url, "-c", "4", "-d", "3s", "--think", think, "-q", "--out", str(out))
            assert proc.returncode == 0, proc.stdout + proc.stderr
            ((run,),) = [list(out.iterdir())]
            gaps = _gaps(log)
            assert len(gaps) > 150, (think, len(gaps))
            shapes[think] = (min(gaps), statistics.mean(gaps), statistics.stdev(gaps))
            # the run's scenario and its record say the think time as it was given
            said = json.dumps(think) if "(" in think else "0.05"
            assert f"think = {said}" in (run / "scenario.toml").read_text()
            assert json.loads((run / "run.json").read_text())["scenario"]["groups"]["main"]["think"] == json.loads(said)
        (lo, mean, sd) = shapes["50ms"]
        assert lo >= 49 and mean < 60 and sd < 0.25 * mean, shapes
        (lo, mean, sd) = shapes["uniform(20ms, 80ms)"]
        # uniform over 20–80 ms: mean 50, sd 60/√12 = 17.3; nothing below 20
        assert lo >= 19 and 45 < mean < 60 and 12 < sd < 23, shapes
        (lo, mean, sd) = shapes["exponential(50ms)"]
        # exponential of mean 50 ms: its sd is its mean, and gaps far below it are common
        assert lo < 10 and 38 < mean < 65 and 0.7 < sd / mean < 1.3, shapes
    proc = knee_cli("run", "http://127.0.0.1:9/", "-n", "1", "--think", "uniform(3s, 1s)")
    assert proc.returncode == 2 and "uniform(3s, 1s)': its least is above its most" in proc.stderr, proc.stderr
