"""Watching a sweep live, against real parts: `knee sweep --serve` drives `knee target` (and a baseload against
nginx that echoes its credentials back), a real Prometheus (Debian's, scrape interval 1 s, its own storage) scrapes
knee's /metrics, headless Chromium reads the live page, and a plain HTTP client reads the event stream.

One sweep serves every test of the module (CI time): the fixture watches it from start to end and keeps what it
saw; each test then checks one promise against run.json, the server's own count and Prometheus' query API.
"""

from __future__ import annotations

import itertools
import json
import re
import signal
import socket
import subprocess
import sys
import threading
import time
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from knee.demo_target import TargetProcess, start_target
from knee.model import RunRecord
from knee.store import RunDir

from browser import Browser
from conftest import knee_cli
from servers import Nginx, free_port, kill_if_running, sent, settled, start_prometheus, wait_for_http

TOKEN = "tok-5ecr3t-Val"  # given with --secret: sent as a cookie, echoed back by nginx in a 401's body
LITERAL = "Basic bGl2ZTpwYXNzd29yZA=="  # a literal Authorization header: made a secret of its own
ARTIFACTS = Path(__file__).resolve().parents[1] / "artifacts"
LEVELS = [2, 6, 12]
STEP_S = 5
REOPEN_S = 2.5  # the time the reopened page has to show the step it was closed in: Chromium's load and the stream's

SCENARIO = """\
name = "live"
[groups.main]
kind = "http"
url = "{target}/"
clients = "level"
[groups.echo]
kind = "http"
url = "{nginx}/echo-credentials"
clients = 1
background = true
think = "0.25s"
headers = {{ Authorization = "{literal}" }}
cookies = {{ sid = "${{tok}}" }}
[sweep]
levels = {levels}
duration = "{step}s"
[recovery]
enabled = false
[serve]
address = "127.0.0.1:{port}"
linger = "30s"
"""

TOTAL = 'document.querySelector(\'#totals [data-group="main"][data-k="succeeded"]\')'


@dataclass
class Watched:
    """What the module's sweep left, and what its watchers read while it ran."""

    record: RunRecord | None = None
    run_dir: Path | None = None
    stdout: str = ""
    served_requests: int = 0  # knee target's own count of the requests it served during the sweep
    reads: list[tuple[int, int]] = field(default_factory=list)  # (step index, the page's main succeeded) a second apart
    before_close: dict[str, Any] = field(default_factory=dict)  # what the page showed just before it was closed
    closed_step: int = -1  # the step running when the page was reopened …
    closed_in_step: float = 0.0  # … and how long it had run while the page was closed
    reopened: dict[str, Any] = field(default_factory=dict)  # … and once reopened
    final: dict[str, Any] = field(default_factory=dict)  # the page once the run had ended
    errors: list[str] = field(default_factory=list)  # the browser's console
    requests: list[str] = field(default_factory=list)  # what the page loaded
    texts: dict[str, str] = field(default_factory=dict)  # everything read: pages, the event stream, /metrics
    prometheus: dict[tuple[str, str], float] = field(default_factory=dict)  # (group, outcome) -> last total
    prometheus_running: float | None = None


def _stream(url: str, into: dict[str, str]) -> None:
    """Read the event stream from its first event to its `end` (the whole text, for the tests to grep)."""
    chunks: list[str] = []
    try:
        with urllib.request.urlopen(url, timeout=60) as r:
            for line in r:
                chunks.append(line.decode())
                if line.startswith(b"event: end"):
                    break
    finally:
        into["event stream"] = "".join(chunks)


def _get(url: str) -> str:
    with urllib.request.urlopen(url, timeout=30) as r:
        return r.read().decode()


def _knee_step(base: str) -> int:
    m = re.search(r"^knee_step (-?\d+)$", _get(base + "metrics"), re.M)
    assert m, "knee's /metrics has no knee_step"
    return int(m[1])


def _closed(base: str, step: int, elapsed: float) -> tuple[int, float]:
    """Keep the page closed (it closed `elapsed` s into `step`) until a step has run at least 1.5 s of it while
    the page was closed and has REOPEN_S left: the reopened page must show that step, its points made while the page
    was closed among them (a page that lost them would wait for the next step's). Returns that step and how long
    it ran while the page was closed."""
    closed = began = time.monotonic()
    deadline = closed + 30
    while time.monotonic() < deadline:
        now, running = time.monotonic(), _knee_step(base)
        if running != step:
            step, began, elapsed = running, now, 0.0
        into, unseen = elapsed + now - began, now - began
        if step >= 0 and unseen >= 1.5 and into <= STEP_S - REOPEN_S:
            return step, unseen
        time.sleep(0.05)
    raise AssertionError(f"no step ran 1.5 s while the page was closed with {REOPEN_S} s left (last: step {step})")


