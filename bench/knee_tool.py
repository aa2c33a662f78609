"""knee itself, driven through its CLI like any other generator: `knee run URL -c N -d Ds --json out.json`."""

from __future__ import annotations

import json
import shutil
import subprocess

from measure import Measured
from tool import BENCH, ROOT, TOOLS_BIN, ParseError, Run, Sample, Tool, first_line

HOLD_S = 20  # exec-hold: how long each client's process lives


class Knee(Tool):
    name = "knee"
    modes = ("keepalive", "close", "h2", "https", "https-close", "exec", "exec-hold", "flow", "worker")

    def version(self) -> str:
        return first_line([self.binary() or "knee", "--version"]).removeprefix("knee, version ")

    def command(self, run: Run) -> list[str]:
        out = run.workdir / "knee.json"
        # -q: no live progress line (like oha --no-tui); latency is still recorded for every request.
        common = ["-q", "-c", str(run.concurrency), "-d", f"{run.duration_s}s", "--json", str(out)]
        if run.mode == "exec":
            return [self.binary() or "knee", "run", *common, "--", "/bin/true"]
        if run.mode == "flow":
            return [self.binary() or "knee", "run", *common, "--python", "noopflow:noop", "--path", str(BENCH)]
        if run.mode == "worker":
            return [self.binary() or "knee", "run", *common, "--worker", "--", noop_worker()]
        if run.mode == "exec-hold":
            # One `sleep 20` per client: all 5 000 are alive together if the last starts within 20 s.
            hold = ["-q", "-c", str(run.concurrency), "--iterations", "1", "--timeout", "60s", "--json", str(out)]
            return [self.binary() or "knee", "run", *hold, "--", "sleep", str(HOLD_S)]
        argv = [self.binary() or "knee", "run", run.url, *common]
        if run.mode in ("close", "https-close"):
            argv.append("--new-connection")
        if run.mode == "h2":
            argv += ["--http2", "--streams", str(run.streams)]
        if run.mode.startswith("https"):
            # wrk and ab verify no certificate: neither does knee here; and every handshake a full one
            argv += ["--insecure", *(["--tls-resume", "off"] if run.mode == "https-close" else [])]
        return argv

    def parse(self, measured: Measured, run: Run) -> Sample:
        path = run.workdir / "knee.json"
        try:
            data = json.loads(path.read_text())
        except (OSError, json.JSONDecodeError) as exc:
            raise ParseError(f"knee wrote no readable {path.name}: {exc}") from exc
        if "groups" in data and "succeeded" not in data:  # an engine summary: one group
            data = data["groups"][0]
        succeeded, failed, hung = int(data["succeeded"]), int(data["failed"]), int(data.get("hung", 0))
        latency = data.get("latency_ms") or {}
        return Sample(
            requests=succeeded + failed + hung,
            rps=float(data.get("rate_hz") or succeeded / float(data["elapsed_s"])),
            p50_ms=float(latency["p50"]) if "p50" in latency else None,
            p99_ms=float(latency["p99"]) if "p99" in latency else None,
            errors=failed + hung,
            own_cpu_s=float(data["generator"]["cpu_s"]) if data.get("generator") else None,
            started=int(data["started"]) + int(data.get("warmup_ops", 0)) if "started" in data else None,
        )


def noop_worker() -> str:
    """examples/workers/c/noop_worker.c, compiled into bench/tools/bin when missing or older than its source."""
    source = ROOT / "examples" / "workers" / "c" / "noop_worker.c"
    binary = TOOLS_BIN / "noop_worker"
    if not binary.is_file() or binary.stat().st_mtime < source.stat().st_mtime:
        cc = shutil.which("cc") or shutil.which("gcc")
        if cc is None:
            raise ParseError("no C compiler (cc or gcc) for the no-op worker")
        TOOLS_BIN.mkdir(parents=True, exist_ok=True)
        subprocess.run([cc, "-O2", "-o", str(binary), str(source)], check=True, timeout=120)
    return str(binary)
