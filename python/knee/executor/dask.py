"""Run steps on a Dask cluster (`knee[dask]`, docs/distributed.md): the same plan, many load machines.

The Dask transport only (splitting a step and merging its shards: `knee.executor.shards`). `DaskExecutor` splits each
step's engine spec across the cluster's workers, each weighted by its `nthreads` or its host's `[cluster] weights`. One
shard task runs on each worker (`dask_tasks.shard`, seceded from the worker's thread pool, around `shards.run_shard`).
The shards get ready (worker programs started), wait at a Dask `Event`, and start together: no clock is assumed to
agree with another. Live snapshots come back on a Dask `Queue`; a stop `Event` is polled by every shard every 0.25 s.
The shards' results come back as bytes and merge into one step result, as a local run's; each worker's part is kept
(`WorkerShare`). A queue's rows are cut into a part per shard, and each data file travels to each worker once, a
`scatter` (`knee.executor.dataparts`). A worker that dies mid-step is named (`StepRun.lost`) and the step is partial;
the others' results are kept. The driver's lease (`knee.executor.lease`) is a counter in a Dask `Variable` the executor
renews while it is open; every shard and baseload shard watches it and stops by itself when it lapses.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import socket
import sys
import time
import uuid
from collections.abc import Iterator, Sequence
from typing import TYPE_CHECKING, Any

from knee._engine import __version__
from knee.engine import EngineError, Snapshot
from knee.errors import UserError
from knee.executor.base import Executor, OnSnapshot, StepRun, StoppedBeforeStart
from knee.executor.dask_tasks import quietly, shard, workers_now
from knee.executor.dataparts import DataSplit, Shipping, without_files
from knee.executor.interrupt import Interrupts
from knee.executor.lease import LeaseKeeper, LeaseTimes
from knee.executor.shards import (
    Gather,
    LoadGenerator,
    ShardOutcome,
    merge_snapshots,
    split,
)
from knee.executor.ship import Shipper, by_value, driver_build, version_problem
from knee.scenario.cluster import DEFAULT_LEASE_S
from knee.spec import EngineSpec

if TYPE_CHECKING:
    from knee.executor.dask_background import DaskBackground
    from knee.scenario import Scenario

POLL_S = 0.2
SCHEDULER_LOST_S = 3.0  # how long an error may wait for the client to say its scheduler is gone
CANCELLED = (asyncio.CancelledError, concurrent.futures.CancelledError)  # Dask's FutureCancelledError is the latter
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


class DaskExecutor(Executor):
    """Every step on a Dask cluster's workers, split and started together."""

    name = "dask"  # and the scheduler's address, once connected

    def __init__(
        self,
        client: Any,
        weights: dict[str, float] | None = None,
        *,
        owns_client: bool = False,
        cluster: Any = None,
        lease_s: float = DEFAULT_LEASE_S,
        ship: bool | str = False,
    ) -> None:
        self.client = client
        # --ship: the driver's wheel, installed where a worker lacks this knee (knee.executor.ship)
        self.shipper = Shipper(ship) if ship else None
        self.weights = dict(weights or {})
        self._owns_client = owns_client  # a client this executor made (a user's is left open)
        self._cluster = cluster  # a LocalCluster this executor started (closed with it)
        self._offsets: dict[str, float] = {}
        self._checked: set[str] = set()  # workers whose knee version matched
        self.refused: dict[str, str] = {}  # workers that joined later without this knee: left out, and why
        self.last_overhead = (0.0, 0.0)  # seconds before the common start, and after the last shard ended
        self._closed = False
        self.data = DataSplit()  # each queue's rows not used yet, cut into a part per shard at each step
        self._shipping = Shipping(
            lambda text, address: client.scatter(text, workers=[address], hash=False),
            lambda held: held.status == "finished",
        )
        self.check_workers()
        # The driver's lease (knee.executor.lease): renewed on the scheduler while this executor is open; every
        # shard reads it, and stops by itself when it lapses.
        self.lease = (f"knee-lease-{uuid.uuid4().hex[:12]}", lease_s)
        variable = _dask().Variable(self.lease[0], client=client)
        self._keeper = LeaseKeeper(variable.set, LeaseTimes(lease_s))
        self._lease_variable = variable
        # where the scheduler is, as `describe` says it
        self.where = "a LocalCluster" if cluster is not None else str(getattr(client.scheduler, "address", "?"))
        self.name = f"dask {self.where}"

    def describe(self) -> str:
        """'3 Dask workers on 2 hosts (tcp://…)'."""
        workers = self.workers()
        hosts = len({w.host for w in workers})
        return (
            f"{len(workers)} Dask worker{'s' if len(workers) != 1 else ''} on {hosts} host{'s' if hosts != 1 else ''}"
            f" ({self.where})"
        )

    @classmethod
    def connect(
        cls,
        where: str,
        weights: dict[str, float] | None = None,
        *,
        lease_s: float = DEFAULT_LEASE_S,
        ship: bool | str = False,
    ) -> DaskExecutor:
        """`tcp://host:port` (a running scheduler) or `local:N` (a LocalCluster of N worker processes)."""
        distributed = _dask()
        if where.startswith("local:"):
            n_text = where.removeprefix("local:")
            if not n_text.isdigit() or int(n_text) < 1:
                raise UserError(f"--cluster {where!r}: local:N needs a number of worker processes, like local:3")
            import dask  # no dashboard shows it: Dask's profiler (every thread's stack each 10 ms) only takes CPU

            with dask.config.set({"distributed.worker.profile.enabled": False}):
                cluster = distributed.LocalCluster(
                    n_workers=int(n_text), threads_per_worker=1, processes=True, dashboard_address=None
                )
            return cls(
                distributed.Client(cluster), weights, owns_client=True, cluster=cluster, lease_s=lease_s, ship=ship
            )
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
            return cls(client, weights, owns_client=True, lease_s=lease_s, ship=ship)
        except BaseException:
            client.close()
            raise

    def workers(self) -> list[LoadGenerator]:
        """The cluster's workers now, each with its weight: its `nthreads`, or its host's `[cluster] weights`
        entry shared evenly by that host's workers."""
        info = sorted(workers_now(self.client).items())
        hosts = [str(w.get("host") or address) for address, w in info]
        out = []
        for (address, w), host in zip(info, hosts, strict=True):
            nthreads = int(w.get("nthreads") or 1)
            weight = self.weights[host] / hosts.count(host) if host in self.weights else float(nthreads)
            out.append(LoadGenerator(address, host, nthreads, weight, self.job_of(str(w.get("name") or ""))))
        return out

    def job_of(self, worker_name: str) -> str:
        """What else names the worker of that Dask name (a batch job: `JobQueueExecutor`); nothing here."""
        return ""

    def check_workers(self, workers: Sequence[LoadGenerator] | None = None) -> None:
        """Every worker has this knee, installed and loaded: one sentence before any load, naming the first that has
        not (and --ship). With --ship, the driver's wheel is installed there first. Workers that join later (a batch
        system's jobs starting) are checked before their first step."""
        workers = [w for w in (workers or self.workers()) if w.address not in self._checked | self.refused.keys()]
        if not workers and not self._checked:
            raise UserError("the Dask cluster has no workers: start some (dask worker SCHEDULER) and try again")
        if not workers:
            return
        if self.shipper is not None:
            self.shipper.ensure(self.client, workers)
            workers = [w for w in self.workers() if w.address not in self._checked]  # a restarted one has moved
        found = self.client.run(by_value().probe, workers=[w.address for w in workers], on_error="return")
        build = driver_build()
        for w in workers:
            problem = version_problem(
                w.named, found.get(w.address), __version__, shipped=self.shipper is not None, build=build
            )
            if problem and not self._checked:
                raise UserError(problem)
            if problem:  # joined after the first step (a batch job starting late): the sweep goes on without it
                if w.address not in self.refused:
                    sys.stderr.write(f"knee: warning: {problem}; the steps go on without it\n")
                self.refused[w.address] = problem
        self._checked.update(w.address for w in workers if w.address not in self.refused)

    def preflight(self, scenario: Scenario) -> list[str]:
        """knee's preflight on every worker (the machines that send the load): the target reachable and the
        commands found from there, their limits. Raises the first worker's refusal, naming it; returns the
        warnings, each naming its host."""
        from knee.preflight import preflight_scenario

        # each worker runs its weight's share of the clients (the largest share, for all: one call)
        weights = [w.weight for w in self.workers()]
        share = max(weights) / sum(weights) if weights and sum(weights) > 0 else 1.0
        found = self.client.run(preflight_scenario, scenario, 3.0, share, on_error="return")
        warnings: dict[str, list[str]] = {}
        for w in self.workers():
            got = found.get(w.address)
            if isinstance(got, UserError):
                raise UserError(f"on Dask worker {w.named}: {got}")
            if isinstance(got, BaseException):
                raise UserError(f"the preflight on Dask worker {w.named} failed: {got}")
            for text in got or []:
                warnings.setdefault(text, []).append(w.host)
        return [f"{text} (on {', '.join(sorted(set(hosts)))})" for text, hosts in warnings.items()]

    def _clock_offsets(self, workers: Sequence[LoadGenerator]) -> dict[str, float]:
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
        if spec.operations_log is not None:  # the command line refuses it; the Python API came here
            raise UserError(
                "operations_log writes where the engine runs: every worker would write its own part to the same "
                "path (one file, corrupt; or a path the workers do not have): not with a cluster yet; drop one"
            )
        with self.scheduler_needed():
            return self._run_step(spec, interrupts, on_snapshot)

    @contextlib.contextmanager
    def scheduler_needed(self) -> Iterator[None]:
        """Talking to the scheduler: when it is gone (its connection lost, not to be had back), one sentence that
        says so, whatever the call that noticed. The workers stop their load by themselves (the lease)."""
        try:
            yield
        except (Exception, asyncio.CancelledError) as exc:
            # What notices the loss varies with the moment: a closed comm (OSError), a future the scheduler's end
            # cancelled (concurrent.futures.CancelledError, an Exception), a call refused as not running. The
            # client then leaves "running" within moments; until it has, the error is not the scheduler's. knee's
            # own refusals (UserError) are said at once.
            waited = 0.0 if isinstance(exc, UserError) else SCHEDULER_LOST_S
            if not isinstance(exc, CANCELLED) and not self._scheduler_lost(within_s=waited):
                raise
            where = getattr(self.client.scheduler, "address", None) or "of this run"
            raise UserError(
                f"the Dask scheduler {where} is gone: the steps measured before it are kept; start the cluster "
                "again and continue with knee sweep --resume"
            ) from None

    def _scheduler_lost(self, within_s: float) -> bool:
        """Whether the client has lost its scheduler (its status no longer "running"), waiting up to `within_s`."""
        deadline = time.monotonic() + within_s
        while self.client.status == "running":
            if time.monotonic() >= deadline:
                return False
            time.sleep(0.05)
        return True

    def _run_step(self, spec: EngineSpec, interrupts: Interrupts, on_snapshot: OnSnapshot | None) -> StepRun:
        t_begin = time.monotonic()
        workers = self.workers()
        if not workers:
            raise UserError("every Dask worker is gone: the sweep cannot go on (start workers and --resume it)")
        self.check_workers(workers)
        workers = [w for w in workers if w.address not in self.refused]
        if not workers:
            raise UserError(f"no Dask worker left has this knee: {'; '.join(self.refused.values())}")
        chosen = self._with_data([(w, s) for w, s in zip(workers, split(spec, workers), strict=True) if s is not None])
        step = _Step(self.client, chosen, self.lease, self._shipping.texts([(w.address, s) for w, s in chosen]))
        offsets = self._clock_offsets([w for w, _ in chosen])
        step.submit()
        # Every shard ready (or lost), then the common start.
        step.wait_ready(interrupts)
        if interrupts.requested:
            step.stop.set()
        else:
            step.go.set()
        t_go = time.monotonic()
        started_unix = time.time()
        stop_sent = step.watch(interrupts, on_snapshot)
        t_end = time.monotonic()
        gather = step.gather(offsets, stopped=stop_sent or step.enough)
        # A lost shard Dask runs again (its worker restarted at the same address, a fixed --worker-port) finds the
        # step stopped, not its go: it ran a whole step of load nobody counted, from the first row of its data.
        quietly(step.stop.set)
        self.client.cancel([f for i, f in enumerate(step.futures) if i in step.lost])  # never left pending
        if gather.result is None:
            if not step.lost:  # every shard was stopped before it began: Ctrl-C during the wait for the workers
                raise StoppedBeforeStart
            raise UserError(f"no shard of the step came back: {'; '.join(step.lost.values())}")
        self.last_overhead = (t_go - t_begin, time.monotonic() - t_end)
        lost = [step.lost[i] for i in sorted(step.lost)]
        if step.enough and not stop_sent:
            gather.partial = False
        run = gather.step_run(gather.result, started_unix=started_unix, partial=stop_sent, lost=lost)
        run.first_out = self.data.settle([w.address for w, _ in chosen], gather.uses)
        return run

    def _with_data(
        self, chosen: list[tuple[LoadGenerator, EngineSpec]], *, remember: bool = True
    ) -> list[tuple[LoadGenerator, EngineSpec]]:
        """Each shard with its part of every queue and shuffle (`dataparts.DataSplit`)."""
        specs = self.data.parts([s for _, s in chosen], remember=remember)
        return list(zip([w for w, _ in chosen], specs, strict=True))

    def start_background(self, spec: EngineSpec) -> DaskBackground:
        from knee.executor.dask_background import DaskBackground

        return DaskBackground(self, spec)

    def close(self) -> None:
        """End the lease and let go of what this executor made (its client, its cluster); again: nothing."""
        if self._closed:
            return
        self._closed = True
        self._keeper.close()
        self._shipping.forget()
        quietly(self._lease_variable.delete)
        if self._owns_client:
            self.client.close()
        if self._cluster is not None:
            self._cluster.close()


