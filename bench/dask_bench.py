"""The Dask executor's own costs (bench/run.py scenario "distributed", docs/distributed.md).

Two measurements, on real `dask scheduler` and `dask worker` processes on this machine:

- **orchestration overhead** with 3 workers: per step, the time from the step's start until every shard
  runs (split, submit, worker programs ready, the common start), and from the last shard's end until the
  merged result is back on the driver. Steps of fixed, tiny work, so the overhead is all there is.
- **scaling**: an exec step (`/bin/true`, 8 clients) that is generator-bound on one worker process, run on
  1 worker pinned to core 0, then on 2 workers pinned to cores 0 and 1: operations/s with 2 over 1.
"""

from __future__ import annotations

import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

DASK = str(Path(sys.executable).parent / "dask")
OVERHEAD_STEPS = 7


def _free_port() -> int:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class _Cluster:
    """A scheduler and `dask worker` processes (one thread each), each pinned to a core when asked."""

    def __init__(self, cores: list[int | None]) -> None:
        import distributed

        self.logs = Path(tempfile.mkdtemp(prefix="knee-bench-dask-"))
        port = _free_port()
        self.address = f"tcp://127.0.0.1:{port}"
        log = open(self.logs / "dask.log", "wb")  # noqa: SIM115 - closed with the processes
        self.procs = [
            subprocess.Popen(
                [DASK, "scheduler", "--host", "127.0.0.1", "--port", str(port), "--no-dashboard"],
                stdout=log,
                stderr=log,
                stdin=subprocess.DEVNULL,
            )
        ]
        for i, core in enumerate(cores):
            pin = ["taskset", "-c", str(core)] if core is not None else []
            worker = [DASK, "worker", self.address, "--nthreads", "1", "--no-nanny", "--no-dashboard"]
            self.procs.append(
                subprocess.Popen(
                    [*pin, *worker, "--name", f"b{i}", "--host", "127.0.0.1"],
                    stdout=log,
                    stderr=log,
                    stdin=subprocess.DEVNULL,
                )
            )
        self.client = distributed.Client(self.address, timeout=30)
        self.client.wait_for_workers(len(cores), timeout=60)

    def close(self) -> None:
        self.client.close()
        for p in reversed(self.procs):
            p.terminate()
        for p in self.procs:
            try:
                p.wait(10)
            except subprocess.TimeoutExpired:
                p.kill()
                p.wait(5)
        shutil.rmtree(self.logs, ignore_errors=True)


def _exec_spec(clients: int, stop: dict[str, int]) -> object:
    from knee.spec import EngineSpec

    return EngineSpec.model_validate(
        {
            "groups": [
                {"name": "main", "clients": clients, "stop": stop, "client": {"kind": "exec", "argv": ["/bin/true"]}}
            ]
        }
    )


def overhead() -> dict[str, object]:
    """Median per-step overhead of a 3-worker cluster, in ms."""
    from knee.executor import Interrupts
    from knee.executor.dask import DaskExecutor

    cluster = _Cluster([None, None, None])
    try:
        executor = DaskExecutor(cluster.client)
        before, after, skew = [], [], []
        for _ in range(OVERHEAD_STEPS):
            run = executor.run_step(_exec_spec(3, {"total": 3}), Interrupts())  # type: ignore[arg-type]
            before.append(executor.last_overhead[0] * 1000)
            after.append(executor.last_overhead[1] * 1000)
            skew.append((run.start_skew_s or 0.0) * 1000)
        return {
            "scenario": "distributed",
            "tool": "knee-3-workers",
            "start_ms": statistics.median(before),
            "merge_ms": statistics.median(after),
            "skew_ms": statistics.median(skew),
            "steps": OVERHEAD_STEPS,
        }
    finally:
        cluster.close()


def scaling(workers: int, duration_s: int) -> dict[str, object]:
    """Operations/s of an exec step on `workers` worker processes pinned to cores 0…workers-1."""
    from knee.engine import group_stats
    from knee.executor import Interrupts
    from knee.executor.dask import DaskExecutor

    cores = os.sched_getaffinity(0)
    if len(cores) < workers:
        return {"scenario": "distributed", "tool": f"knee-{workers}-pinned", "error": f"needs {workers} cores"}
    cluster = _Cluster(sorted(cores)[:workers])
    try:
        executor = DaskExecutor(cluster.client)
        t0 = time.monotonic()
        run = executor.run_step(_exec_spec(8, {"duration_ms": duration_s * 1000}), Interrupts())  # type: ignore[arg-type]
        wall = time.monotonic() - t0
        g = group_stats(run.result)["main"]
        load = run.generator
        return {
            "scenario": "distributed",
            "tool": f"knee-{workers}-pinned",
            "rps": g.succeeded / g.elapsed_s if g.elapsed_s else 0.0,
            "requests": g.succeeded,
            "errors": g.failed + g.hung,
            "load_cores": round(load.cpu_cores + load.children_cpu_cores, 3),
            "wall_s": wall,
        }
    finally:
        cluster.close()


def measure(duration_s: int, reps: int) -> list[dict[str, object]]:
    """Every distributed row: the overhead once per repetition, then 1 and 2 pinned workers interleaved."""
    rows: list[dict[str, object]] = []
    for rep in range(reps):
        for row in (overhead(), scaling(1, duration_s), scaling(2, duration_s)):
            row["rep"] = rep
            rows.append(row)
            print(f"  distributed {row}", flush=True)
    return rows
