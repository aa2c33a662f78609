"""The live page's parts on their own: the HdrHistogram reader against the Python port, `/metrics` against promtool
(Prometheus' own checker), the server's routes, its event stream and its one-sentence errors."""

from __future__ import annotations

import base64
import json
import random
import shutil
import socket
import subprocess
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from dataclasses import replace
from typing import Any

import pytest
from hdrh.histogram import HdrHistogram
from rich.console import Console

from knee.errors import UserError
from knee.live import exposure, start_live
from knee.live.hdr import HistogramError, buckets
from knee.live.metrics import BUCKETS_S, Metrics
from knee.live.state import GroupNow, Hub, StepNow
from knee.live.stream import state
from knee.model.measured import OpenLoopStats
from knee.scenario.address import listen_address, parse_serve
from knee.scenario.secrets import Secrets

from sample_records import sample_record

SECRET = "hunter2-very-secret"


def encoded(values: list[int]) -> bytes:
    h = HdrHistogram(1, 3_600_000_000, 3)
    for v in values:
        h.record_value(v)
    return base64.b64decode(h.encode())


def test_hdr_buckets_count_what_the_python_port_recorded() -> None:
    rng = random.Random(7)
    values = [min(3_600_000_000, int(rng.lognormvariate(8, 2.5)) + 1) for _ in range(5000)]
    bounds = tuple(b * 1e6 for b in BUCKETS_S)
    got = buckets(encoded(values), bounds)
    assert got.count == len(values)
    for bound, below in zip(bounds, got.cumulative, strict=True):
        exact = sum(v <= bound for v in values)
        # within the histogram's 3 significant digits: only values within 0.1 % of a bound may land across it
        near = sum(abs(v - bound) <= bound * 0.001 + 1 for v in values)
        assert abs(below - exact) <= near, (bound, below, exact)
    assert got.total / got.count == pytest.approx(sum(values) / len(values), rel=0.001)
    below_2ms = buckets(encoded([5, 1999, 2000, 2001]), (2000.0,))  # exact below 2,048 µs
    assert below_2ms.cumulative == (3,) and below_2ms.count == 4


def test_hdr_refuses_what_is_not_a_histogram() -> None:
    for junk in (b"", b"not a histogram at all", b"\x1c\x84\x93\x14\x00\x00\x00\x04abcd"):
        with pytest.raises(HistogramError):
            buckets(junk, (1.0,))


def live_record() -> Any:
    record = sample_record(error_sample=f"denied: token {SECRET}")
    record.status = "running"
    return record


def current(index: int) -> StepNow:
    g = GroupNow("main", 700, 120, 3, 1, 0, 700, 40.0, 900.0, 11.5, 12.0, None)
    return StepNow(index, 3, 12, 700, "", "sweep", "up", "", 10.0, 4.0, (g,))


def promtool_finds_nothing(text: str) -> None:
    """Prometheus' own checker of an exposition text: nothing to say about it."""
    promtool = shutil.which("promtool")
    assert promtool, "promtool is not installed: run `make ci-deps` (scripts/install-system-deps.sh)"
    check = subprocess.run([promtool, "check", "metrics"], input=text, capture_output=True, text=True, timeout=30)
    assert check.returncode == 0 and not check.stdout.strip() and not check.stderr.strip(), check


def test_metrics_hold_the_record_and_the_current_step_and_pass_promtool() -> None:
    record = live_record()
    hub = Hub(record)
    hub.publish(current=current(len(record.steps)))
    text = Metrics(hub).text()
    promtool_finds_nothing(text)
    samples = {line.rsplit(" ", 1)[0]: float(line.rsplit(" ", 1)[1]) for line in text.splitlines() if line[0] != "#"}
    for s in record.steps:
        for outcome in ("succeeded", "failed", "hung", "abandoned"):
            key = f'knee_operations_total{{group="main",step="{s.index}",level="{s.level}",outcome="{outcome}"}}'
            assert samples[key] == getattr(s.groups["main"], outcome), key
        for cls, n in s.groups["main"].failures.items():
            assert samples[f'knee_failures_total{{group="main",step="{s.index}",level="{s.level}",class="{cls}"}}'] == n
    now = f'group="main",step="{len(record.steps)}",level="700"'
    assert samples[f'knee_operations_total{{{now},outcome="succeeded"}}'] == 120
    assert samples[f"knee_operations_started_total{{{now}}}"] == 124
    assert samples['knee_in_flight_operations{group="main"}'] == 700
    assert samples['knee_latency_p99_seconds{group="main"}'] == 0.9
    assert samples['knee_level{unit="clients"}'] == 700 and samples["knee_running"] == 1
    assert "knee_latency_seconds_bucket" not in text  # a synthetic record has no histogram files
    # a second in which nothing succeeded has no latency: no sample, where it said 0 s (as if it were fast)
    idle = GroupNow("main", 700, 120, 3, 1, 0, 700, 40.0, 0.0, 0.0, 0.0, None)
    hub.publish(current=StepNow(len(record.steps), 3, 12, 700, "", "sweep", "up", "", 10.0, 4.0, (idle,)))
    assert "knee_latency_p99_seconds{" not in Metrics(hub).text()


