"""`knee ARGS` in a process of its own, forked from one that has imported knee already (the tests' `knee_cli`).

A `python -m knee run` spends about 0.4 CPU-s importing knee and building its pydantic models before it sends a
request; the parallel test pass started 589 of them (338 CPU-s of its 665, a census of stop 58), and the cores are
what that pass waits for. Here one server per pytest process imports every knee module once; each command is a
child forked from it that runs `knee.cli.main(ARGS)` with the caller's standard streams, environment and directory,
and exits with the status `python -m knee` would: the same code, a real process (its own PID, signals, children and
files), without the import. knee's own start (`python -m knee`, its entry point) is still run by the tests that
start it with Popen (interrupts, the live page, the wheel's).

The server is this file run as a program, with a listening Unix socket on its standard input's other side: it ends
when its standard input closes (the pytest process that started it is gone). A request is one connection: the
caller's stdin, stdout and stderr as file descriptors (SCM_RIGHTS) and a JSON header (argv, env, cwd); the server
forks a waiter, which forks the command, says its PID, waits for it and says its exit status.
"""

from __future__ import annotations

import atexit
import contextlib
import gc
import importlib
import io
import json
import locale
import os
import pkgutil
import selectors
import signal
import socket
import struct
import subprocess
import sys
import threading
import time
from typing import Any

SKIP = "knee.__main__"  # a program's own module


def _preload() -> None:
    import knee
    import knee.cli

    knee.cli._skip_pydantic_plugins()  # as entry() does: a process of knee's own
    os.environ["OPENBLAS_NUM_THREADS"] = "1"  # numpy's OpenBLAS starts no thread of its own (it would not fork)
    gc.disable()
    for module in pkgutil.walk_packages(knee.__path__, "knee."):
        if not module.name.startswith(SKIP):
            importlib.import_module(module.name)
    gc.freeze()  # the children share these pages: no collection of theirs walks (and so copies) them
    gc.enable()
    assert threading.active_count() == 1 and len(os.listdir("/proc/self/task")) == 1, "a thread would not fork"


def _recv_exactly(conn: socket.socket, n: int) -> bytes:
    data = b""
    while len(data) < n:
        chunk = conn.recv(n - len(data))
        if not chunk:
            raise EOFError
        data += chunk
    return data


def _command(header: dict[str, Any]) -> int:
    """In the forked child, whose fds 0-2 are the caller's: knee's main(), then the exit Python's own makes."""
    os.environ.clear()
    os.environ.update(header["env"])
    os.chdir(header["cwd"])
    sys.path[0] = header["cwd"]  # as `python -m` puts it (the server's own, tests/, is not the command's)
    import knee.cli

    sys.argv = [os.path.join(os.path.dirname(knee.cli.__file__), "__main__.py"), *header["argv"]]

    knee.cli._own_process = True
    code: Any = 0
    try:
        try:
            knee.cli.main(header["argv"])
        finally:
            signal.signal(signal.SIGINT, signal.SIG_IGN)  # as entry() does
    except SystemExit as exc:
        code = exc.code
    except BaseException:
        import traceback

        traceback.print_exc()
        code = 1
    if code is not None and not isinstance(code, int):
        print(code, file=sys.stderr)
        code = 1
    threading._shutdown()  # type: ignore[attr-defined]  # the interpreter's exit: non-daemon threads, then atexit
    atexit._run_exitfuncs()
    for stream in (sys.stdout, sys.stderr):
        with contextlib.suppress(Exception):
            stream.flush()
    return code or 0


def _serve_one(conn: socket.socket, listener: socket.socket) -> None:
    """In the waiter (a child of the server): fork the command, say its PID, wait, say its status."""
    size = struct.calcsize("!I")
    msg, fds, _, _ = socket.recv_fds(conn, size, 3)
    (length,) = struct.unpack("!I", msg)
    header = json.loads(_recv_exactly(conn, length))
    pid = os.fork()
    if pid == 0:
        listener.close()
        conn.close()
        for target, fd in enumerate(fds):
            os.dup2(fd, target)
        for fd in fds:
            if fd > 2:
                os.close(fd)
        os._exit(_command(header))
    for fd in fds:
        os.close(fd)
    conn.sendall(f"{pid}\n".encode())
    _, status = os.waitpid(pid, 0)
    conn.sendall(f"{os.waitstatus_to_exitcode(status)}\n".encode())


