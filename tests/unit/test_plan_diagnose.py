"""knee's own limits: CPU use per step (saturation flag) and the preflight checks."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

from knee.diagnose import CpuMeter, cores_available, ephemeral_port_range, fds_needed, preflight


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
    assert busy.saturated is (busy.cpu_cores >= 0.9 * busy.cores_available)

    meter = CpuMeter().start()
    time.sleep(0.3)
    idle = meter.stop()
    assert idle.cpu_cores < 0.3
    assert not idle.saturated


def test_fd_limit_is_raised_when_the_hard_limit_allows() -> None:
    # in a child process whose soft limit is lowered to 256 first (here and in CI soft == hard, so raising
    # it in this process would exercise nothing)
    code = (
        "import resource\n"
        "_, hard = resource.getrlimit(resource.RLIMIT_NOFILE)\n"
        "resource.setrlimit(resource.RLIMIT_NOFILE, (256, hard))\n"
        "from knee.diagnose import preflight\n"
        "check = preflight({'http': 1000}, new_connections=False)\n"
        "print(resource.getrlimit(resource.RLIMIT_NOFILE)[0], check.fd_limit)\n"
        "print(*check.warnings, sep='\\n')\n"
    )
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(sys.path))
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=30, env=env, check=True)
    first, said = out.stdout.splitlines()[0], out.stdout.splitlines()[1:]
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
        "from knee.diagnose import preflight\n"
        "from knee.errors import UserError\n"
        "try:\n"
        "    preflight({'exec': 1000}, new_connections=False)\n"
        "except UserError as e:\n"
        "    print(e)\n"
    )
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(sys.path))
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=30, env=env, check=True)
    assert out.stdout.strip() == (
        "the open-file limit is 512 (ulimit -n) but 1000 clients need about 3064 file descriptors; "
        "raise it with `ulimit -n 3064` or run fewer clients per machine"
    )


def test_new_connections_warn_about_the_ephemeral_port_range(tmp_path: Path) -> None:
    f = tmp_path / "range"
    f.write_text("40000\t40599\n")
    assert ephemeral_port_range(f) == (40000, 40599)
    assert ephemeral_port_range(tmp_path / "missing") == (32768, 60999)
    lo, hi = ephemeral_port_range()
    (warning,) = preflight({"tcp": 1}, new_connections=True).warnings
    assert f"{lo}-{hi}" in warning
    assert "TIME_WAIT" in warning
    assert preflight({"http": 1}, new_connections=False).warnings == []
