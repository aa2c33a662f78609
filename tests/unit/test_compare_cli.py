"""`knee compare RUN_A RUN_B` as its own process: table, --json, --fail-on's exit 3, and bad input as one line."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

from conftest import knee_cli
from sample_records import sample_record


def knee(*args: str) -> subprocess.CompletedProcess[str]:
    return knee_cli(*args)


def _runs(tmp_path: Path) -> tuple[Path, Path]:
    out = []
    for name, lam, seed in (("old", 4.0, 1), ("new", 5.2, 2)):
        d = tmp_path / name
        d.mkdir()
        (d / "run.json").write_text(sample_record((1, 10, 50, 200), lam=lam, seed=seed, run_id=name).model_dump_json())
        out.append(d)
    return out[0], out[1]


def test_compare_prints_the_table_and_the_answer(tmp_path: Path) -> None:
    a, b = _runs(tmp_path)
    proc = knee("compare", str(a), str(b))
    assert proc.returncode == 0, proc.stderr
    assert "A = old" in proc.stdout and "B = new" in proc.stdout
    assert "B is better than A beyond noise at" in proc.stdout
    swapped = knee("compare", str(b), str(a))
    assert "B is worse than A beyond noise at" in swapped.stdout
    assert swapped.returncode == 0  # worse, but no --fail-on
    same = knee("compare", str(a), str(a))
    assert same.returncode == 0 and "no change within noise at any of" in same.stdout, same.stdout


def test_compare_json(tmp_path: Path) -> None:
    a, b = _runs(tmp_path)
    proc = knee("compare", str(a), str(b), "--json")
    assert proc.returncode == 0, proc.stderr
    data = json.loads(proc.stdout)
    assert (data["run_a"], data["run_b"]) == ("old", "new")
    sweep = [d for d in data["levels"] if d["phase"] == "sweep"]
    assert [d["level"] for d in sweep] == [1, 10, 50, 200]
    for d in sweep:
        assert d["rate_b"] > d["rate_a"]
        assert abs(d["change_pct"] - (d["rate_b"] - d["rate_a"]) / d["rate_a"] * 100) < 1e-9
        assert d["noise_pct"] > 0 and d["rate_method"] == "batch means"
    assert {d["overall"] for d in sweep} <= {"better", "no change within noise"}
    assert "better" in {d["overall"] for d in sweep}
    assert (data["confidence"], data["noise_floor"], data["warnings"], data["failed"]) == (0.95, 0.05, [], [])


def test_compare_fail_on_exits_3_and_names_the_rule_and_the_levels(tmp_path: Path) -> None:
    a, b = _runs(tmp_path)
    proc = knee("compare", str(b), str(a), "--fail-on", "throughput:5%", "--fail-on", "errors:any")
    assert proc.returncode == 3, proc.stdout + proc.stderr
    assert "failed: --fail-on throughput:5%: main at 1: rate -" in proc.stdout, proc.stdout
    data = json.loads(knee("compare", str(b), str(a), "--fail-on", "throughput:5%,errors:any", "--json").stdout)
    assert data["fail_on"] == ["throughput:5%", "errors:any"] and data["failed"][0].startswith("--fail-on throughput")
    ok = knee("compare", str(a), str(b), "--fail-on", "throughput:5%")
    assert ok.returncode == 0 and "passed: --fail-on throughput:5%" in ok.stdout, ok.stdout


def test_compare_markdown(tmp_path: Path) -> None:
    a, b = _runs(tmp_path)
    proc = knee("compare", str(b), str(a), "--markdown", "--fail-on", "throughput:5%")
    assert proc.returncode == 3, proc.stderr
    lines = proc.stdout.splitlines()
    assert lines[0] == "# knee compare: A = new, B = old" and lines[2].startswith("**B is worse than A beyond noise")
    assert "| Level | Rate A Hz | Rate B Hz | Change (95 %) |" in proc.stdout
    row = next(line for line in lines if line.startswith("| 10 |"))
    assert " ±" in row and row.endswith("| worse |"), row
    assert "- failed: --fail-on throughput:5%: main at " in proc.stdout


def test_compare_bad_input_is_one_line(tmp_path: Path) -> None:
    a, _ = _runs(tmp_path)
    for args, words in (
        ((str(a), str(tmp_path / "missing")), "does not exist"),
        ((str(a), str(tmp_path)), "not a run directory"),
        ((str(a), str(a), "--alpha", "2"), "--alpha 2"),
        ((str(a), str(a), "--fail-on", "throughput:lots"), "--fail-on 'throughput:lots': 'lots' is not a size"),
        ((str(a), str(a), "--fail-on", "latency:5%"), "--fail-on 'latency:5%' is not a rule; write throughput:PCT%"),
        ((str(a), str(a), "--noise-floor", "-1"), "--noise-floor -1"),
        ((str(a), str(a), "--json", "--markdown"), "--json and --markdown"),
    ):
        proc = knee("compare", *args)
        assert proc.returncode == 2, proc.stdout
        lines = proc.stderr.strip().splitlines()
        assert len(lines) == 1 and lines[0].startswith("knee: error: ") and words in lines[0], proc.stderr
        assert "Traceback" not in proc.stderr