class _Step:
    """One step's shards on the cluster: their tasks, the common start's events, the live queue, and the
    workers lost on the way (by shard index, each named)."""

    def __init__(
        self,
        client: Any,
        chosen: list[tuple[LoadGenerator, EngineSpec]],
        lease: tuple[str, float],
        texts: list[dict[str, Any]],
    ) -> None:
        distributed = _dask()
        self.client = client
        self.chosen = chosen
        self.texts = texts  # each shard's data files' texts, as its worker holds them
        self.names = [(w.named, sum(g.clients for g in spec.groups)) for w, spec in chosen]  # the live rows' names
        self.lease = lease
        self.key = key = f"knee-{uuid.uuid4().hex[:12]}"
        self.go = distributed.Event(f"{key}-go", client=client)
        self.stop = distributed.Event(f"{key}-stop", client=client)
        self.ready = distributed.Queue(f"{key}-ready", client=client)
        self.live = distributed.Queue(f"{key}-live", client=client)
        self.futures: list[Any] = []
        self.lost: dict[int, str] = {}
        self.enough = False  # stopped because it had measured enough, not by Ctrl-C: the shards' stop is no cut

    def submit(self) -> None:
        key = self.key
        self.futures = [
            self.client.submit(
                shard,
                without_files(s).to_json(),
                key,
                i,
                True,
                self.lease,
                texts=self.texts[i],
                key=f"{key}-shard-{i}",
                workers=[w.address],
                pure=False,
            )
            for i, (w, s) in enumerate(self.chosen)
        ]

    def check_lost(self) -> None:
        """Name the workers that left the cluster, and the shards that failed, since the last look."""
        alive = set(workers_now(self.client))
        for i, (w, _) in enumerate(self.chosen):
            if i in self.lost:
                continue
            if self.futures[i].status == "error":
                exc = self.futures[i].exception()
                if isinstance(exc, EngineError):  # the engine refused (a worker program that cannot start)
                    self.stop.set()
                    self.client.cancel(self.futures)
                    raise UserError(f"on Dask worker {w.named}: {exc}")
                self.lost[i] = f"{w.named}: {type(exc).__name__}: {exc}"
            elif w.address not in alive:
                self.lost[i] = f"{w.named}: the worker left the cluster"

    def wait_ready(self, interrupts: Interrupts) -> None:
        """Until every shard is ready (or lost), or Ctrl-C; a UserError when that takes too long."""
        n_ready, deadline = 0, time.monotonic() + READY_TIMEOUT_S
        while n_ready + len(self.lost) < len(self.chosen) and not interrupts.requested:
            try:
                self.ready.get(timeout=POLL_S)
                n_ready += 1
            except TimeoutError:
                self.check_lost()
                if time.monotonic() > deadline:
                    self.stop.set()
                    self.client.cancel(self.futures)
                    raise UserError(
                        f"the shards were not ready within {READY_TIMEOUT_S:.0f} s ({n_ready} of {len(self.chosen)}): "
                        "a worker program starting slowly, or workers too busy"
                    ) from None

    def watch(self, interrupts: Interrupts, on_snapshot: OnSnapshot | None) -> bool:
        """The live view until every shard ended; Ctrl-C sets the stop event, and so does `on_snapshot` saying
        the step has measured enough. Whether the step was stopped by Ctrl-C (then it is partial)."""
        latest: dict[int, Snapshot] = {}
        stop_sent = interrupts.requested
        next_check = time.monotonic() + 1.0
        while not all(f.done() or i in self.lost for i, f in enumerate(self.futures)):
            if interrupts.requested and not stop_sent:
                self.stop.set()
                stop_sent = True
            fresh = _drain(self.live)
            for index, text in fresh:
                latest[index] = Snapshot.model_validate_json(text)
            for index in self.lost:  # a lost shard's counts are not the step's (its last snapshot stayed in them)
                latest.pop(index, None)
            if fresh and on_snapshot is not None:
                enough = on_snapshot(merge_snapshots(latest, len(self.chosen) - len(self.lost), self.names))
                if enough and not stop_sent:  # the step has measured enough (duration = "auto"): end it, whole
                    self.stop.set()
                    self.enough = True
            if time.monotonic() >= next_check:
                next_check = time.monotonic() + 1.0
                self.check_lost()
        return stop_sent

    def gather(self, offsets: dict[str, float], stopped: bool) -> Gather:
        """The shards' results merged, in order; a shard that did not come back is named in `lost`, and so is one
        that stopped by itself (`stopped`: the driver stopped the step), its lease not renewed for a while: the step
        ran without its clients from then on (that step was taken for a whole one, or for a Ctrl-C)."""
        gather = Gather()
        for i, (w, s) in enumerate(self.chosen):
            got = None
            if i not in self.lost:
                try:
                    got = self.futures[i].result(timeout=30)
                except Exception as exc:
                    self.lost[i] = f"{w.named}: {type(exc).__name__}: {exc}"
            if got is not None and got.get("lapsed") and not stopped:
                lapse = LeaseTimes(self.lease[1]).lapse_s
                self.lost[i] = (
                    f"{w.named}: stopped by itself: no renewal of the driver's lease for {lapse:g} s (the scheduler "
                    "too busy or unreachable)"
                )
            outcome = None if got is None or got.get("stopped_before_start") else ShardOutcome.from_wire(got)
            gather.add(w, s, outcome, lost=i in self.lost, offset=offsets.get(w.address, 0.0))
        return gather


def _drain(queue: Any) -> list[Any]:
    """Everything waiting on `queue` now; after a short sleep when nothing is."""
    n = queue.qsize()
    if n == 0:
        time.sleep(POLL_S)
        return []
    return list(queue.get(batch=n))
