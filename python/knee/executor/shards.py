"""A step on many load generators, whatever carries it there: split, run a shard, merge (backend-neutral).

The driver splits a step's spec into one shard per load generator (`split`): each group's clients by
the generators' weights (largest remainder, `shares`; an HTTP/2 group's by its connections, so that its
⌈clients / streams⌉ connections stay that many across the shards), numbered on through `client_offset` so
`${client}` stays unique across machines; fixed work (`total`) exactly, in proportion to the clients each
got; an open loop's rate and in-flight cap in the same proportion. On a load generator, `run_shard` runs
one shard: the engine, its CPU meter and kernel counters, a barrier before the common start, a stop
request polled and live snapshots handed on, through callbacks the transport (Dask, …) supplies; its
`ShardOutcome` travels back as plain data (`to_wire`). Back on the driver, `Gather` merges the shards'
results into one step result, the same as a local run's, with a per-generator breakdown (`WorkerShare`),
the combined CPU (`combined_generator`) and the load machines' counters (`hosts_counters`);
`merge_snapshots` joins the shards' live snapshots into one.
"""

from __future__ import annotations

import math
import sys
import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from knee.engine import Engine, ShardNow, ShardResult, Snapshot, group_stats, summary
from knee.executor.base import StepRun
from knee.executor.lease import LeaseWatch
from knee.machine.cpu import saturated
from knee.model import GeneratorStats, HostCounters, WorkerShare
from knee.model.engine_summary import EngineDataUse
from knee.spec import EngineSpec, GroupSpec, HttpClient, RatePacer, Total

POLL_S = 0.1  # how often a shard looks at its engine
STOP_POLL_S = 0.25  # how often a shard asks whether to stop
LIVE_S = 1.0  # how often a shard hands on a live snapshot

# ---- splitting a step --------------------------------------------------------------------------


@dataclass(frozen=True)
class LoadGenerator:
    """One place a shard can run (a Dask worker, …): its address, its host, its threads, its weight, and what else
    names it (a batch job: "Slurm job 17")."""

    address: str
    host: str
    nthreads: int
    weight: float
    label: str = ""

    @property
    def named(self) -> str:
        """'tcp://10.0.0.7:40213 (10.0.0.7)', or '… (10.0.0.7, Slurm job 17)': how messages name it."""
        return f"{self.address} ({', '.join(p for p in (self.host, self.label) if p)})"


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


def split(spec: EngineSpec, generators: Sequence[LoadGenerator]) -> list[EngineSpec | None]:
    """One spec per load generator (None: nothing for it to run). Each group's clients go by the generators'
    weights (numbered on from the group's `client_offset`, so `${client}` stays unique); `total` splits in
    proportion to the clients each got, so the parts add up to it exactly; an open loop's rate and
    in-flight cap go in the same proportion (the caps adding up to it, at least 1 each); `per_client` and
    durations stay as they are."""
    weights = [g.weight for g in generators]
    per_generator: list[list[GroupSpec]] = [[] for _ in generators]
    for g in spec.groups:
        clients = shares(g.clients, weights)
        c = g.client
        if isinstance(c, HttpClient) and c.http2 and not c.new_connection and c.streams > 1:
            # whole connections to each generator, then the clients in proportion to them
            connections = shares(math.ceil(g.clients / c.streams), weights)
            clients = shares(g.clients, [float(n) for n in connections])
        totals = shares(g.stop.total, clients) if isinstance(g.stop, Total) else None
        cap = g.pacer.max_in_flight if isinstance(g.pacer, RatePacer) else None
        caps = shares(cap, clients) if cap is not None else None  # adding up to the cap (each rounded up: 6 for 5)
        offset = g.client_offset
        for i, n in enumerate(clients):
            if n == 0 or (totals is not None and totals[i] == 0):
                offset += n
                continue
            update: dict[str, Any] = {"clients": n, "client_offset": offset}
            if totals is not None:
                update["stop"] = Total(total=totals[i])
            if isinstance(g.pacer, RatePacer):
                update["pacer"] = g.pacer.scaled(n / g.clients).model_copy(
                    update={"max_in_flight": None if caps is None else max(1, caps[i])}  # 1: a cap below the workers
                )
            if isinstance(g.pacer, RatePacer) or g.pacer.profile is not None:
                # an open loop's arrivals go by turns over the whole group's clients (a constant rate's shards would
                # otherwise all start at the same instant, in phase); a clients profile numbers them over it (the
                # first shards' join first)
                update["group_clients"] = g.group_clients or g.client_offset + g.clients
            per_generator[i].append(g.model_copy(update=update))
            offset += n
    return [
        spec.model_copy(update={"groups": groups, "threads": spec.threads or gen.nthreads}) if groups else None
        for gen, groups in zip(generators, per_generator, strict=True)
    ]


