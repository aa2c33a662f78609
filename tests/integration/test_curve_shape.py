"""The shape of a real curve: a server with a fixed pool of 8 workers and a queue is named a pool, and
its size is read back from the sweep (peak rate × single-client latency)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from knee.fmt import clauses
from knee.store import RunDir

from conftest import knee_cli

POOL = 8
SERVICE_S = 0.020

# An HTTP/1.1 keep-alive server on 127.0.0.1:0: POOL workers (a semaphore), SERVICE_S each, requests past the
# pool wait in the queue. It prints its port, then serves until killed.
SERVER = f"""
import asyncio

POOL, SERVICE_S = {POOL}, {SERVICE_S}


async def main() -> None:
    pool = asyncio.Semaphore(POOL)

    async def serve(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            while True:
                head = await reader.readuntil(b"\\r\\n\\r\\n")
                length = 0
                for line in head.split(b"\\r\\n")[1:]:
                    name, _, value = line.partition(b":")
                    if name.strip().lower() == b"content-length":
                        length = int(value)
                if length:
                    await reader.readexactly(length)
                async with pool:
                    await asyncio.sleep(SERVICE_S)
                writer.write(b"HTTP/1.1 200 OK\\r\\nContent-Length: 2\\r\\nContent-Type: text/plain\\r\\n\\r\\nok")
                await writer.drain()
        except (asyncio.IncompleteReadError, ConnectionError):
            pass
        finally:
            writer.close()

    server = await asyncio.start_server(serve, "127.0.0.1", 0, backlog=1024)
    print(server.sockets[0].getsockname()[1], flush=True)
    async with server:
        await server.serve_forever()


asyncio.run(main())
"""


@pytest.fixture
def pool_server() -> Iterator[str]:
    proc = subprocess.Popen([sys.executable, "-c", SERVER], stdout=subprocess.PIPE, text=True)
    try:
        assert proc.stdout is not None
        port = int(proc.stdout.readline())
        yield f"http://127.0.0.1:{port}/"
    finally:
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait(timeout=10)


@pytest.mark.serial  # a plateau and a pool size from measured rates
@pytest.mark.timeout(60)
def test_a_fixed_pool_is_named_and_sized(pool_server: str, tmp_path: Path) -> None:
    out = tmp_path / "runs"
    proc = knee_cli(
        "sweep", pool_server, "--levels", "1,4,8,16,32", "-d", "2s", "--warmup", "0.5s", "--no-recovery",
        "--out", str(out), timeout=60,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stdout + proc.stderr
    (run,) = [p for p in out.iterdir() if p.is_dir()]
    record = RunDir(run).load()
    v = next(v for v in record.verdicts if v.group == record.measured_group)
    assert v.shape is not None, v.sentences
    assert v.shape.name == "pool", v.sentences
    assert v.shape.pool_size == pytest.approx(POOL, rel=0.15), v.shape.evidence
    print(f"measured pool: {v.shape.pool_size:.2f} ({v.shape.evidence})")
    # the same sentence in the terminal report (which wraps long lines)
    # the terminal gives the verdict as short points: each clause of the evidence is one of them
    said = " ".join(proc.stdout.split())
    assert all(" ".join(c.split()) in said for c in clauses(v.shape.evidence)), proc.stdout
