"""The peer HTTP load generators: wrk, ab, oha, hey, vegeta, Locust — how to run each and read its output."""

from __future__ import annotations

import json
import re
import subprocess
from typing import ClassVar

from measure import Measured
from tool import BENCH, ParseError, Run, Sample, Tool, debian_version, first_line, go_module_version, search, to_ms


class UrlTool(Tool):
    """A generator of requests to one URL: its program, its own flags, its flags for the connection mode, the URL."""

    modes = ("keepalive", "close")
    mode_flags: ClassVar[dict[str, tuple[str, ...]]] = {}

    def flags(self, run: Run) -> list[str]:
        raise NotImplementedError

    def command(self, run: Run) -> list[str]:
        return [self.binary() or self.name, *self.flags(run), *self.mode_flags.get(run.mode, ()), run.url]


class Wrk(UrlTool):
    name = "wrk"
    modes = ("keepalive", "close", "https", "https-close")
    mode_flags: ClassVar[dict[str, tuple[str, ...]]] = {
        "close": ("-H", "Connection: close"),
        "https-close": ("-H", "Connection: close"),
    }

    def version(self) -> str:
        deb = debian_version("wrk")
        return f"wrk {deb} (Debian)" if deb else first_line([self.binary() or "wrk", "-v"]).split(" Copyright")[0]

    def flags(self, run: Run) -> list[str]:
        return ["-t1", f"-c{run.concurrency}", f"-d{run.duration_s}s", "--latency"]

    def parse(self, measured: Measured, run: Run) -> Sample:
        out = measured.stdout
        requests = int(search(r"^\s*(\d+) requests in", out, "request count").group(1))
        rps = float(search(r"^Requests/sec:\s*([\d.]+)", out, "Requests/sec").group(1))
        p50 = search(r"^\s*50%\s+([\d.]+)(us|ms|s|m|h)\s*$", out, "p50")
        p99 = search(r"^\s*99%\s+([\d.]+)(us|ms|s|m|h)\s*$", out, "p99")
        errors = 0
        sock = re.search(r"Socket errors: connect (\d+), read (\d+), write (\d+), timeout (\d+)", out)
        if sock:
            errors += sum(int(g) for g in sock.groups())
        non2xx = re.search(r"Non-2xx or 3xx responses: (\d+)", out)
        errors += int(non2xx.group(1)) if non2xx else 0
        return Sample(requests, rps, to_ms(*p50.groups()), to_ms(*p99.groups()), errors)


class Ab(UrlTool):
    name = "ab"
    modes = ("keepalive", "close", "https", "https-close")
    mode_flags: ClassVar[dict[str, tuple[str, ...]]] = {"keepalive": ("-k",), "https": ("-k",)}

    def version(self) -> str:
        own = first_line([self.binary() or "ab", "-V"]).removeprefix("This is ApacheBench, ").split(" <")[0]
        deb = debian_version("apache2-utils")
        return f"ApacheBench {own}, apache2-utils {deb} (Debian)" if deb else f"ApacheBench {own}"

    def flags(self, run: Run) -> list[str]:
        # -t alone caps ab at 50 000 requests; -n after it lifts the cap (ab allocates per request, lazily).
        return ["-q", "-t", str(run.duration_s), "-n", str(200_000 * run.duration_s), "-c", str(run.concurrency)]

    def parse(self, measured: Measured, run: Run) -> Sample:
        out = measured.stdout
        requests = int(search(r"^Complete requests:\s*(\d+)", out, "Complete requests").group(1))
        rps = float(search(r"^Requests per second:\s*([\d.]+)", out, "Requests per second").group(1))
        failed = int(search(r"^Failed requests:\s*(\d+)", out, "Failed requests").group(1))
        non2xx = re.search(r"^Non-2xx responses:\s*(\d+)", out, re.MULTILINE)
        writes = re.search(r"^Write errors:\s*(\d+)", out, re.MULTILINE)
        errors = failed + (int(non2xx.group(1)) if non2xx else 0) + (int(writes.group(1)) if writes else 0)
        # ab's percentile table is in whole milliseconds.
        p50 = float(search(r"^\s*50%\s+(\d+)", out, "p50").group(1))
        p99 = float(search(r"^\s*99%\s+(\d+)", out, "p99").group(1))
        return Sample(requests, rps, p50, p99, errors)