def _watch(browser: Browser, base: str, seen: Watched) -> None:
    browser.open(base)
    browser.wait(f"window.knee && window.knee.state.step && {TOTAL} && Number({TOTAL}.textContent.replace(/,/g, ''))")
    for _ in range(2):  # two reads a second apart, in the same step
        state = browser.eval("JSON.stringify(window.knee.state)")
        seen.reads.append(
            (json.loads(state)["step"]["index"], browser.eval(f"Number({TOTAL}.textContent.replace(/,/g, ''))"))
        )
        time.sleep(1.0)
    seen.texts["/metrics mid-run"] = _get(base + "metrics")
    seen.before_close = browser.eval(
        f"({{step: window.knee.state.step.index, elapsed: window.knee.state.step.elapsed_s,"
        f" points: window.knee.points.data.length, total: Number({TOTAL}.textContent.replace(/,/g, ''))}})"
    )
    browser.open("about:blank")  # the page closed …
    seen.closed_step, seen.closed_in_step = _closed(base, seen.before_close["step"], seen.before_close["elapsed"])
    browser.open(base)  # … and opened again
    try:
        browser.wait("window.knee && window.knee.state.step && window.knee.points.data.length")
    except AssertionError as e:  # say what the page showed instead, and the step knee was in
        page = browser.eval(
            "JSON.stringify({step: window.knee && window.knee.state.step, ended: document.body.dataset.ended,"
            " points: window.knee && window.knee.points.data.length})"
        )
        knee_at = _knee_step(base)
        raise AssertionError(f"{e}: reopened in step {seen.closed_step}, the page: {page}, knee: {knee_at}") from e
    seen.reopened = browser.eval(
        f"({{step: window.knee.state.step.index, points: window.knee.points.data.map(p => p[0]),"
        f" elapsed: window.knee.state.step.elapsed_s, total: Number({TOTAL}.textContent.replace(/,/g, ''))}})"
    )
    # the screenshot once the step has drawn a few seconds (or has ended)
    browser.wait("!window.knee.state.step || window.knee.points.data.length >= 3", 10)
    browser.screenshot(ARTIFACTS / "live.png", full=True)
    browser.wait("document.body.dataset.ended === 'true'", 90)
    seen.final = browser.eval(
        "Object.fromEntries(Array.from(document.querySelectorAll('#totals [data-k]'))"
        ".filter(c => c.dataset.k !== 'name')"
        ".map(c => [c.dataset.group + ' ' + c.dataset.k, Number(c.textContent.replace(/,/g, ''))]))"
    )
    seen.texts["page at the end"] = browser.eval("document.documentElement.outerHTML")
    browser.screenshot(ARTIFACTS / "live-final.png")
    seen.errors = browser.errors()
    seen.requests = browser.requests()


# Alone (make test-py runs them with nothing beside them): a browser watching a live sweep's steps as they happen.
# The cluster's sweep and the refused port are not timed: they run in the parallel pass.
watching = pytest.mark.alone


@pytest.fixture(scope="module")
def target() -> Iterator[TargetProcess]:
    with start_target("basic") as t:
        yield t


@pytest.fixture(scope="module")
def watched(target: TargetProcess, nginx: Nginx, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Watched]:
    tmp = tmp_path_factory.mktemp("live")
    port = free_port()
    base = f"http://127.0.0.1:{port}/"
    (tmp / "live.toml").write_text(
        SCENARIO.format(target=target.url, nginx=nginx.url, literal=LITERAL, levels=LEVELS, step=STEP_S, port=port)
    )
    prometheus = start_prometheus(tmp / "prometheus", [f"127.0.0.1:{port}"])
    browser = Browser()
    before = target.stats()["requests"]
    texts: dict[str, str] = {}
    sweep = subprocess.Popen(
        [sys.executable, "-m", "knee", "sweep", str(tmp / "live.toml"), "--out", str(tmp / "runs"),
         "--secret", f"tok={TOKEN}"],
        stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
    )  # fmt: skip
    try:
        wait_for_http(base + "metrics", 30)
        reader = threading.Thread(target=_stream, args=(base + "events", texts), daemon=True)
        reader.start()
        seen = Watched()
        _watch(browser, base, seen)
        stdout, _ = sweep.communicate(timeout=120)
        reader.join(30)
        (run,) = (tmp / "runs").iterdir()
        record = seen.record = RunDir(run).load()
        seen.run_dir = run
        seen.stdout = stdout
        seen.texts.update(texts)
        seen.served_requests = settled(lambda: target.stats()["requests"] - before, _main_sent(record))
        for row in prometheus.query("sum by (group, outcome) (last_over_time(knee_operations_total[10m]))"):
            seen.prometheus[(row["metric"]["group"], row["metric"]["outcome"])] = float(row["value"][1])
        running = prometheus.query("last_over_time(knee_running[10m])")
        seen.prometheus_running = float(running[0]["value"][1]) if running else None
        yield seen
    finally:
        kill_if_running(sweep)
        browser.close()
        prometheus.stop()


