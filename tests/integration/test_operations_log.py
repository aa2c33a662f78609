"""`--operations-log FILE` (issue 40 item 6): every operation, as the engine ends it, read back with
knee.read_operations. Against nginx: a row per request nginx logged, the log's latencies are the histogram's
(HdrHistogram's three digits), its bytes the result's; refused connections are rows of their class; an open loop's
rows say how late each started; a run of several steps writes a file a step; a file cut short reads up to its last
whole record; mistakes are one sentence."""

from __future__ import annotations

import json
import math
import time
from pathlib import Path

import pytest

import knee
from knee.operations import read_records

from conftest import knee_cli
from servers import Nginx, settled


def nearest_rank(values: list[float], percent: float) -> float:
    ordered = sorted(values)
    return ordered[max(0, math.ceil(percent / 100 * len(ordered)) - 1)]


def test_every_request_nginx_saw_is_a_row(nginx: Nginx, tmp_path: Path) -> None:
    nginx.clear_log()
    log, out = tmp_path / "ops.bin", tmp_path / "r.json"
    proc = knee_cli("run", nginx.url + "/", "-c", "4", "-n", "2000", "--operations-log", str(log), "--json", str(out))
    assert proc.returncode == 0, proc.stderr
    doc = json.loads(out.read_text())
    ops = knee.read_operations(log)
    assert len(ops) == doc["started"] == 2000 == settled(lambda: len(nginx.access_lines()), 2000)
    assert set(ops.outcome) == {"succeeded"} and ops["class"].isna().all()
    assert sorted(set(ops.client)) == [0, 1, 2, 3] and list(ops.group.unique()) == ["main"]
    assert ops.start_s.is_monotonic_increasing and ops.start_s.iloc[-1] <= doc["elapsed_s"]
    assert (ops.wait_ms == 0).all()  # a closed loop starts when it means to
    assert ops.bytes_received.sum() == doc["bytes_received"] and ops.bytes_sent.sum() == doc["bytes_sent"]
    latency = list(ops.latency_ms)
    for p in (50, 99):  # HdrHistogram keeps three significant digits
        assert nearest_rank(latency, p) == pytest.approx(doc["latency_ms"][f"p{p}"], rel=2e-3, abs=0.002), p
    assert abs(ops.attrs["started_unix"] - time.time()) < 60  # the step's start: the rows' start_s count from it


def test_failures_are_rows_of_their_class(nginx: Nginx, tmp_path: Path) -> None:
    log = tmp_path / "ops.bin"
    proc = knee_cli(
        "run", nginx.url + "/", "-c", "2", "-n", "50", "--expect-status", "201", "--operations-log", str(log)
    )
    assert proc.returncode == 0, proc.stderr
    ops = knee.read_operations(log)
    assert len(ops) == 50 and set(ops.outcome) == {"failed"} and set(ops["class"]) == {"status"}


def test_an_open_loop_of_two_rates_writes_a_file_a_step(nginx: Nginx, tmp_path: Path) -> None:
    log, out = tmp_path / "ops.bin", tmp_path / "r.json"
    proc = knee_cli(
        "run", nginx.url + "/", "--rate", "200,400", "-c", "4", "-d", "1s", "--operations-log", str(log),
        "--json", str(out),
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    doc = json.loads(out.read_text())
    steps = doc["rate_steps"]
    files = sorted(tmp_path.glob("ops.step*.bin"))
    assert [f.name for f in files] == ["ops.step0.bin", "ops.step1.bin"] and not log.exists()
    for f, step, rate in zip(files, steps, (200, 400), strict=True):
        ops = knee.read_operations(f)
        # every operation started is in the log; the arrivals not started by the end (a stall there) are few
        assert len(ops) == step["started"] and 0 <= rate - len(ops) <= 0.05 * rate, (f, len(ops))
        assert (ops.wait_ms >= 0).all() and (ops.start_s < 1.0).all()


def test_a_file_cut_short_reads_up_to_its_last_whole_record(nginx: Nginx, tmp_path: Path) -> None:
    log = tmp_path / "ops.bin"
    assert knee_cli("run", nginx.url + "/", "-n", "10", "--operations-log", str(log)).returncode == 0
    data = log.read_bytes()
    log.write_bytes(data[:-15])  # killed mid-write
    header, records = read_records(log)
    assert header["format"] == "knee-operations" and len(records) == 9
    (tmp_path / "other.bin").write_bytes(b"GET / HTTP/1.1\r\n")
    with pytest.raises(ValueError, match="is not an operations log of knee"):
        knee.read_operations(tmp_path / "other.bin")


@pytest.mark.parametrize(
    ("args", "said"),
    [
        (["--operations-log", "/nonexistent/dir/ops.bin"], "its directory does not exist or cannot be written"),
        (["--operations-log", "ops.bin", "--cluster", "tcp://127.0.0.1:1"], "--operations-log writes where the engine"),
    ],
)
def test_mistakes_are_one_sentence(nginx: Nginx, args: list[str], said: str, tmp_path: Path) -> None:
    proc = knee_cli("run", nginx.url + "/", "-n", "1", *args, cwd=tmp_path, timeout=60)
    assert proc.returncode == 2 and said in proc.stderr and "Traceback" not in proc.stderr, proc.stderr
