"""knee's own limits: CPU use per step (saturation flag) and the preflight checks."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from knee.machine.cpu import CpuMeter, cores_available, saturated
from knee.machine.host import Machine, ephemeral_port_range
from knee.machine.network import Endpoint
from knee.preflight import Connections, Load, fds_needed, preflight


@pytest.mark.alone  # the CPU a busy loop got
def test_cpu_meter_sees_a_busy_loop_and_an_idle_wait() -> None:
    meter = CpuMeter().start()
    end = time.monotonic() + 0.3
    x = 0
    while time.monotonic() < end:
        x += 1
    busy = meter.stop()
    assert busy.cpu_s >= 0.1
    assert busy.cpu_cores >= 0.3
    assert busy.cores_available == cores_available()
    assert busy.cores_busy >= busy.cpu_cores * 0.9  # the busy loop ran on knee's own cores
    assert busy.saturated is saturated(busy.load_cores, busy.cores_busy, busy.cores_available)

    meter = CpuMeter().start()
    time.sleep(0.3)
    idle = meter.stop()
    assert idle.cpu_cores < 0.3
    assert not idle.saturated


def test_the_load_side_is_saturated_by_its_own_use_or_by_full_cores_it_held_half_of() -> None:
    assert saturated(1.8, 1.8, 2) and not saturated(1.7, 1.7, 2)
    # Its cores full: saturated when knee and its children held half of them, not when others took most.
    assert saturated(1.0, 1.9, 2) and not saturated(0.9, 1.9, 2)
    assert not saturated(1.5, 1.7, 2)


def _in_child(code: str) -> str:
    """What `code` prints, run in a child Python (its resource limits are its own) that imports this knee."""
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(sys.path))
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=30, env=env, check=True)
    return out.stdout


def test_fd_limit_is_raised_when_the_hard_limit_allows() -> None:
    # in a child process whose soft limit is lowered to 256 first (here and in CI soft == hard, so raising
    # it in this process would exercise nothing)
    code = (
        "import resource\n"
        "_, hard = resource.getrlimit(resource.RLIMIT_NOFILE)\n"
        "resource.setrlimit(resource.RLIMIT_NOFILE, (256, hard))\n"
        "from knee.preflight import Load, preflight\n"
        "check = preflight(Load({'http': 1000}))\n"
        "print(resource.getrlimit(resource.RLIMIT_NOFILE)[0], check.fd_limit)\n"
        "print(*check.warnings, sep='\\n')\n"
    )
    out = _in_child(code)
    first, said = out.splitlines()[0], out.splitlines()[1:]
    need = fds_needed({"http": 1000})
    assert first == f"{need} {need}"
    assert said == [
        f"the open-file limit (ulimit -n) was 256, too low for 1000 clients: knee raised it to {need} for this run"
    ]


def test_fd_limit_beyond_the_hard_limit_is_one_sentence_with_the_fix() -> None:
    # in a child process whose hard limit is lowered to 512 (a limit only root could raise again)
    code = (
        "import resource\n"
        "resource.setrlimit(resource.RLIMIT_NOFILE, (256, 512))\n"
        "from knee.preflight import Load, preflight\n"
        "from knee.errors import UserError\n"
        "try:\n"
        "    preflight(Load({'exec': 1000}))\n"
        "except UserError as e:\n"
        "    print(e)\n"
    )
    out = _in_child(code)
    assert out.strip() == (
        "the open-file limit is 512 (ulimit -n) but 1000 clients need about 3064 file descriptors; "
        "raise it with `ulimit -n 3064` or run fewer clients per machine"
    )


def test_the_machine_values_are_read_from_proc(tmp_path: Path) -> None:
    f = tmp_path / "range"
    f.write_text("40000\t40599\n")
    assert ephemeral_port_range(f) == (40000, 40599)
    assert ephemeral_port_range(tmp_path / "missing") == (32768, 60999)
    m = Machine.read()
    assert m.port_range == ephemeral_port_range()
    assert m.tw_reuse == int(Path("/proc/sys/net/ipv4/tcp_tw_reuse").read_text())
    assert m.somaxconn == int(Path("/proc/sys/net/core/somaxconn").read_text())
    assert m.cores == cores_available()


# 600 ports: about 10 new connections/s to one address without TIME_WAIT reuse
NARROW = Machine(
    fd_soft=None,
    fd_hard=None,
    port_range=(40000, 40599),
    tw_reuse=0,
    somaxconn=100,
    mem_available=1_000_000_000,
    cores=2,
)
REMOTE = Endpoint("203.0.113.7", 80, "203.0.113.7", connect_s=0.001)  # TEST-NET-3: never this machine
LOOPBACK = Endpoint("127.0.0.1", 8080, "127.0.0.1", connect_s=0.0001)


def findings(load: Load, machine: Machine = NARROW) -> dict[str, str]:
    check = preflight(load, fix=False, strict=False, machine=machine)
    return {f.check: f.text for f in check.findings}


def churn(ep: Endpoint, clients: int, **kw: float) -> Load:
    return Load({"http": clients}, connections=[Connections("main", ep, clients, new_per_op=True, **kw)])


def test_ports_an_open_loop_above_ports_per_time_wait_is_a_finding_with_the_numbers() -> None:
    said = findings(churn(REMOTE, 50, rate=50.0))["ports"]
    assert said.startswith("a new connection per operation at 50.0/s (the top rate) to 203.0.113.7:80 can run out")
    assert "keeps its local port 60 s in TIME_WAIT" in said
    assert "the 600 ephemeral ports (40000-40599) allow about 10.0 new connections/s" in said
    assert "'Cannot assign requested address'" in said
    assert '`sysctl -w net.ipv4.ip_local_port_range="1024 65535"`' in said
    assert "`sysctl -w net.ipv4.tcp_tw_reuse=1` (now 0: off)" in said
    assert "keep connections alive" in said
    assert "ports" not in findings(churn(REMOTE, 50, rate=9.0))
    # kept alive: no TIME_WAIT per operation
    alive = Load({"http": 50}, connections=[Connections("main", REMOTE, 50, new_per_op=False, rate=5000.0)])
    assert "ports" not in findings(alive)


def test_ports_a_closed_loop_is_bounded_by_two_round_trips_and_think() -> None:
    # 20 clients, a connect of 1 ms: up to 20 / 2 ms = 10,000/s, past 10/s when an operation takes under 2 s
    said = findings(churn(REMOTE, 20))["ports"]
    assert said.startswith("20 clients opening a new connection per operation to 203.0.113.7:80 can run out")
    assert "when an operation takes under 2.00 s (one connect took 1.00 ms)" in said
    # thinking 5 s, they cannot open more than 20 / 5.002 s = 4/s
    assert "ports" not in findings(churn(REMOTE, 20, think_s=5.0))
    # TCP groups cannot keep a connection alive: the fix says only what can be done
    tcp = Load({"tcp": 20}, connections=[Connections("main", REMOTE, 20, new_per_op=True, http=False)])
    assert "keep connections alive" not in findings(tcp)["ports"]


def test_ports_tw_reuse_2_covers_loopback_only() -> None:
    reuse2 = Machine(**{**NARROW.__dict__, "tw_reuse": 2})
    assert "ports" not in findings(churn(LOOPBACK, 20), reuse2)
    assert "ports" not in findings(churn(LOOPBACK, 50, rate=500.0), reuse2)
    said = findings(churn(LOOPBACK, 50, rate=1000.0), reuse2)["ports"]  # more than 600 ports a second
    assert "even with tcp_tw_reuse = 2: loopback only" in said
    assert "ports" in findings(churn(REMOTE, 20), reuse2)
    reuse1 = Machine(**{**NARROW.__dict__, "tw_reuse": 1})
    assert "ports" not in findings(churn(REMOTE, 20), reuse1)


def test_backlog_somaxconn_below_the_connections_to_a_local_service() -> None:
    said = findings(Load({"http": 101}, connections=[Connections("main", LOOPBACK, 101, new_per_op=False)]))
    assert said["backlog"].startswith("101 connections to 127.0.0.1:8080 on this machine can arrive at once")
    assert "net.core.somaxconn = 100" in said["backlog"]
    assert "`sysctl -w net.core.somaxconn=101`" in said["backlog"]
    at = Load({"http": 100}, connections=[Connections("main", LOOPBACK, 100, new_per_op=False)])
    assert "backlog" not in findings(at)
    far = Load({"http": 101}, connections=[Connections("main", REMOTE, 101, new_per_op=False, rate=1.0)])
    assert "backlog" not in findings(far)


@pytest.mark.parametrize(
    ("load", "share"),
    [
        (Load({"exec": 200}), "80 % of"),  # 200 × 4 MB assumed
        (Load({"exec": 200}, exec_rss=10_000_000), "more than"),  # 2 GB measured
        (Load({"python": 10}, processes={"python": 12}), "60 % of"),  # 12 × 50 MB + 10 × 32 kB
    ],
)
def test_memory_above_half_of_what_is_available_is_a_warning(load: Load, share: str) -> None:
    check = preflight(load, fix=False, strict=True, machine=NARROW)  # strict: a warning, never an error
    (said,) = check.warnings
    assert f"{share} the 1.00 GB available (MemAvailable)" in said
    assert preflight(Load({"exec": 100}), fix=False, machine=NARROW).warnings == []  # 400 MB


def test_ports_connections_open_at_once_past_the_ports_of_their_source_addresses() -> None:
    held = Load({"http": 700}, connections=[Connections("main", LOOPBACK, 700, new_per_op=False)])
    said = findings(held)["ports"]
    assert said.startswith(
        "700 connections open at once to 127.0.0.1:8080 need more local ports than the 600 that one source address"
    )
    assert "--source-addr 127.0.0.2-127.0.0.9" in said and "'Cannot assign requested address'" in said
    # two source addresses hold 1 200, and spread the TIME_WAIT budget the same way
    spread = Load({"http": 700}, connections=[Connections("main", LOOPBACK, 700, new_per_op=False, sources=2)])
    assert "ports" not in findings(spread)
    assert "the 1200 ephemeral ports" in findings(churn(REMOTE, 50, rate=50.0, sources=2))["ports"]