def _record(watched: Watched) -> RunRecord:
    assert watched.record is not None
    return watched.record


def _main_sent(record: RunRecord) -> int:
    """What the measured group sent to knee target (the baseload went to nginx): its steps, and the probes of
    whether the service was at rest before each (single operations of the measured group)."""
    sent(record)  # the accounting identity, step by step
    probes = sum(s.settle.probes for s in record.steps if s.settle is not None)
    return sum(s.groups["main"].started + s.groups["main"].warmup_ops for s in record.steps) + probes


def _totals(record: RunRecord, group: str) -> dict[str, int]:
    steps = [s.groups[group] for s in record.steps if group in s.groups]
    return {k: sum(getattr(g, k) for g in steps) for k in ("succeeded", "failed", "hung", "abandoned")}


@watching
def test_prometheus_scraped_the_totals_run_json_holds(watched: Watched) -> None:
    """Prometheus' last scrape (after the run's end: knee_running 0) holds, per group, run.json's totals; and the
    service served what run.json says was sent."""
    record = _record(watched)
    assert record.status == "complete" and [s.level for s in record.steps] == LEVELS, watched.stdout
    assert watched.prometheus_running == 0, "Prometheus never scraped knee after the run ended"
    for group in ("main", "echo"):
        totals = _totals(record, group)
        for outcome in ("succeeded", "failed", "hung", "abandoned"):
            assert watched.prometheus[(group, outcome)] == totals[outcome], (group, outcome)
    assert _totals(record, "echo")["failed"] > 0  # nginx refused the baseload with its credentials echoed
    assert watched.served_requests == _main_sent(record)


@watching
def test_the_live_page_counts_and_ends_as_run_json(watched: Watched) -> None:
    (step_a, a), (step_b, b) = watched.reads
    assert step_a == step_b and b > a, watched.reads  # a second later, the page's count had grown
    for group in ("main", "echo"):
        for outcome, n in _totals(_record(watched), group).items():
            assert watched.final[f"{group} {outcome}"] == n, (group, outcome)
    assert watched.errors == [], watched.errors
    origin = watched.requests[0].rsplit("/", 1)[0]
    assert all(u.startswith(origin) for u in watched.requests), watched.requests  # nothing from elsewhere
    for shot in ("live.png", "live-final.png"):
        data = (ARTIFACTS / shot).read_bytes()
        assert data[:8] == b"\x89PNG\r\n\x1a\n" and len(data) > 20_000, shot
    assert "knee report: " in watched.texts["page at the end"] and "Failure reasons" in watched.texts["page at the end"]


def test_a_cluster_sweep_shows_each_workers_row_and_the_failures_by_class(
    target: TargetProcess, tmp_path: Path
) -> None:
    """--cluster local:2 --serve, every response a failure (--expect-status 201): each step's event stream names
    both workers with their clients and counts, the rows add up to the step's, and the step's failures so far are
    shown by class (in the stream and in /metrics) while it runs."""
    port = free_port()
    sweep = subprocess.Popen(
        [sys.executable, "-m", "knee", "sweep", target.url + "/", "--levels", "2,4", "-d", "3s", "--no-recovery",
         "--expect-status", "201", "--think", "20ms", "--cluster", "local:2", "--serve", str(port),
         "--out", str(tmp_path)],
        stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
    )  # fmt: skip
    states: list[dict[str, Any]] = []
    metrics = ""
    try:
        wait_for_http(f"http://127.0.0.1:{port}/metrics", 60)
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/events", timeout=60) as r:
            event = ""
            for line in r:
                if line.startswith(b"event: "):
                    event = line[7:].decode().strip()
                    if event == "end":
                        break
                elif line.startswith(b"data: ") and event == "state":
                    states.append(json.loads(line[6:])["state"])
                    step = states[-1].get("step")
                    if not metrics and step and step["shards"] and step["groups"][0]["failed"]:
                        metrics = _get(f"http://127.0.0.1:{port}/metrics")
        out, _ = sweep.communicate(timeout=120)
    finally:
        kill_if_running(sweep)
    assert sweep.returncode == 0, out
    rows = {}
    for st in states:
        step = st.get("step")
        if step and step["shards"]:
            rows[step["level"]] = (step["shards"], step["groups"])
    assert set(rows) == {2, 4}, [s.get("step") for s in states][-3:]
    for level, (shards, groups) in rows.items():
        assert len(shards) == 2 and sum(w["clients"] for w in shards) == level, shards
        assert all(w["worker"].startswith("tcp://127.0.0.1:") for w in shards), shards
        for k in ("succeeded", "failed", "hung", "in_flight"):
            assert sum(w[k] for w in shards) == sum(g[k] for g in groups), (k, shards, groups)
        (main,) = groups
        assert main["failed"] > 0 and main["failed_by_class"] == [["status", main["failed"]]], main
    assert 'knee_failures_total{group="main",step="0",level="2",class="status"}' in metrics, metrics
    record = RunDir(next(tmp_path.iterdir())).load()
    assert all(s.groups["main"].succeeded == 0 and s.groups["main"].failed > 0 for s in record.steps)


