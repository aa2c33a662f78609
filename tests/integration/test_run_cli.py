"""`knee run` against real processes: nginx from Debian, curl as an exec client, commands that hang."""

from __future__ import annotations

import json
import os
import re
import resource
import signal
import subprocess
import sys
import time
from pathlib import Path

import jsonschema
import psutil
import pytest

import knee
from cli import SCHEMA, run_json

from conftest import knee_cli
from servers import Nginx, free_port, pids_alive, settled


def test_counts_equal_what_nginx_logged(nginx: Nginx, tmp_path: Path) -> None:
    nginx.clear_log()
    doc, proc = run_json(tmp_path, nginx.url + "/", "-c", "50", "-n", "20000")
    lines = nginx.access_lines()
    assert doc["succeeded"] == 20000 == len(lines)
    assert doc["failed"] == doc["hung"] == 0
    assert all(line.split()[1:4] == ["GET", "/", "200"] for line in lines)
    # keep-alive: one connection per client, each used again and again (nginx's $connection serial number)
    assert len({line.split()[0] for line in lines}) == 50
    assert sum(doc["per_client"]) == 20000
    assert re.search(r"^Operations per second:\s+[\d.]+ \[#/sec\] \(succeeded, mean\)$", proc.stdout, re.M), proc.stdout
    assert "Percentage of the operations served within a certain time" in proc.stdout


def test_new_connection_opens_one_connection_per_request(nginx: Nginx, tmp_path: Path) -> None:
    nginx.clear_log()
    doc, _ = run_json(tmp_path, nginx.url + "/", "-c", "20", "-n", "3000", "--new-connection")
    lines = nginx.access_lines()
    assert doc["succeeded"] == 3000 == len(lines)
    assert len({line.split()[0] for line in lines}) == 3000  # nginx's $connection serial number
    assert doc["connect_ms"]["count"] == 3000


def test_connections_come_from_the_source_addresses(nginx: Nginx, tmp_path: Path) -> None:
    nginx.clear_log()
    doc, _ = run_json(tmp_path, nginx.url + "/", "-c", "4", "-n", "400", "--source-addr", "127.0.0.2-127.0.0.3")
    lines = [line.split() for line in nginx.access_lines()]
    assert doc["succeeded"] == 400 == len(lines)
    # 4 keep-alive connections (nginx's $connection), clients 0 and 2 from 127.0.0.2, 1 and 3 from 127.0.0.3
    peer_of = {line[0]: line[4] for line in lines}
    assert sorted(peer_of.values()) == ["127.0.0.2", "127.0.0.2", "127.0.0.3", "127.0.0.3"]


def test_ab_connection_times_table(nginx: Nginx) -> None:
    proc = knee_cli(
        "run", "-q", nginx.url + "/", "-c", "4", "-n", "400", "--new-connection", env={**os.environ, "COLUMNS": "80"}
    )
    assert proc.returncode == 0, proc.stderr
    # standard output is a pipe with COLUMNS=80: nothing is cut short, every figure whole on its line
    assert "…" not in proc.stdout, proc.stdout
    assert re.search(r"^Complete operations:\s+400$", proc.stdout, re.M), proc.stdout
    rows = [line.split()[0] for line in proc.stdout.splitlines() if re.match(r"^\w+:\s+[\d.]+\s+[\d.]+", line)]
    assert [r for r in rows if r in ("Connect:", "Processing:", "Waiting:", "Total:")] == [
        "Connect:",
        "Processing:",
        "Waiting:",
        "Total:",
    ]


def test_status_check_and_failure_classes(nginx: Nginx, tmp_path: Path) -> None:
    doc, _ = run_json(tmp_path, nginx.url + "/missing", "-c", "4", "-n", "200")
    assert doc["succeeded"] == 0 and doc["failed"] == 200
    assert doc["failures"] == {"status": 200}
    assert "404" in " ".join(doc["error_samples"]["status"])
    doc, _ = run_json(tmp_path, nginx.url + "/missing", "-c", "4", "-n", "200", "--expect-status", "404")
    assert doc["succeeded"] == 200
    doc, _ = run_json(tmp_path, nginx.url + "/", "-n", "50", "--expect-body", "nginx", "--expect-length", "17")
    assert doc["succeeded"] == 50
    doc, _ = run_json(tmp_path, nginx.url + "/", "-n", "50", "--expect-body", "apache")
    assert doc["failures"] == {"body": 50}


