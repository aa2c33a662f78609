"""The floor: the least HTTP/1.1 client that can be written (bench/bounds/*.c, one write and one read per request,
no parsing, no clock, no histogram), run beside the generators in the keep-alive and new-connection scenarios. Its
requests per CPU-s are the kernel's TCP work on loopback and nothing else: what no generator can beat here, so
knee's share of it says how much of a request's CPU is knee's own (issue 41)."""

from __future__ import annotations

import atexit
import re
import shutil
import subprocess
import tempfile
from pathlib import Path
from urllib.parse import urlsplit

from measure import Measured
from tool import BENCH, ParseError, Run, Sample, Tool, first_line

SOURCES = {"keepalive": "keepalive_epoll", "close": "newconn_epoll"}
_BUILT: dict[str, Path] = {}


class Floor(Tool):
    name = "floor"
    modes = tuple(SOURCES)

    def binary(self) -> str | None:
        return shutil.which("gcc")

    def version(self) -> str:
        names = " and ".join(f"bench/bounds/{s}.c" for s in SOURCES.values())
        return f"{names}, built by {first_line(['gcc', '--version'])} -O2"

    def program(self, mode: str) -> Path:
        """The mode's client, compiled once per benchmark process."""
        name = SOURCES[mode]
        if name not in _BUILT:
            where = tempfile.mkdtemp(prefix="knee-bench-floor-")
            atexit.register(shutil.rmtree, where, ignore_errors=True)
            out = Path(where) / name
            subprocess.run(["gcc", "-O2", "-o", str(out), str(BENCH / "bounds" / f"{name}.c")], check=True)
            _BUILT[name] = out
        return _BUILT[name]

    def command(self, run: Run) -> list[str]:
        port = urlsplit(run.url).port
        return [str(self.program(run.mode)), str(port), str(run.concurrency), str(run.duration_s)]

    def parse(self, measured: Measured, run: Run) -> Sample:
        found = re.search(r"requests (\d+)", measured.stdout)
        if measured.returncode != 0 or found is None:
            raise ParseError("no request count")
        requests = int(found.group(1))
        # no latencies (it keeps no clock per request) and no status check (nginx's count is held against its own)
        return Sample(requests, requests / run.duration_s, None, None, 0)
