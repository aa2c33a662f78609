"""report.html in headless Chromium: no console errors, no network, the plots rendered with a real size.

Chromium is a test dependency (`make ci-deps` installs it): the test fails, not skips, without it.
The screenshot is kept as tests/artifacts/report.png for a human to look at.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

from knee.report import write_reports
from knee.store import RunDir

from sample_records import sample_record

REPO = Path(__file__).resolve().parents[2]
CHECK = REPO / "scripts" / "chromium-check.py"
ARTIFACTS = REPO / "tests" / "artifacts"
HOSTILE = "<script>console.error('injected')</script>"


def chromium_check(html: Path, screenshot: Path | None = None) -> dict:  # type: ignore[type-arg]
    chromium = shutil.which("chromium") or shutil.which("chromium-browser")
    assert chromium, "chromium is not installed: run `make ci-deps` (scripts/install-system-deps.sh)"
    args = [sys.executable, str(CHECK), str(html), "--chromium", chromium, "--timeout", "90"]
    if screenshot is not None:
        args += ["--screenshot", str(screenshot)]
    proc = subprocess.run(args, capture_output=True, text=True, timeout=150, stdin=subprocess.DEVNULL)
    assert proc.returncode == 0, proc.stderr
    return json.loads(proc.stdout)  # type: ignore[no-any-return]


def test_report_renders_in_chromium(tmp_path: Path) -> None:
    record = sample_record(error_sample=f"body: {HOSTILE}")
    record.scenario = record.scenario.model_copy(update={"name": HOSTILE})
    write_reports(RunDir(tmp_path), record)
    html = tmp_path / "report.html"
    shot = ARTIFACTS / "report.png"
    shot.unlink(missing_ok=True)
    seen = chromium_check(html, shot)
    assert seen["console_errors"] == []
    assert seen["requests"] == [html.resolve().as_uri()], "the report loaded something besides itself"
    assert seen["scripts"] == 0, "the hostile <script> was not escaped"
    assert seen["title"] == f"knee report {record.run_id}"
    assert len(seen["svgs"]) == 5
    for svg in seen["svgs"]:
        assert svg["width"] > 400 and svg["height"] > 150, svg
        assert svg["children"] > 50
    assert seen["text_length"] > 1000
    assert shot.stat().st_size > 50_000  # a real screenshot of a long page, not a blank one
    assert shot.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_the_checker_sees_console_errors_and_requests(tmp_path: Path) -> None:
    """The same check on a page that misbehaves: proves the assertions above can fail."""
    bad = tmp_path / "bad.html"
    bad.write_text(
        "<!DOCTYPE html><html><head><title>bad</title></head><body>"
        '<img src="http://127.0.0.1:9/missing.png">'
        "<script>console.error('boom'); throw new Error('kaput');</script></body></html>"
    )
    seen = chromium_check(bad)
    errors = " ".join(seen["console_errors"])
    assert "boom" in errors and "kaput" in errors
    assert "http://127.0.0.1:9/missing.png" in seen["requests"]
    assert seen["svgs"] == [] and seen["scripts"] == 1
