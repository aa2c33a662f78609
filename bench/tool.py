"""What every generator in the benchmark provides: a command for a run, and a parser for its output."""

from __future__ import annotations

import re
import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path

from measure import Measured

BENCH = Path(__file__).resolve().parent
ROOT = BENCH.parent
TOOLS_BIN = BENCH / "tools" / "bin"
VENV_BIN = ROOT / ".venv" / "bin"


@dataclass
class Run:
    """One run's parameters. mode: keepalive | close (new connection per request) | h2 (HTTP/2 with prior
    knowledge) | https | https-close (a new TLS connection, full handshake, per request) | exec (/bin/true) |
    exec-hold (one `sleep 20` per client: every client holds a running process at once) | flow (a no-op
    Python flow) | worker (a no-op worker program in C)."""

    mode: str
    concurrency: int  # clients; HTTP/2: streams in flight in all (connections × streams)
    duration_s: int
    url: str  # empty for exec
    workdir: Path
    expected_ops: int = 0  # count-based tools (xargs) run this many operations
    streams: int = 1  # HTTP/2: concurrent streams per connection

    @property
    def connections(self) -> int:
        """HTTP/2: connections (⌈concurrency / streams⌉)."""
        return -(-self.concurrency // self.streams)


@dataclass
class Sample:
    """What a tool's own output says about a run (latencies in ms; None when the tool does not report it)."""

    requests: int
    rps: float
    p50_ms: float | None
    p99_ms: float | None
    errors: int
    own_cpu_s: float | None = None  # the generator's own CPU, without its child processes (knee reports it)
    started: int | None = None  # knee: every operation it started (succeeded, failed, hung, abandoned, warm-up)


class ParseError(Exception):
    """The tool's output did not hold the numbers it should have."""


class Tool:
    name = ""
    modes: tuple[str, ...] = ()

    def binary(self) -> str | None:
        """The tool's program, found by its name (`find_binary`); None when it is not installed."""
        return find_binary(self.name)

    def available(self) -> bool:
        return self.binary() is not None

    def version(self) -> str:
        raise NotImplementedError

    def command(self, run: Run) -> list[str]:
        raise NotImplementedError

    def parse(self, measured: Measured, run: Run) -> Sample:
        raise NotImplementedError


def find_binary(name: str) -> str | None:
    """A tool installed by bench/install.sh, in the venv, or on PATH."""
    for candidate in (TOOLS_BIN / name, VENV_BIN / name):
        if candidate.is_file():
            return str(candidate)
    return shutil.which(name)


def first_line(argv: list[str]) -> str:
    try:
        out = subprocess.run(argv, check=False, capture_output=True, text=True, timeout=20)
    except (OSError, subprocess.TimeoutExpired) as exc:
        return f"unknown ({exc})"
    text = (out.stdout or out.stderr).strip()
    return text.splitlines()[0].strip() if text else "unknown"


def go_module_version(binary: str) -> str:
    """The module version a `go install` recorded in the binary's build info (`go version -m`)."""
    try:
        out = subprocess.run(["go", "version", "-m", binary], check=False, capture_output=True, text=True, timeout=20)
    except OSError:
        return "unknown (go not installed)"
    mod = re.search(r"^\s*mod\s+\S+\s+(\S+)", out.stdout, re.MULTILINE)
    return mod.group(1) if mod else "unknown"


def debian_version(package: str) -> str | None:
    """The Debian package's version (wrk and ab print none useful of their own)."""
    try:
        out = subprocess.run(
            ["dpkg-query", "-W", "-f", "${Version}", package], check=False, capture_output=True, text=True, timeout=20
        )
    except (OSError, subprocess.TimeoutExpired):
        return None
    return out.stdout.strip() or None


def search(pattern: str, text: str, what: str) -> re.Match[str]:
    match = re.search(pattern, text, re.MULTILINE)
    if match is None:
        raise ParseError(f"no {what} in the output ({pattern!r})")
    return match


_UNITS_MS = {"ns": 1e-6, "us": 1e-3, "µs": 1e-3, "ms": 1.0, "s": 1e3, "m": 60e3, "h": 3600e3}


def to_ms(value: str, unit: str) -> float:
    return float(value) * _UNITS_MS[unit]