# ---- a shard, on its load generator --------------------------------------------------------------


class Stopped(Exception):
    """The driver stopped the step before the common start (raised by a transport's barrier)."""


def as_run_here(spec: EngineSpec) -> EngineSpec:
    """The spec as this machine runs it: a Python flow's worker processes start this machine's Python (the
    driver wrote its own, which need not exist here)."""
    groups = []
    for g in spec.groups:
        argv = getattr(g.client, "argv", None)
        if g.client.kind == "worker" and argv and argv[1:3] == ["-m", "knee.pyworker"]:
            client = g.client.model_copy(update={"argv": [sys.executable, *argv[1:]]})
            groups.append(g.model_copy(update={"client": client}))
        else:
            groups.append(g)
    return spec.model_copy(update={"groups": groups})


@dataclass
class ShardOutcome:
    """What one shard brought back: its result, whether it was stopped, when its engine started (on its own
    machine's clock), its load side's CPU and its machine's kernel counters."""

    result: ShardResult
    partial: bool
    started_unix: float
    generator: GeneratorStats
    counters: HostCounters | None

    def to_wire(self) -> dict[str, Any]:
        """Plain data (the result as bytes) for any transport."""
        return {
            "result": self.result.to_bytes(),
            "generator": self.generator.model_dump(),
            "counters": None if self.counters is None else self.counters.model_dump(),
            "partial": self.partial,
            "started_unix": self.started_unix,
        }

    @classmethod
    def from_wire(cls, got: dict[str, Any]) -> ShardOutcome:
        return cls(
            result=ShardResult.from_bytes(got["result"]),
            partial=bool(got["partial"]),
            started_unix=float(got["started_unix"]),
            generator=GeneratorStats.model_validate(got["generator"]),
            counters=HostCounters.model_validate(got["counters"]) if got.get("counters") else None,
        )


def run_shard(
    spec: EngineSpec,
    *,
    ready: Callable[[], None] | None,
    stop_requested: Callable[[], bool],
    live: Callable[[Snapshot], None],
    lease: LeaseWatch | None = None,
) -> ShardOutcome | None:
    """Run one shard on this machine: get ready, call `ready` (the transport's barrier: it returns at the
    common start, or raises `Stopped`), run, hand a snapshot to `live` every second, stop once
    `stop_requested()`, or once the driver's `lease` lapses (the driver is gone: the outcome is partial). None:
    stopped before the start."""
    from knee.machine.cpu import CpuMeter
    from knee.machine.kernel import HostSampler

    engine = Engine(as_run_here(spec))
    meter = CpuMeter().start()
    host = HostSampler().start()
    try:
        engine.start(ready)
    except Stopped:
        host.stop()
        return None
    if lease is not None:
        lease.guard(engine)
    next_live, next_poll = time.monotonic() + LIVE_S, time.monotonic() + STOP_POLL_S
    partial = False
    while not engine.wait(POLL_S):
        now = time.monotonic()
        if now >= next_poll:
            next_poll = now + STOP_POLL_S
            if not partial and stop_requested():
                partial = True
                engine.stop()
        if now >= next_live:
            next_live = now + LIVE_S
            live(engine.snapshot())
    partial = partial or (lease is not None and lease.lapsed)
    result = engine.result()
    generator = meter.stop()
    return ShardOutcome(result, partial, summary(result).started_unix, generator, host.stop())