@watching
def test_closing_and_reopening_the_page_loses_nothing(watched: Watched) -> None:
    """The page was reopened in a step that ran at least 1.5 s while it was closed (whether that step began before
    the page closed or after): the reopened page shows that step at once, with every second of it, those made
    while the page was closed among them."""
    before, after = watched.before_close, watched.reopened
    assert after["total"] >= before["total"] > 0
    assert watched.closed_in_step >= 1.5
    assert after["step"] == watched.closed_step, (before, after, watched.closed_step)
    times = after["points"]
    assert times[0] <= 1.5 and after["elapsed"] - times[-1] <= 1.5, (after, watched.closed_in_step)
    assert all(0.5 <= b - a <= 1.5 for a, b in itertools.pairwise(times)), times
    if after["step"] == before["step"]:
        assert len(times) >= before["points"] + 1, (before, after)


@watching
def test_no_secret_in_anything_read(watched: Watched) -> None:
    assert set(watched.texts) == {"/metrics mid-run", "page at the end", "event stream"}
    assert watched.texts["event stream"].rstrip().endswith("event: end"), watched.texts["event stream"][-300:]
    assert "denied: &lt;redacted&gt; sid=&lt;redacted&gt;" in watched.texts["page at the end"]  # echoed, scrubbed
    for name, text in watched.texts.items():
        for secret in (TOKEN, LITERAL, LITERAL.split()[1]):
            assert secret not in text, name
    assert TOKEN not in watched.stdout and LITERAL not in watched.stdout


def test_a_port_in_use_stops_before_any_load(target: TargetProcess) -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        before = target.stats()["requests"]
        proc = knee_cli("run", target.url + "/", "-c", "2", "-d", "2s", "--serve", str(port))
    assert proc.returncode == 2 and "Traceback" not in proc.stderr
    assert proc.stderr.strip() == (
        f"knee: error: --serve 127.0.0.1:{port}: the port is in use (another process listens on it); pick another "
        "port, or 0 for any free one"
    )
    assert target.stats()["requests"] == before


@watching
def test_report_serve_serves_the_finished_run(watched: Watched) -> None:
    """`knee report --serve RUN_DIR`: the run's final page and /metrics, with the latency histograms from its
    files, until Ctrl-C."""
    record, port = _record(watched), free_port()
    serving = subprocess.Popen(
        [sys.executable, "-m", "knee", "report", "--serve", str(watched.run_dir), "--listen", str(port)],
        stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )  # fmt: skip
    try:
        wait_for_http(f"http://127.0.0.1:{port}/metrics", 30)
        page, metrics = _get(f"http://127.0.0.1:{port}/"), _get(f"http://127.0.0.1:{port}/metrics")
    finally:
        serving.send_signal(signal.SIGINT)
        out, err = serving.communicate(timeout=30)
    assert serving.returncode == 0 and "Traceback" not in err, err
    assert f"live page: http://127.0.0.1:{port}/" in out
    assert "knee report: " in page and "<svg" in page and TOKEN not in page and LITERAL not in page
    assert "knee_running 0" in metrics
    for s in record.steps:
        g = s.groups["main"]
        labels = f'group="main",step="{s.index}",level="{s.level}"'
        assert f'knee_operations_total{{{labels},outcome="succeeded"}} {g.succeeded}' in metrics
        counts = [line for line in metrics.splitlines() if line.startswith("knee_latency_seconds_count")]
        assert f"knee_latency_seconds_count{{{labels}}} {g.succeeded}" in metrics, counts  # steps/<n>-main.hgrm
