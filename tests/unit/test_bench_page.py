"""docs/performance.md traces to a file: the raw results it names, rendered again, give the page exactly."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

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