# ---- merging, on the driver -----------------------------------------------------------------------


def merged(a: ShardResult, b: ShardResult) -> ShardResult:
    """`b` merged into `a` (bytes-exact, as one engine would have counted), and `a`."""
    a.merge(b)
    return a


def merge_results(results: Iterable[ShardResult]) -> ShardResult | None:
    """The results merged, in their order, into the first (None: none): the windows of a baseload's parts, cut
    together, their series side by side (the parts' start times are on their machines' clocks, not to be compared)."""
    out: ShardResult | None = None
    for r in results:
        out = r if out is None else merged(out, r)
    return out


def merge_snapshots(latest: dict[int, Snapshot], of: int, names: Sequence[tuple[str, int]] = ()) -> Snapshot:
    """The shards' latest snapshots as one: counts add up (failures by class and late arrivals too); live percentiles
    are the highest shard's. `names`: each shard index's (worker, clients), for the per-worker rows."""
    keys = ("succeeded", "failed", "hung", "abandoned", "in_flight")
    summed = (*keys, "late", "lagged")  # a group's; a worker's row has `keys`
    groups: dict[str, dict[str, Any]] = {}
    rows: list[ShardNow] = []
    for index, snap in sorted(latest.items()):
        for g in snap.groups:
            acc = groups.setdefault(g.name, {**dict.fromkeys(summed, 0), "failed_by_class": {}})
            for k in summed:
                acc[k] += getattr(g, k)
            acc["p50_us"] = max(acc.get("p50_us", 0), g.p50_us)
            acc["p99_us"] = max(acc.get("p99_us", 0), g.p99_us)
            for cls, n in g.failed_by_class.items():
                acc["failed_by_class"][cls] = acc["failed_by_class"].get(cls, 0) + n
        if index < len(names):
            worker, clients = names[index]
            sums = {k: sum(getattr(g, k) for g in snap.groups) for k in keys}
            rows.append(ShardNow(worker=worker, clients=clients, finished=snap.finished, **sums))
    return Snapshot.model_validate(
        {
            "elapsed_s": max(s.elapsed_s for s in latest.values()),
            "finished": all(s.finished for s in latest.values()),
            "groups": [{"name": n, **v} for n, v in groups.items()],
            "workers": (len(latest), of),
            "shards": rows or None,
        }
    )


def hosts_counters(shares: list[WorkerShare]) -> HostCounters | None:
    """The load machines' kernel counters: one generator's per host (they share its kernel), added up."""
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


def combined_generator(shares: list[WorkerShare]) -> GeneratorStats:
    """The load side of a step on many machines: CPU adds up; a host's workers share its cores, so each host is
    judged whole (four workers of one core each on a 4-core host: each idle against the 4 cores alone, the host
    full), and the step is saturated if any host was."""
    stats = [s.generator for s in shares]
    if not stats:
        return GeneratorStats()
    hosts: dict[str, list[GeneratorStats]] = {}
    for share in shares:
        hosts.setdefault(share.host, []).append(share.generator)
    each = [_host(gens) for gens in hosts.values()]
    return GeneratorStats(
        cpu_s=round(sum(s.cpu_s for s in stats), 4),
        cpu_cores=round(sum(s.cpu_cores for s in stats), 4),
        children_cpu_s=round(sum(s.children_cpu_s for s in stats), 4),
        children_cpu_cores=round(sum(s.children_cpu_cores for s in stats), 4),
        machine_cpu_cores=round(max(s.machine_cpu_cores for s in stats), 4),
        cores_busy=round(sum(h.cores_busy for h in each), 4),
        cores_available=sum(h.cores_available for h in each),
        # a machine under a cgroup's quota adds what its quota allows, the others their cores
        cpu_quota=sum(h.cpu_quota or h.cores_available for h in each) if any(h.cpu_quota for h in each) else 0.0,
        machine_cores=max(s.machine_cores for s in stats),
        saturated=any(h.saturated for h in each),
    )


