"""`make bench`, WebSocket (issue 39): knee's echo round trips per CPU-s against the least client, and the memory of
10 000 held connections.

Node's `ws` server (bench/ws_server.js, one process on core 0, started afresh for every run, its counts read when it
ends). On core 1, in repetitions whose order rotates: `knee run ws://…/echo --message hello -c CLIENTS -d D` and
bench/bounds/ws_echo_epoll.c, the least echo client (a ready-made masked frame written, its 7-byte echo read, epoll,
nothing else). k6, the tool users know for WebSocket load, is not built here: it is under the AGPL (the machine's
package notes say not to use it), so the floor client is the yardstick, as bench/bounds.py's are for HTTP. CPU is the
generator's whole process tree (wait4), knee's Python start-up included. Every knee run's round trips are held
against the server's count of messages.

Then `knee run ws://…/push --mode listen --hold H -c HELD -n HELD`: HELD connections held at once, each read the
one message the server pushed; knee's peak resident set (VmHWM) is reported against the issue's 150 MB.

Writes bench/results/bench-ws.json and the section between the markers in docs/performance.md.
"""

from __future__ import annotations

import json
import os
import signal
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from paired import GENERATOR_CPU, SERVER_CPU, Row, finish, installed, median, paired, parser, pinned, repeated, section

BEGIN, END = "<!-- ws-bench: begin -->", "<!-- ws-bench: end -->"
VARIANTS = ("knee", "floor")
BENCH = Path(__file__).resolve().parent
NODE_MODULES = BENCH / "tools" / "node" / "node_modules"


class NodeWs:
    """bench/ws_server.js on a free port of core SERVER_CPU; `stop()` returns its counts."""

    def __enter__(self) -> NodeWs:
        from nginx_server import free_port

        self.port = free_port()
        env = {**os.environ, "NODE_PATH": str(NODE_MODULES)}
        self.proc = subprocess.Popen(
            ["taskset", "-c", str(SERVER_CPU), "node", str(BENCH / "ws_server.js"), str(self.port)],
            stdout=subprocess.PIPE, text=True, env=env,
        )  # fmt: skip
        assert self.proc.stdout is not None
        if self.proc.stdout.readline().strip() != "listening":
            raise SystemExit("bench/ws_server.js did not start: run bench/install.sh ws")
        return self

    def stop(self) -> dict[str, int]:
        self.proc.send_signal(signal.SIGTERM)
        out, _ = self.proc.communicate(timeout=30)
        return json.loads(out.strip().splitlines()[-1])

    def __exit__(self, *exc: object) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()


def floor_binary() -> Path:
    out = Path(tempfile.mkdtemp(prefix="knee-ws-floor-")) / "ws_echo_epoll"
    subprocess.run(["gcc", "-O2", "-o", str(out), str(BENCH / "bounds" / "ws_echo_epoll.c")], check=True)
    return out


def echo(variant: str, floor: Path, a: Any) -> Row:
    from measure import run_measured

    with NodeWs() as server, tempfile.TemporaryDirectory(prefix="knee-ws-bench-") as tmp:
        url = f"ws://127.0.0.1:{server.port}/echo"
        if variant == "knee":
            out = Path(tmp) / "knee.json"
            argv = [sys.executable, "-m", "knee", "run", url, "-q", "--message", "hello", "-c", str(a.clients),
                    "-d", f"{a.duration:g}s", "--json", str(out)]  # fmt: skip
        else:
            argv = [str(floor), str(server.port), str(a.clients), f"{a.duration:g}"]
        m = run_measured(argv, GENERATOR_CPU, a.duration * 3 + 60, cwd=tmp)
        counts = server.stop()
        if m.returncode != 0 or m.timed_out:
            raise SystemExit(f"{variant} failed ({m.returncode}):\n{m.stderr[-2000:]}")
        if variant == "knee":
            doc = json.loads(out.read_text())
            done, errors = doc["succeeded"], doc["failed"] + doc["hung"]
            if errors or counts["messages"] != doc["started"]:
                raise SystemExit(f"knee: {errors} errors, the server read {counts['messages']} of {doc['started']}")
        else:
            done, errors = int(m.stdout.split()[-1]), 0
    return {
        "variant": variant,
        "messages": done,
        "server_messages": counts["messages"],
        "cpu_s": m.cpu_s,
        "wall_s": m.wall_s,
        "per_cpu_s": done / m.cpu_s,
        "us_per_message": m.cpu_s / done * 1e6,
    }