def test_duration_and_series(nginx: Nginx, tmp_path: Path) -> None:
    began = time.monotonic()
    doc, _ = run_json(tmp_path, nginx.url + "/", "-c", "4", "-d", "2s", "--interval", "500ms")
    # Counts and order, not a wall-clock window: the measured window is the 2 s asked for, cut into exactly four
    # intervals, each with its operations; and the run did not end before its duration (how soon after it ends is
    # a timing claim, for `make bench`).
    assert time.monotonic() - began >= 2.0
    assert doc["elapsed_s"] == 2.0
    assert doc["interval_s"] == 0.5
    assert [p["t"] for p in doc["series"]] == [0.0, 0.5, 1.0, 1.5], doc["series"]
    assert all(p["succeeded"] > 0 for p in doc["series"]), doc["series"]
    assert sum(p["succeeded"] for p in doc["series"]) == doc["succeeded"] > 0
    assert doc["rate_hz"] == pytest.approx(doc["succeeded"] / doc["elapsed_s"])


def test_curl_as_exec_client(nginx: Nginx, tmp_path: Path) -> None:
    nginx.clear_log()
    doc, _ = run_json(
        tmp_path,
        "-c", "4", "--iterations", "10", "--expect-stdout", "hello",
        "--", "curl", "-sf", nginx.url + "/",
    )  # fmt: skip
    assert doc["succeeded"] == 40 == len(nginx.access_lines())
    assert doc["per_client"] == [10, 10, 10, 10]
    # curl exits 0 on a 404 without -f: the output check is what catches it.
    nginx.clear_log()
    doc, _ = run_json(tmp_path, "-n", "5", "--expect-stdout", "hello", "--", "curl", "-s", nginx.url + "/missing")
    assert doc["failures"] == {"stdout": 5}
    doc, _ = run_json(tmp_path, "-n", "5", "--", "curl", "-sf", nginx.url + "/missing")
    assert doc["failures"] == {"exit_code": 5}
    # each failed run of the command is one request nginx answered 404: the witness of the failures too
    settled(lambda: len(nginx.access_lines()), 10)
    assert [x.split()[1:4] for x in nginx.access_lines()] == [["GET", "/missing", "404"]] * 10


def test_exec_substitution_and_file_check(tmp_path: Path) -> None:
    out = tmp_path / "out"
    out.mkdir()
    doc, _ = run_json(
        tmp_path,
        "-c", "3", "--iterations", "2", "--expect-file", f"{out}/${{client}}-${{iteration}}:1",
        "--", "sh", "-c", f"echo x > {out}/${{client}}-${{iteration}}",
    )  # fmt: skip
    assert doc["succeeded"] == 6
    assert sorted(p.name for p in out.iterdir()) == ["0-0", "0-1", "1-0", "1-1", "2-0", "2-1"]
    doc, _ = run_json(tmp_path, "-n", "3", "--expect-file", f"{out}/never", "--", "true")
    assert doc["failures"] == {"file": 3}


def test_hung_commands_are_killed_with_their_children(tmp_path: Path) -> None:
    pidfile = tmp_path / "pids"
    script = f"echo $$ >> {pidfile}; sleep 60 & echo $! >> {pidfile}; wait"
    started = time.monotonic()
    doc, proc = run_json(tmp_path, "-c", "3", "--iterations", "2", "--timeout", "300ms", "--", "sh", "-c", script)
    assert time.monotonic() - started < 60  # order: ended before the hung commands' `sleep 60` could have
    assert doc["hung"] == 6 and doc["succeeded"] == 0 and doc["failed"] == 0
    assert sorted(doc["hung_clients"]) == [0, 1, 2]
    pids = [int(p) for p in pidfile.read_text().split()]
    assert len(pids) == 12
    time.sleep(0.2)
    assert pids_alive(pids) == [], "processes left running after their operation hung"
    assert "Clients that hung" in proc.stdout


