"""`knee doctor`'s probe: an exec group's command run once, as the engine would run client 0's first
operation, and what that says about every operation of the run (a `Check`)."""

from __future__ import annotations

import contextlib
import json
import os
import re
import signal
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path

import psutil

from knee.preflight.rules import Check
from knee.scenario import ExecGroup

PROBE_CAP_S = 10.0  # the longest `knee doctor` lets an exec command run once


@dataclass(frozen=True)
class Probe:
    """An exec group's command run once, as the engine would run client 0's first operation."""

    program: str
    timeout_s: float
    code: int | None = None  # its exit status; None: killed by a signal, or stopped
    signal: int | None = None
    timed_out: bool = False
    stdout: str = ""
    stderr: str = ""
    error: str = ""  # it could not start
    rss: int | None = None  # its peak resident memory (bytes), sampled while it ran; None: too quick to sample


def _fill(text: str) -> str:
    return text.replace("${client}", "0").replace("${iteration}", "0")


def _kill_group(pgid: int) -> None:
    with contextlib.suppress(OSError):
        os.killpg(pgid, signal.SIGKILL)


def run_once(g: ExecGroup, cap_s: float = PROBE_CAP_S) -> Probe | None:
    """Run the command once with ${client} and ${iteration} as 0, its env and cwd, stdin empty, for its timeout
    (at most `cap_s`); its process group is killed afterwards, as the engine does. None: a placeholder it cannot
    fill (${stage})."""
    argv = [_fill(a) for a in g.argv]
    env = {k: _fill(v) for k, v in g.env.items()}
    if any("${" in s for s in (*argv, *env.values())):
        return None
    timeout = min(g.timeout, cap_s)
    try:
        proc = subprocess.Popen(
            argv,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            env={**os.environ, **env},
            cwd=g.cwd,
            process_group=0,
        )
    except OSError as exc:
        where = f" (cwd {g.cwd!r})" if g.cwd is not None and not os.path.isdir(g.cwd) else ""
        return Probe(argv[0], timeout, error=f"{exc.strerror or exc}{where}")
    deadline = time.monotonic() + timeout
    timed_out, peak, pause = False, 0, 0.002
    try:
        while True:
            try:
                out, err = proc.communicate(timeout=max(0.0, min(pause, deadline - time.monotonic())))
                break
            except subprocess.TimeoutExpired:
                if time.monotonic() >= deadline:
                    timed_out = True
                    _kill_group(proc.pid)
                    out, err = _drain(proc)
                    break
                # its resident memory, sampled while it runs (the exit status's ru_maxrss would count the
                # Python process it was forked from)
                peak = max(peak, _tree_peak_rss(proc.pid))
                pause = min(2 * pause, 0.1)
    finally:
        _kill_group(proc.pid)  # after an exit, whatever it left running
        proc.wait()
    rc = proc.returncode
    return Probe(
        argv[0],
        timeout,
        code=rc if rc >= 0 and not timed_out else None,
        signal=-rc if rc < 0 and not timed_out else None,
        timed_out=timed_out,
        stdout=out.decode(errors="replace"),
        stderr=err.decode(errors="replace"),
        rss=peak or None,
    )


def _tree_peak_rss(pid: int) -> int:
    """The peak resident memory (VmHWM) of a process and its descendants so far, in bytes (0: not known)."""
    try:
        tree = [pid, *(p.pid for p in psutil.Process(pid).children(recursive=True))]
    except psutil.Error:
        return 0
    total = 0
    for p in tree:
        with contextlib.suppress(OSError, ValueError):
            status = Path(f"/proc/{p}/status").read_text()
            total += next((int(ln.split()[1]) * 1024 for ln in status.splitlines() if ln.startswith("VmHWM:")), 0)
    return total


def _drain(proc: subprocess.Popen[bytes]) -> tuple[bytes, bytes]:
    try:
        return proc.communicate(timeout=2)
    except subprocess.TimeoutExpired:  # a process that left the group still holds its output open
        for f in (proc.stdout, proc.stderr):
            if f is not None:
                f.close()
        return b"", b""


def _last_line(text: str, width: int = 200) -> str:
    lines = [ln.strip() for ln in text.splitlines() if ln.strip()]
    return lines[-1][:width] if lines else ""


def _matches(pattern: str, text: str) -> bool:
    """As the engine holds a check's pattern against the output: line by line, as grep does (`^` and `$` at every
    line's ends; crates/engine/src/spec/mod.rs `line_regex`)."""
    try:
        return re.search(pattern, text, re.MULTILINE) is not None
    except re.error:  # a pattern only Rust's regex reads: the run checks it
        return True


def _quoted(text: str, width: int = 200) -> str:
    """`text` in quotes with its newlines escaped, as a run's failure reason shows it: '"1\\n"'."""
    return json.dumps(text[:width], ensure_ascii=False) + ("…" if len(text) > width else "")


def probe_check(g: ExecGroup, p: Probe) -> Check | None:
    """What running the command once says about every operation of the run (None: it succeeded)."""
    who = f"the command {p.program!r}, run once as client 0's first operation,"
    if p.error:
        return Check("command", f"{who} could not start: {p.error}. Fix the command or its cwd.", True)
    if p.timed_out:
        if p.timeout_s < g.timeout:
            return Check(
                "command",
                f"{who} was still running after {p.timeout_s:g} s, when knee doctor stopped it (a run allows "
                f"{g.timeout:g} s): fine if it is that slow; otherwise check that it does not wait for input "
                "(its stdin is empty).",
            )
        return Check(
            "command",
            f"{who} did not finish within its timeout ({g.timeout:g} s) and was killed: a run counts every such "
            "operation as hung. Fix: a longer timeout (--timeout, or timeout in the scenario), or check that it "
            "does not wait for input (its stdin is empty).",
            True,
        )
    said = _last_line(p.stderr) or _last_line(p.stdout)
    quote = f', saying "{said}"' if said else ""
    rerun = "run it by hand to see why, fix that, then run knee doctor again"
    if p.signal is not None:
        name = signal.Signals(p.signal).name if p.signal in signal.valid_signals() else str(p.signal)
        return Check(
            "command",
            f"{who} was killed by signal {p.signal} ({name}){quote}: a run counts that as a failure; {rerun}.",
            True,
        )
    if p.code:
        return Check(
            "command",
            f"{who} exited with code {p.code}{quote}: a run counts every operation that ends like this as failed; "
            f"{rerun}.",
            True,
        )
    for stream, pattern, text in (("stdout", g.expect_stdout, p.stdout), ("stderr", g.expect_stderr, p.stderr)):
        if pattern is not None and not _matches(pattern, text):
            got = f"it wrote {_quoted(text)}" if text else "it wrote nothing there"
            return Check(
                "command",
                f"{who} succeeded, but its {stream} does not match expect_{stream} {pattern!r} ({got}): a run counts "
                f"every such operation as failed. Fix the pattern (--expect-{stream}) or the command.",
                True,
            )
    if g.expect_file is not None and "${" not in (path := _fill(g.expect_file.path)):
        try:
            size: int | None = os.stat(path).st_size
        except OSError:
            size = None
        if size is None or size < g.expect_file.min_size:
            left = f"left no file {path}" if size is None else f"left {path} with {size} bytes"
            return Check(
                "command",
                f"{who} succeeded but {left} (expect_file wants at least {g.expect_file.min_size} bytes): a run "
                "counts every such operation as failed. Fix the path (--expect-file) or the command.",
                True,
            )
    return None
