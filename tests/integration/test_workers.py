"""Clients that are code (docs/worker-protocol.md): a Python flow, a Java worker and a C worker against
knee target with a login, and a flow against nginx; counts exact against the target's own and nginx's access log;
hangs, deaths, bad lines and bad starts."""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import psutil
import pytest

from knee.demo_target import TargetProcess
from knee.model import RunRecord
from knee.store import RunDir

from conftest import REPO, knee_cli
from servers import SESSION_PASSWORD as PASSWORD
from servers import Nginx, pids_alive, sent, session_target, settled

FLOWS = REPO / "examples" / "flows"
TEST_FLOWS = REPO / "tests" / "flows"


# One xdist worker for the module's tests: its fixtures (javac, cc) run once.
pytestmark = pytest.mark.xdist_group("workers")


@pytest.fixture(scope="module")
def target() -> Iterator[TargetProcess]:
    with session_target() as t:
        yield t


@pytest.fixture(scope="module")
def java_classes(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("java")
    javac = shutil.which("javac")
    assert javac is not None, "the tests need a JDK (javac): it is part of this machine's toolchain"
    subprocess.run(
        [javac, "-d", str(out), str(REPO / "examples/workers/java/KneeWorker.java")], check=True, timeout=120
    )
    return out


@pytest.fixture(scope="module")
def c_worker(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("c") / "noop_worker"
    cc = shutil.which("cc") or shutil.which("gcc")
    assert cc is not None
    subprocess.run([cc, "-O2", "-o", str(out), str(REPO / "examples/workers/c/noop_worker.c")], check=True, timeout=60)
    return out


def run(tmp_path: Path, *args: str, env: dict[str, str] | None = None) -> tuple[dict, subprocess.CompletedProcess[str]]:
    out = tmp_path / f"r{time.monotonic_ns()}.json"
    proc = knee_cli("run", "-q", "--json", str(out), *args, timeout=120, env=dict(os.environ, **(env or {})), cwd=REPO)
    assert proc.returncode == 0, proc.stderr + proc.stdout
    return json.loads(out.read_text()), proc


def exact(target: TargetProcess, before: dict, logins: int, fetches: int) -> None:
    """The target saw exactly these logins and fetches, and served them all."""
    after = target.stats()
    assert after["logins"] - before["logins"] == logins
    assert after["requests"] - before["requests"] == logins + fetches
    assert after["served"] - before["served"] == logins + fetches
    assert after["unauthorized"] == before["unauthorized"]


def test_a_python_flow_counts_exactly_with_its_steps(target: TargetProcess, tmp_path: Path) -> None:
    before = target.stats()
    doc, proc = run(
        tmp_path, "--python", "content:login_and_fetch", "--path", str(FLOWS), "-c", "10", "--iterations", "20",
        "--var", f"target={target.url}", env={"CONTENT_PASSWORD": PASSWORD},
    )  # fmt: skip
    assert (doc["succeeded"], doc["failed"], doc["hung"], doc["abandoned"]) == (200, 0, 0, 0)
    exact(target, before, logins=10, fetches=200)
    steps = doc["steps"]
    assert list(steps) == ["connect", "login", "fetch"]
    assert (steps["connect"]["count"], steps["login"]["count"], steps["fetch"]["count"]) == (10, 10, 200)
    assert doc["latency_ms"]["count"] == steps["fetch"]["count"] == 200
    assert doc["payload_bytes"] == 200 * 1000
    assert "Timed steps (ms)" in proc.stdout and "fetch" in proc.stdout


def test_the_timed_steps_table_keeps_its_columns_apart(tmp_path: Path) -> None:
    # testflows:mixed times a step of about a microsecond in operations of milliseconds: a share like "0.003 %"
    _, proc = run(tmp_path, "--python", "testflows:mixed", "--path", str(TEST_FLOWS), "-c", "8", "--iterations", "3")
    lines = proc.stdout.splitlines()
    head = next(i for i, line in enumerate(lines) if line.startswith("Timed steps (ms)"))
    assert lines[head + 1].split() == ["step", "count", "min", "mean", "p50", "p99", "max", "share"]
    work = lines[head + 2].split()
    assert work[:2] == ["work", "6"] and len(work) == 9 and work[-1] == "%", lines[head + 2]
    assert float(work[-2]) < 1  # the share, a number of its own
    # the operation row is the succeeded operations': 24 less client 2's 3 × 2 that raised
    assert lines[head + 3].split()[:2] == ["(operation)", "18"]


def test_a_plain_function_flow_runs_in_threads_and_counts_exactly(nginx: Nginx, tmp_path: Path) -> None:
    nginx.clear_log()
    doc, _ = run(
        tmp_path, "--python", "testflows:sync_fetch", "--path", str(TEST_FLOWS), "-c", "5", "--iterations", "8",
        "--var", f"target={nginx.url}",
    )  # fmt: skip
    assert (doc["succeeded"], doc["failed"], doc["hung"], doc["abandoned"]) == (30, 10, 0, 0)
    # An independent witness: nginx logged one GET per succeeded operation (the failed ones raise before sending).
    settled(lambda: len(nginx.access_lines()), 30)
    assert [x.split()[1:4] for x in nginx.access_lines()] == [["GET", "/", "200"]] * 30
    assert doc["steps"]["get"]["count"] == 30
    (reason,) = doc["reasons"]
    assert reason["key"] == "ValueError: iteration <n> refused on purpose" and reason["count"] == 10


@pytest.mark.parametrize("processes", [None, 1, 3])
def test_processes_is_the_number_of_worker_processes(processes: int | None, tmp_path: Path) -> None:
    pids = tmp_path / "pids"
    pids.mkdir()
    extra = [] if processes is None else ["--processes", str(processes)]
    doc, _ = run(tmp_path, "--python", "testflows:mark_pid", "--path", str(TEST_FLOWS), "-c", "6", "--iterations",
                 "5", "--var", f"pids={pids}", *extra)  # fmt: skip
    assert doc["succeeded"] == 30
    threads = min(len(os.sched_getaffinity(0)), 6)  # the engine's threads: one per core, at most one per client
    assert len(list(pids.iterdir())) == (threads if processes is None else max(processes, 1))


def test_failed_logins_are_grouped_by_reason_in_every_report(target: TargetProcess, tmp_path: Path) -> None:
    out = tmp_path / "runs"
    doc, proc = run(
        tmp_path, "--python", "content:login_and_fetch", "--path", str(FLOWS), "-c", "10", "--iterations", "5",
        "--var", f"target={target.url}", "--var", "refuse_every=5", "--out", str(out),
        env={"CONTENT_PASSWORD": PASSWORD},
    )  # fmt: skip
    assert (doc["succeeded"], doc["failed"]) == (40, 10)  # clients 0 and 5 are refused, 5 times each
    (reason,) = doc["reasons"]
    assert (reason["class"], reason["count"]) == ("worker", 10)
    assert reason["key"] == "LoginRefused: bad password for user<n>"
    assert reason["sample"].startswith("LoginRefused: bad password for user")
    line = f"10 × [worker] {reason['sample']}"
    assert line in proc.stdout
    (run_dir,) = [p for p in out.iterdir() if p.is_dir()]
    assert reason["sample"] in (run_dir / "report.md").read_text()
    assert reason["sample"] in (run_dir / "report.html").read_text()
    record = json.loads((run_dir / "run.json").read_text())
    assert record["steps"][0]["groups"]["main"]["reasons"][0]["count"] == 10
    # The password reached the service (40 logins succeeded), and no file of the run holds it, nor its name (knee
    # was never told it: the flow read it from its environment), nor what knee printed; each checked on its own.
    written = {p.name: p.read_bytes() for p in run_dir.rglob("*") if p.is_file()}
    assert {"run.json", "report.md", "report.html", "scenario.toml"} <= written.keys()
    for name, data in written.items():
        assert PASSWORD.encode() not in data, name
        assert b"CONTENT_PASSWORD" not in data, name
    assert PASSWORD not in json.dumps(doc)
    assert PASSWORD not in proc.stdout
    assert PASSWORD not in proc.stderr


def test_a_java_worker_counts_exactly_with_its_steps(target: TargetProcess, java_classes: Path, tmp_path: Path) -> None:
    before = target.stats()
    doc, _ = run(
        tmp_path, "-c", "10", "--iterations", "20", "--var", f"target={target.url}", "--processes", "1",
        "--worker", "--", "java", "-cp", str(java_classes), "KneeWorker", env={"CONTENT_PASSWORD": PASSWORD},
    )  # fmt: skip
    assert (doc["succeeded"], doc["failed"], doc["hung"], doc["abandoned"]) == (200, 0, 0, 0)
    exact(target, before, logins=10, fetches=200)
    steps = doc["steps"]
    assert {k: v["count"] for k, v in steps.items()} == {"connect": 10, "auth": 10, "fetch": 200}
    assert doc["payload_bytes"] == 200 * 1000


def test_a_hung_operation_is_counted_and_its_late_reply_discarded(tmp_path: Path) -> None:
    doc, _ = run(
        tmp_path, "--python", "testflows:slow_once", "--path", str(TEST_FLOWS), "-c", "3", "--iterations", "5",
        "--timeout", "0.5s", "--processes", "1",
    )  # fmt: skip
    assert (doc["succeeded"], doc["failed"], doc["hung"]) == (14, 0, 1)
    assert doc["hung_clients"] == [1]
    assert doc["per_client"] == [5, 4, 5]  # client 1 went on after its hung operation
    assert doc["steps"]["work"]["count"] == 14  # the late reply (its steps too) was discarded


def test_an_operation_running_at_the_end_of_a_duration_is_abandoned_at_once(tmp_path: Path) -> None:
    began = time.monotonic()
    doc, _ = run(tmp_path, "--python", "testflows:stuck_client_2", "--path", str(TEST_FLOWS), "-c", "3", "-d", "1s",
                 "--timeout", "90s", "--processes", "1")  # fmt: skip
    # Order, not a wall-clock window: the run ended before client 2's operation (60 s) could have, so it was not
    # held up by it, nor by its 90 s timeout (how soon after the 1 s it ends is a timing claim, for `make bench`).
    assert time.monotonic() - began < 60
    assert (doc["hung"], doc["failed"]) == (0, 0)
    # client 2's one operation, and at most one of each other client's quick ones, were cut short
    assert 1 <= doc["abandoned"] <= 3
    assert doc["per_client"][2] == 0 and doc["succeeded"] > 100


def test_a_timeout_inside_a_duration_hangs_only_that_operation(tmp_path: Path) -> None:
    doc, _ = run(tmp_path, "--python", "testflows:hangs_first", "--path", str(TEST_FLOWS), "-c", "2", "-d", "1.5s",
                 "--timeout", "0.3s", "--processes", "1")  # fmt: skip
    assert (doc["hung"], doc["hung_clients"], doc["failed"]) == (1, [0], 0)
    assert doc["abandoned"] <= 2 and doc["succeeded"] > 100  # each client had at most one operation cut short
    # client 0 went on once its late operation ended (0.5 s); client 1 ran all along
    assert 0 < doc["per_client"][0] < doc["per_client"][1]


def test_a_timeout_is_kept_after_idle_spells(tmp_path: Path) -> None:
    # With think time, knee's watchdog often finds nothing in flight; an operation that begins later still hangs
    # at its own timeout, not at the end of the run.
    doc, _ = run(tmp_path, "--python", "testflows:hangs_fourth", "--path", str(TEST_FLOWS), "-c", "1", "-d", "2s",
                 "--timeout", "0.3s", "--think", "200ms", "--processes", "1")  # fmt: skip
    assert (doc["hung"], doc["hung_clients"], doc["failed"]) == (1, [0], 0)
    assert doc["latency_ms"]["max"] < 300


def test_a_worker_that_dies_fails_its_in_flight_operations_and_is_restarted(c_worker: Path, tmp_path: Path) -> None:
    doc, _ = run(tmp_path, "-c", "4", "--iterations", "100", "--processes", "1", "--worker", "--",
                    str(c_worker), "--exit-after", "100")  # fmt: skip
    assert doc["succeeded"] + doc["failed"] == 400 and doc["hung"] == doc["abandoned"] == 0
    assert doc["failed"] > 0 and set(doc["failures"]) == {"worker_exit"}
    samples = [r["sample"] for r in doc["reasons"]]
    assert any("exit status: 3" in s and "exiting after 100 replies, as told" in s for s in samples), samples
    # it came back: 400 operations could not have run on one process that exits after 100 replies
    assert doc["succeeded"] > 100


def test_a_line_that_is_not_a_reply_is_quoted(c_worker: Path, tmp_path: Path) -> None:
    doc, _ = run(tmp_path, "-c", "2", "--iterations", "50", "--processes", "1", "--worker", "--",
                 str(c_worker), "--garbage-after", "20")  # fmt: skip
    assert doc["succeeded"] + doc["failed"] == 100 and set(doc["failures"]) == {"protocol"}
    (reason,) = doc["reasons"]
    assert reason["sample"] == 'the worker wrote a line that is not a reply: "this is not a reply"'


def test_a_batch_worker_gets_the_documented_lines_and_counts_exactly(tmp_path: Path) -> None:
    lines = tmp_path / "lines.jsonl"
    doc, _ = run(tmp_path, "-c", "6", "--iterations", "40", "--processes", "2", "--worker", "--",
                 sys.executable, str(TEST_FLOWS / "batch_worker.py"), str(lines))  # fmt: skip
    assert (doc["succeeded"], doc["failed"], doc["hung"], doc["abandoned"]) == (240, 0, 0, 0)
    assert doc["per_client"] == [40] * 6
    hosted = []
    for process in (0, 1):
        msgs = [json.loads(line) for line in Path(f"{lines}.{process}").read_text().splitlines()]
        runs = [m for m in msgs if m["op"] == "run"]
        assert msgs[0]["op"] == "start" and msgs[-1] == {"op": "stop"}
        assert all(set(m) == {"op", "operation", "ops"} and m["operation"] == "" for m in runs)
        pairs = [(m["ops"][i], m["ops"][i + 1]) for m in runs for i in range(0, len(m["ops"]), 2)]
        # the process's own clients, each operation id 0…39 once: one request per operation, none lost
        assert sorted(pairs) == sorted((c, i) for c in msgs[0]["clients"] for i in range(40))
        assert len(runs) < len(pairs)  # operations due together came in one line
        hosted += msgs[0]["clients"]
    assert sorted(hosted) == list(range(6))


def test_a_worker_reading_to_the_end_of_its_input_ends_after_stop(tmp_path: Path) -> None:
    """stdin closes after `stop`, as docs/worker-protocol.md says: a program that reads to its input's end exits of
    itself (it was killed after the 2 s grace, its last work lost)."""
    lines = tmp_path / "lines.jsonl"
    doc, _ = run(tmp_path, "-c", "2", "--iterations", "5", "--processes", "1", "--worker", "--",
                 sys.executable, str(TEST_FLOWS / "batch_worker.py"), str(lines), "--to-eof")  # fmt: skip
    assert doc["succeeded"] == 10
    assert Path(f"{lines}.0").read_text().splitlines()[-2:] == ['{"op":"stop"}', "eof"]


def test_a_done_line_with_an_odd_count_is_not_a_reply(tmp_path: Path) -> None:
    doc, _ = run(tmp_path, "-c", "2", "--iterations", "5", "--processes", "1", "--worker", "--",
                 sys.executable, str(TEST_FLOWS / "batch_worker.py"), str(tmp_path / "l"), "--odd")  # fmt: skip
    assert doc["succeeded"] == 0 and doc["failed"] == 10 and set(doc["failures"]) == {"protocol"}
    assert {r["sample"] for r in doc["reasons"]} == {'the worker wrote a line that is not a reply: "{\\"done\\":[0]}"'}


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--start-timeout", "1s", "--worker", "--", "{c}", "--no-ready"],
         'groups[0]: the worker program "{c}" did not answer start within 1 s (it must reply {"ready": true} on '
         "stdout); it said: noop_worker: not answering start, as told"),
        (["--python", "nosuch:flow"], "no module 'nosuch' on the Python path (for 'nosuch:flow')"),
        (["--python", "content:nope", "--path", str(FLOWS)], "module 'content' has no function 'nope'"),
        (["--python", "content"], "--python must be module:function, like flows:login (got 'content')"),
    ],
)  # fmt: skip
def test_a_worker_that_cannot_start_is_one_sentence(c_worker: Path, args: list[str], message: str) -> None:
    args = [a.replace("{c}", str(c_worker)) for a in args]
    proc = knee_cli("run", "-q", "-c", "2", "-n", "10", *args, timeout=60)
    assert proc.returncode == 2, proc.stdout + proc.stderr
    assert message.replace("{c}", str(c_worker)) in proc.stderr
    assert proc.stderr.count("\n") == 1 and "Traceback" not in proc.stderr


