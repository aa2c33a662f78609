"""Run steps on a Dask cluster (`knee[dask]`, docs/distributed.md): the same plan, many load machines.

`DaskExecutor` splits each step's engine spec across the cluster's workers (`split`): clients by
each worker's weight (its `nthreads`, or `[cluster] weights` by host), an open loop's rate in the
same shares, fixed work exactly, `${client}` numbers global through `client_offset`. One shard task
runs on each worker (`_shard`, seceded from the worker's thread pool). The shards get ready
(worker programs started), wait at a Dask `Event`, and start together: no clock is assumed to agree
with another. Live snapshots come back on a Dask `Queue`; a stop `Event` is polled by every shard
every 0.25 s. The shards' results come back as bytes and merge into one step result, as a local run's;
each worker's part is kept (`WorkerShare`). A worker that dies mid-step is named (`StepRun.lost`) and
the step is partial; the others' results are kept.
"""

from __future__ import annotations

import contextlib
import importlib.metadata
import math
import socket
import time
import uuid
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from knee import __version__
from knee.engine import Engine, EngineError, ShardResult, Snapshot, group_stats, summary
from knee.errors import UserError
from knee.executor.base import Executor, OnSnapshot, StepRun
from knee.executor.interrupt import Interrupts
from knee.model import GeneratorStats, HostCounters, WorkerShare
from knee.spec import EngineSpec, GroupSpec, RatePacer, Total

if TYPE_CHECKING:
    from knee.scenario import Scenario

POLL_S = 0.2
STOP_POLL_S = 0.25  # how often a shard asks whether to stop
READY_TIMEOUT_S = 120.0  # a shard that is not ready by then (worker programs starting) fails the step
CONNECT_TIMEOUT_S = 10.0


def _dask() -> Any:
    try:
        import distributed
    except ImportError:
        raise UserError(
            "--cluster needs Dask: pip install 'knee[dask]' (on this machine and on every worker)"
        ) from None
    return distributed


# ---- splitting a step --------------------------------------------------------------------------


@dataclass(frozen=True)
class Worker:
    address: str
    host: str
    nthreads: int
    weight: float


def shares(total: int, weights: Sequence[float]) -> list[int]:
    """`total` split in proportion to `weights` (largest remainder): the parts add up to `total` exactly."""
    whole = sum(weights)
    if total <= 0 or whole <= 0:
        return [0] * len(weights)
    exact = [total * w / whole for w in weights]
    parts = [math.floor(x) for x in exact]
    left = total - sum(parts)
    for i in sorted(range(len(weights)), key=lambda i: (parts[i] - exact[i], i))[:left]:
        parts[i] += 1
    return parts


def split(spec: EngineSpec, workers: Sequence[Worker]) -> list[EngineSpec | None]:
    """One spec per worker (None: nothing for it to run). Each group's clients go by the workers' weights
    (numbered on from the group's `client_offset`, so `${client}` stays unique); `total` splits in
    proportion to the clients each got, so the parts add up to it exactly; an open loop's rate and
    in-flight cap go in the same proportion; `per_client` and durations stay as they are."""
    weights = [w.weight for w in workers]
    per_worker: list[list[GroupSpec]] = [[] for _ in workers]
    for g in spec.groups:
        clients = shares(g.clients, weights)
        totals = shares(g.stop.total, clients) if isinstance(g.stop, Total) else None
        offset = g.client_offset
        for i, n in enumerate(clients):
            if n == 0 or (totals is not None and totals[i] == 0):
                offset += n
                continue
            update: dict[str, Any] = {"clients": n, "client_offset": offset}
            if totals is not None:
                update["stop"] = Total(total=totals[i])
            if isinstance(g.pacer, RatePacer):
                share = n / g.clients
                cap = g.pacer.max_in_flight
                update["pacer"] = g.pacer.model_copy(
                    update={
                        "rate_hz": g.pacer.rate_hz * share,
                        "max_in_flight": None if cap is None else max(1, math.ceil(cap * share)),
                    }
                )
            per_worker[i].append(g.model_copy(update=update))
            offset += n
    return [
        spec.model_copy(update={"groups": groups, "threads": spec.threads or w.nthreads}) if groups else None
        for w, groups in zip(workers, per_worker, strict=True)
    ]