def test_sigint_prints_partial_report_and_leaves_no_process(tmp_path: Path) -> None:
    pidfile = tmp_path / "pids"
    proc = subprocess.Popen(
        [sys.executable, "-m", "knee", "run", "-q", "-c", "4", "-d", "60s", "--json", str(tmp_path / "r.json"),
         "--", "sh", "-c", f"echo $$ >> {pidfile}; sleep 0.05; sleep 30 & echo $! >> {pidfile}; wait"],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, stdin=subprocess.DEVNULL,
    )  # fmt: skip
    deadline = time.monotonic() + 20
    while time.monotonic() < deadline and len(pidfile.read_text().split() if pidfile.exists() else []) < 8:
        time.sleep(0.1)
    proc.send_signal(signal.SIGINT)
    out, err = proc.communicate(timeout=20)
    assert proc.returncode == 130, err
    assert "Traceback" not in err
    assert "Interrupted" in out
    doc = json.loads((tmp_path / "r.json").read_text())
    assert doc["interrupted"] is True
    time.sleep(0.2)
    assert pids_alive([int(p) for p in pidfile.read_text().split()]) == []


def interrupt_under_load(proc: subprocess.Popen[str], nginx: Nginx, requests: int) -> None:
    """Ctrl-C `proc` once nginx has logged `requests` more requests (knee's start-up is slow on a busy
    machine), and check it ends with 130."""
    nginx.clear_log()
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline and len(nginx.access_lines()) < requests:
        time.sleep(0.1)
    if len(nginx.access_lines()) < requests:
        proc.kill()
        proc.communicate(timeout=20)
        pytest.fail(f"the load never started: nginx logged {len(nginx.access_lines())} of {requests} requests in 30 s")
    proc.send_signal(signal.SIGINT)
    _, err = proc.communicate(timeout=20)
    assert proc.returncode == 130, err


def test_sigint_on_http_run_keeps_the_counts(nginx: Nginx, tmp_path: Path) -> None:
    proc = subprocess.Popen(
        [sys.executable, "-m", "knee", "run", "-q", "-c", "8", "-d", "60s", "--json", str(tmp_path / "r.json"),
         nginx.url + "/"],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, stdin=subprocess.DEVNULL,
    )  # fmt: skip
    interrupt_under_load(proc, nginx, requests=1000)
    doc = json.loads((tmp_path / "r.json").read_text())
    assert doc["interrupted"] is True and doc["succeeded"] > 0
    assert doc["elapsed_s"] < 60  # order: its window was cut by Ctrl-C, before the 60 s duration's end


def test_sigint_stops_a_run_started_with_sigint_ignored(nginx: Nginx, tmp_path: Path) -> None:
    # What a shell does to the background jobs of a script (`knee run ... &`).
    argv = [sys.executable, "-m", "knee", "run", "-q", "-c", "2", "-d", "60s", "--json", str(tmp_path / "r.json"),
            nginx.url + "/"]  # fmt: skip
    proc = subprocess.Popen(
        ["sh", "-c", 'trap "" INT; exec "$@"', "sh", *argv],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, stdin=subprocess.DEVNULL,
    )  # fmt: skip
    interrupt_under_load(proc, nginx, requests=100)
    assert json.loads((tmp_path / "r.json").read_text())["interrupted"] is True


@pytest.mark.parametrize(
    ("args", "pattern"),
    [
        (["http://127.0.0.1:1/", "--bogus"], r"No such option '--bogus'"),
        (["ftp://127.0.0.1/"], r"unsupported target 'ftp://127.0.0.1/'"),
        (["http://"], r"TARGET must name a host, like http://host:port/path \(got 'http://'\)"),
        (["http://127.0.0.1:99999/"], r"TARGET must have a port from 1 to 65535, not '99999'"),
        # sent as the Host header ("Host: alice:pw@127.0.0.1:1", servers answer 400) and written in every file
        (["http://alice:pw@127.0.0.1:1/"], r"TARGET must not carry a user:password@: send credentials as a header"),
        (
            ["http://127.0.0.1:1/", "-c", "0"],
            r"^knee: error: -c/--clients must be a whole number of at least 1 \(got '0'\)$",
        ),
        (["http://127.0.0.1:1/", "-n", "1.5"], r"-n/--requests must be a whole number of at least 1 \(got '1.5'\)$"),
        (["http://127.0.0.1:1/", "--slo-failure-ratio", "2"], r"--slo-failure-ratio must be a number from 0 to 1"),
        (["http://127.0.0.1:1/", "--rate", "0s:10, 60s:400"], r"a rate over time is --rate-profile, e\.g\."),
        (["http://127.0.0.1:1/", "--slo-p99", "inf"], r"--slo-p99 must be a number above 0 \(got 'inf'\)$"),
        (["--", "no-such-command-knee"], r"command not found or not executable: 'no-such-command-knee'"),
        (["http://host.invalid/"], r"cannot resolve host 'host.invalid'"),
        (["-d", "ten", "--", "true"], r"--duration must be a duration like 10s"),
        (["-n", "5", "-d", "1s", "--", "true"], r"give only one of -n, --iterations and --duration"),
        (["-H", "nocolon", "http://127.0.0.1:1/"], r"-H must look like 'Name: value'"),
        (["--expect-status", "abc", "http://127.0.0.1:1/"], r"--expect-status must be statuses like"),
        (["--source-addr", "127.0.0.9-127.0.0.2", "http://127.0.0.1:1/"], r"--source-addr.*ends before it starts"),
        (["--source-addr", "192.0.2.1", "http://127.0.0.1:1/"], r"192\.0\.2\.1 is not an address of this machine"),
    ],
)
def test_bad_input_gets_one_clear_sentence(args: list[str], pattern: str) -> None:
    proc = knee_cli("run", *args, timeout=30)
    assert proc.returncode != 0
    assert "Traceback" not in proc.stderr
    lines = [line for line in proc.stderr.splitlines() if line.strip()]
    assert len(lines) == 1, proc.stderr
    assert re.search(pattern, lines[0]), lines[0]


