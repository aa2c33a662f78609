"""`knee doctor` as its own process: real limits, real listening sockets, real commands run once."""

from __future__ import annotations

import json
import resource
import socket
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from conftest import knee_cli
from servers import pids_alive


@pytest.fixture
def listening() -> Iterator[int]:
    """A port on 127.0.0.1 that accepts connections (into its backlog; nobody reads them)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        s.listen(8)
        yield s.getsockname()[1]


def doctor(*args: str, **kw: object) -> tuple[int, dict, str]:
    """`knee doctor --json ARGS`: exit status, the JSON document, stderr."""
    proc = knee_cli("doctor", "--json", *args, timeout=30, **kw)
    assert "Traceback" not in proc.stderr, proc.stderr
    return proc.returncode, json.loads(proc.stdout), proc.stderr


def said(doc: dict, check: str) -> list[str]:
    return [f["text"] for f in doc["findings"] if f["check"] == check]


def test_an_open_file_limit_below_the_largest_level_is_an_error_with_the_numbers() -> None:
    # a hard limit of 512 (only root could raise it again): 5000 HTTP clients need 5000 + 64 descriptors
    def low() -> None:
        resource.setrlimit(resource.RLIMIT_NOFILE, (256, 512))

    code, doc, _ = doctor("--levels", "50,5000", "http://127.0.0.1:1/", preexec_fn=low)
    assert code == 1
    assert doc["machine"]["fd_soft"] == 256 and doc["machine"]["fd_hard"] == 512
    assert said(doc, "fd") == [
        "the open-file limit is 512 (ulimit -n) but 5000 clients need about 5064 file descriptors; "
        "raise it with `ulimit -n 5064` or run fewer clients per machine"
    ]
    # and the target is not there: every finding at once, not only the first
    assert said(doc, "target") == ["connection refused by 127.0.0.1:1: is the service running on that port?"]
    # HTTP/2's clients are streams: 5000 of them at 100 streams a connection hold 50 descriptors, not 5000 (refused)
    code, doc, _ = doctor("--levels", "50,5000", "--http2", "--streams", "100", "http://127.0.0.1:1/", preexec_fn=low)
    assert said(doc, "fd") == [], doc["findings"]


def test_a_soft_limit_the_hard_limit_can_lift_is_a_warning(listening: int) -> None:
    _, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if hard != resource.RLIM_INFINITY and hard < 2000:
        pytest.skip(f"the hard open-file limit here is {hard}")

    def low() -> None:
        resource.setrlimit(resource.RLIMIT_NOFILE, (256, hard))

    code, doc, _ = doctor("-c", "1000", f"http://127.0.0.1:{listening}/", preexec_fn=low)
    (fd,) = [f for f in doc["findings"] if f["check"] == "fd"]
    assert fd["severity"] == "warning"
    assert fd["text"].startswith("the open-file limit (ulimit -n) is 256, too low for 1000 clients (about 1064 file")
    assert "a run raises it to 1064 itself" in fd["text"]
    assert code == doc["exit"] == 0


def test_somaxconn_below_the_connections_to_a_local_service(listening: int) -> None:
    somaxconn = int(Path("/proc/sys/net/core/somaxconn").read_text())
    level = somaxconn + 1
    code, doc, _ = doctor("--levels", f"10,{level}", f"http://127.0.0.1:{listening}/")
    assert doc["machine"]["somaxconn"] == somaxconn
    (text,) = said(doc, "backlog")
    assert text.startswith(f"{level} connections to 127.0.0.1:{listening} on this machine can arrive at once")
    assert f"net.core.somaxconn = {somaxconn} caps the server's accept queue" in text
    assert f"`sysctl -w net.core.somaxconn={level}`" in text
    assert code == (1 if doc["exit"] else 0)  # a warning (an fd limit below somaxconn + 65 would add an error)


def test_an_open_loop_past_the_ephemeral_ports_is_a_finding(listening: int) -> None:
    # 100,000 new connections/s is more than any port range gives, with tcp_tw_reuse or without
    lo, hi = (int(x) for x in Path("/proc/sys/net/ipv4/ip_local_port_range").read_text().split())
    code, doc, _ = doctor("--rates", "10,100000", "-c", "10", f"tcp://127.0.0.1:{listening}")
    (text,) = said(doc, "ports")
    assert f"{hi - lo + 1} ephemeral ports ({lo}-{hi})" in text
    assert "'Cannot assign requested address'" in text and "net.ipv4.ip_local_port_range" in text
    assert "keep connections alive" not in text  # a TCP group cannot
    assert code == 0


def test_a_command_that_fails_on_its_own_is_quoted(tmp_path: Path) -> None:
    runs = tmp_path / "runs"
    script = f"echo $0-${{client}}-${{iteration}} >> {runs}; echo 'FATAL: sorry, too many clients already' >&2; exit 2"
    code, doc, _ = doctor("-c", "20", "--", "sh", "-c", script)
    assert code == doc["exit"] == 1
    (text,) = said(doc, "command")
    assert text.startswith("the command 'sh', run once as client 0's first operation, exited with code 2, saying ")
    assert '"FATAL: sorry, too many clients already"' in text
    assert runs.read_text() == "sh-0-0\n"  # once, as client 0's first operation
    # --no-probe: not run at all
    code, doc, _ = doctor("--no-probe", "-c", "20", "--", "sh", "-c", script)
    assert code == 0 and said(doc, "command") == []
    assert runs.read_text() == "sh-0-0\n"


def test_a_secret_the_command_echoes_is_not_printed() -> None:
    proc = knee_cli("doctor", "--secret", "tok=s3cr3t-t0ken", "--", "sh", "-c", "echo bad $0 >&2; exit 1", "${tok}")
    assert proc.returncode == 1
    assert 'saying "bad <redacted>"' in proc.stdout
    assert "s3cr3t" not in proc.stdout + proc.stderr


def test_a_command_past_its_timeout_is_killed_with_what_it_started(tmp_path: Path) -> None:
    pidfile = tmp_path / "pids"
    script = f"echo $$ >> {pidfile}; sleep 60 & echo $! >> {pidfile}; wait"
    started = time.monotonic()
    code, doc, _ = doctor("--timeout", "300ms", "--", "sh", "-c", script)
    assert time.monotonic() - started < 10
    assert code == 1
    (text,) = said(doc, "command")
    assert "did not finish within its timeout (0.3 s) and was killed" in text
    pids = [int(p) for p in pidfile.read_text().split()]
    assert len(pids) == 2 and pids_alive(pids) == []


def test_a_command_that_is_not_there_is_one_sentence() -> None:
    proc = knee_cli("doctor", "-c", "5", "--", "knee-no-such-command", "x")
    assert proc.returncode == 1
    assert "error: command not found or not executable: 'knee-no-such-command' (check the name and your PATH)" in (
        proc.stdout
    )
    assert "Traceback" not in proc.stdout + proc.stderr


def test_without_a_target_it_checks_this_machine_for_1000_clients() -> None:
    proc = knee_cli("doctor", timeout=30)
    assert proc.returncode in (0, 1), proc.stderr
    out = proc.stdout
    assert out.startswith("checked for: 1000 HTTP clients, a new connection per request, to a service on this machine")
    assert ("no findings" in out) != ("findings:" in out)
    for row in ("open files (ulimit -n)", "ephemeral ports", "net.ipv4.tcp_tw_reuse", "net.core.somaxconn"):
        assert f"  {row} " in out
    assert "MemAvailable" in out and "cores" in out
    assert "error:" not in out or proc.returncode == 1


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--levels", "abc", "http://127.0.0.1:1/"], "--levels 'abc': 'abc' is not a whole number"),
        (["--new-connection"], "--new-connection describes a target: give the TARGET"),
    ],
)
def test_bad_input_is_one_line(args: list[str], message: str) -> None:
    proc = knee_cli("doctor", *args, timeout=30)
    assert proc.returncode == 2
    assert proc.stdout == ""
    (line,) = proc.stderr.splitlines()
    assert line.startswith("knee: error: ") and message in line


def test_the_machine_alone_with_a_level_search() -> None:
    # `knee doctor --levels auto` took max("auto") for the largest level: a ValueError's traceback
    code, doc, _ = doctor("--levels", "auto")
    assert code in (0, 1) and doc["machine"]["fd_soft"], doc