def held(a: Any) -> Row:
    from measure import run_measured

    with NodeWs() as server, tempfile.TemporaryDirectory(prefix="knee-ws-held-") as tmp:
        out = Path(tmp) / "knee.json"
        argv = [sys.executable, "-m", "knee", "run", f"ws://127.0.0.1:{server.port}/push", "-q", "--mode", "listen",
                "--hold", f"{a.hold:g}s", "-c", str(a.held), "-n", str(a.held), "--timeout", f"{a.hold + 30:g}s",
                "--json", str(out)]  # fmt: skip
        m = run_measured(argv, GENERATOR_CPU, a.hold * 4 + 120, cwd=tmp)
        counts = server.stop()
        if m.returncode != 0 or m.timed_out:
            raise SystemExit(f"held connections failed ({m.returncode}):\n{m.stderr[-2000:]}")
        doc = json.loads(out.read_text())
    return {
        "held": a.held,
        "hold_s": a.hold,
        "succeeded": doc["succeeded"],
        "failed": doc["failed"] + doc["hung"],
        "messages_received": doc["messages_received"],
        "server_connections": counts["connections"],
        "server_most_open": counts["most_open"],
        "maxrss_mb": m.maxrss_mb,
        "cpu_s": m.cpu_s,
        "wall_s": m.wall_s,
    }


def section_from(data: dict[str, Any]) -> str:
    a, rows, h = data["args"], data["runs"], data["held"]
    ratio = paired(rows, "knee", "floor")
    by = {v: [r for r in rows if r["variant"] == v] for v in VARIANTS}
    return section(
        BEGIN,
        [
            f"## WebSocket (issue 39): echo round trips, {a['clients']} clients, and {h['held']:,} held connections",
            "",
            f"`python bench/ws_bench.py --duration {a['duration']:g} --reps {a['reps']}` (part of `make bench`): "
            "Node's `ws` server (bench/ws_server.js) on core 0, started afresh for each run; on core 1, in turn, "
            f"`knee run ws://…/echo --message hello -c {a['clients']} -d {a['duration']:g}s` and the least echo "
            "client (bench/bounds/ws_echo_epoll.c: a ready-made masked frame written, its echo read, nothing else). "
            "k6 is not built here (AGPL), so the floor is the yardstick. CPU is the process tree's (wait4), knee's "
            "start-up included; every knee run's round trips equal the server's count of messages. Medians:",
            "",
            "| client | round trips | CPU s | round trips per CPU-s | µs CPU per round trip |",
            "|---|---|---|---|---|",
            *(
                f"| {'knee' if v == 'knee' else 'the floor (ws_echo_epoll.c)'} | {median(by[v], 'messages'):,.0f} "
                f"| {median(by[v], 'cpu_s'):.2f} | {median(by[v], 'per_cpu_s'):,.0f} "
                f"| {median(by[v], 'us_per_message'):.2f} |"
                for v in VARIANTS
            ),
            "",
            f"knee makes **{statistics.median(ratio):.2f}×** the floor's round trips per CPU-s "
            f"({ratio[0]:.2f}–{ratio[-1]:.2f} over the repetitions). Both are bound by the one-core server here "
            "(its round trips per second are the runs' rates), so the figure is per CPU-s of the generator.",
            "",
            f"Held: `knee run ws://…/push --mode listen --hold {h['hold_s']:g}s -c {h['held']} -n {h['held']}`: "
            f"{h['succeeded']:,} connections held at once (the server saw {h['server_most_open']:,} open together, "
            f"{h['server_connections']:,} in all), {h['messages_received']:,} pushed messages read, {h['failed']} "
            f"failed; knee's peak resident set **{h['maxrss_mb']:.0f} MB** (the issue's bound: 150 MB), "
            f"{h['cpu_s']:.1f} CPU-s over {h['wall_s']:.1f} s.",
        ],
        data,
        "bench-ws.json",
        END,
    )


def main(argv: list[str] | None = None) -> int:
    p = parser(__doc__, 5, "client", "bench-ws.json", duration=5, note=True)
    p.add_argument("--held", type=int, default=10_000, help="connections held at once (default 10 000)")
    p.add_argument("--hold", type=float, default=10.0, help="seconds each is held (default 10)")
    a = p.parse_args(argv)
    installed(NODE_MODULES.joinpath("ws").is_dir, "ws", "Node's ws package")
    floor = floor_binary()
    load_before = pinned()
    rows = repeated(a.reps, VARIANTS, lambda variant: echo(variant, floor, a), pause_s=1)
    finish(a, load_before, rows, section_from, held=held(a))
    return 0


if __name__ == "__main__":
    sys.exit(main())