# ---- the shard, on a worker ----------------------------------------------------------------------


class _Stopped(Exception):
    """The driver stopped the step before the common start."""


def _here(spec: EngineSpec) -> EngineSpec:
    """The spec as this worker runs it: a Python flow's worker processes start this machine's Python (the
    driver wrote its own, which need not exist here)."""
    import sys

    groups = []
    for g in spec.groups:
        argv = getattr(g.client, "argv", None)
        if g.client.kind == "worker" and argv and argv[1:3] == ["-m", "knee.pyworker"]:
            client = g.client.model_copy(update={"argv": [sys.executable, *argv[1:]]})
            groups.append(g.model_copy(update={"client": client}))
        else:
            groups.append(g)
    return spec.model_copy(update={"groups": groups})


def _shard(spec_json: str, key: str, index: int, barrier: bool) -> dict[str, Any]:
    """One worker's part of a step: get ready, wait for the common start, run, stream snapshots, stop when
    told; return the result as bytes with this worker's CPU use. Runs outside the worker's thread pool."""
    import distributed

    from knee.counters import HostSampler
    from knee.diagnose import CpuMeter

    distributed.secede()
    client = distributed.get_client()
    worker = distributed.get_worker()
    go = distributed.Event(f"{key}-go", client=client)
    stop = distributed.Event(f"{key}-stop", client=client)
    ready = distributed.Queue(f"{key}-ready", client=client)
    live = distributed.Queue(f"{key}-live", client=client)
    engine = Engine(_here(EngineSpec.model_validate_json(spec_json)))
    meter = CpuMeter().start()
    host = HostSampler().start()

    def wait_for_go() -> None:
        ready.put(index)
        while not go.wait(STOP_POLL_S):
            if stop.is_set():
                raise _Stopped
        # Released: the engine starts its clients now (plus its few ms of lead time).

    try:
        engine.start(wait_for_go if barrier else None)
    except _Stopped:
        host.stop()
        return {"index": index, "address": worker.address, "stopped_before_start": True}
    next_live, next_poll = time.monotonic() + 1.0, time.monotonic() + STOP_POLL_S
    partial = False
    while not engine.wait(POLL_S / 2):
        now = time.monotonic()
        if now >= next_poll:
            next_poll = now + STOP_POLL_S
            if not partial and stop.is_set():
                partial = True
                engine.stop()
        if now >= next_live:
            next_live = now + 1.0
            live.put((index, engine.snapshot().model_dump_json()))
    result = engine.result()
    return {
        "index": index,
        "address": worker.address,
        "result": result.to_bytes(),
        "generator": meter.stop().model_dump(),
        "counters": host.stop().model_dump(),
        "partial": partial,
        "started_unix": summary(result).started_unix,  # the engine's start instant, on this worker's clock
    }


def _background(spec_json: str, key: str, index: int) -> bytes | None:
    """A worker's part of a baseload kept across steps: answers `cut` and `stop` on its command queue."""
    import distributed

    distributed.secede()
    client = distributed.get_client()
    commands = distributed.Queue(f"{key}-cmd-{index}", client=client)
    replies = distributed.Queue(f"{key}-reply-{index}", client=client)
    engine = Engine(_here(EngineSpec.model_validate_json(spec_json))).start()
    while True:
        try:
            command = commands.get(timeout=1.0)
        except TimeoutError:
            continue
        if command == "cut":
            replies.put(engine.cut().to_bytes())
        else:
            engine.stop()
            engine.wait(None)
            replies.put(engine.result().to_bytes())
            return None


# ---- the driver ---------------------------------------------------------------------------------


def _version_probe() -> str:
    return importlib.metadata.version("knee")


