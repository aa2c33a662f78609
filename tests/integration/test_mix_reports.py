"""A 9:1 mix swept through `knee sweep` against nginx (`write` a POST nginx answers 404, `read` its 200): the
terminal, report.md, levels.csv and the finding name each request, and their counts are nginx's; a queue that runs
out ends its steps without a collapse, said in every report."""

from __future__ import annotations

import csv
import json
import subprocess
from collections import Counter
from pathlib import Path
from typing import Any

from datafiles import mix_scenario

from conftest import knee_cli
from servers import Nginx

ROWS = 25


def _run_dir(out: Path) -> Path:
    (run,) = [p for p in out.iterdir() if p.is_dir()]
    return run


def test_a_swept_mix_is_reported_per_request(nginx: Nginx, tmp_path: Path) -> None:
    scenario = tmp_path / "mix.toml"
    scenario.write_text(
        mix_scenario(
            f"{nginx.url}/read",
            {"name": "read", "weight": 9},
            {"name": "write", "method": "POST", "url": "/missing", "body": "x"},
            name="mix",
            seed=3,
            sweep={"levels": [1, 4], "total": 3000, "settle_wait": "0s"},
            recovery={"enabled": False},
        )
    )
    nginx.clear_log()
    r = knee_cli("sweep", str(scenario), "--out", str(tmp_path / "runs"))
    assert r.returncode == 0, r.stderr
    run = _run_dir(tmp_path / "runs")
    record: dict[str, Any] = json.loads((run / "run.json").read_text())
    steps = record["steps"]
    # nginx's own counts per path are the mix's per request (the probes, if any, are GETs of /read)
    log = Counter((f[1], f[2]) for f in (line.split() for line in nginx.access_lines()))
    reqs = [s["groups"]["main"]["requests"] for s in steps]
    assert log[("POST", "/missing")] == sum(q["write"]["failed"] for q in reqs) > 0
    probes = sum(s["settle"]["probes"] for s in steps if s["settle"])
    assert log[("GET", "/read")] == sum(q["read"]["succeeded"] for q in reqs) + probes
    assert all(q["write"]["succeeded"] == 0 == q["read"]["failed"] for q in reqs)

    # the terminal: a line per request under each step's, the per-request table, the finding
    out = r.stdout
    for q in reqs:
        w = q["write"]["failed"]
        assert f"    write: 0 ok (0/s), {w:,} failed (status {w:,}), 0 hung" in out
        assert f"{w:,} (100 %: status {w:,})" in out
    assert "group main: per request" in out
    assert "why: `write` failed from 1 client while `read` held: failed or hung `write` 100 %, `read` 0 %" in out

    md = (run / "report.md").read_text()
    assert "### Per request" in md
    assert "- `write` failed from 1 client while `read` held" in md
    w4 = reqs[1]["write"]["failed"]
    assert f"| 4 | write | 0 (0 Hz) | {w4:,} (100 %: status {w4:,}) | 0 | 0 | - | - |" in md
    assert "<h3>Per request</h3>" in (run / "report.html").read_text()

    with (run / "levels.csv").open() as f:
        rows = list(csv.DictReader(f))
    assert [(r["level"], r["request"]) for r in rows] == [("1", ""), ("1", "read"), ("1", "write"),
                                                          ("4", ""), ("4", "read"), ("4", "write")]  # fmt: skip
    for i, q in enumerate(reqs):
        group, read, write = rows[3 * i : 3 * i + 3]
        assert int(read["succeeded"]) == q["read"]["succeeded"] and int(write["failed"]) == q["write"]["failed"]
        assert int(read["succeeded"]) + int(write["succeeded"]) == int(group["succeeded"])
        assert int(read["failed"]) + int(write["failed"]) == int(group["failed"])