@pytest.mark.parametrize(
    ("args", "said"),
    [
        (["report"], "knee: error: knee report needs RUN_DIR: knee report [OPTIONS] RUN_DIR (--help says more)"),
        (
            ["compare", "a"],
            "knee: error: knee compare needs RUN_B: knee compare [OPTIONS] RUN_A RUN_B (--help says more)",
        ),
        (["fit"], "knee: error: knee fit needs FILE: knee fit [OPTIONS] FILE (--help says more)"),
    ],
)
def test_a_missing_argument_is_named_with_the_command_s_usage(args: list[str], said: str) -> None:
    proc = knee_cli(*args, timeout=30)
    assert proc.returncode == 2
    assert proc.stderr.strip() == said, proc.stderr


def test_refused_connection_is_a_clear_error() -> None:
    port = free_port()  # nothing listens there any more
    proc = knee_cli("run", f"http://127.0.0.1:{port}/", "-n", "5", timeout=30)
    assert proc.returncode == 2
    assert proc.stderr.strip() == (
        f"knee: error: connection refused by 127.0.0.1:{port}: is the service running on that port?"
    )


def test_too_few_file_descriptors_is_said_before_starting(nginx: Nginx) -> None:
    def low_limit() -> None:
        resource.setrlimit(resource.RLIMIT_NOFILE, (256, 256))

    proc = subprocess.run(
        [sys.executable, "-m", "knee", "run", "-q", "-c", "2000", "-n", "2000", nginx.url + "/"],
        capture_output=True, text=True, timeout=60, preexec_fn=low_limit, stdin=subprocess.DEVNULL,
    )  # fmt: skip
    assert proc.returncode != 0
    assert "Traceback" not in proc.stderr
    assert "ulimit -n" in proc.stderr and "limit is 256" in proc.stderr, proc.stderr