def _host(gens: list[GeneratorStats]) -> GeneratorStats:
    """One host's load side from its workers': their CPU added, its cores (and busy cores, and quota) once."""
    load = sum(g.load_cores for g in gens)
    cores = max(g.cores_available for g in gens)
    busy = max(g.cores_busy for g in gens)
    quota = max(g.cpu_quota for g in gens)
    return GeneratorStats(
        cores_busy=busy,
        cores_available=cores,
        cpu_quota=quota,
        saturated=any(g.saturated for g in gens) or saturated(load, busy, cores, quota),
    )


def worker_share(gen: LoadGenerator, clients: int, outcome: ShardOutcome, started_unix: float) -> WorkerShare:
    """One generator's part of a step, from its shard's outcome (`started_unix` on the driver's clock)."""
    stats = group_stats(outcome.result)
    return WorkerShare(
        worker=gen.address,
        host=gen.host,
        clients=clients,
        started_unix=started_unix,
        succeeded=sum(g.succeeded for g in stats.values()),
        failed=sum(g.failed for g in stats.values()),
        hung=sum(g.hung for g in stats.values()),
        abandoned=sum(g.abandoned for g in stats.values()),
        rate_hz=sum(g.rate_hz for g in stats.values()),
        generator=outcome.generator,
        counters=outcome.counters,
    )


def place(into: ShardResult, result: ShardResult, lag: float, dt: float, elapsed: float) -> float:
    """Merge `result`, a shard that started `lag` s after `into`'s series' first interval began (on the driver's
    clock), into the intervals it ran in: a shard that joined late is not at 0. Whole intervals of `dt` s; none when
    the lag is longer than the shard ran (`elapsed` s: a worker's clock offset not known, or far off), side by side as
    shards that started together. Returns how far the series' start moved (back, for a shard that started before)."""
    ticks = round(lag / dt) if dt > 0 and abs(lag) <= elapsed else 0
    into.merge(result, lag_s=ticks * dt)
    return min(0, ticks) * dt


class Gather:
    """A step's shards merged into one run, in the order they are added."""

    def __init__(self) -> None:
        self.result: ShardResult | None = None
        self.workers: list[WorkerShare] = []
        self.starts: list[float] = []  # each shard's engine start, on the driver's clock
        self.partial = False  # a shard was stopped
        self.uses: list[list[EngineDataUse] | None] = []  # each shard's data sources' use (None: nothing came back)
        self.origin = 0.0  # when the merged series' first interval began, on the driver's clock

    def add(
        self, gen: LoadGenerator, spec: EngineSpec, outcome: ShardOutcome | None, *, lost: bool, offset: float
    ) -> None:
        """Shard `spec` ran on `gen`, whose clock is `offset` s ahead of the driver's; `outcome` None: nothing
        came back (`lost`, or stopped before the start)."""
        clients = sum(g.clients for g in spec.groups)
        if outcome is None:
            self.uses.append(None)
            self.workers.append(WorkerShare(worker=gen.address, host=gen.host, clients=clients, lost=lost))
            return
        own = summary(outcome.result)
        self.uses.append(own.data)  # before it merges into another
        start = outcome.started_unix - offset
        if self.result is None:
            self.result, self.origin = outcome.result, start
        else:
            self.origin += place(self.result, outcome.result, start - self.origin, own.interval_s, own.elapsed_s)
        self.partial = self.partial or outcome.partial
        self.starts.append(start)
        share = worker_share(gen, clients, outcome, start)
        share.lost = lost  # it stopped by itself: what it ran counts, and the step lost its clients from then on
        self.workers.append(share)

    def step_run(self, result: ShardResult, *, started_unix: float, partial: bool, lost: list[str]) -> StepRun:
        """The step's run: `result` (this gather's), `partial` if the driver stopped it or a shard was lost
        (`lost`, each named); `started_unix` when no shard started."""
        starts = self.starts
        return StepRun(
            result=result,
            partial=partial or self.partial or bool(lost),
            started_unix=min(starts) if starts else started_unix,
            generator=combined_generator([s for s in self.workers if not s.lost]),
            counters=hosts_counters(self.workers),
            workers=self.workers,
            start_skew_s=(max(starts) - min(starts)) if len(starts) > 1 else 0.0,
            lost=lost,
        )
