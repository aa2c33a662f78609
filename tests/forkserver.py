"""`knee ARGS` in a process of its own, forked from one that has imported knee already (the tests' `knee_cli`).

A `python -m knee run` spends about 0.4 CPU-s importing knee and building its pydantic models before it sends a
request; the parallel test pass started 589 of them (338 CPU-s of its 665, a census of stop 58), and the cores are
what that pass waits for. Here one server per pytest process imports knee's command line and each command's module
(what a command imports only when it runs is still imported by the command); each command is a child forked from it
that runs `knee.cli.main(ARGS)` with the caller's standard streams, environment and directory, and exits with the
status `python -m knee` would: the same code, a real process (its own PID, signals, children and files), without the
import. knee's own start (`python -m knee`, its entry point) is still run by the tests that start it with Popen
(interrupts, the live page, the wheel's, the Dask driver's).

What differs from a process started afresh: what shapes an interpreter's start is the server's (a command whose
PYTHON*, LANG, LC_* or TZ differ is started afresh instead), every command has the server's hash seed, a warning
printed while the preloaded modules were imported is not printed again, and the command ends with os._exit after
the interpreter's own exit steps (non-daemon threads, atexit, a collection), without its module teardown.

The server is this file run as a program, with a listening Unix socket (this user's connections only) on its
standard input's other side: it ends when its standard input closes (the pytest process that started it is gone). A
request is one connection: the caller's stdin, stdout and stderr as file descriptors (SCM_RIGHTS) and a JSON header
(argv, env, cwd); the server forks a waiter, which forks the command, says its PID, waits for it and says its exit
status. The caller kills the command (through its pidfd) if it leaves before that status: a timeout, pytest-timeout,
Ctrl-C.
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
import selectors
import signal
import socket
import struct
import subprocess
import sys
import threading
import time
from typing import Any


def _preload() -> None:
    """knee's command line and each command's module, with what they import at their top: not the modules a
    command imports only when it runs (a command's own import of them is then still tested)."""
    import knee.cli

    knee.cli._skip_pydantic_plugins()  # as entry() does: a process of knee's own
    os.environ["OPENBLAS_NUM_THREADS"] = "1"  # numpy's OpenBLAS starts no thread of its own (it would not fork)
    gc.disable()
    for module in knee.cli.SUBCOMMANDS.values():
        importlib.import_module(f"knee.commands.{module}")
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
    time.tzset()  # TZ as the caller has it
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
    gc.collect()  # what the interpreter's own exit would collect (os._exit below skips its teardown)
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
        code = 1
        try:
            listener.close()
            conn.close()
            for target, fd in enumerate(fds):
                os.dup2(fd, target)
            for fd in fds:
                if fd > 2:
                    os.close(fd)
            code = _command(header)
        except BaseException:
            import traceback

            traceback.print_exc()
        finally:
            os._exit(code)
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
            uid = struct.unpack("3i", conn.getsockopt(socket.SOL_SOCKET, socket.SO_PEERCRED, 12))[1]
            if uid != os.getuid():  # an abstract socket anyone on the machine can reach: this user's commands only
                conn.close()
                continue
            if os.fork() == 0:
                signal.signal(signal.SIGCHLD, signal.SIG_DFL)  # the waiter waits for its command
                events.close()
                try:
                    _serve_one(conn, listener)
                finally:
                    os._exit(0)
            conn.close()


class Server:
    """The caller's side: one server per pytest process (tests/conftest.py starts it with the session)."""

    PYTHON_ENV = ("PYTHON", "LANG", "LC_", "TZ")  # what shapes the interpreter when it starts, not a command

    def __init__(self) -> None:
        self.path = f"\0knee-tests-{os.getpid()}-{time.monotonic_ns()}"  # an abstract socket: no file to remove
        self.started_env = self.shaping(os.environ)
        here = os.path.dirname(os.path.abspath(__file__))
        self.proc = subprocess.Popen(
            [sys.executable, os.path.abspath(__file__), self.path.removeprefix("\0")],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, cwd=here,
        )  # fmt: skip
        assert self.proc.stdout is not None
        if self.proc.stdout.readline() != b"ready\n":
            self.stop()
            raise RuntimeError("the fork server did not start (tests/forkserver.py)")
        atexit.register(self.stop)

    def shaping(self, env: Any) -> dict[str, str]:
        return {k: v for k, v in env.items() if k.startswith(self.PYTHON_ENV)}

    def serves(self, env: dict[str, str] | None) -> bool:
        """Whether a command with `env` (None: this process's) is this server's to fork: the variables that shape
        an interpreter's start are those it started with."""
        return self.proc.poll() is None and self.shaping(os.environ if env is None else env) == self.started_env

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
        """subprocess.run([python, -m, knee, *argv], capture_output=True, text=True, stdin=DEVNULL, timeout=…): on
        any way out before the command's end (its timeout, pytest-timeout, Ctrl-C) the command is killed."""
        deadline = time.monotonic() + timeout
        where = os.path.abspath(cwd or ".")
        if not os.path.isdir(where):
            raise FileNotFoundError(f"No such directory: {where!r}")  # as subprocess says it, before anything runs
        header = json.dumps({"argv": argv, "env": dict(os.environ if env is None else env), "cwd": where}).encode()
        out_r, out_w = os.pipe()
        err_r, err_w = os.pipe()
        null = os.open(os.devnull, os.O_RDONLY)
        conn = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        chunks: dict[int, list[bytes]] = {out_r: [], err_r: []}
        events = selectors.DefaultSelector()
        pidfd, status = -1, b""
        try:
            try:
                conn.connect(self.path)
                socket.send_fds(conn, [struct.pack("!I", len(header))], [null, out_w, err_w])
                conn.sendall(header)
            finally:
                for fd in (null, out_w, err_w):
                    os.close(fd)
            reply = conn.makefile("rb")
            conn.settimeout(max(0.1, deadline - time.monotonic()))
            pid = int(reply.readline())
            # the command's pidfd: a kill that cannot reach another process, should its PID be reused
            with contextlib.suppress(ProcessLookupError):
                pidfd = os.pidfd_open(pid)
            for fd in chunks:
                events.register(fd, selectors.EVENT_READ)
            while events.get_map():
                left = deadline - time.monotonic()
                if left <= 0:
                    out, err = _text(chunks[out_r]), _text(chunks[err_r])
                    raise subprocess.TimeoutExpired(["knee", *argv], timeout, out, err)
                for key, _ in events.select(timeout=left):
                    data = os.read(key.fd, 65536)
                    if data:
                        chunks[key.fd].append(data)
                    else:
                        events.unregister(key.fd)
            conn.settimeout(max(0.1, deadline - time.monotonic()))
            status = reply.readline()  # the waiter's, once the command has been waited for
        finally:
            if not status and pidfd >= 0:
                with contextlib.suppress(ProcessLookupError):
                    signal.pidfd_send_signal(pidfd, signal.SIGKILL)
            if pidfd >= 0:
                os.close(pidfd)
            events.close()
            os.close(out_r)
            os.close(err_r)
            conn.close()
        return subprocess.CompletedProcess(
            [sys.executable, "-m", "knee", *argv], int(status), _text(chunks[out_r]), _text(chunks[err_r])
        )


def _text(chunks: list[bytes]) -> str:
    """As subprocess's text=True reads: the locale's encoding, universal newlines."""
    return io.TextIOWrapper(io.BytesIO(b"".join(chunks)), encoding=locale.getpreferredencoding(False)).read()


if __name__ == "__main__":
    serve("\0" + sys.argv[1])