def test_raises_the_soft_fd_limit_to_the_hard_one(nginx: Nginx) -> None:
    def soft_low() -> None:
        _, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
        resource.setrlimit(resource.RLIMIT_NOFILE, (256, hard))

    proc = subprocess.run(
        [sys.executable, "-m", "knee", "run", "-q", "-c", "600", "-n", "3000", nginx.url + "/"],
        capture_output=True, text=True, timeout=60, preexec_fn=soft_low, stdin=subprocess.DEVNULL,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    assert re.search(r"Succeeded:\s+3000", proc.stdout)


def test_tcp_target(nginx: Nginx, tmp_path: Path) -> None:
    nginx.clear_log()
    doc, _ = run_json(
        tmp_path, f"tcp://127.0.0.1:{nginx.port}", "-c", "5", "-n", "100",
        "--send", "GET / HTTP/1.0\\r\\n\\r\\n", "--expect", "hello from nginx",
    )  # fmt: skip
    assert doc["succeeded"] == 100
    assert doc["connect_ms"]["count"] == 100
    # An independent witness: nginx answered each operation, on a connection of its own (knee's preflight connects
    # and closes without a request, which nginx does not log).
    settled(lambda: len(nginx.access_lines()), 100)
    lines = [line.split() for line in nginx.access_lines()]
    assert [x[1:4] for x in lines] == [["GET", "/", "200"]] * 100
    assert len({x[0] for x in lines}) == 100  # nginx's $connection serial number
    # Failures too: a reply without the expected text is one failed operation per request nginx logged.
    nginx.clear_log()
    doc, _ = run_json(
        tmp_path, f"tcp://127.0.0.1:{nginx.port}", "-c", "2", "-n", "20",
        "--send", "GET /missing HTTP/1.0\\r\\n\\r\\n", "--expect", "hello from nginx",
    )  # fmt: skip
    assert (doc["succeeded"], doc["failed"], doc["hung"], doc["abandoned"]) == (0, 20, 0, 0)
    settled(lambda: len(nginx.access_lines()), 20)
    assert [x.split()[1:4] for x in nginx.access_lines()] == [["GET", "/missing", "404"]] * 20


def test_no_descriptor_or_child_leak_in_process(nginx: Nginx) -> None:
    def runs() -> None:
        r = knee.run(nginx.url + "/", clients=10, n=500)
        assert r.stats.succeeded == 500
        # exec clients too: every client process is reaped, none outlives its run
        r = knee.run(["/bin/sh", "-c", "sleep 0.01"], clients=4, n=20)
        assert r.stats.succeeded == 20

    # The first runs in a process open what it keeps for the next (a socket pair, /dev/null for the children's
    # standard streams): counted from after them, so the test holds alone as in the suite.
    runs()
    before = len(os.listdir("/proc/self/fd"))
    children = {p.pid for p in psutil.Process().children(recursive=True)}
    threads = psutil.Process().num_threads()
    for _ in range(3):
        runs()
    assert len(os.listdir("/proc/self/fd")) <= before
    assert {p.pid for p in psutil.Process().children(recursive=True)} == children
    assert psutil.Process().num_threads() <= threads + 1  # the engine's threads end with each run


def test_what_an_exec_command_leaves_running_is_killed_after_its_normal_exit(tmp_path: Path) -> None:
    # Each operation's shell exits at once, leaving a `sleep 30` behind in its process group. An orphan is
    # re-parented to init, so no children() of this process can see it: its pid is written down instead.
    pidfile = tmp_path / "pids"
    r = knee.run(["/bin/sh", "-c", f"sleep 30 >/dev/null 2>&1 & echo $! >> {pidfile}"], clients=2, n=6)
    assert r.stats.succeeded == 6
    pids = [int(p) for p in pidfile.read_text().split()]
    assert len(pids) == 6
    assert settled(lambda: len(pids_alive(pids)), 0) == 0, f"processes the commands left behind still run: {pids}"


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--send", "x", "--", "true"], "--send applies to tcp:// targets only, not to commands"),
        (["-H", "a: b", "tcp://127.0.0.1:1"],
         "-H/--header applies to http(s)://, ws(s):// and grpc(s):// targets only, not to tcp:// targets"),
        (["--expect-stdout", "x", "http://127.0.0.1:1/"], "--expect-stdout applies to commands only"),
        (["--expect-stdout", "x", "--worker", "--", "true"],
         "--expect-stdout applies to commands only, not to worker programs (--worker) and Python flows (--python)"),
        (["-e", "A=1", "http://127.0.0.1:1/"], "-e/--env applies to commands and worker programs only"),
        (["--python", "m:f", "--cwd", "/tmp"], "--cwd is for a --worker program; a --python flow is imported from"),
        (["--processes", "2", "--", "true"], "--processes applies to worker programs (--worker) and Python flows"),
        (["--source-addr", "127.0.0.2", "--", "true"],
         "--source-addr applies to http(s)://, tcp://, ws(s):// and grpc(s):// targets only"),
    ],
)  # fmt: skip
def test_options_of_another_client_kind_are_refused(args: list[str], message: str) -> None:
    proc = knee_cli("run", "-n", "1", *args, timeout=30)
    assert proc.returncode == 2
    assert message in proc.stderr and "Traceback" not in proc.stderr