def _queue_sweep(nginx: Nginx, tmp_path: Path, levels: str) -> subprocess.CompletedProcess[str]:
    """`knee sweep` of `levels`, 1 s steps, each operation taking the next of ROWS ids (a queue) and 50 ms of
    think time; its runs in tmp_path/runs."""
    ids = tmp_path / "ids.csv"
    ids.write_text("id\n" + "".join(f"{i}\n" for i in range(ROWS)))
    return knee_cli(
        "sweep", nginx.url + "/u/${ids.id}", "--data", f"ids={ids}", "--data-order", "queue", "--think", "50ms",
        "--levels", levels, "-d", "1s", "--no-recovery", "--settle", "0s", "--out", str(tmp_path / "runs"),
        timeout=90,
    )  # fmt: skip


def test_a_sweep_whose_queue_runs_out_is_marked_and_not_called_a_collapse(nginx: Nginx, tmp_path: Path) -> None:
    # clients paced by their think time (about 20 operations a second each): 1 client takes about 20 rows in its
    # 1 s step, 4 clients the few left in a fraction of theirs, then 8 clients find none left
    r = _queue_sweep(nginx, tmp_path, "1,4,8")
    assert r.returncode == 0, r.stderr
    run = _run_dir(tmp_path / "runs")
    record = json.loads((run / "run.json").read_text())
    steps = record["steps"]
    assert [s["groups"]["main"]["ran_out"] for s in steps] == [None, "ids", "ids"]
    first, fed = (s["data"][0]["taken"] for s in steps[:2])
    assert first + fed == ROWS and steps[2]["data"][0]["taken"] == 0
    out = r.stdout
    assert f"[ran out of ids after {fed:,} rows (all that earlier steps left of its {ROWS}), " in out
    assert f"step 1 (4 clients): ran out of ids after {fed:,} rows" in out
    assert f"step 2 (8 clients): ran out of ids at once: earlier steps used all its {ROWS:,} rows" in out
    assert f"warning: the step at 8 clients ran out of ids at once: earlier steps used all its {ROWS} rows: no " in out
    # over its 1 s window the second step's rate would be under half the first's: a collapse. The engine measures
    # it until its last operation ended, and over those seconds it is about four times it: no collapse is called.
    lone = steps[0]["groups"]["main"]["succeeded"] / steps[0]["groups"]["main"]["elapsed_s"]
    assert fed / 1.0 < 0.5 * lone
    assert steps[1]["groups"]["main"]["elapsed_s"] < 0.5
    (verdict,) = record["verdicts"]
    assert verdict["collapse_level"] is None and "collapsed" not in out
    assert verdict["peak_rate"] > 2 * lone  # the 4 clients' rate while the rows lasted
    md = (run / "report.md").read_text()
    assert "### Data that ran out" in md and "| 4 (ran out of ids) |" in md
    with (run / "levels.csv").open() as f:
        rows = list(csv.DictReader(f))
    assert [(r["ran_out"], r["rows_used"]) for r in rows] == [("", ""), ("ids", str(fed)), ("ids", "0")]
    assert float(rows[1]["rate_hz"]) > 2 * float(rows[0]["rate_hz"])


def test_a_level_search_whose_queue_runs_out_ends_there(nginx: Nginx, tmp_path: Path) -> None:
    # The search left a step that ran out of its data out of its points, so nothing it decided on changed: it
    # asked for the same level after it, again and again, until Ctrl-C. It ends with the data now.
    r = _queue_sweep(nginx, tmp_path, "auto")
    assert r.returncode == 0, r.stderr
    record = json.loads((_run_dir(tmp_path / "runs") / "run.json").read_text())
    steps = record["steps"]
    assert len(steps) <= 4 and steps[-1]["groups"]["main"]["ran_out"] == "ids", [s["level"] for s in steps]
    assert sum(s["data"][0]["taken"] for s in steps) == ROWS
    end = record["search_end"]
    assert "ran out of ids" in end and "no rows are left for the levels after it" in end, end
    assert f"search done: {end}" in " ".join(r.stdout.split())