def test_ctrl_c_leaves_no_worker_process(tmp_path: Path) -> None:
    proc = subprocess.Popen(
        [sys.executable, "-m", "knee", "run", "-q", "-c", "4", "-d", "60s", "--processes", "2",
         "--python", "testflows:sleepy", "--path", str(TEST_FLOWS)],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, stdin=subprocess.DEVNULL,
    )  # fmt: skip
    knee_proc = psutil.Process(proc.pid)
    deadline = time.monotonic() + 30
    workers: list[int] = []
    while time.monotonic() < deadline and len(workers) < 2:
        workers = [c.pid for c in knee_proc.children(recursive=True) if "knee.pyworker" in " ".join(c.cmdline())]
        time.sleep(0.1)
    assert len(workers) == 2, "the two worker processes never started"
    time.sleep(1.0)  # operations under way
    proc.send_signal(signal.SIGINT)
    out, err = proc.communicate(timeout=20)
    assert proc.returncode == 130, err
    assert "Interrupted" in out
    deadline = time.monotonic() + 2
    while pids_alive(workers) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert pids_alive(workers) == []


def sweep_example(name: str, tmp_path: Path, *args: str) -> tuple[RunRecord, subprocess.CompletedProcess[str]]:
    out = tmp_path / "runs"
    proc = knee_cli("sweep", str(REPO / "examples" / f"{name}.toml"), "--quick", "--out", str(out), *args,
                    timeout=180, cwd=REPO)  # fmt: skip
    assert proc.returncode == 0, proc.stdout + proc.stderr
    (run_dir,) = [p for p in out.iterdir() if p.is_dir()]
    assert PASSWORD not in "".join(p.read_text() for p in run_dir.iterdir() if p.is_file())
    return RunDir(run_dir).load(), proc


