"""A second Ctrl-C under knee's Python API stops at once by raising KeyboardInterrupt in the caller's process: it left
the process (os._exit(130)), and a notebook's kernel went with everything it held. The command line's second Ctrl-C
still leaves at once. Each case in a process of its own, as the signal handler's exit would end the test's."""

from __future__ import annotations

import signal
import subprocess
import sys

from conftest import REPO

SCRIPT = """
import signal, sys
from knee.executor.interrupt import Interrupts, in_callers_process
api = sys.argv[1] == "api"
try:
    with (in_callers_process() if api else Interrupts()), Interrupts() as intr:
        intr._handle(signal.SIGINT, None)  # the first: the step ends, the report is written
        print("first", intr.requested, flush=True)
        intr._handle(signal.SIGINT, None)  # the second: stop now
except KeyboardInterrupt:
    print("raised: the caller goes on", flush=True)
"""


def _second_ctrl_c(where: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-c", SCRIPT, where],
        capture_output=True, text=True, timeout=60, env={"PYTHONPATH": str(REPO / "python")},
    )  # fmt: skip


def test_a_second_ctrl_c_raises_in_the_api_and_exits_on_the_command_line() -> None:
    api = _second_ctrl_c("api")
    assert (api.returncode, api.stdout) == (0, "first True\nraised: the caller goes on\n"), api.stderr
    cli = _second_ctrl_c("cli")
    assert (cli.returncode, cli.stdout) == (128 + signal.SIGINT, "first True\n"), cli.stderr
