"""`make bench`, gRPC (issue 38): knee's unary calls per generator CPU-s against ghz's.

grpc-go's own helloworld greeter_server (built by bench/install.sh grpc-examples), one process on core 0, started
afresh for every run. On core 1, in repetitions whose order rotates: `knee run grpc://…/helloworld.Greeter/SayHello
--proto helloworld.proto --message '{"name": "knee"}' -c CLIENTS -d D` and ghz, the gRPC load tool users know, with
the same clients and one connection per client for both (`ghz -c CLIENTS --connections CLIENTS`: ghz's default is one
connection for every client, which is not what many clients of a service do). CPU is the generator's whole process
tree (wait4), knee's Python start-up included. A run with a failed call is refused.

Writes bench/results/bench-grpc.json and the section between the markers in docs/performance.md.
"""

from __future__ import annotations

import json
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from paired import GENERATOR_CPU, SERVER_CPU, Row, finish, installed, median, paired, parser, pinned, repeated, section

BEGIN, END = "<!-- grpc-bench: begin -->", "<!-- grpc-bench: end -->"
VARIANTS = ("knee", "ghz", "tonic")
BENCH = Path(__file__).resolve().parent
TOOLS = BENCH / "tools" / "bin"
PROTO = BENCH.parent / "examples" / "grpc" / "helloworld.proto"


class Greeter:
    """grpc-go's greeter_server on a free port of core SERVER_CPU."""

    def __enter__(self) -> Greeter:
        from nginx_server import free_port

        self.port = free_port()
        self.proc = subprocess.Popen(
            ["taskset", "-c", str(SERVER_CPU), str(TOOLS / "grpc_greeter_server"), f"-port={self.port}"],
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
        )  # fmt: skip
        deadline = time.monotonic() + 15
        while True:
            try:
                socket.create_connection(("127.0.0.1", self.port), timeout=1).close()
                return self
            except OSError:
                if time.monotonic() > deadline or self.proc.poll() is not None:
                    raise SystemExit("grpc_greeter_server did not start") from None
                time.sleep(0.05)

    def __exit__(self, *exc: object) -> None:
        self.proc.kill()
        self.proc.wait()


def one(variant: str, a: Any) -> Row:
    from measure import run_measured

    with Greeter() as server, tempfile.TemporaryDirectory(prefix="knee-grpc-bench-") as tmp:
        out = Path(tmp) / "out.json"
        if variant == "knee":
            argv = [sys.executable, "-m", "knee", "run", f"grpc://127.0.0.1:{server.port}/helloworld.Greeter/SayHello",
                    "-q", "--proto", str(PROTO), "--message", '{"name": "knee"}', "-c", str(a.clients),
                    "-d", f"{a.duration:g}s", "--json", str(out)]  # fmt: skip
        elif variant == "tonic":
            argv = [str(TOOLS / "tonic-client"), str(server.port), str(a.clients), f"{a.duration:g}"]
        else:
            argv = [str(TOOLS / "ghz"), "--insecure", "--proto", str(PROTO), "--call", "helloworld.Greeter.SayHello",
                    "-d", '{"name": "ghz"}', "-c", str(a.clients), "--connections", str(a.clients),
                    "-z", f"{a.duration:g}s", "-O", "json", "-o", str(out), f"127.0.0.1:{server.port}"]  # fmt: skip
        m = run_measured(argv, GENERATOR_CPU, a.duration * 3 + 60, cwd=tmp)
        if m.returncode != 0 or m.timed_out:
            raise SystemExit(f"{variant} failed ({m.returncode}):\n{m.stderr[-2000:]}")
        doc = json.loads(out.read_text()) if variant != "tonic" else {}
    if variant == "knee":
        done, errors = doc["succeeded"], doc["failed"] + doc["hung"]
        ended = 0
    elif variant == "tonic":
        done, errors = (int(x) for x in m.stdout.split()[-2:])
        ended = 0
    else:
        codes = doc.get("statusCodeDistribution") or {}
        done = codes.get("OK", 0)
        # ghz closes its connections at its end with calls in flight and counts them Unavailable ("use of closed
        # network connection"): those are its abandoned calls (at most one a client), not the server's failures
        ends = doc.get("errorDistribution") or {}
        ended = sum(n for e, n in ends.items() if "use of closed network connection" in e)
        errors = sum(n for c, n in codes.items() if c != "OK") - ended
        if ended > a.clients:
            errors += ended
    if errors:
        raise SystemExit(f"{variant}: {errors} calls failed")
    return {
        "variant": variant,
        "calls": done,
        "ended_in_flight": ended,
        "cpu_s": m.cpu_s,
        "wall_s": m.wall_s,
        "per_cpu_s": done / m.cpu_s,
        "us_per_call": m.cpu_s / done * 1e6,
        "maxrss_mb": m.maxrss_mb,
    }


