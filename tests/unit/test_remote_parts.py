"""The target's machines, part by part: the Prometheus text reader, the findings a run's remote figures give, and
the report's table and plot of them (the real exporters: tests/integration/test_remote_metrics.py)."""

from __future__ import annotations

import math

import pytest

from knee.analysis import analyze_run
from knee.machine.promtext import PromTextError, parse
from knee.model import RemoteStats, RunRecord, TargetHost
from knee.report.html import render_html

from sample_records import sample_record

EXPOSITION = r"""# HELP node_cpu_seconds_total Seconds the CPUs spent in each mode.
# TYPE node_cpu_seconds_total counter
node_cpu_seconds_total{cpu="0",mode="idle"} 1305.43
node_cpu_seconds_total{cpu="0",mode="user"} 957.13 1700000000000
node_load1 2.03
odd_labels{path="/a,b}c",quote="say \"hi\"\\n",empty=""} +Inf
not_a_number NaN
# TYPE my_requests counter
my_requests{code="200",} 1.5e3
"""


def test_the_reader_keeps_what_is_asked_and_reads_labels_and_values() -> None:
    samples, types = parse(EXPOSITION)
    by = {(s.name, tuple(sorted(s.labels.items()))): s.value for s in samples}
    assert by[("node_cpu_seconds_total", (("cpu", "0"), ("mode", "user")))] == 957.13  # a timestamp is allowed
    assert by[("odd_labels", (("empty", ""), ("path", "/a,b}c"), ("quote", 'say "hi"\\n')))] == math.inf
    assert math.isnan(by[("not_a_number", ())]) and by[("my_requests", (("code", "200"),))] == 1500
    assert types == {"node_cpu_seconds_total": "counter", "my_requests": "counter"}
    kept, _ = parse(EXPOSITION, {"node_load1"}.__contains__)
    assert [(s.name, s.value) for s in kept] == [("node_load1", 2.03)]


@pytest.mark.parametrize(
    ("text", "why", "skimmed"),
    [
        ("<html><body>hello</body></html>", "line 1: does not start with a metric name", True),
        ("ok", "line 1: not `name{labels} value`: 'ok'", True),
        ('a{b="c" 1', "line 1: its labels are not closed", False),
        ("a{b=c} 1", 'line 1: a label is not name="value"', False),
        ("a 1 2 3", "line 1: not `name{labels} value`", False),
        ("# just a comment\nnode_load1 one", "line 2: 'one' is not a number", True),
    ],
)
def test_what_is_not_prometheus_text_says_where(text: str, why: str, skimmed: bool) -> None:
    with pytest.raises(PromTextError) as exc:
        parse(text)
    assert str(exc.value).startswith(why)
    if skimmed:  # a line of a metric not kept is read up to its name: text that is no exposition at all fails too
        with pytest.raises(PromTextError):
            parse(text, {"node_load1"}.__contains__)


def remote(host: str = "db:9100", **figures: object) -> RemoteStats:
    return RemoteStats.model_validate({"url": f"http://{host}/metrics", "host": host, "samples": 5, **figures})


def with_remote(by_level: dict[int, list[RemoteStats]]) -> RunRecord:
    record = sample_record()
    record.targets = {"main": TargetHost(host="db", port=8080, local=False)}
    for s in record.steps:
        s.remote = by_level.get(int(s.level), [])
    record.verdicts = analyze_run(record)
    return record


def findings(record: RunRecord) -> dict[str, str]:
    v = next(v for v in record.verdicts if v.group == "main")
    return {f.kind: f"{f.level}: {f.what}. Fix: {f.fix}" for f in v.findings if f.kind.startswith("remote_")}


def test_the_findings_name_the_host_the_level_and_the_evidence() -> None:
    calm = remote(cpu_busy=0.3, cpus=8, mem_used_mb_peak=2000.0, mem_total_mb=16000.0, listen_overflows=0,
                  listen_drops=0, pg_connections_peak=12, pg_max_connections=20)  # fmt: skip
    busy = remote(cpu_busy=0.97, cpus=8, cpu_modes={"user": 0.8, "system": 0.15, "idle": 0.03, "iowait": 0.02},
                  mem_used_mb_peak=15200.0, mem_total_mb=16000.0, listen_overflows=0, listen_drops=0)  # fmt: skip
    pg = remote("pg:9187", pg_connections_peak=20, pg_max_connections=20)
    drops = remote("lb:9100", listen_overflows=1234, listen_drops=1234)
    gone = remote("pg:9187", samples=2, failed=3, error="cannot connect (Connection refused)")
    record = with_remote({20: [calm], 50: [busy, pg], 100: [busy, drops], 200: [gone]})
    got = findings(record)
    assert got["remote_cpu"] == (
        "50: from 50 clients the CPUs of the target host (db:9100), 8 of them, were 97 % busy (user 80 %, system "
        "15 %). Fix: that host ran out of CPU: find what used it (the service, or something beside it), make each "
        "operation cost less, or give the host more cores"
    )
    memory = "50: at 50 clients the memory in use on the target host (db:9100) reached 95 %"
    assert got["remote_memory"].startswith(memory)
    assert got["remote_connections"].startswith(
        "50: the database's connections (pg:9187) reached its max_connections (20) at 50 clients. Fix: raise "
        "max_connections, or put a connection pool (PgBouncer) in front"
    )
    assert got["remote_listen"].startswith("100: from 100 clients the kernel of lb:9100 dropped 1,234 connections")
    assert got["remote_down"].startswith(
        "200: http://pg:9187/metrics stopped answering during the step at 200 clients (3 of 5 scrapes failed: cannot "
        "connect (Connection refused))"
    )
    assert findings(with_remote({20: [calm], 50: [calm]})) == {}


def test_the_report_shows_the_machines_in_a_table_and_a_plot() -> None:
    record = with_remote({n: [remote(cpu_busy=min(1.0, n / 200), cpus=4, load1_peak=n / 50)] for n in (5, 20, 50, 100)})
    page = render_html(record)
    assert "<h3>The target&#x27;s machines</h3>" in page
    assert "the target&#x27;s machines beside throughput" in page
    assert "db:9100: CPU busy" in page  # the plot's legend
    plain = render_html(sample_record())
    assert "The target&#x27;s machines" not in plain
