"""The exec baselines: a C fork/exec loop, `xargs -P`, and Python's subprocess, each running /bin/true."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys

from measure import Measured
from tool import BENCH, TOOLS_BIN, ParseError, Run, Sample, Tool, first_line

TRUE = "/bin/true"


def _json_sample(measured: Measured) -> Sample:
    try:
        data = json.loads(measured.stdout.strip().splitlines()[-1])
    except (IndexError, json.JSONDecodeError) as exc:
        raise ParseError(f"no JSON result line: {exc}") from exc
    ops, failed = int(data["ops"]), int(data["failed"])
    return Sample(ops + failed, ops / float(data["elapsed_s"]), None, None, failed)


class ForkExecC(Tool):
    name = "forkexec-c"
    modes = ("exec",)

    def binary(self) -> str | None:
        target = TOOLS_BIN / "forkexec"
        source = BENCH / "forkexec.c"
        if not target.exists() or target.stat().st_mtime < source.stat().st_mtime:
            cc = shutil.which("cc") or shutil.which("gcc")
            if cc is None:
                return None
            TOOLS_BIN.mkdir(parents=True, exist_ok=True)
            subprocess.run([cc, "-O2", "-o", str(target), str(source)], check=True, timeout=60)
        return str(target)

    def version(self) -> str:
        return "bench/forkexec.c, " + first_line([shutil.which("cc") or "cc", "--version"])

    def command(self, run: Run) -> list[str]:
        return [self.binary() or "forkexec", str(run.concurrency), str(run.duration_s), TRUE]

    def parse(self, measured: Measured, run: Run) -> Sample:
        return _json_sample(measured)


class Xargs(Tool):
    """Count-based: runs `run.expected_ops` operations (sized from the C loop's rate) and is timed by its wall clock."""

    name = "xargs"
    modes = ("exec",)

    def binary(self) -> str | None:
        return shutil.which("xargs")

    def version(self) -> str:
        return first_line([self.binary() or "xargs", "--version"])

    def command(self, run: Run) -> list[str]:
        items = run.workdir / "xargs-items.txt"
        items.write_text("x\n" * run.expected_ops)
        return [self.binary() or "xargs", "-P", str(run.concurrency), "-n", "1", "-a", str(items), TRUE]

    def parse(self, measured: Measured, run: Run) -> Sample:
        if measured.returncode != 0:
            raise ParseError(f"xargs exited {measured.returncode}: {measured.stderr.strip()[-200:]}")
        return Sample(run.expected_ops, run.expected_ops / measured.wall_s, None, None, 0)


class PySubprocess(Tool):
    name = "python-subprocess"
    modes = ("exec",)

    def binary(self) -> str | None:
        return sys.executable

    def version(self) -> str:
        return "Python " + sys.version.split()[0]

    def command(self, run: Run) -> list[str]:
        script = BENCH / "pyexec.py"
        return [sys.executable, str(script), str(run.concurrency), str(run.duration_s), TRUE]

    def parse(self, measured: Measured, run: Run) -> Sample:
        return _json_sample(measured)