def serve(path: str) -> None:
    _preload()
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    listener.bind(path)
    listener.listen(64)
    sys.stdout.write("ready\n")
    sys.stdout.flush()
    events = selectors.DefaultSelector()
    events.register(listener, selectors.EVENT_READ)
    events.register(sys.stdin, selectors.EVENT_READ)
    # The waiters are reaped by the kernel as they end: a zombie left for later would be a child of the pytest
    # process's that comes and goes under a test that counts them (test_run_cli's leak test).
    signal.signal(signal.SIGCHLD, signal.SIG_IGN)
    while True:
        for key, _ in events.select():
            if key.fileobj is sys.stdin:
                return  # the pytest process is gone (or done)
            conn, _ = listener.accept()
            if os.fork() == 0:
                signal.signal(signal.SIGCHLD, signal.SIG_DFL)  # the waiter waits for its command
                events.close()
                try:
                    _serve_one(conn, listener)
                finally:
                    os._exit(0)
            conn.close()


class Server:
    """The caller's side: one server per pytest process, started at the first command."""

    def __init__(self) -> None:
        self.path = f"\0knee-tests-{os.getpid()}-{time.monotonic_ns()}"  # an abstract socket: no file to remove
        here = os.path.dirname(os.path.abspath(__file__))
        self.proc = subprocess.Popen(
            [sys.executable, os.path.abspath(__file__), self.path.removeprefix("\0")],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, cwd=here,
        )  # fmt: skip
        assert self.proc.stdout is not None and self.proc.stdout.readline() == b"ready\n", "the fork server failed"
        atexit.register(self.stop)

    def stop(self) -> None:
        if self.proc.poll() is None:
            assert self.proc.stdin is not None
            self.proc.stdin.close()
            try:
                self.proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()

    def run(
        self, argv: list[str], *, timeout: float, env: dict[str, str] | None = None, cwd: Any = None
    ) -> subprocess.CompletedProcess[str]:
        """subprocess.run([python, -m, knee, *argv], capture_output=True, text=True, stdin=DEVNULL, timeout=…)."""
        header = {"argv": argv, "env": dict(os.environ if env is None else env), "cwd": os.path.abspath(cwd or ".")}
        header_bytes = json.dumps(header).encode()
        out_r, out_w = os.pipe()
        err_r, err_w = os.pipe()
        null = os.open(os.devnull, os.O_RDONLY)
        conn = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        try:
            conn.connect(self.path)
            socket.send_fds(conn, [struct.pack("!I", len(header_bytes))], [null, out_w, err_w])
            conn.sendall(header_bytes)
        finally:
            for fd in (null, out_w, err_w):
                os.close(fd)
        reply = conn.makefile("rb")
        pid = int(reply.readline())
        deadline = time.monotonic() + timeout
        chunks: dict[int, list[bytes]] = {out_r: [], err_r: []}
        events = selectors.DefaultSelector()
        for fd in chunks:
            events.register(fd, selectors.EVENT_READ)
        try:
            while events.get_map():
                left = deadline - time.monotonic()
                if left <= 0:
                    with contextlib.suppress(ProcessLookupError):
                        os.kill(pid, signal.SIGKILL)
                    raise subprocess.TimeoutExpired(
                        ["knee", *argv], timeout, _text(chunks[out_r]), _text(chunks[err_r])
                    )
                for key, _ in events.select(timeout=left):
                    data = os.read(key.fd, 65536)
                    if data:
                        chunks[key.fd].append(data)
                    else:
                        events.unregister(key.fd)
            status = reply.readline()
        finally:
            events.close()
            os.close(out_r)
            os.close(err_r)
            reply.close()
            conn.close()
        return subprocess.CompletedProcess(
            [sys.executable, "-m", "knee", *argv], int(status), _text(chunks[out_r]), _text(chunks[err_r])
        )


def _text(chunks: list[bytes]) -> str:
    """As subprocess's text=True reads: the locale's encoding, universal newlines."""
    return io.TextIOWrapper(io.BytesIO(b"".join(chunks)), encoding=locale.getpreferredencoding(False)).read()


if __name__ == "__main__":
    serve("\0" + sys.argv[1])
