"""Request mixes and data that runs out, in every output: the terminal, report.md/html, levels.csv, knee run's text
and JSON, knee compare, the findings, and the verdict (a step ended by its data is no collapse). Records are built
from real engine runs against nginx (tests/mix_records.py)."""

from __future__ import annotations

import csv
import io
from pathlib import Path

import pytest
from rich.console import Console

from knee.analysis.compare import compare_runs
from knee.analysis.levels import pool
from knee.analysis.mix import slowed_most
from knee.model import Finding, RunRecord
from knee.progress import SweepProgress
from knee.report import abtext
from knee.report.compare import comparison_markdown, render_comparison
from knee.report.csvout import levels_csv
from knee.report.html import render_html
from knee.report.markdown import render_markdown
from knee.report.terminal import render_terminal
from mix_records import FED_WINDOW_S, data_record, mix_record

from servers import Nginx

# A queue nginx's rate (20 000 to 25 000/s here) empties in about 0.5 s of the step's 6 s. 4 000 rows, 0.17 s, once
# read as a collapse at 2 clients beside other tests: the step's rate over a window that short moved with a pause.
ROWS = 10_000

# Serial: the verdict compares the rates the fixtures' sweeps measured (a CPU-bound parallel pass made the second
# level's read low enough to look like a collapse, twice)
pytestmark = pytest.mark.serial


@pytest.fixture(scope="module")
def mix(nginx: Nginx) -> RunRecord:
    return mix_record(nginx.url)


@pytest.fixture(scope="module")
def users(nginx: Nginx, tmp_path_factory: pytest.TempPathFactory) -> RunRecord:
    return data_record(nginx.url, tmp_path_factory.mktemp("data") / "users.csv", ROWS)


def _text(draw: object) -> str:
    console = Console(record=True, width=220, file=io.StringIO())
    draw(console)  # type: ignore[operator]
    return console.export_text()


def test_the_engine_counted_the_mix_apart(mix: RunRecord) -> None:
    for s in mix.steps:
        g = s.groups["main"]
        read, write = g.requests["read"], g.requests["write"]
        assert list(g.requests) == ["read", "write"]
        assert read.succeeded + write.succeeded == g.succeeded and read.failed + write.failed == g.failed
        assert write.failed > 0 == write.succeeded and read.succeeded > 0 == read.failed
        assert write.failures == {"status": write.failed}


def test_terminal_has_a_row_per_request_under_the_group(mix: RunRecord) -> None:
    out = _text(lambda c: render_terminal(mix, c))
    assert "group main: per request" in out
    for s in mix.steps:
        w = s.groups["main"].requests["write"]
        assert f"{w.failed:,} (100 %: status {w.failed:,})" in out

    def ends(console: Console) -> None:
        for s in mix.steps:
            SweepProgress(console, 1.0, 0.0).end(s)

    lines = _text(ends).splitlines()
    r = mix.steps[0].groups["main"].requests
    assert lines[1].startswith(f"    read: {r['read'].succeeded:,} ok (") and ", 0 failed, 0 hung" in lines[1]
    assert lines[2].startswith(f"    write: 0 ok (0/s), {r['write'].failed:,} failed (status {r['write'].failed:,})")


def test_markdown_and_html_have_the_per_request_table(mix: RunRecord) -> None:
    md = render_markdown(mix)
    assert "### Per request" in md
    assert "| Level | Request | Succeeded (rate) | Failed | Hung | Abandoned | p50 | p99 |" in md
    w = mix.steps[1].groups["main"].requests["write"]
    assert f"| 4 | write | 0 (0 Hz) | {w.failed:,} (100 %: status {w.failed:,}) | 0 | 0 | - | - |" in md
    page = render_html(mix)
    assert "<h3>Per request</h3>" in page and '<tr class="bad"><td>4</td><td>write</td>' in page


def test_levels_csv_has_a_row_per_level_and_request(mix: RunRecord) -> None:
    rows = list(csv.DictReader(io.StringIO(levels_csv(mix))))
    assert [(r["level"], r["request"]) for r in rows] == [
        (str(lv), name) for lv in (1, 4) for name in ("", "read", "write")
    ]
    for r in rows:
        g = mix.steps[int(r["index"])].groups["main"]
        counts = g.requests[r["request"]] if r["request"] else g
        assert (int(r["succeeded"]), int(r["failed"]), int(r["started"])) == (
            counts.succeeded,
            counts.failed,
            counts.started,
        )
        assert (r["bytes_received"] == "") == bool(r["request"])  # bytes are the group's alone
    write = [r for r in rows if r["request"] == "write"]
    assert all(float(r["failure_ratio"]) == 1.0 and r["p99_ms"] == "0" for r in write)


def test_knee_run_text_and_json_carry_the_requests(mix: RunRecord) -> None:
    step = mix.steps[0]
    g = step.groups["main"]
    text = abtext.render(mix.scenario, step)
    assert "Requests (the mix; latency in ms, of the succeeded ones)" in text
    write_line = next(line for line in text.splitlines() if line.startswith("  write "))
    assert write_line.split()[1:4] == ["0", str(g.requests["write"].failed), "0"]
    assert write_line.endswith(f"status: {g.requests['write'].failed}")
    doc = abtext.to_json(mix.scenario, step)
    assert doc.requests == g.requests and doc.ran_out is None and doc.data == []


