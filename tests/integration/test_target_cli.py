"""`knee target` as a user runs it: profiles, one-line errors, ready file, clean stop on signals."""

from __future__ import annotations

import json
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

from knee.demo_target import start_target, to_toml
from knee.errors import UserError

from conftest import knee_cli
from servers import kill_if_running


def knee(*args: str, timeout: float = 30) -> subprocess.CompletedProcess[str]:
    return knee_cli(*args, timeout=timeout)


def test_list_profiles() -> None:
    r = knee("target", "--list-profiles")
    assert r.returncode == 0, r.stderr
    names = [line.split()[0] for line in r.stdout.splitlines()]
    assert {"srm", "srm-fast", "auth", "web"} <= set(names)


@pytest.mark.parametrize(
    ("args", "words"),
    [
        (["--sigma", "-0.1"], ["sigma = -0.1", "0 ≤ sigma < 1"]),
        (["--profile", "nope"], ["'nope'", "srm-fast"]),
        (["--hang-fraction", "2"], ["hang_fraction = 2"]),
        (["--recovery", "stuck", "--overload-threshold", "0"], ["recovery.threshold = 0"]),
        (["--path", "copy=cost:2"], ["--path", "/copy=cost:2"]),
        (["--config", "/nonexistent/x.toml"], ["--config", "cannot read"]),
    ],
)
def test_bad_configuration_is_one_clear_line(args: list[str], words: list[str]) -> None:
    r = knee("target", *args)
    assert r.returncode == 2
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("knee: error: "), r.stderr
    for w in words:
        assert w in lines[0], lines[0]


def test_bad_config_file_names_the_line(tmp_path: Path) -> None:
    bad = tmp_path / "t.toml"
    bad.write_text("lambda = 10.0\npool = \n")
    r = knee("target", "--config", str(bad))
    assert r.returncode == 2 and "line 2" in r.stderr and len(r.stderr.strip().splitlines()) == 1, r.stderr
    bad.write_text("lambda = 10.0\npoool = 3\n")
    r = knee("target", "--config", str(bad))
    assert r.returncode == 2 and "poool" in r.stderr, r.stderr


def test_port_in_use_is_one_clear_line() -> None:
    with socket.socket() as holder:
        holder.bind(("127.0.0.1", 0))
        holder.listen(1)
        port = holder.getsockname()[1]
        r = knee("target", "--port", str(port))
    assert r.returncode == 2
    assert f"127.0.0.1:{port}" in r.stderr and "pick another port" in r.stderr, r.stderr
    assert len(r.stderr.strip().splitlines()) == 1
    with pytest.raises(UserError, match="pick another port"), socket.socket() as holder:
        holder.bind(("127.0.0.1", 0))
        holder.listen(1)
        start_target(port=holder.getsockname()[1])


def test_config_file_and_flags_override_the_profile(tmp_path: Path) -> None:
    cfg = tmp_path / "t.toml"
    cfg.write_text(to_toml({"pool": 7, "recovery": {"factor": 3.0}, "paths": {"/copy": {"bytes": 100}}}))
    with start_target("srm-fast", extra_args=["--config", str(cfg), "--lambda", "20"]) as t:
        doc = t.config()["config"]
    assert (doc["name"], doc["pool"], doc["lambda"], doc["sigma"]) == ("srm-fast", 7, 20.0, 0.2)
    assert doc["recovery"]["factor"] == 3.0 and doc["recovery"]["mode"] == "stuck"
    assert doc["paths"]["/copy"]["bytes"] == 100 and doc["paths"]["/copy"]["cost"] == 2.0


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT])
def test_foreground_run_prints_addresses_and_stops_cleanly(tmp_path: Path, sig: signal.Signals) -> None:
    ready = tmp_path / "ready.json"
    proc = subprocess.Popen(
        [sys.executable, "-m", "knee", "target", "--profile", "srm-fast", "--ready-file", str(ready)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        stdin=subprocess.DEVNULL,
        text=True,
    )
    try:
        deadline = time.monotonic() + 20
        while not ready.exists():
            assert proc.poll() is None and time.monotonic() < deadline, proc.stderr.read() if proc.stderr else ""
            time.sleep(0.02)
        info = json.loads(ready.read_text())
        assert info["pid"] == proc.pid and info["profile"] == "srm-fast"
        assert info["model"]["peak_clients"] == 50
        with socket.create_connection(("127.0.0.1", info["tcp_port"]), timeout=5) as s:
            assert s.makefile().readline() == "HELLO knee-target\n"
        proc.send_signal(sig)
        out, err = proc.communicate(timeout=10)
    finally:
        kill_if_running(proc)
    assert proc.returncode == 0, err
    assert info["url"] in out and "peak ≈ 432 req/s at 50 clients" in out
    assert "stopped" in out and "Traceback" not in err


def test_launcher_stats_reset_and_tcp() -> None:
    with start_target("srm-fast") as t:
        assert t.model["peak_clients"] == 50
        with socket.create_connection((t.host, t.tcp_port), timeout=5) as s:
            f = s.makefile("rw")
            assert f.readline() == "HELLO knee-target\n"
            f.write("PING\n")
            f.flush()
            assert f.readline() == "PONG\n"
        stats = t.stats()
        assert stats["profile"] == "srm-fast" and stats["tcp_handshakes"] == 1 and stats["state"] == "normal"
        assert t.reset()["tcp_lines"] == 1
        assert t.stats()["tcp_lines"] == 0
        pid = t.pid
    assert not _alive(pid), "stop() leaves no process"


def _alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().split()[2] != "Z"
    except FileNotFoundError:
        return False