class DaskExecutor(Executor):
    """Every step on a Dask cluster's workers, split and started together."""

    name = "dask"  # and the scheduler's address, once connected

    def __init__(
        self, client: Any, weights: dict[str, float] | None = None, *, owns_client: bool = False, cluster: Any = None
    ) -> None:
        self.client = client
        self.weights = dict(weights or {})
        self._owns_client = owns_client  # a client this executor made (a user's is left open)
        self._cluster = cluster  # a LocalCluster this executor started (closed with it)
        self._offsets: dict[str, float] = {}
        self._checked: set[str] = set()  # workers whose knee version matched
        self.last_overhead = (0.0, 0.0)  # seconds before the common start, and after the last shard ended
        self.check_workers()
        where = "a LocalCluster" if cluster is not None else str(getattr(client.scheduler, "address", "?"))
        self.name = f"dask {where}"

    def describe(self) -> str:
        """'3 Dask workers on 2 hosts (tcp://…)'."""
        workers = self.workers()
        hosts = len({w.host for w in workers})
        return (
            f"{len(workers)} Dask worker{'s' if len(workers) != 1 else ''} on {hosts} host{'s' if hosts != 1 else ''}"
            f" ({self.name.removeprefix('dask ')})"
        )

    @classmethod
    def connect(cls, where: str, weights: dict[str, float] | None = None) -> DaskExecutor:
        """`tcp://host:port` (a running scheduler) or `local:N` (a LocalCluster of N worker processes)."""
        distributed = _dask()
        if where.startswith("local:"):
            n_text = where.removeprefix("local:")
            if not n_text.isdigit() or int(n_text) < 1:
                raise UserError(f"--cluster {where!r}: local:N needs a number of worker processes, like local:3")
            cluster = distributed.LocalCluster(
                n_workers=int(n_text), threads_per_worker=1, processes=True, dashboard_address=None
            )
            return cls(distributed.Client(cluster), weights, owns_client=True, cluster=cluster)
        if "://" not in where:
            raise UserError(
                f"--cluster {where!r}: give a scheduler address (tcp://host:8786) or local:N (N worker processes)"
            )
        try:
            client = distributed.Client(where, timeout=CONNECT_TIMEOUT_S)
        except (OSError, TimeoutError) as exc:
            raise UserError(
                f"--cluster {where}: cannot reach the Dask scheduler ({exc}); start one with `dask scheduler` "
                "or check the address"
            ) from None
        try:
            return cls(client, weights, owns_client=True)
        except BaseException:
            client.close()
            raise

    def workers(self) -> list[Worker]:
        """The cluster's workers now, each with its weight: its `nthreads`, or its host's `[cluster] weights`
        entry shared evenly by that host's workers."""
        info = sorted(self.client.scheduler_info(n_workers=-1)["workers"].items())
        hosts = [str(w.get("host") or address) for address, w in info]
        out = []
        for (address, w), host in zip(info, hosts, strict=True):
            nthreads = int(w.get("nthreads") or 1)
            weight = self.weights[host] / hosts.count(host) if host in self.weights else float(nthreads)
            out.append(Worker(address, host, nthreads, weight))
        return out

    def check_workers(self, workers: Sequence[Worker] | None = None) -> None:
        """Every worker has this knee: one sentence before any load, naming the first that has not. Workers
        that join later (a batch system's jobs starting) are checked before their first step."""
        workers = [w for w in (workers or self.workers()) if w.address not in self._checked]
        if not workers and not self._checked:
            raise UserError("the Dask cluster has no workers: start some (dask worker SCHEDULER) and try again")
        if not workers:
            return
        found = self.client.run(_version_probe, workers=[w.address for w in workers], on_error="return")
        for w in workers:
            got = found.get(w.address)
            if isinstance(got, BaseException):
                raise UserError(
                    f"Dask worker {w.address} ({w.host}) has no knee ({type(got).__name__}: {got}): install the "
                    f"same knee there (pip install 'knee[dask]=={__version__}')"
                )
            if got is not None and got != __version__:
                raise UserError(
                    f"Dask worker {w.address} ({w.host}) runs knee {got}, this knee is {__version__}: install "
                    "the same version on every worker"
                )
        self._checked.update(w.address for w in workers)

    def preflight(self, scenario: Scenario) -> list[str]:
        """knee's preflight on every worker (the machines that send the load): the target reachable and the
        commands found from there, their limits. Raises the first worker's refusal, naming it; returns the
        warnings, each naming its host."""
        from knee.diagnose import preflight_scenario

        found = self.client.run(preflight_scenario, scenario, on_error="return")
        warnings: dict[str, list[str]] = {}
        for w in self.workers():
            got = found.get(w.address)
            if isinstance(got, UserError):
                raise UserError(f"on Dask worker {w.address} ({w.host}): {got}")
            if isinstance(got, BaseException):
                raise UserError(f"the preflight on Dask worker {w.address} ({w.host}) failed: {got}")
            for text in got or []:
                warnings.setdefault(text, []).append(w.host)
        return [f"{text} (on {', '.join(sorted(set(hosts)))})" for text, hosts in warnings.items()]

    def _clock_offsets(self, workers: Sequence[Worker]) -> dict[str, float]:
        """Each worker's clock minus this machine's (0 on this host), to compare the shards' start times."""
        here = {"127.0.0.1", "localhost", socket.gethostname()}
        with contextlib.suppress(OSError):
            here.add(socket.gethostbyname(socket.gethostname()))
        far = [w.address for w in workers if w.host not in here and w.address not in self._offsets]
        if far:
            best: dict[str, tuple[float, float]] = {}
            for _ in range(3):  # the round trip with the least delay bounds the error best
                t0 = time.time()
                seen = self.client.run(time.time, workers=far, on_error="return")
                t1 = time.time()
                for a, t in seen.items():
                    if isinstance(t, float) and (a not in best or t1 - t0 < best[a][1]):
                        best[a] = (t - (t0 + t1) / 2, t1 - t0)
            self._offsets.update({a: off for a, (off, _) in best.items()})
        return {w.address: self._offsets.get(w.address, 0.0) for w in workers}

    def run_step(self, spec: EngineSpec, interrupts: Interrupts, on_snapshot: OnSnapshot | None = None) -> StepRun:
        distributed = _dask()
        t_begin = time.monotonic()
        workers = self.workers()
        if not workers:
            raise UserError("every Dask worker is gone: the sweep cannot go on (start workers and --resume it)")
        self.check_workers(workers)
        specs = split(spec, workers)
        chosen = [(w, s) for w, s in zip(workers, specs, strict=True) if s is not None]
        key = f"knee-{uuid.uuid4().hex[:12]}"
        go = distributed.Event(f"{key}-go", client=self.client)
        stop = distributed.Event(f"{key}-stop", client=self.client)
        ready = distributed.Queue(f"{key}-ready", client=self.client)
        live = distributed.Queue(f"{key}-live", client=self.client)
        offsets = self._clock_offsets([w for w, _ in chosen])
        futures = [
            self.client.submit(
                _shard, s.to_json(), key, i, True, key=f"{key}-shard-{i}", workers=[w.address], pure=False
            )
            for i, (w, s) in enumerate(chosen)
        ]
        lost: dict[int, str] = {}

        def check_lost() -> None:
            """Name the workers that left the cluster, and the shards that failed, since the last look."""
            alive = set(self.client.scheduler_info(n_workers=-1)["workers"])
            for i, (w, _) in enumerate(chosen):
                if i in lost:
                    continue
                if futures[i].status == "error":
                    exc = futures[i].exception()
                    if isinstance(exc, EngineError):  # the engine refused (a worker program that cannot start)
                        stop.set()
                        self.client.cancel(futures)
                        raise UserError(f"on Dask worker {w.address} ({w.host}): {exc}")
                    lost[i] = f"{w.address} ({w.host}): {type(exc).__name__}: {exc}"
                elif w.address not in alive:
                    lost[i] = f"{w.address} ({w.host}): the worker left the cluster"

        # Every shard ready (or failed), then the common start.
        n_ready, deadline = 0, time.monotonic() + READY_TIMEOUT_S
        while n_ready + len(lost) < len(chosen) and not interrupts.requested:
            try:
                ready.get(timeout=POLL_S)
                n_ready += 1
            except TimeoutError:
                check_lost()
                if time.monotonic() > deadline:
                    stop.set()
                    self.client.cancel(futures)
                    raise UserError(
                        f"the shards were not ready within {READY_TIMEOUT_S:.0f} s ({n_ready} of {len(chosen)}): "
                        "a worker program starting slowly, or workers too busy"
                    ) from None
        if interrupts.requested:
            stop.set()
        else:
            go.set()
        t_go = time.monotonic()
        started_unix = time.time()
        # Live view until every shard ended; Ctrl-C sets the stop event.
        latest: dict[int, Snapshot] = {}
        stop_sent = interrupts.requested
        next_check = time.monotonic() + 1.0
        while not all(f.done() or i in lost for i, f in enumerate(futures)):
            if interrupts.requested and not stop_sent:
                stop.set()
                stop_sent = True
            fresh = _drain(live)
            for index, text in fresh:
                latest[index] = Snapshot.model_validate_json(text)
            if fresh and on_snapshot is not None:
                on_snapshot(merge_snapshots(latest, of=len(chosen) - len(lost)))
            if time.monotonic() >= next_check:
                next_check = time.monotonic() + 1.0
                check_lost()
        t_end = time.monotonic()
        # Results: merge what came back; name what did not.
        merged: ShardResult | None = None
        shares_out: list[WorkerShare] = []
        starts: list[float] = []
        partial = stop_sent
        for i, (w, s) in enumerate(chosen):
            got = None
            if i not in lost:
                try:
                    got = futures[i].result(timeout=30)
                except Exception as exc:
                    lost[i] = f"{w.address} ({w.host}): {type(exc).__name__}: {exc}"
            clients = sum(g.clients for g in s.groups)
            if got is None or got.get("stopped_before_start"):
                shares_out.append(WorkerShare(worker=w.address, host=w.host, clients=clients, lost=i in lost))
                continue
            result = ShardResult.from_bytes(got["result"])
            merged = result if merged is None else _merged(merged, result)
            partial = partial or bool(got["partial"])
            stats = group_stats(result)
            start = float(got["started_unix"]) - offsets.get(w.address, 0.0)
            starts.append(start)
            shares_out.append(
                WorkerShare(
                    worker=w.address,
                    host=w.host,
                    clients=clients,
                    started_unix=start,
                    succeeded=sum(g.succeeded for g in stats.values()),
                    failed=sum(g.failed for g in stats.values()),
                    hung=sum(g.hung for g in stats.values()),
                    abandoned=sum(g.abandoned for g in stats.values()),
                    rate_hz=sum(g.rate_hz for g in stats.values()),
                    generator=GeneratorStats.model_validate(got["generator"]),
                    counters=HostCounters.model_validate(got["counters"]) if got.get("counters") else None,
                )
            )
        self.client.cancel([f for i, f in enumerate(futures) if i in lost])  # never left pending on the scheduler
        if merged is None:
            what = "; ".join(lost.values()) or "the step was stopped before it started"
            raise UserError(f"no shard of the step came back: {what}")
        self.last_overhead = (t_go - t_begin, time.monotonic() - t_end)
        return StepRun(
            result=merged,
            partial=partial or bool(lost),
            started_unix=min(starts) if starts else started_unix,
            generator=_combined([s.generator for s in shares_out if not s.lost]),
            counters=_hosts_counters(shares_out),
            workers=shares_out,
            start_skew_s=(max(starts) - min(starts)) if len(starts) > 1 else 0.0,
            lost=[lost[i] for i in sorted(lost)],
        )

    def start_background(self, spec: EngineSpec) -> DaskBackground:
        return DaskBackground(self, spec)

    def close(self) -> None:
        if self._owns_client:
            self.client.close()
        if self._cluster is not None:
            self._cluster.close()


