"""The tests' `knee_cli` forks knee from a process that imported it (tests/forkserver.py): what a command prints, its
exit status, the files it writes where, and its environment are those of `python -m knee` started afresh."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import time
from pathlib import Path

import psutil
import pytest

import conftest
from conftest import knee_cli
from servers import Nginx


def afresh(*args: str, env: dict[str, str] | None = None, cwd: Path | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "knee", *args], capture_output=True, text=True, timeout=60, stdin=subprocess.DEVNULL,
        env=env, cwd=cwd,
    )  # fmt: skip


@pytest.mark.parametrize(
    "args",
    [
        ("--version",),
        ("run", "http://127.0.0.1:1/", "-c", "0"),  # a mistake: one sentence, exit 2
        ("nosuch",),  # click's own error
        ("fit", "/nonexistent.csv"),
        ("report",),  # a missing argument
    ],
)
def test_a_forked_command_prints_and_exits_as_one_started_afresh(args: tuple[str, ...]) -> None:
    forked, fresh = knee_cli(*args), afresh(*args)
    assert (forked.returncode, forked.stdout, forked.stderr) == (fresh.returncode, fresh.stdout, fresh.stderr)


def test_its_directory_environment_and_counts_are_the_callers(nginx: Nginx, tmp_path: Path) -> None:
    env = {**os.environ, "tok": "t0k"}
    for run, how in ((knee_cli, "forked"), (afresh, "afresh")):
        (tmp_path / how).mkdir()
        proc = run(
            "run", "-q", nginx.url + "/", "-n", "7", "-H", "Authorization: Bearer ${tok}",
            "--secret", "tok", "--json", "r.json", env=env, cwd=tmp_path / how,
        )  # fmt: skip
        assert proc.returncode == 0, (how, proc.stderr)
        doc = json.loads((tmp_path / how / "r.json").read_text())
        assert (doc["started"], doc["succeeded"]) == (7, 7), how


def test_a_command_past_its_timeout_is_killed() -> None:
    with socket.create_server(("127.0.0.1", 0)) as silent:  # accepts (its backlog), never answers
        t0 = time.monotonic()
        with pytest.raises(subprocess.TimeoutExpired):
            url = f"http://127.0.0.1:{silent.getsockname()[1]}/"
            knee_cli("run", "-q", url, "-n", "1", "--timeout", "20s", timeout=1)
        assert time.monotonic() - t0 < 5
        assert conftest._fork_server is not None
        server = psutil.Process(conftest._fork_server.proc.pid)
        while server.children(recursive=True) and time.monotonic() - t0 < 5:  # the command, then its waiter
            time.sleep(0.05)
        assert server.children(recursive=True) == []


def test_a_directory_that_is_not_there_is_refused_as_subprocess_refuses_it(tmp_path: Path) -> None:
    for run in (knee_cli, afresh):
        with pytest.raises(FileNotFoundError):
            run("--version", cwd=tmp_path / "gone")
