"""docs/performance.md traces to a file: the raw results it names, rendered again, give the page exactly."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
PAGE = ROOT / "docs" / "performance.md"


def test_the_performance_page_is_its_committed_results_rendered(tmp_path: Path) -> None:
    text = PAGE.read_text()
    named = re.search(r"comes from `(bench/results/[^`]+\.json)`", text)
    assert named, "docs/performance.md does not name the results file it was written from"
    results = ROOT / named.group(1)
    assert results.is_file(), f"{named.group(1)} is not in the repository: commit it with the page"
    again = tmp_path / "performance.md"
    proc = subprocess.run(
        [sys.executable, str(ROOT / "bench" / "run.py"), "--from-json", str(results), "--out", str(again)],
        capture_output=True,
        text=True,
        timeout=60,
        cwd=ROOT,
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert again.read_text() == text


def test_a_partial_run_merged_into_a_results_file_keeps_every_other_row(tmp_path: Path) -> None:
    """`bench/run.py --scenario keepalive --merge-into FILE`: FILE's keep-alive runs give way to this run's, its
    other runs stay, and the page says which rows were measured when."""
    import importlib.util

    sys.path.insert(0, str(ROOT / "bench"))
    try:
        spec = importlib.util.spec_from_file_location("bench_run", ROOT / "bench" / "run.py")
        assert spec is not None and spec.loader is not None
        bench = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(bench)
    finally:
        sys.path.remove(str(ROOT / "bench"))
    named = re.search(r"comes from `(bench/results/[^`]+\.json)`", PAGE.read_text())
    assert named
    base = json.loads((ROOT / named.group(1)).read_text())
    assert any(r["scenario"] == "keepalive" for r in base["runs"])
    new = [dict(r, per_cpu_s=1.0, rep=r["rep"]) for r in base["runs"] if r["scenario"] == "keepalive"]
    extra: dict[str, object] = {}
    versions = {"knee": "9.9.9"}
    rows, titles, merged = bench.merge_into(base, new, {"keepalive": "Keep-alive"}, extra, versions)
    assert [r for r in rows if r["scenario"] == "keepalive"] == new
    # the kept rows are base's; knee's carry the fixed cost of the run that measured them
    fixed = base["meta"]["knee_fixed_cpu_s"]
    kept = [r for r in base["runs"] if r["scenario"] != "keepalive"]
    expected = [dict(r, fixed_cpu_s=r.get("fixed_cpu_s", fixed)) if r["tool"] == "knee" else r for r in kept]
    assert [r for r in rows if r["scenario"] != "keepalive"] == expected
    assert list(titles) == list(base["meta"]["titles"]) and titles["keepalive"] == "Keep-alive"
    assert extra["knee_fixed_cpu_s"] == fixed and merged["fixed_cost_now"] is False
    # the versions of the tools whose rows are kept are base's; this run's own stay
    assert versions["knee"] == "9.9.9"
    for tool in ({str(r["tool"]) for r in kept} & set(base["meta"]["versions"])) - {"knee"}:
        assert versions[tool] == base["meta"]["versions"][tool]
    meta = dict(base["meta"], titles=titles, merged=merged, versions=versions, **dict(extra, knee_fixed_cpu_s=9.0))
    out = tmp_path / "performance.md"
    bench.write_report(out, meta, bench.medians(rows), rows, titles)
    text = out.read_text()
    assert "runs:** the rows of keepalive were measured on " in text
    assert f"kept from `{named.group(1)}`" in text
    # a fixed cost measured now (9 CPU-s, more than any run) is not taken off the rows an earlier run measured
    assert "fixed cost of about 9.00 CPU-s" in text and "less that run's own fixed" in text
    knee_kept = [r for r in bench.medians(rows) if r["tool"] == "knee" and r["scenario"] in ("c1000", "https")]
    for r in knee_kept:
        assert f"- {r['scenario']}: " in text, r
    # A file that was itself a merge: its runs are named too, oldest last.
    base_merged = base["meta"].get("merged")
    if base_merged:
        assert f"the rows of {', '.join(s for s in base_merged['scenarios'] if s != 'keepalive')}" in text
        assert f", which kept them from `{base_merged['from']}`" in text


def test_a_merge_of_a_merge_names_every_run() -> None:
    """Rows re-measured by a newer run are that run's; the fixed cost is the newest run's that measured it."""
    sys.path.insert(0, str(ROOT / "bench"))
    try:
        from report import _merged
    finally:
        sys.path.remove(str(ROOT / "bench"))
    hour = 3600.0
    meta = {
        "merged": {
            "scenarios": ["h2-1", "https"],
            "from": "b.json",
            "from_started_unix": 2 * hour,
            "fixed_cost_now": True,
            "before": {"scenarios": ["https", "httpsnew"], "from": "a.json", "from_started_unix": hour,
                       "fixed_cost_now": True},
        }
    }  # fmt: skip
    assert _merged(meta, "NOW") == [
        "- **Three runs:** the rows of h2-1, https (and the fixed cost) were measured on NOW; the rows of httpsnew"
        " were measured on 1970-01-01 02:00 UTC (`bench/run.py --scenario … --merge-into`); every other row was"
        " measured on 1970-01-01 01:00 UTC (kept from `b.json`, which kept them from `a.json`)."
    ]
    assert _merged({}, "NOW") == []


def test_contention_is_the_cores_use_before_the_first_run_where_it_was_measured() -> None:
    """Right after bench/install.sh built a peer the minute's load average is still the build's: the cores' use over
    the seconds before the first run says whether other work shared the machine."""
    sys.path.insert(0, str(ROOT / "bench"))
    try:
        from report import _contention
    finally:
        sys.path.remove(str(ROOT / "bench"))
    assert _contention((1.99, 1.0, 0.5), 0.03) == []
    assert _contention((0.1, 0.1, 0.1), 0.6) != []
    assert _contention((1.99, 1.0, 0.5), None) != []  # a results file from before: the load average
    assert _contention((0.2, 0.1, 0.1), None) == []


H2LOAD = """starting benchmark...
spawning thread #0: 1 total client(s). Timing-based test with 0s warm-up time and 1s main duration per client
Main benchmark duration is started for client #0.
Main benchmark duration is over for client #0. Stopping all clients.
Stopped all clients for thread #0

finished in {took}, 9972.00 req/s, 312.62KB/s
requests: 9972 total, 9973 started, 9972 done, 9972 succeeded, 0 failed, 0 errored, 0 timeout
status codes: 9972 2xx, 0 3xx, 0 4xx, 0 5xx
"""


@pytest.mark.parametrize("took", ["1.00s", "999.77ms", "812us"])
def test_h2loads_counts_are_read_whatever_unit_its_duration_is_in(took: str) -> None:
    """h2load writes the time it took in the unit that reads best: a run of a hair under 1 s said `999.77ms`, which
    the bench's smoke test (ci84) read as no req/s at all."""
    sys.path.insert(0, str(ROOT / "bench"))
    try:
        from http_tools import H2load
        from measure import Measured
    finally:
        sys.path.remove(str(ROOT / "bench"))
    measured = Measured(["h2load"], 0, H2LOAD.format(took=took), "", 1.0, 0.3, 0.2, 0.1, 10.0, False)
    sample = H2load().parse(measured, None)  # type: ignore[arg-type]
    assert (sample.requests, sample.rps, sample.errors) == (9972, 9972.0, 0)