def _drain(queue: Any) -> list[Any]:
    """Everything waiting on `queue` now; after a short sleep when nothing is."""
    n = queue.qsize()
    if n == 0:
        time.sleep(POLL_S)
        return []
    return list(queue.get(batch=n))


def _merged(a: ShardResult, b: ShardResult) -> ShardResult:
    a.merge(b)
    return a


def merge_snapshots(latest: dict[int, Snapshot], of: int) -> Snapshot:
    """The shards' latest snapshots as one: counts add up; live percentiles are the highest shard's."""
    groups: dict[str, dict[str, Any]] = {}
    for snap in latest.values():
        for g in snap.groups:
            acc = groups.setdefault(g.name, dict.fromkeys(("succeeded", "failed", "hung", "abandoned", "in_flight"), 0))
            for k in ("succeeded", "failed", "hung", "abandoned", "in_flight"):
                acc[k] += getattr(g, k)
            acc["p50_us"] = max(acc.get("p50_us", 0), g.p50_us)
            acc["p99_us"] = max(acc.get("p99_us", 0), g.p99_us)
    return Snapshot.model_validate(
        {
            "elapsed_s": max(s.elapsed_s for s in latest.values()),
            "finished": all(s.finished for s in latest.values()),
            "groups": [{"name": n, **v} for n, v in groups.items()],
            "workers": (len(latest), of),
        }
    )