def test_an_open_loops_late_arrivals_are_counters_the_stream_and_metrics_carry() -> None:
    """Late arrivals and knee's own lag among them: the running step's from its snapshot, a finished step's from its
    record; the page's state carries them; promtool finds nothing to say."""
    record = live_record()
    done = record.steps[-1].groups["main"]
    done.open_loop = OpenLoopStats(
        offered=900, offered_rate_hz=90.0, achieved_rate_hz=88.0, late=41, lagged=7, dropped=2
    )
    hub = Hub(record)
    g = replace(current(0).groups[0], offered_hz=2000.0, late=30, lagged=20)
    hub.publish(current=replace(current(len(record.steps)), groups=(g,)))
    text = Metrics(hub).text()
    promtool_finds_nothing(text)
    assert "# TYPE knee_late_arrivals_total counter" in text and "# TYPE knee_lagged_arrivals_total counter" in text
    last = record.steps[-1]
    for index, level, late, lagged in ((last.index, last.level, 41, 7), (len(record.steps), 700, 30, 20)):
        labels = f'group="main",step="{index}",level="{level}"'
        assert f"knee_late_arrivals_total{{{labels}}} {late}" in text, text
        assert f"knee_lagged_arrivals_total{{{labels}}} {lagged}" in text, text
    # a closed loop's step has none (the other steps of the sample record)
    assert f'knee_late_arrivals_total{{group="main",step="{record.steps[0].index}"' not in text
    (shown,) = state(hub.view)["step"]["groups"]
    assert (shown["late"], shown["lagged"], shown["offered_hz"]) == (30, 20, 2000.0)


@pytest.fixture
def served() -> Iterator[tuple[str, Hub]]:
    live = start_live(("127.0.0.1", 0), live_record(), Secrets({"tok": SECRET}), Console(quiet=True), linger_s=0)
    with live:
        yield f"http://127.0.0.1:{live.server.port}", live.hub


def get(url: str) -> tuple[int, str, str]:
    try:
        with urllib.request.urlopen(url, timeout=30) as r:
            return r.status, r.headers["Content-Type"], r.read().decode()
    except urllib.error.HTTPError as e:
        return e.code, e.headers["Content-Type"], e.read().decode()


def events(url: str, count: int) -> list[tuple[str, Any]]:
    """The first `count` events of the stream at `url`."""
    out = []
    with urllib.request.urlopen(url, timeout=30) as r:
        event = ""
        for raw in r:
            line = raw.decode().rstrip("\n")
            if line.startswith("event: "):
                event = line[7:]
            elif line.startswith("data: "):
                out.append((event, json.loads(line[6:])))
                if len(out) == count:
                    return out
    return out


@pytest.mark.serial  # an event stream read within its timeouts
def test_the_server_serves_the_page_the_stream_and_metrics_without_the_secret(served: tuple[str, Hub]) -> None:
    url, hub = served
    status, kind, page = get(url + "/")
    assert status == 200 and kind.startswith("text/html")
    assert "<svg" in page and "knee report:" in page and 'id="totals"' in page  # the record's report, in place
    status, kind, metrics = get(url + "/metrics")
    assert status == 200 and kind.startswith("text/plain; version=0.0.4")
    assert get(url + "/nothing")[0] == 404
    hub.publish(current=current(len(hub.view.steps)))
    (event, first), *_ = events(url + "/events?v=" + str(hub.view.version), 1)
    assert event == "state"
    main = next(t for t in first["state"]["totals"] if t["name"] == "main")
    assert main["succeeded"] == sum(s.groups["main"].succeeded for s in hub.view.steps) + 120
    assert first["points"] == {"step": len(hub.view.steps), "from": 0, "data": []}
    for text in (page, metrics, json.dumps(first)):
        assert SECRET not in text
    assert "denied: token <redacted>" in page  # the failure's sample was there, scrubbed as report.html is


