"""`knee run --rate`: open-loop load against real servers (nginx, whose access log witnesses the counts, and
`knee target`, its own process), over real sockets.

The rate-accuracy-over-10-s, Poisson goodness-of-fit, cap and 2 s stall checks live in Rust
(crates/engine/tests/it/pacer.rs, crates/engine/src/pacer.rs); here: the CLI, the report and the JSON.
"""

from __future__ import annotations

import base64
import re
from collections.abc import Iterator
from pathlib import Path

import pytest
from hdrh.histogram import HdrHistogram

import knee
from cli import run_json
from knee.demo_target import TargetProcess, start_target

from conftest import knee_cli
from servers import Nginx, settled


@pytest.fixture(scope="module")
def target() -> Iterator[TargetProcess]:
    # basic: S(1) = 10 ms, capacity ≈ 900 req/s; 200/s keeps about 2 requests in flight.
    with start_target("basic") as t:
        yield t


def test_a_rate_within_capacity_is_achieved_and_nginx_saw_every_arrival(nginx: Nginx, tmp_path: Path) -> None:
    nginx.clear_log()
    doc, proc = run_json(tmp_path, nginx.url + "/", "--rate", "200", "-c", "20", "-d", "3s")
    o = doc["open_loop"]
    assert o["target_rate_hz"] == 200.0 and o["poisson"] is False and o["max_in_flight"] == 10_000
    # Counts, not rates over a wall-clock window: a constant pacer offers exactly one arrival every 5 ms of the
    # 3 s, each started or dropped, and dropped only if due as the window closed with no client run before it ended
    # (on a CPU-starved machine: one or two at most); nginx being far faster than 200/s, the started succeeded, bar
    # those still in flight when the window closed (abandoned: a few at most, 1 % is the old rate tolerance).
    assert o["offered"] == 600 and o["dropped"] <= 2, o
    assert doc["started"] + o["dropped"] == o["offered"] and doc["failed"] == doc["hung"] == 0, doc
    assert doc["started"] == doc["succeeded"] + doc["abandoned"] and doc["abandoned"] <= 6, doc
    assert o["latency_uncorrected_ms"]["count"] == doc["latency_ms"]["count"] == doc["succeeded"]
    # Corrected latency counts from the intended start: never below the uncorrected figure's median.
    assert doc["latency_ms"]["p50"] >= o["latency_uncorrected_ms"]["p50"]
    # An independent witness: nginx logged exactly the requests knee started (and those of the warm-up), abandoned
    # ones too (nginx answers `/` at once, so a request cut short was answered, and logged, before it was dropped).
    seen = doc["started"] + doc["warmup_ops"]
    assert settled(lambda: len(nginx.access_lines()), seen) == seen
    assert doc["spec"]["groups"][0]["pacer"] == {
        "kind": "rate",
        "rate_hz": 200.0,
        "profile": None,  # a constant rate, not a rate profile
        "poisson": False,
        "max_in_flight": 10_000,
    }
    for line in ("Offered rate:", "Achieved rate:", "Late (> 10 ms after due):", "Dropped (never started):"):
        assert line in proc.stdout, proc.stdout
    assert "uncorrected" in proc.stdout and "(from the intended start)" in proc.stdout


@pytest.mark.serial  # counts within 2 of rate × time
def test_rate_steps_give_one_row_and_one_document_per_rate(target: TargetProcess, tmp_path: Path) -> None:
    doc, proc = run_json(tmp_path, target.url + "/", "--rate", "50,150", "--poisson", "-c", "10", "-d", "1s")
    steps = doc["rate_steps"]
    assert [s["open_loop"]["target_rate_hz"] for s in steps] == [50.0, 150.0]
    for s in steps:
        o = s["open_loop"]
        assert o["poisson"] is True
        # Poisson: 50 or 150 expected arrivals in 1 s; allow 5 standard deviations.
        rate = o["target_rate_hz"]
        assert abs(o["offered"] - rate) <= 5 * rate**0.5 + 1, o
        # every arrival started or was dropped; of those started, at most one a connection was in flight at the
        # window's end (a parallel run's latency left 3 of 145 in flight: an allowance of 2 failed it)
        assert s["started"] + o["dropped"] == o["offered"], s
        assert s["succeeded"] + s["abandoned"] == s["started"] and s["abandoned"] <= 10, s
    assert "== Rate 50/s ==" in proc.stdout and "== Rate 150/s ==" in proc.stdout
    assert "Rate steps" in proc.stdout
    # a row per rate, its late arrivals and of them knee's own lag (issued while a client was free)
    rows = proc.stdout.split("Rate steps", 1)[1].splitlines()
    assert rows[1].split()[:6] == ["target/s", "offered/s", "achieved/s", "late", "lagged", "dropped"], rows[1]
    for row, s in zip(rows[2:4], steps, strict=True):
        o = s["open_loop"]
        assert row.split()[:6] == [f"{o['target_rate_hz']:g}", *row.split()[1:3], str(o["late"]), str(o["lagged"]),
                                   str(o["dropped"])], (row, o)  # fmt: skip


def test_the_in_flight_cap_drops_over_a_slow_service(tmp_path: Path) -> None:
    # 20 ms per request without contention: 2 connections serve 100/s; 300/s with a cap of 3 drops most.
    with start_target(lam=50.0, sigma=0.0, kappa=0.0) as t:
        doc, proc = run_json(tmp_path, t.url + "/", "--rate", "300", "--max-in-flight", "3", "-c", "2", "-d", "1s")
    o = doc["open_loop"]
    assert o["max_in_flight"] == 3
    assert o["dropped"] > o["offered"] // 3, o
    # every arrival started or was dropped: those still waiting for a connection when the window closed too
    assert doc["started"] + o["dropped"] == o["offered"], doc
    assert re.search(rf"^Dropped \(never started\): +{o['dropped']}$", proc.stdout, re.M), proc.stdout


def test_python_api_open_loop_and_uncorrected_histogram(target: TargetProcess) -> None:
    r = knee.run(target.url + "/", clients=4, duration=1.0, rate=100.0)
    g = r.summary.groups[0]
    assert g.open_loop is True and g.offered >= 99
    raw = r.result.histogram(0, "latency_uncorrected")
    assert raw is not None
    h = HdrHistogram.decode(base64.b64encode(raw))  # hdrh decodes only the base64-wrapped V2 form
    assert h.get_total_count() == g.latency_uncorrected_us.count == g.succeeded


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--poisson"], "--poisson shapes an open loop: give --rate too"),
        (["--max-in-flight", "5"], "--max-in-flight caps an open loop: give --rate too"),
        (["--rate", "fast"], "--rate 'fast': 'fast' is not a number"),
        (["--rate", "0"], "every rate must be a positive number"),
        (["--rate", "100", "--think", "10ms"], "--think applies to closed loops only"),
    ],
)
def test_open_loop_mistakes_get_one_sentence(args: list[str], message: str) -> None:
    proc = knee_cli("run", "-q", "http://127.0.0.1:9/", "-n", "1", *args, timeout=30)
    assert proc.returncode != 0
    assert message in proc.stderr, proc.stderr
    assert "Traceback" not in proc.stderr
