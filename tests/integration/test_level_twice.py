"""A level that contradicts both neighbours is measured again before the search believes it (docs/analysis.md "A
level measured twice").

The service is this test's own asyncio HTTP server: WORKERS workers of SERVICE_S each behind a FIFO queue that
keeps every request it read, so the requests a level abandons are still served after their clients have gone (as a
thread-pool server with a deep queue does). With `--settle 0`, the level the search measures right after 128
clients (4, to place the plateau's start) begins behind seconds of that backlog: it is measured again, does not
repeat, and is superseded. With the default settle it begins at rest and nothing is measured twice. A server that
truly refuses at 3 to 5 open connections is measured twice and kept."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from knee.model import RunRecord
from knee.store import RunDir

from conftest import knee_cli

WORKERS, SERVICE_S = 4, 0.100

SERVER = f"""
import asyncio
import sys

WORKERS, SERVICE_S = {WORKERS}, {SERVICE_S}
REFUSE = sys.argv[1] == "refuse"  # 503 while 3 to 5 connections are open: a truly non-monotone service
OK = b"HTTP/1.1 200 OK\\r\\nContent-Length: 2\\r\\n\\r\\nok"
BUSY = b"HTTP/1.1 503 Service Unavailable\\r\\nContent-Length: 4\\r\\n\\r\\nbusy"


async def main() -> None:
    queue: asyncio.Queue = asyncio.Queue()
    open_now = 0

    async def worker() -> None:
        while True:
            writer, done = await queue.get()
            await asyncio.sleep(SERVICE_S)
            try:
                writer.write(OK)
            except Exception:
                pass
            done.set()

    async def serve(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        nonlocal open_now
        open_now += 1
        served = 0
        try:
            while True:
                await reader.readuntil(b"\\r\\n\\r\\n")
                # a connection's first request is served: while a level's clients connect, the count passes 3 to 5
                served += 1
                if REFUSE and served > 1 and 3 <= open_now <= 5:
                    writer.write(BUSY)
                    continue
                done = asyncio.Event()
                await queue.put((writer, done))
                await done.wait()
        except (asyncio.IncompleteReadError, ConnectionError):
            pass
        finally:
            open_now -= 1
            writer.close()

    for _ in range(WORKERS):
        asyncio.ensure_future(worker())
    server = await asyncio.start_server(serve, "127.0.0.1", 0, backlog=1024)
    print(server.sockets[0].getsockname()[1], flush=True)
    async with server:
        await server.serve_forever()


asyncio.run(main())
"""


def _server(mode: str) -> Iterator[str]:
    proc = subprocess.Popen([sys.executable, "-c", SERVER, mode], stdout=subprocess.PIPE, text=True)
    try:
        assert proc.stdout is not None
        yield f"http://127.0.0.1:{int(proc.stdout.readline())}/"
    finally:
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait(timeout=10)


@pytest.fixture
def backlog_server() -> Iterator[str]:
    yield from _server("queue")


@pytest.fixture
def refusing_server() -> Iterator[str]:
    yield from _server("refuse")


def _search(url: str, out: Path, *extra: str, top: int = 128, seconds: str = "2s") -> RunRecord:
    proc = knee_cli(
        "sweep", url, "--levels", "auto", "--max-level", str(top), "-d", seconds, "--timeout", "10s", "--no-recovery",
        "--out", str(out), *extra, timeout=200,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stdout + proc.stderr
    (run,) = [p for p in out.iterdir() if p.is_dir()]
    return RunDir(run).load()


@pytest.mark.timeout(200)
def test_a_level_behind_a_backlog_is_measured_again_and_superseded(backlog_server: str, tmp_path: Path) -> None:
    record = _search(backlog_server, tmp_path / "runs", "--settle", "0")
    steps = [s for s in record.steps if s.phase == "sweep"]
    shown = [(s.level, s.groups["main"].rate_hz, s.superseded, s.reason) for s in steps]
    # the first level measured behind the backlog the level before it left: it is measured again, at rest (a level
    # measured again settles even with --settle 0), does not repeat, and is left out
    first = next((s for s in steps if s.superseded), None)
    assert first is not None, shown  # the levels searched, their rates and why: which ran behind a backlog
    again = next(s for s in steps if s.repeat_of == first.index)
    assert again.level == first.level and not again.superseded, shown
    assert again.reason.startswith(f"measuring {first.level} clients again: "), shown
    assert again.settle is not None and again.settle.settled, again.settle
    assert first.settle is None, first.settle  # --settle 0: the first measurement did not wait
    assert again.groups["main"].rate_hz > 1.5 * first.groups["main"].rate_hz, shown
    v = next(v for v in record.verdicts if v.group == "main")
    said = "\n".join(v.sentences)
    assert f"{first.level} clients was measured again: its first measurement" in said, said
    assert "did not repeat" in said and "is left out" in said, said


@pytest.mark.timeout(200)
def test_with_settling_the_backlog_is_waited_for_not_measured(backlog_server: str, tmp_path: Path) -> None:
    record = _search(backlog_server, tmp_path / "runs")
    steps = [s for s in record.steps if s.phase == "sweep"]
    assert not any(s.superseded or s.repeat_of is not None for s in steps), [(s.level, s.reason) for s in steps]
    top = max(steps, key=lambda s: s.level)
    after = next(s for s in steps if s.index > top.index)
    # 124 requests left in the server's queue at 40/s: about 3 s of work it did for clients that had gone
    assert after.settle is not None and after.settle.settled and after.settle.seconds > 1.5, after.settle
    assert "held by the service after their clients went" in after.settle.reason, after.settle


@pytest.mark.timeout(200)
def test_a_level_that_truly_contradicts_its_neighbours_is_kept(refusing_server: str, tmp_path: Path) -> None:
    record = _search(refusing_server, tmp_path / "runs", top=32, seconds="1.5s")
    steps = [s for s in record.steps if s.phase == "sweep"]
    twice = [s for s in steps if s.level == 4]
    assert len(twice) == 2 and twice[1].repeat_of == twice[0].index, [(s.level, s.reason) for s in steps]
    assert not any(s.superseded for s in twice)
    v = next(v for v in record.verdicts if v.group == "main")
    said = "\n".join(v.sentences)
    assert "4 clients contradicted its neighbours twice" in said and "real, kept" in said, said
    # the onset is where the refusals start (3 open connections), not pushed past the level measured twice
    assert v.error_onset_level in (3, 4) and v.brackets["onset"].below == 2, said
    assert not any(s.superseded for s in steps), said