def test_a_port_in_use_and_a_bad_address_are_one_sentence() -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        with pytest.raises(UserError) as exc:
            start_live(("127.0.0.1", port), live_record(), Secrets(), Console(quiet=True))
    assert str(exc.value) == (
        f"--serve 127.0.0.1:{port}: the port is in use (another process listens on it); pick another port, or 0 for "
        "any free one"
    )
    with pytest.raises(UserError, match=r"^--serve 192\.0\.2\.1:8089: 192\.0\.2\.1 is not an address of this machine"):
        start_live(("192.0.2.1", 8089), live_record(), Secrets(), Console(quiet=True))
    for bad in ("http", "99999", "::1:80", ":80"):
        with pytest.raises(UserError, match=rf"^--serve '{bad}': "):
            parse_serve(bad)
    assert listen_address("8089") == ("127.0.0.1", 8089)
    assert listen_address("[::1]:0") == ("::1", 0)
    assert listen_address("0.0.0.0:8089") == ("0.0.0.0", 8089)


def test_serving_beyond_loopback_names_who_can_see_it() -> None:
    assert exposure("--serve", "127.0.0.1", 8089) is None
    assert exposure("--serve", "::1", 8089) is None
    every = exposure("--serve", "0.0.0.0", 8089)
    assert every is not None and every.startswith("--serve 0.0.0.0:8089 listens on every address of this machine")
    assert "anyone who can reach one of them can see the run" in every and "never its secrets" in every
    one = exposure("--serve", "10.1.2.3", 8089)
    assert one is not None and "anyone who can reach 10.1.2.3 can see the run" in one


def test_the_final_page_is_report_html_s_own_body() -> None:
    """At the end of a run that wrote report.html, the page gets that file's body (not drawn a second time)."""
    from knee.report.html import body_of, render_html, report_body

    record = live_record()
    assert body_of(render_html(record)) == report_body(record)
    assert body_of("<html><body><p>not knee's</p></body></html>") is None


@pytest.mark.serial  # a window of SETTLE_S + 3 s
def test_nothing_is_drawn_while_nobody_watches() -> None:
    """The report (its plots, the analysis) is drawn only for a page that wants it: a run served to nobody, or only
    to a scraper, draws nothing, however long it runs. A page asks once (the drawing's imports are loaded then);
    then three versions come with nobody watching, and nothing is drawn in the time the renderer would take to
    settle (SETTLE_S) and draw (about 1.5 s, once loaded) with room to spare."""
    from knee.live.render import SETTLE_S, Renderer

    hub = Hub(live_record())
    renderer = Renderer(hub, Secrets(), poll_s=0.01).start()
    try:
        asked = hub.view.version
        hub.want(asked)  # a page asks
        assert hub.wait_for(lambda: hub.report_version() == asked, 30)
        assert "knee report:" in (hub.report() or (0, ""))[1]
        for _ in range(3):
            hub.publish(version=hub.view.version + 1)
            time.sleep(0.1)
        drawn = hub.wait_for(lambda: hub.report_version() > asked, SETTLE_S + 3.0)
        assert not drawn, f"version {hub.report_version()} was drawn with nobody watching"
    finally:
        renderer.close()


def test_a_soak_s_step_saved_as_it_runs_is_counted_once() -> None:
    """A soak saves its one step each interval while it is still the current one: /metrics wrote its series twice
    (a duplicate sample in every scrape) and the page's totals counted it twice."""
    from knee.live.stream import _totals

    record = live_record()
    hub = Hub(record)
    last = record.steps[-1].index
    hub.publish(current=current(last))
    lines = [line for line in Metrics(hub).text().splitlines() if f'step="{last}"' in line]
    assert lines and len(lines) == len(set(lines)), lines
    assert all('level="700"' in line for line in lines if line.startswith("knee_operations_total")), lines
    before = sum(s.groups["main"].succeeded for s in record.steps[:-1])
    (main,) = _totals(hub.view)
    assert main["succeeded"] == before + 120