def requests_but_logins(target: TargetProcess, before: dict) -> Callable[[], int]:
    """The login target's requests since `before` less its logins, read anew at each call: for `settled`, since
    the server may count the last request a moment after knee has ended the step."""

    def count() -> int:
        after = target.stats()
        return (after["requests"] - before["requests"]) - (after["logins"] - before["logins"])

    return count


def test_the_python_flow_example_sweeps(target: TargetProcess, tmp_path: Path) -> None:
    before = target.stats()
    record, proc = sweep_example("python-flow", tmp_path, "--var", f"target={target.url}", "--secret",
                                 f"password={PASSWORD}")  # fmt: skip
    # An operation is one fetch or one refused login, plus a login for a client without a session.
    assert settled(requests_but_logins(target, before), sent(record)) == sent(record)
    after = target.stats()
    assert after["unauthorized"] == before["unauthorized"]
    failed = sum(g.failed for s in record.steps for g in s.groups.values())
    assert 0 < failed <= after["logins_refused"] - before["logins_refused"]  # warm-ups are refused too
    for s in record.steps:
        assert {r.class_ for r in s.groups["users"].reasons} == {"worker"}
        # connect and login happen in the warm-up (its sessions carry on), bar the refused clients' retries
        assert {"login", "fetch"} <= set(s.groups["users"].steps) <= {"connect", "login", "fetch"}
    assert "LoginRefused: bad password for user" in proc.stdout


def test_the_java_worker_example_sweeps(target: TargetProcess, java_classes: Path, tmp_path: Path) -> None:
    before = target.stats()
    record, _ = sweep_example("java-worker", tmp_path, "--var", f"target={target.url}", "--var",
                              f"classes={java_classes}", "--secret", f"password={PASSWORD}")  # fmt: skip
    assert settled(requests_but_logins(target, before), sent(record)) == sent(record)
    assert target.stats()["unauthorized"] == before["unauthorized"]
    assert all(g.failed == g.hung == 0 for s in record.steps for g in s.groups.values())
    assert all("fetch" in s.groups["content"].steps for s in record.steps)