def test_a_missed_slo_exits_3_as_a_sweep_does(nginx: Nginx, tmp_path: Path) -> None:
    """`knee run` takes the sweep's SLO options: the outcome is printed and in --json, and a missed one exits 3 (a
    CI job fails), whether the failures come from a command (`false`) or from a real server's statuses."""
    out = tmp_path / "false.json"
    proc = knee_cli("run", "-q", "-c", "2", "-n", "4", "--slo-failure-ratio", "0.01", "--json", str(out), "--", "false")
    assert proc.returncode == 3, proc.stderr + proc.stdout
    assert "SLO (failures ≤ 1.0 %): missed: failed or hung 100 % > 1.0 %" in proc.stdout, proc.stdout
    doc = json.loads(out.read_text())
    jsonschema.validate(doc, SCHEMA)
    assert doc["failed"] == 4
    assert doc["slo"] == {
        "p99_ms": None, "failure_ratio": 0.01, "measured_p99_ms": doc["slo"]["measured_p99_ms"],
        "measured_failure_ratio": 1.0, "met": False, "missed": ["failed or hung 100 % > 1.0 %"],
    }  # fmt: skip
    proc = knee_cli("run", "-q", "-c", "2", "-n", "4", "--slo-failure-ratio", "0.01", "--", "true")
    assert proc.returncode == 0, proc.stderr + proc.stdout
    assert "SLO (failures ≤ 1.0 %): met" in proc.stdout
    # nginx answers 404: missed; 200 within a generous p99: met; no SLO given: failures are counted, exit 0
    assert knee_cli("run", "-q", nginx.url + "/missing", "-n", "20", "--slo-failure-ratio", "0").returncode == 3
    doc, proc = run_json(tmp_path, nginx.url + "/", "-n", "20", "--slo-p99", "5000", "--slo-failure-ratio", "0")
    assert doc["slo"]["met"] is True and doc["slo"]["missed"] == [] and doc["slo"]["p99_ms"] == 5000
    assert "SLO (p99 ≤ 5000 ms, failures ≤ 0 %): met" in proc.stdout
    doc, proc = run_json(tmp_path, nginx.url + "/missing", "-n", "20")
    assert doc["failed"] == 20 and doc["slo"] is None and "SLO" not in proc.stdout


@pytest.mark.parametrize(
    ("args", "said"),
    [
        (["sweeep"], "knee: error: knee has no command 'sweeep'; did you mean sweep? its commands are compare, "),
        (["import", "x"], "knee: error: knee import has no command 'x'; its commands are curl, har, targets "),
        (["import", "rec.har"], "knee: error: knee import takes the recording's kind first: knee import har rec.har"),
    ],
)
def test_a_command_that_does_not_exist_is_named_with_the_ones_that_do(args: list[str], said: str) -> None:
    proc = knee_cli(*args, timeout=30)
    assert proc.returncode == 2
    assert proc.stderr.startswith(said) and len(proc.stderr.strip().splitlines()) == 1, proc.stderr


def test_output_piped_into_head_does_not_stop_the_sweep(nginx: Nginx, tmp_path: Path) -> None:
    # `knee sweep … | head -1`: the first print after head left raised BrokenPipeError, a traceback that ended
    # the sweep with run.json "failed"
    out = tmp_path / "runs"
    args = ["sweep", nginx.url + "/", "--levels", "1,2,3", "-d", "1s", "--no-recovery", "--settle", "0s"]
    proc = subprocess.Popen(
        [sys.executable, "-m", "knee", *args, "--out", str(out)],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, stdin=subprocess.DEVNULL, text=True,
    )  # fmt: skip
    assert proc.stdout is not None and proc.stderr is not None
    proc.stdout.readline()
    proc.stdout.close()  # as head does after its line
    err = proc.stderr.read()
    assert proc.wait(timeout=60) == 0, err
    assert "Traceback" not in err and "BrokenPipe" not in err, err
    (run,) = out.iterdir()
    doc = json.loads((run / "run.json").read_text())
    assert doc["status"] == "complete" and [s["level"] for s in doc["steps"]] == [1, 2, 3]


def test_an_argument_that_is_not_utf8_is_one_sentence() -> None:
    # a Latin-1 file name on grid storage, as a command's argument: a serialization error's traceback
    proc = subprocess.run(
        [sys.executable, "-m", "knee", "run", "-c", "1", "-n", "1", "--", "true", b"caf\xe9"],
        capture_output=True, text=True, timeout=60, stdin=subprocess.DEVNULL,
    )  # fmt: skip
    assert proc.returncode == 2, proc.stderr
    assert proc.stderr.strip() == (
        "knee: error: b'caf\\xe9' is not UTF-8 (an argument, a file's name or the environment's): knee sends and "
        "writes UTF-8 only; give it in UTF-8, or pass it through a file"
    )