def _hosts_counters(shares: list[WorkerShare]) -> HostCounters | None:
    """The load machines' kernel counters: one worker's per host (they share its kernel), added up."""
    seen: dict[str, HostCounters] = {}
    for s in shares:
        if s.counters is not None and s.host not in seen:
            seen[s.host] = s.counters
    if not seen:
        return None
    out = HostCounters()
    for c in seen.values():
        out.merge(c)
    return out


def _combined(stats: list[GeneratorStats]) -> GeneratorStats:
    """The load side of a step on many machines: CPU adds up; saturated if any machine was."""
    if not stats:
        return GeneratorStats()
    return GeneratorStats(
        cpu_s=round(sum(s.cpu_s for s in stats), 4),
        cpu_cores=round(sum(s.cpu_cores for s in stats), 4),
        children_cpu_s=round(sum(s.children_cpu_s for s in stats), 4),
        children_cpu_cores=round(sum(s.children_cpu_cores for s in stats), 4),
        machine_cpu_cores=round(max(s.machine_cpu_cores for s in stats), 4),
        cores_available=sum(s.cores_available for s in stats),
        saturated=any(s.saturated for s in stats),
    )


class DaskBackground:
    """A baseload kept across steps, split over the workers like a step; `cut()` and `stop()` go to every
    worker's part through its command queue."""

    def __init__(self, executor: DaskExecutor, spec: EngineSpec) -> None:
        distributed = _dask()
        self._client = executor.client
        workers = executor.workers()
        key = f"knee-bg-{uuid.uuid4().hex[:12]}"
        self._parts = []
        for i, (w, s) in enumerate(zip(workers, split(spec, workers), strict=True)):
            if s is None:
                continue
            fut = self._client.submit(
                _background, s.to_json(), key, i, key=f"{key}-{i}", workers=[w.address], pure=False
            )
            commands = distributed.Queue(f"{key}-cmd-{i}", client=self._client)
            replies = distributed.Queue(f"{key}-reply-{i}", client=self._client)
            self._parts.append((w, fut, commands, replies))

    def _ask(self, command: str) -> ShardResult:
        for _, _, commands, _ in self._parts:
            commands.put(command)
        merged: ShardResult | None = None
        for w, fut, _, replies in self._parts:
            try:
                data = replies.get(timeout=30)
            except TimeoutError:
                if fut.status == "error":
                    raise UserError(
                        f"the baseload on Dask worker {w.address} ({w.host}) failed: {fut.exception()}"
                    ) from None
                raise UserError(
                    f"the baseload on Dask worker {w.address} ({w.host}) did not answer {command}"
                ) from None
            part = ShardResult.from_bytes(data)
            merged = part if merged is None else _merged(merged, part)
        if merged is None:
            raise UserError("the baseload runs on no worker")
        return merged

    def cut(self) -> ShardResult:
        return self._ask("cut")

    def stop(self) -> ShardResult:
        return self._ask("stop")
