"""The golden sweep: a fixed-work sweep against `knee target`, held against committed files.

What a run writes must not change when the code behind it moves: run.json's structure, its counts and its
discrete verdict (peak, onset, collapse levels), and every report after its timings are masked. The expected
files live in `tests/golden/expected/`; `KNEE_GOLDEN_UPDATE=1 pytest tests/golden` rewrites them (and the
diff is then read in review, like any code change).
"""

from __future__ import annotations

import difflib
import json
import os
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from knee.demo_target import TargetProcess, start_target

from conftest import knee_cli

EXPECTED = Path(__file__).resolve().parent / "expected"
UPDATE = os.environ.get("KNEE_GOLDEN_UPDATE") == "1"

LEVELS = "1,2,4"
PER_CLIENT = 100

# Keys whose integer values are the measured counts: these must equal the expected ones exactly.
COUNT_KEYS = frozenset(
    {
        "started",
        "succeeded",
        "failed",
        "hung",
        "abandoned",
        "level",
        "clients",
        "operations",
        "count",
        "per_client",
        "warmup_ops",
    }
)
# Keys whose values say where and when the run happened, not what it measured.
PLACE_KEYS = frozenset(
    {
        "run_id",
        "started_at",
        "ended_at",
        "created",
        "host",
        "hostname",
        "url",
        "knee_version",
        "version",
        "python",
        "platform",
        "kernel",
        "cpu_model",
        "path",
        "out",
        "pid",
        "port",
        "target",
        "dir",
        "reason",  # what the wait before a step found (StepResult.settle): the machine's moment, in words
    }
)
# Lists whose length follows the clock (one point a second, one sample a tick) or the measurement (an interval's
# latency buckets, as many as the latencies spread over): only their first item's shape.
CLOCK_LISTS = frozenset({"series", "points", "samples", "intervals", "latency"})
# Maps whose keys are what the machine showed at a sample (the TCP states seen on the host, the listening ports
# with connections waiting): data, not structure.
SEEN_MAPS = frozenset({"tcp_states_peak", "accept_queue_peak"})


# Alone (make test-py runs it with nothing beside it): the verdict's words, from measured rates, and its findings,
# from the machine's CPU. Beside two other serial tests a CI run's verdict added "at 1 client the machine's CPUs were
# busy" (the other tests' load, rightly seen).
pytestmark = pytest.mark.alone


@pytest.fixture(scope="module")
def target() -> Iterator[TargetProcess]:
    # No limit is reached: every operation succeeds, so the counts are clients × PER_CLIENT exactly. A light load
    # (at most about 420/s), so that neither side is short of CPU, on a curve that bends (σ, κ > 0: N* ≈ 4.2),
    # so that the USL fit's κ is clearly positive and the verdict's words do not follow the machine's noise.
    with start_target("basic", pool=1000, lam=200.0, sigma=0.1, kappa=0.05) as t:
        yield t


@pytest.fixture(scope="module")
def run_dir(target: TargetProcess, tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, str]:
    out = tmp_path_factory.mktemp("golden")
    proc = knee_cli(
        "sweep",
        target.url + "/ls",
        "--levels",
        LEVELS,
        "--iterations",
        str(PER_CLIENT),
        "--pause",
        "0.1s",
        "--no-recovery",
        "--name",
        "golden",
        "--out",
        str(out),
        env={**os.environ, "COLUMNS": "1000"},  # the terminal's tables and verdict unwrapped
    )
    assert proc.returncode == 0, proc.stderr
    (run,) = [p for p in out.iterdir() if p.is_dir()]
    return run, proc.stdout