def test_the_finding_names_the_request_that_failed_while_the_other_held(mix: RunRecord, nginx: Nginx) -> None:
    (f,) = [f for f in mix.verdicts[0].findings if f.kind.startswith("mix")]
    assert f.kind == "mix_failed" and f.level == 1
    assert f.what.startswith("`write` failed from 1 client while `read` held: failed or hung `write` 100 %, `read` 0 %")
    # no such finding when both requests held (write to a path nginx answers) …
    held = mix_record(nginx.url, levels=(1, 2), n=600, write="/", write_method="GET")
    assert not [f for f in held.verdicts[0].findings if f.kind == "mix_failed"]

    # … but the one that slowed most, when one did: from 1 client to 2 (taken as the peak), read's p99 kept and
    # write's grown by `times`
    def grown(times: float) -> Finding | None:
        for name, factor in (("read", 1.0), ("write", times)):
            first, top = (s.groups["main"].requests[name] for s in held.steps)
            top.latency_ms = top.latency_ms.model_copy(update={"p99": first.latency_ms.p99 * factor})
        return slowed_most(held.steps, "main", 2, "clients")

    assert grown(1.2) is None  # grown too little to say
    slowed = grown(10.0)
    assert slowed is not None and slowed.kind == "mix_slowed" and slowed.level == 2
    assert slowed.what.startswith("`write` slowed most as the level grew: its p99 went from ")
    assert " at 1 client to " in slowed.what and " at 2 clients (×10), `read`'s from " in slowed.what


def test_compare_judges_each_request_when_both_runs_have_the_same_names(mix: RunRecord, nginx: Nginx) -> None:
    other = mix_record(nginx.url, write="/", write_method="GET")  # B: write succeeds
    cmp = compare_runs(mix, other)
    assert [(d.level, d.request) for d in cmp.requests] == [(1, "read"), (1, "write"), (4, "read"), (4, "write")]
    writes = [d for d in cmp.requests if d.request == "write"]
    assert all(d.failures == "better" and d.rate == "unknown" and d.failure_ratio_b == 0 for d in writes)
    assert all(d.count_a == mix.steps[i].groups["main"].requests["write"].total for i, d in enumerate(writes))
    assert any(line.startswith("main `write`: better at 2 (") for line in cmp.summary)
    text = _text(lambda c: render_comparison(cmp, c))
    assert "group main: per request" in text
    assert "### Per request" in comparison_markdown(cmp)
    plain = mix_record(nginx.url, levels=(1,), n=300)
    for s in plain.steps:
        g = s.groups["main"]
        g.requests = {"browse": g.requests["read"], "write": g.requests["write"]}
    assert compare_runs(mix, plain).requests == []  # other names: nothing to hold against each other


def test_a_step_whose_data_ran_out_is_marked_and_no_collapse(users: RunRecord) -> None:
    _, fed, _ = users.steps
    g = fed.groups["main"]
    (use,) = fed.data
    # the engine measures the group until its last operation ended, not the whole planned window
    assert g.ran_out == "users" and g.elapsed_s < FED_WINDOW_S / 2 and use.exhausted_after_s is not None
    assert use.taken == ROWS and use.exhausted_after_s is not None
    rows = pool(users.steps, "main", "up")
    assert [r.level for r in rows] == [1, 2]  # none left: nothing ended, so the third is left out
    # over the seconds until the rows ran out it is the rate the service kept (over the planned window it would
    # have been a collapse past the first level's)
    assert 0.5 * rows[0].rate > ROWS / FED_WINDOW_S
    assert rows[1].rate == pytest.approx(ROWS / use.exhausted_after_s, rel=0.05)
    v = users.verdicts[0]
    assert v.collapse_level is None and not any("collapse" in s for s in v.sentences)
    said = [w for w in v.warnings if "ran out of users" in w]
    assert said[0].startswith(f"the step at 2 clients ran out of users after {ROWS:,} rows, ")
    assert "it ended because its data did, not because the service failed" in said[0]
    assert said[1] == (
        f"the step at 4 clients ran out of users at once: earlier steps used all its {ROWS:,} rows: no operation "
        "ended, so it is left out"
    )


def test_every_report_marks_the_step_that_ran_out(users: RunRecord, tmp_path: Path) -> None:
    term = _text(lambda c: render_terminal(users, c))
    assert "2 (ran out of users)" in term and "4 (ran out of users)" in term
    assert f"step 1 (2 clients): ran out of users after {ROWS:,} rows" in term
    line = _text(lambda c: SweepProgress(c, 1.0, 0.0).end(users.steps[1]))
    assert f"[ran out of users after {ROWS:,} rows, " in line
    md = render_markdown(users)
    assert "### Data that ran out" in md and "| 2 (ran out of users) |" in md
    assert "ran out of users" in render_html(users)
    rows = list(csv.DictReader(io.StringIO(levels_csv(users))))
    assert [(r["ran_out"], r["rows_used"]) for r in rows] == [("", ""), ("users", str(ROWS)), ("users", "0")]
    text = abtext.render(users.scenario, users.steps[1])
    assert f"Data ran out:               ran out of users after {ROWS:,} rows" in text
    assert abtext.to_json(users.scenario, users.steps[1]).ran_out == "users"