class H2load(UrlTool):
    """nghttp2's h2load (Debian nghttp2-client): HTTP/2, the reference for knee's --http2."""

    name = "h2load"
    modes = ("h2",)

    def version(self) -> str:
        deb = debian_version("nghttp2-client")
        own = first_line([self.binary() or "h2load", "--version"])
        return f"{own}, nghttp2-client {deb} (Debian)" if deb else own

    def flags(self, run: Run) -> list[str]:
        # one thread (the generator's one core), the same connections and streams as knee's clients
        return ["-t", "1", "-c", str(run.connections), "-m", str(run.streams), "-D", str(run.duration_s)]

    def parse(self, measured: Measured, run: Run) -> Sample:
        out = measured.stdout
        # its duration in the unit that reads best: 1.00s, 999.77ms, 812us (nghttp2's util::format_duration)
        rps = float(search(r"^finished in [\d.]+(?:s|ms|us), ([\d.]+) req/s", out, "req/s").group(1))
        counts = search(
            r"^requests: (\d+) total, \d+ started, (\d+) done, (\d+) succeeded, (\d+) failed, (\d+) errored, "
            r"(\d+) timeout",
            out,
            "request counts",
        )
        done, succeeded = int(counts.group(2)), int(counts.group(3))
        non2xx = sum(int(n) for n in re.findall(r"(\d+) [345]xx", out))
        # h2load reports no latency percentiles (its "time for request" line is min/max/mean/sd)
        return Sample(done, rps, None, None, done - succeeded + non2xx)


class Oha(UrlTool):
    name = "oha"
    mode_flags: ClassVar[dict[str, tuple[str, ...]]] = {"close": ("--disable-keepalive",)}

    def version(self) -> str:
        return first_line([self.binary() or "oha", "--version"])

    def _json_flags(self) -> list[str]:
        help_text = subprocess.run(
            [self.binary() or "oha", "--help"], check=False, capture_output=True, text=True, timeout=20
        )
        if "--output-format" in help_text.stdout:
            return ["--output-format", "json"]
        return ["--json"]

    def flags(self, run: Run) -> list[str]:
        # -w: requests in flight at the deadline finish instead of counting as "aborted due to deadline".
        return ["--no-tui", *self._json_flags(), "-w", "-z", f"{run.duration_s}s", "-c", str(run.concurrency)]

    def parse(self, measured: Measured, run: Run) -> Sample:
        try:
            data = json.loads(measured.stdout)
        except json.JSONDecodeError as exc:
            raise ParseError(f"oha printed no JSON: {exc}") from exc
        statuses = {int(k): int(v) for k, v in data.get("statusCodeDistribution", {}).items()}
        failed = sum(int(v) for v in data.get("errorDistribution", {}).values())
        ok = sum(v for k, v in statuses.items() if 200 <= k < 400)
        requests = sum(statuses.values()) + failed
        pct = data["latencyPercentiles"]
        return Sample(
            requests=requests,
            rps=float(data["summary"]["requestsPerSec"]),
            p50_ms=float(pct["p50"]) * 1e3,
            p99_ms=float(pct["p99"]) * 1e3,
            errors=requests - ok,
        )


class Hey(UrlTool):
    name = "hey"
    mode_flags: ClassVar[dict[str, tuple[str, ...]]] = {"close": ("-disable-keepalive",)}

    def version(self) -> str:
        # hey has no version flag; the Go build info records the module version.
        return go_module_version(self.binary() or "hey")

    def flags(self, run: Run) -> list[str]:
        return ["-z", f"{run.duration_s}s", "-c", str(run.concurrency)]

    def parse(self, measured: Measured, run: Run) -> Sample:
        out = measured.stdout
        rps = float(search(r"Requests/sec:\s*([\d.]+)", out, "Requests/sec").group(1))
        p50 = float(search(r"^\s*50%+ in ([\d.]+) secs", out, "p50").group(1)) * 1e3
        p99 = float(search(r"^\s*99%+ in ([\d.]+) secs", out, "p99").group(1)) * 1e3
        statuses = {int(c): int(n) for c, n in re.findall(r"^\s*\[(\d+)\]\s+(\d+) responses", out, re.MULTILINE)}
        errors_part = out.split("Error distribution:", 1)
        failed = (
            sum(int(n) for n in re.findall(r"^\s*\[(\d+)\]", errors_part[1], re.MULTILINE))
            if len(errors_part) > 1
            else 0
        )
        ok = sum(v for k, v in statuses.items() if 200 <= k < 400)
        requests = sum(statuses.values()) + failed
        return Sample(requests, rps, p50, p99, requests - ok)


