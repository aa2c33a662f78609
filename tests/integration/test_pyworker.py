"""knee's Python worker as a process speaking the worker protocol's batches (docs/worker-protocol.md): flows
that return at once, wait, fail or time steps, in one line, each answered once, each client in order."""

from __future__ import annotations

import contextlib
import json
import os
import select
import subprocess
import sys
import time
from collections.abc import Iterator

from conftest import REPO

FLOWS = REPO / "tests" / "flows"


class Replies:
    """The worker's stdout, read with a deadline: every answer by (client, id), each exactly once."""

    def __init__(self, proc: subprocess.Popen[bytes]) -> None:
        assert proc.stdout is not None
        self.fd, self.buf, self.answers = proc.stdout.fileno(), b"", {}

    def line(self, deadline: float) -> dict | None:
        while b"\n" not in self.buf:
            ready, _, _ = select.select([self.fd], [], [], max(0.0, deadline - time.monotonic()))
            if not ready:
                return None
            self.buf += os.read(self.fd, 1 << 16)
        line, self.buf = self.buf.split(b"\n", 1)
        return json.loads(line)

    def until(self, count: int, seconds: float = 10) -> None:
        deadline = time.monotonic() + seconds
        while len(self.answers) < count:
            line = self.line(deadline)
            assert line is not None, f"only {sorted(self.answers)} answered within {seconds} s"
            done = line.pop("done", None)
            pairs = zip(done[::2], done[1::2], strict=True) if done is not None else None
            for reply in [{"client": c, "id": i, "ok": True} for c, i in pairs] if pairs else [line]:
                key = (reply["client"], reply["id"])
                assert key not in self.answers, f"{key} answered twice"
                self.answers[key] = reply


def run_line(proc: subprocess.Popen[bytes], op_id: int) -> None:
    assert proc.stdin is not None
    ops = [n for client in range(8) for n in (client, op_id)]
    proc.stdin.write(b'{"op":"run","operation":"fetch","ops":%s}\n' % json.dumps(ops).encode())
    proc.stdin.flush()


@contextlib.contextmanager
def worker(flow: str, clients: int) -> Iterator[tuple[subprocess.Popen[bytes], Replies]]:
    """`python -m knee.pyworker testflows:FLOW` started for `clients` clients and ready; killed after."""
    proc = subprocess.Popen(
        [sys.executable, "-m", "knee.pyworker", f"testflows:{flow}", "--path", str(FLOWS)],
        stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
        env=dict(os.environ, PYTHONPATH=str(REPO / "python")),
    )  # fmt: skip
    assert proc.stdin is not None
    replies = Replies(proc)
    try:
        start = {"op": "start", "protocol": 1, "group": "g", "process": 0, "clients": list(range(clients)), "vars": {}}
        proc.stdin.write(json.dumps(start).encode() + b"\n")
        proc.stdin.flush()
        assert replies.line(time.monotonic() + 10) == {"ready": True, "batch": True}
        yield proc, replies
    finally:
        proc.kill()
        proc.wait()


def stop(proc: subprocess.Popen[bytes]) -> None:
    """knee's stop, stdin closed: the worker exits 0."""
    assert proc.stdin is not None
    proc.stdin.write(b'{"op":"stop"}\n')
    proc.stdin.close()
    assert proc.wait(timeout=10) == 0, proc.stderr.read() if proc.stderr else ""


def test_a_batch_of_mixed_flows_is_answered_once_each_and_in_client_order() -> None:
    with worker("mixed", 8) as (proc, replies):
        assert proc.stdin is not None
        run_line(proc, 0)
        replies.until(8)  # clients 1 and 5 answer 20 ms later, with nothing else to come: they are sent anyway
        run_line(proc, 1)  # two lines at once: every client's operation 2 comes while 1's and 5's operation 1 waits
        run_line(proc, 2)
        replies.until(24)
        for client in range(8):  # the protocol's single requests still work: the worker runs them as batches of one
            proc.stdin.write(b'{"op":"run","client":%d,"id":3,"operation":"fetch"}\n' % client)
        proc.stdin.flush()
        replies.until(32)
        stop(proc)
    assert sorted(replies.answers) == [(c, i) for c in range(8) for i in (0, 1, 2, 3)]
    for (client, op_id), reply in replies.answers.items():
        kind = client % 4
        if kind == 2:
            assert reply == {"client": client, "id": op_id, "ok": False, "error": "ValueError",
                             "message": f"client {client} says no to {op_id}"}  # fmt: skip
        elif kind == 3:
            assert reply["ok"] is True and reply["bytes"] == 7 and set(reply["steps"]) == {"work"}
        else:
            assert reply == {"client": client, "id": op_id, "ok": True}


def test_a_wrapped_async_flow_runs_and_a_print_or_a_cancel_is_no_protocol_error() -> None:
    """An async flow behind a plain wrapper ran in a thread and was counted done without running; a print() went
    into the protocol's pipe; a CancelledError escaped the worker."""
    with worker("wrapped", 3) as (proc, replies):
        assert proc.stdin is not None and proc.stderr is not None
        proc.stdin.write(b'{"op":"run","operation":"","ops":[0,0,1,0,2,0]}\n')
        proc.stdin.flush()
        replies.until(3)
        stop(proc)
        assert "a flow's own line, not knee's" in proc.stderr.read().decode()
    a = replies.answers
    assert (a[(0, 0)]["bytes"], a[(2, 0)]["bytes"]) == (3, 5), a
    assert a[(1, 0)]["ok"] is False and a[(1, 0)]["error"] == "CancelledError", a


def test_asyncios_timeouts_work_in_a_flow_that_waits_and_in_one_that_does_not() -> None:
    """`async with asyncio.timeout(…)` raised "Timeout should be used inside a task" in a flow the worker ran
    eagerly (outside any Task), before it waited: every such flow failed. Now it runs, and one that outlasts it
    fails with TimeoutError, the operation's own."""
    with worker("timed", 8) as (proc, replies):
        run_line(proc, 0)
        replies.until(8)
        run_line(proc, 1)
        replies.until(16)
        stop(proc)
    for (client, op_id), reply in replies.answers.items():
        if client % 4 == 2:
            assert (reply["ok"], reply["error"]) == (False, "TimeoutError"), reply
        else:
            assert reply == {"client": client, "id": op_id, "ok": True}


def test_a_contextvar_set_before_a_flow_waits_is_its_own_after_the_wait() -> None:
    """The Task a flow goes on in after its first wait ran in a context copied before the flow began: a contextvar
    it set before the wait (a request id, a tracing span) was gone, or another operation's, after it."""
    with worker("context_kept", 8) as (proc, replies):
        run_line(proc, 0)
        replies.until(8)
        run_line(proc, 1)
        replies.until(16)
        stop(proc)
    assert all(reply["ok"] for reply in replies.answers.values()), replies.answers