def skeleton(doc: Any, key: str = "") -> Any:
    """What of a JSON document must not change: its keys, value types and counts; floats, places and clocks masked."""
    if isinstance(doc, dict):
        if key in SEEN_MAPS:
            return "<seen>"
        return {k: skeleton(v, k) for k, v in sorted(doc.items())}
    if isinstance(doc, list):
        if key in CLOCK_LISTS:
            return [skeleton(doc[0], key)] if doc else []
        return [skeleton(v, key) for v in doc]
    if key in PLACE_KEYS:
        return f"<{type(doc).__name__}>"
    if isinstance(doc, bool) or doc is None:
        return doc
    if isinstance(doc, int):
        return doc if key in COUNT_KEYS else "<int>"
    if isinstance(doc, float):
        return "<float>"
    return mask(doc)


_MASKS = [
    (re.compile(r"/tmp/\S*"), "<path>"),
    (re.compile(r"\b\d{8}[T-]\d{6}[-\w]*"), "<run-id>"),
    (re.compile(r"\d{4}-\d{2}-\d{2}[T ][\d:.]+(Z|[+-]\d{2}:?\d{2})?"), "<time>"),
    (re.compile(r"127\.0\.0\.1:\d+"), "127.0.0.1:<port>"),
    (re.compile(r"\b[0-9a-f]{8,}\b"), "<hex>"),
    (re.compile(r"\d+(\.\d+)?(e[-+]?\d+)?"), "#"),
    (re.compile(r"#(,#)+"), "#"),  # thousands grouped or not
    (re.compile(r"[ \t]+"), " "),  # column widths follow the numbers' widths
    (re.compile(r"(─|━|-){2,}"), "--"),
]


def mask(text: str) -> str:
    for pattern, repl in _MASKS:
        text = pattern.sub(repl, text)
    return text


def check(name: str, actual: str) -> None:
    path = EXPECTED / name
    if UPDATE:
        EXPECTED.mkdir(exist_ok=True)
        path.write_text(actual)
        return
    assert path.exists(), f"{path} is missing: run KNEE_GOLDEN_UPDATE=1 pytest tests/golden"
    expected = path.read_text()
    diff = "".join(difflib.unified_diff(expected.splitlines(True), actual.splitlines(True), "expected", "actual"))
    assert actual == expected, f"{name} differs from {path} (review, then KNEE_GOLDEN_UPDATE=1 to accept):\n{diff}"


def test_run_json_structure_and_counts(run_dir: tuple[Path, str]) -> None:
    run, _ = run_dir
    record = json.loads((run / "run.json").read_text())
    for step in record["steps"]:
        for g in step["groups"].values():
            started = g["succeeded"] + g["failed"] + g["hung"] + g["abandoned"]
            assert g["succeeded"] == started == step["level"] * PER_CLIENT, (step["level"], g)
    check("run.json", json.dumps(skeleton(record), indent=1, sort_keys=True) + "\n")


@pytest.mark.parametrize("name", ["report.md", "levels.csv"])
def test_reports_after_masking_times(run_dir: tuple[Path, str], name: str) -> None:
    run, _ = run_dir
    check(name, mask((run / name).read_text()))


def test_html_report_after_masking(run_dir: tuple[Path, str]) -> None:
    run, _ = run_dir
    html = (run / "report.html").read_text()
    # The plots' SVG is drawn from the measured numbers: its text and structure are held, not its coordinates.
    # Axis ticks follow the data's range, so only the words are kept.
    html = re.sub(r"<svg.*?</svg>", lambda m: "<svg>" + " ".join(_words(m[0])) + "</svg>", html, flags=re.S)
    check("report.html", mask(html))


def _words(svg: str) -> list[str]:
    texts = (t.strip() for t in re.findall(r"<text[^>]*>([^<]*)<", svg))
    return [t for t in texts if t and not re.fullmatch(r"[-−+\d.,%e ]+", t)]


def test_terminal_after_masking(run_dir: tuple[Path, str]) -> None:
    _, stdout = run_dir
    check("terminal.txt", mask(stdout))


def test_report_command_gives_the_same(run_dir: tuple[Path, str]) -> None:
    run, _ = run_dir
    proc = knee_cli("report", str(run), env={**os.environ, "COLUMNS": "1000"})
    assert proc.returncode == 0, proc.stderr
    check("report-command.txt", mask(proc.stdout))