class Vegeta(Tool):
    name = "vegeta"
    modes = ("keepalive", "close")

    def version(self) -> str:
        binary = self.binary() or "vegeta"
        own = first_line([binary, "-version"]).removeprefix("Version:").strip()
        # `go install …@latest` leaves main.Version empty: the module's version is in the binary's build info
        return own or go_module_version(binary)

    def command(self, run: Run) -> list[str]:
        # attack | report: both are the generator, so one shell holds both and its rusage covers them.
        bin_ = self.binary() or "vegeta"
        targets = run.workdir / "vegeta-targets.txt"
        targets.write_text(f"GET {run.url}\n")
        keepalive = "-keepalive=false " if run.mode == "close" else ""
        attack = (
            f"{bin_} attack -rate=0 -workers={run.concurrency} -max-workers={run.concurrency} "
            f"-duration={run.duration_s}s {keepalive}-targets={targets}"
        )
        return ["sh", "-c", f"{attack} | {bin_} report -type=json"]

    def parse(self, measured: Measured, run: Run) -> Sample:
        try:
            data = json.loads(measured.stdout)
        except json.JSONDecodeError as exc:
            raise ParseError(f"vegeta report printed no JSON: {exc}") from exc
        requests = int(data["requests"])
        ok = sum(int(n) for code, n in data.get("status_codes", {}).items() if 200 <= int(code) < 400)
        return Sample(
            requests=requests,
            rps=float(data["rate"]),
            p50_ms=float(data["latencies"]["50th"]) / 1e6,
            p99_ms=float(data["latencies"]["99th"]) / 1e6,
            errors=requests - ok,
        )


class Locust(Tool):
    name = "locust"
    modes = ("keepalive", "flow")

    def version(self) -> str:
        return first_line([self.binary() or "locust", "--version"]).split(" from ")[0].removeprefix("locust ")

    def command(self, run: Run) -> list[str]:
        n = str(run.concurrency)
        if run.mode == "flow":  # a no-op task, no HTTP
            return [self.binary() or "locust", "-f", str(BENCH / "locust_noop.py"), "--headless", "--only-summary",
                    "-u", n, "-r", n, "-t", f"{run.duration_s}s"]  # fmt: skip
        return [
            self.binary() or "locust",
            "-f",
            str(BENCH / "locustfile.py"),
            "--headless",
            "--only-summary",
            "-u",
            n,
            "-r",
            n,
            "-t",
            f"{run.duration_s}s",
            "--host",
            run.url.rstrip("/"),
        ]

    def parse(self, measured: Measured, run: Run) -> Sample:
        # The summary tables Locust prints at exit (its CSV snapshots may miss the last second).
        out = measured.stdout + measured.stderr
        totals = search(r"^\s+Aggregated\s+(\d+)\s+(\d+)\(.*\|\s*([\d.]+)\s+[\d.]+\s*$", out, "Aggregated totals")
        pct = out.split("Response time percentiles", 1)
        if len(pct) < 2:
            raise ParseError("no percentile table in locust's summary")
        cells = search(r"^\s+Aggregated((?:\s+\d+){12})\s*$", pct[1], "Aggregated percentiles").group(1).split()
        # columns: 50% 66% 75% 80% 90% 95% 98% 99% 99.9% 99.99% 100% #reqs, in whole ms
        return Sample(
            requests=int(totals.group(1)),
            rps=float(totals.group(3)),
            p50_ms=float(cells[0]),
            p99_ms=float(cells[7]),
            errors=int(totals.group(2)),
        )