def clients_held(a: Any) -> Row:
    """knee at `a.many` clients, a connection each, for `a.duration` s: its peak resident set."""
    from measure import run_measured

    with Greeter() as server, tempfile.TemporaryDirectory(prefix="knee-grpc-many-") as tmp:
        out = Path(tmp) / "out.json"
        argv = [sys.executable, "-m", "knee", "run", f"grpc://127.0.0.1:{server.port}/helloworld.Greeter/SayHello",
                "-q", "--proto", str(PROTO), "--message", '{"name": "knee"}', "-c", str(a.many),
                "-d", f"{a.duration:g}s", "--timeout", "30s", "--json", str(out)]  # fmt: skip
        m = run_measured(argv, GENERATOR_CPU, a.duration * 6 + 120, cwd=tmp)
        if m.returncode != 0 or m.timed_out:
            raise SystemExit(f"{a.many} clients failed ({m.returncode}):\n{m.stderr[-2000:]}")
        doc = json.loads(out.read_text())
    return {
        "clients": a.many,
        "succeeded": doc["succeeded"],
        "failed": doc["failed"] + doc["hung"],
        "connect_count": doc["connect_ms"]["count"],
        "maxrss_mb": m.maxrss_mb,
        "cpu_s": m.cpu_s,
        "wall_s": m.wall_s,
    }


def section_from(data: dict[str, Any]) -> str:
    a, rows, many = data["args"], data["runs"], data.get("many")
    ratio = paired(rows, "knee", "ghz")
    variants = [v for v in VARIANTS if any(r["variant"] == v for r in rows)]
    by = {v: [r for r in rows if r["variant"] == v] for v in variants}
    busy = {v: median(by[v], "cpu_s") / median(by[v], "wall_s") for v in variants}
    calls_ratio = median(by["knee"], "calls") / median(by["ghz"], "calls")
    names = {
        "knee": "knee (its own HTTP/2 client)",
        "ghz": "ghz (grpc-go)",
        "tonic": "the least client on tonic (bench/tonic_client)",
    }
    lines = [
        f"## gRPC (issue 38): unary calls, {a['clients']} clients",
        "",
        f"`python bench/grpc_bench.py --duration {a['duration']:g} --reps {a['reps']}` (part of `make bench`): "
        "grpc-go's own helloworld greeter_server on core 0, started afresh for each run; on core 1, in turn, "
        f"`knee run grpc://…/helloworld.Greeter/SayHello --proto helloworld.proto -c {a['clients']} "
        f"-d {a['duration']:g}s`, `ghz -c {a['clients']} --connections {a['clients']} -z {a['duration']:g}s`"
        + (
            " and bench/tonic_client (tonic's generic client, prost-derived messages, nothing else: what knee's "
            "gRPC would cost on tonic's transport)"
            if "tonic" in by
            else ""
        )
        + ", a connection per client for all. CPU is the process tree's (wait4), knee's Python start-up included; "
        "no run had a failed call (ghz counts the calls in flight when it closes its connections at its end as "
        "Unavailable: those, at most one a client, are left out, as knee's abandoned ones are). Medians:",
        "",
        "| client | calls | CPU s | calls per CPU-s | µs CPU per call | peak RSS MB |",
        "|---|---|---|---|---|---|",
        *(
            f"| {names[v]} | {median(by[v], 'calls'):,.0f} | {median(by[v], 'cpu_s'):.2f} "
            f"| {median(by[v], 'per_cpu_s'):,.0f} | {median(by[v], 'us_per_call'):.1f} "
            f"| {median(by[v], 'maxrss_mb'):.0f} |"
            for v in variants
        ),
        "",
        f"knee makes **{statistics.median(ratio):.2f}×** ghz's calls per CPU-s ({ratio[0]:.2f}–{ratio[-1]:.2f} "
        f"over the paired repetitions; the issue's bound: 2×), and {calls_ratio:.2f}× its calls in the same time: "
        f"ghz used {busy['ghz']:.0%} of its core (it is the bound of its runs), knee {busy['knee']:.0%} of its own "
        "(its runs are bound by the one-core server).",
    ]
    if "tonic" in by:
        t = paired(rows, "knee", "tonic")
        lines += [
            "",
            f"Against tonic's transport: knee makes **{statistics.median(t):.2f}×** its calls per CPU-s "
            f"({t[0]:.2f}–{t[-1]:.2f}); tonic used {busy['tonic']:.0%} of its core.",
        ]
    if many:
        lines += [
            "",
            f"{many['clients']:,} clients (`-c {many['clients']}`, a connection each, {a['duration']:g} s): "
            f"{many['succeeded']:,} calls, {many['failed']} failed, {many['connect_count']:,} connections opened; "
            f"knee's peak resident set **{many['maxrss_mb']:.0f} MB**, {many['cpu_s']:.1f} CPU-s over "
            f"{many['wall_s']:.1f} s.",
        ]
    return section(BEGIN, lines, data, "bench-grpc.json", END)


def main(argv: list[str] | None = None) -> int:
    p = parser(__doc__, 5, "client", "bench-grpc.json", duration=5, note=True)
    p.add_argument("--many", type=int, default=10_000, help="clients of the peak-RSS run (default 10 000)")
    a = p.parse_args(argv)
    for tool, name in (("grpc-examples", "grpc_greeter_server"), ("ghz", "ghz"), ("tonic", "tonic-client")):
        installed((TOOLS / name).exists, tool, name)
    load_before = pinned()
    rows = repeated(a.reps, VARIANTS, lambda variant: one(variant, a), pause_s=1)
    finish(a, load_before, rows, section_from, many=clients_held(a))
    return 0


if __name__ == "__main__":
    sys.exit(main())
