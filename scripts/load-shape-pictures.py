#!/usr/bin/env python3
"""The pictures of docs/load-shapes.md, drawn again: each profile's shape (from knee.scenario.profiles, no load),
and each verdict's figure as report.html draws it, from a run of the doc's own example against `knee target` on
127.0.0.1 (about two minutes of load in all); the soak's against a server of its own that keeps every request body
(it leaks).

    .venv/bin/python scripts/load-shape-pictures.py [OUT_DIR]     (default docs/images)
"""

from __future__ import annotations

import subprocess
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))  # servers.py: Leaky

from knee.demo_target import start_target
from knee.report import plots
from knee.report.svgplot import Figure
from knee.scenario import profiles
from knee.store import RunDir

SHAPES = [
    ('ramp: "0s:10, 60s:400"', profiles.parse("0s:10, 60s:400"), 60),
    (
        'steps: {points = "0s:50, 30s:200, 60s:50", step = true}',
        profiles.parse({"points": "0s:50, 30s:200, 60s:50", "step": True}),
        90,
    ),
    ("sine(mean=200, amplitude=100, period=60s)", profiles.parse("sine(mean=200, amplitude=100, period=60s)"), 120),
    ("spike(base=50, peak=2000, at=30s, hold=10s)", profiles.parse("spike(base=50, peak=2000, at=30s, hold=10s)"), 70),
]


def shapes_svg() -> str:
    """The four shapes, one panel each: the rate (or clients) at each moment."""
    fig = Figure((9.5, 5.0), rows=2, cols=2, sharex=False)
    for ax, (title, p, seconds) in zip(fig.axes, SHAPES, strict=True):
        ts = [seconds * i / 600 for i in range(601)]
        ax.plot(ts, [p.rate_at(t) for t in ts], color="C0", lw=1.5)
        ax.title = title
        ax.xlabel = "seconds from the step's start"
        ax.ylabel = "per second (or clients)"
        ax.set_ylim(0, None)
    return fig.svg()


def run(out: Path, *args: str) -> RunDir:
    """`knee run ARGS --out` into a fresh directory under `out`; its run directory."""
    where = Path(tempfile.mkdtemp(dir=out))
    argv = [sys.executable, "-m", "knee", "run", *args, "-q", "--out", str(where)]
    code = subprocess.run(argv, check=False).returncode
    if code not in (0, 3):  # 3: the run missed its SLO, as the ramp's example does
        raise SystemExit(f"knee run {' '.join(args)} exited with {code}")
    return RunDir(next(where.iterdir()))


def soak_svg(runs: Path) -> str:
    """`knee soak` of a server that keeps every 10 kB body, 100 a second for a minute: its memory's growth."""
    from servers import Leaky  # tests/servers.py: the server test_soak leaks into too

    server = Leaky(runs)
    try:
        where = Path(tempfile.mkdtemp(dir=runs))
        argv = [sys.executable, "-m", "knee", "soak", server.url, "--rate", "100", "-c", "20", "-d", "60s",
                "--interval", "2s", "--method", "POST", "--body", "x" * 10_000, "--monitor-pid", str(server.proc.pid),
                "--out", str(where)]  # fmt: skip
        subprocess.run(argv, check=True, stdout=subprocess.DEVNULL)
        rec = RunDir(next(where.iterdir())).load()
    finally:
        server.stop()
    soak = next(v.soak for v in rec.verdicts if v.soak is not None)
    return plots.soak(rec, "main", soak)


def main() -> None:
    out = Path(sys.argv[1] if len(sys.argv) > 1 else "docs/images")
    out.mkdir(parents=True, exist_ok=True)
    (out / "load-shapes.svg").write_text(shapes_svg())
    with tempfile.TemporaryDirectory() as tmp:
        runs = Path(tmp)
        with start_target(lam=10.0, sigma=0.0, kappa=0.0, workers=10, pool=0, timeout_s=1.5) as t:
            rec = run(runs, t.url + "/", "--rate-profile", "0s:10, 20s:300", "-c", "600", "--slo-p99", "400").load()
            ramp = next(v.ramp for v in rec.verdicts if v.ramp is not None)
            (out / "ramp-verdict.svg").write_text(plots.ramp(rec, "main", ramp))
        with start_target(lam=50.0, sigma=0.0, kappa=0.0, workers=8, pool=0, timeout_s=5.0) as t:
            rec = run(runs, t.url + "/", "--clients-profile", "0s:1, 16s:20").load()
            cr = next(v.client_ramp for v in rec.verdicts if v.client_ramp is not None)
            (out / "clients-ramp-verdict.svg").write_text(plots.client_ramp(rec, "main", cr))
        with start_target(lam=50.0, sigma=0.0, kappa=0.0, workers=20, pool=0, timeout_s=2.0) as t:
            scenario = runs / "spike.toml"
            scenario.write_text(
                f'[groups.base]\nkind = "http"\nurl = "{t.url}/base"\nclients = 10\nbackground = true\n\n'
                f'[groups.spike]\nkind = "http"\nurl = "{t.url}/spike"\nclients = 300\n'
                'rate = "spike(base=0, peak=1500, at=4s, hold=3s)"\n'
            )
            rec = run(runs, str(scenario)).load()
            (out / "spike-verdict.svg").write_text(plots.series(rec, "base"))
        (out / "soak-verdict.svg").write_text(soak_svg(runs))
    for name in ("load-shapes", "ramp-verdict", "clients-ramp-verdict", "spike-verdict", "soak-verdict"):
        print(out / f"{name}.svg")


if __name__ == "__main__":
    main()
