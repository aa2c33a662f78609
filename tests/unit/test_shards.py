"""A step on many load generators, backend-neutral (knee.executor.shards): split exactly with global client
numbers, run as shards on this machine, merged into the same counts as one engine's run, with a per-generator
breakdown. tests/integration/test_distributed.py holds the same against a real Dask cluster."""

from __future__ import annotations

import pytest

from knee.engine import GroupSnapshot, Snapshot, group_stats
from knee.executor.shards import (
    Gather,
    LoadGenerator,
    ShardOutcome,
    Stopped,
    combined_generator,
    hosts_counters,
    merge_results,
    merge_snapshots,
    run_shard,
    shares,
    split,
)
from knee.model import GeneratorStats, HostCounters, WorkerShare
from knee.spec import DurationMs, EngineSpec, ExecClient, GroupSpec, PerClient, RatePacer, Total

TRUE = ExecClient(argv=["true"])


def gens(*weights: float, nthreads: int = 1) -> list[LoadGenerator]:
    return [LoadGenerator(f"tcp://10.0.0.{i}:1", f"h{i}", nthreads, w) for i, w in enumerate(weights)]


def test_shares_add_up_exactly_by_largest_remainder() -> None:
    assert shares(10, [1, 1, 1]) == [4, 3, 3]
    assert shares(7, [2, 1]) == [5, 2]
    assert shares(5, [0.5, 0.25, 0.25]) == [3, 1, 1]
    assert shares(1, [1, 1, 1]) == [1, 0, 0]
    assert shares(0, [1, 2]) == [0, 0]
    assert shares(3, [0, 0]) == [0, 0]
    for total in range(50):
        assert sum(shares(total, [3, 1.5, 0.7, 2])) == total


def test_split_numbers_clients_globally_and_divides_fixed_work_exactly() -> None:
    spec = EngineSpec(
        groups=[
            GroupSpec(name="a", clients=5, client_offset=10, stop=Total(total=11), client=TRUE),
            GroupSpec(name="b", clients=3, stop=PerClient(per_client=4), client=TRUE),
        ]
    )
    parts = split(spec, gens(2, 1, 1, nthreads=4))
    assert all(p is not None for p in parts)
    a = [next(g for g in p.groups if g.name == "a") for p in parts if p is not None]
    assert [(g.clients, g.client_offset) for g in a] == [(3, 10), (1, 13), (1, 14)]
    assert [g.stop for g in a] == [Total(total=7), Total(total=2), Total(total=2)]
    b = [next(g for g in p.groups if g.name == "b") for p in parts if p is not None]
    assert [(g.clients, g.client_offset) for g in b] == [(1, 0), (1, 1), (1, 2)]
    assert all(g.stop == PerClient(per_client=4) for g in b)  # per-client work stays as it is
    assert [p.threads for p in parts if p is not None] == [4, 4, 4]  # the generator's threads, when unset


def test_split_leaves_out_generators_with_nothing_to_run() -> None:
    spec = EngineSpec(threads=2, groups=[GroupSpec(name="a", clients=1, stop=Total(total=1), client=TRUE)])
    parts = split(spec, gens(1, 1, 1))
    assert [p is None for p in parts] == [False, True, True]
    assert parts[0] is not None and parts[0].threads == 2
    # Fewer operations than clients: a generator whose clients would get no work runs nothing, and the
    # numbering still counts its clients.
    spec = EngineSpec(groups=[GroupSpec(name="a", clients=4, stop=Total(total=1), client=TRUE)])
    parts = split(spec, gens(1, 1))
    assert parts[1] is None
    assert parts[0] is not None and parts[0].groups[0].clients == 2


def test_split_shares_an_open_loops_rate_and_in_flight_cap() -> None:
    pacer = RatePacer(rate_hz=90.0, max_in_flight=10)
    spec = EngineSpec(
        groups=[GroupSpec(name="a", clients=9, stop=DurationMs(duration_ms=1000), pacer=pacer, client=TRUE)]
    )
    parts = [p for p in split(spec, gens(2, 1)) if p is not None]
    pacers = [p.groups[0].pacer for p in parts]
    assert all(isinstance(p, RatePacer) for p in pacers)
    # the caps add up to the group's 10 (each rounded up, 7 + 4 allowed 11 in flight)
    assert [(p.rate_hz, p.max_in_flight) for p in pacers if isinstance(p, RatePacer)] == [(60.0, 7), (30.0, 3)]
    assert [p.groups[0].stop for p in parts] == [DurationMs(duration_ms=1000)] * 2
    # each part's arrivals take their clients' turns over the whole group (the engine's pacer test holds them
    # interleaved), not each part's from the same instant
    assert [(p.groups[0].client_offset, p.groups[0].group_clients) for p in parts] == [(0, 9), (6, 9)]
    five = spec.model_copy(
        update={
            "groups": [
                spec.groups[0].model_copy(
                    update={"clients": 10, "pacer": pacer.model_copy(update={"max_in_flight": 5})}
                )
            ]
        }
    )
    caps = [p.groups[0].pacer.max_in_flight for p in split(five, gens(1, 1, 1)) if p is not None]  # type: ignore[union-attr]
    assert caps == [2, 2, 1]  # 2 + 2 + 2 before


def snap(elapsed: float, finished: bool, *groups: tuple[str, int, int, int]) -> Snapshot:
    """Each group (name, succeeded, p50 µs, late arrivals; half of them knee's lag)."""
    return Snapshot(
        elapsed_s=elapsed,
        finished=finished,
        groups=[
            GroupSnapshot(
                name=n,
                succeeded=ok,
                failed=1,
                hung=0,
                abandoned=0,
                in_flight=2,
                late=late,
                lagged=late // 2,
                p50_us=p50,
                p99_us=p50 * 10,
                failed_by_class={"status": 1},
            )
            for n, ok, p50, late in groups
        ],
    )


def test_merge_snapshots_adds_counts_and_keeps_the_slowest_percentiles() -> None:
    latest = {0: snap(2.0, True, ("a", 5, 100, 4)), 3: snap(2.5, False, ("a", 7, 80, 6), ("b", 1, 9, 0))}
    merged = merge_snapshots(latest, of=3)
    assert merged.elapsed_s == 2.5 and not merged.finished
    assert merged.workers == (2, 3)
    a = merged.group("a")
    assert a is not None and (a.succeeded, a.failed, a.in_flight, a.p50_us, a.p99_us) == (12, 2, 4, 100, 1000)
    b = merged.group("b")
    assert b is not None and (b.succeeded, b.p50_us) == (1, 9)
    assert a.failed_by_class == {"status": 2} and b.failed_by_class == {"status": 1}
    assert (a.late, a.lagged, b.late, b.lagged) == (10, 5, 0, 0)  # an open loop's late arrivals add up too
    assert merged.shards is None  # no names given: no per-worker rows


def test_merge_snapshots_gives_each_reporting_worker_its_row() -> None:
    latest = {0: snap(2.0, True, ("a", 5, 100, 0)), 2: snap(2.5, False, ("a", 7, 80, 0), ("b", 1, 9, 0))}
    names = [("tcp://10.0.0.7:1 (10.0.0.7)", 4), ("tcp://10.0.0.8:1 (10.0.0.8)", 4), ("tcp://10.0.0.9:1 (10.0.0.9)", 3)]
    merged = merge_snapshots(latest, 3, names)
    assert merged.shards is not None
    rows = [(r.worker, r.clients, r.succeeded, r.failed, r.in_flight, r.finished) for r in merged.shards]
    assert rows == [
        ("tcp://10.0.0.7:1 (10.0.0.7)", 4, 5, 1, 2, True),
        ("tcp://10.0.0.9:1 (10.0.0.9)", 3, 8, 2, 4, False),
    ]


def test_hosts_counters_count_each_host_once_and_cpu_adds_up() -> None:
    one = HostCounters(samples=3, listen_overflows=2, time_wait_peak=10)
    two = HostCounters(samples=4, listen_overflows=5, time_wait_peak=30)
    shares_ = [
        WorkerShare(worker="w1", host="h1", clients=1, counters=one),
        WorkerShare(worker="w2", host="h1", clients=1, counters=two),  # same kernel as w1: not added again
        WorkerShare(worker="w3", host="h2", clients=1, counters=two),
        WorkerShare(worker="w4", host="h3", clients=1, lost=True),
    ]
    got = hosts_counters(shares_)
    assert got is not None
    assert (got.samples, got.listen_overflows, got.time_wait_peak) == (7, 7, 30)
    assert hosts_counters([WorkerShare(worker="w", host="h", clients=1)]) is None

    def on(host: str, gen: GeneratorStats) -> WorkerShare:
        return WorkerShare(worker=f"w{id(gen)}", host=host, clients=1, generator=gen)

    cpu = combined_generator(
        [
            on("h1", GeneratorStats(cpu_s=1.0, cpu_cores=0.5, machine_cpu_cores=1.5, cores_available=2)),
            on(
                "h2",
                GeneratorStats(cpu_s=0.25, cpu_cores=0.125, machine_cpu_cores=3.0, cores_available=4, saturated=True),
            ),
        ]
    )
    assert (cpu.cpu_s, cpu.cpu_cores, cpu.machine_cpu_cores, cpu.cores_available, cpu.saturated) == (
        1.25,
        0.625,
        3.0,
        6,
        True,
    )
    assert combined_generator([]) == GeneratorStats()
    # four workers of one core each on one 4-core host: each idle against its 4 cores alone, the host full
    one = GeneratorStats(cpu_s=1.0, cpu_cores=0.95, machine_cpu_cores=3.9, cores_busy=3.9, cores_available=4)
    four = combined_generator([on("h", one.model_copy()) for _ in range(4)])
    assert not one.saturated and four.saturated and four.cores_available == 4, four
    assert not combined_generator([on(f"h{i}", one.model_copy()) for i in range(4)]).saturated  # four hosts


def never() -> bool:
    return False


def test_shards_run_here_merge_into_the_counts_of_one_run() -> None:
    """Split a fixed-work step over three generators, run each shard on this machine, gather: the counts are the
    step's, each generator's part is kept, and the outcome survives the trip as plain data."""
    spec = EngineSpec(
        threads=1, groups=[GroupSpec(name="main", clients=5, client_offset=2, stop=Total(total=23), client=TRUE)]
    )
    generators = gens(1, 1, 2)
    parts = split(spec, generators)
    gather = Gather()
    snapshots: list[Snapshot] = []
    for gen, part in zip(generators, parts, strict=True):
        assert part is not None
        outcome = run_shard(part, ready=None, stop_requested=never, live=snapshots.append)
        assert outcome is not None and not outcome.partial
        outcome = ShardOutcome.from_wire(outcome.to_wire())
        gather.add(gen, part, outcome, lost=False, offset=0.0)
    assert gather.result is not None
    run = gather.step_run(gather.result, started_unix=0.0, partial=False, lost=[])
    whole = group_stats(run.result)["main"]
    assert (whole.succeeded, whole.failed, whole.hung, whole.abandoned) == (23, 0, 0, 0)
    assert [(w.worker, w.clients, w.succeeded) for w in run.workers] == [
        (generators[0].address, 1, 5),
        (generators[1].address, 1, 4),
        (generators[2].address, 3, 14),
    ]
    assert not run.partial and run.lost == []
    assert run.started_unix == min(w.started_unix for w in run.workers)
    assert run.start_skew_s == max(w.started_unix for w in run.workers) - run.started_unix
    assert run.generator.cores_available == sum(w.generator.cores_available for w in run.workers)


def test_a_lost_shard_makes_the_step_partial_and_is_named() -> None:
    spec = EngineSpec(threads=1, groups=[GroupSpec(name="main", clients=2, stop=Total(total=4), client=TRUE)])
    generators = gens(1, 1)
    parts = split(spec, generators)
    assert parts[0] is not None and parts[1] is not None
    outcome = run_shard(parts[0], ready=None, stop_requested=never, live=lambda s: None)
    gather = Gather()
    gather.add(generators[0], parts[0], outcome, lost=False, offset=0.0)
    gather.add(generators[1], parts[1], None, lost=True, offset=0.0)
    assert gather.result is not None
    run = gather.step_run(gather.result, started_unix=0.0, partial=False, lost=["tcp://10.0.0.1:1 (h1): gone"])
    assert run.partial and run.lost == ["tcp://10.0.0.1:1 (h1): gone"]
    assert [w.lost for w in run.workers] == [False, True]
    assert group_stats(run.result)["main"].succeeded == 2
    assert run.start_skew_s == 0.0


def test_a_shard_stopped_at_the_barrier_runs_nothing() -> None:
    spec = EngineSpec(threads=1, groups=[GroupSpec(name="main", clients=1, stop=Total(total=1), client=TRUE)])

    def stopped() -> None:
        raise Stopped

    assert run_shard(spec, ready=stopped, stop_requested=never, live=lambda s: None) is None


def test_merge_results_merges_in_order() -> None:
    spec = EngineSpec(threads=1, groups=[GroupSpec(name="main", clients=1, stop=Total(total=3), client=TRUE)])
    results = []
    for _ in range(2):
        outcome = run_shard(spec, ready=None, stop_requested=never, live=lambda s: None)
        assert outcome is not None
        results.append(outcome.result)
    first = results[0]
    assert merge_results(results) is first
    assert group_stats(first)["main"].succeeded == 6
    assert merge_results([]) is None


@pytest.mark.parametrize("partial", [False, True])
def test_a_driver_stop_or_a_stopped_shard_makes_the_step_partial(partial: bool) -> None:
    spec = EngineSpec(threads=1, groups=[GroupSpec(name="main", clients=1, stop=Total(total=1), client=TRUE)])
    outcome = run_shard(spec, ready=None, stop_requested=never, live=lambda s: None)
    assert outcome is not None
    outcome.partial = partial
    gather = Gather()
    gather.add(gens(1)[0], spec, outcome, lost=False, offset=0.5)
    assert gather.result is not None
    run = gather.step_run(gather.result, started_unix=0.0, partial=False, lost=[])
    assert run.partial is partial
    assert run.workers[0].started_unix == outcome.started_unix - 0.5
    assert gather.step_run(gather.result, started_unix=0.0, partial=True, lost=[]).partial


def test_an_http2_group_splits_by_whole_connections() -> None:
    """60 clients at 10 streams are 6 connections: 2 a generator of three, the clients in proportion; 100 clients
    at 100 streams are one connection, on one generator (the others get nothing of the group)."""
    from knee.spec import HttpClient

    def split_h2(clients: int, streams: int, n: int) -> list[int]:
        client = HttpClient(url="http://127.0.0.1:1/", http2=True, streams=streams)
        spec = EngineSpec(groups=[GroupSpec(name="g", clients=clients, stop=PerClient(per_client=1), client=client)])
        return [p.groups[0].clients if p is not None else 0 for p in split(spec, gens(*[1.0] * n))]

    assert split_h2(60, 10, 3) == [20, 20, 20]
    assert split_h2(100, 100, 3) == [100, 0, 0]
    assert split_h2(250, 100, 2) == [167, 83]  # 3 connections: 2 and 1, each ⌈share / 100⌉


def one_second_shards(n: int) -> list[ShardOutcome]:
    """`n` shards run here one after another: 1 s of 250 ms intervals each, a client of `true` every 20 ms."""
    spec = EngineSpec(
        threads=1,
        interval_ms=250,
        groups=[GroupSpec(name="main", clients=1, think_ms=20, stop=DurationMs(duration_ms=1000), client=TRUE)],
    )
    runs = [run_shard(spec, ready=None, stop_requested=never, live=lambda s: None) for _ in range(n)]
    assert all(r is not None for r in runs)
    return runs  # type: ignore[return-value]


def ticks_of(result: object) -> list[int]:
    return [p.succeeded for p in group_stats(result)["main"].series]  # type: ignore[arg-type]


def test_a_shard_that_started_late_is_merged_into_the_intervals_it_ran_in() -> None:
    """Two shards, the second started half a second after the first on the driver's clock (it joined after the
    common start; its own clock reads otherwise): its first interval is the merged series' third (250 ms intervals), not
    its first."""
    a, b = one_second_shards(2)
    ticks = [ticks_of(o.result) for o in (a, b)]
    gather = Gather()
    gather.add(gens(1)[0], EngineSpec(groups=[]), a, lost=False, offset=0.0)
    gather.add(gens(1, 1)[1], EngineSpec(groups=[]), b, lost=False, offset=b.started_unix - (a.started_unix + 0.5))
    assert gather.result is not None
    want = [0] * max(len(ticks[0]), len(ticks[1]) + 2)
    for i, n in enumerate(ticks[0]):
        want[i] += n
    for i, n in enumerate(ticks[1]):
        want[i + 2] += n
    assert ticks_of(gather.result) == want, ticks


def test_shards_are_placed_against_where_the_series_begins_and_a_far_off_clock_is_not_believed() -> None:
    """A 0.1 s early (less than half an interval: not moved), B 0.05 s late against the series' start: both in
    place. Measured against the earliest start instead, B was 0.15 s (0.6 of an interval) late, one interval off.
    A shard whose start is further off than it ran (its worker's clock offset unknown) is not believed: side by
    side."""
    a, b, c = one_second_shards(3)
    ticks = [ticks_of(o.result) for o in (a, b, c)]
    gather = Gather()
    gather.add(gens(1)[0], EngineSpec(groups=[]), a, lost=False, offset=0.0)
    gather.add(gens(1, 1)[1], EngineSpec(groups=[]), b, lost=False, offset=b.started_unix - (a.started_unix - 0.1))
    gather.add(gens(1, 1, 1)[2], EngineSpec(groups=[]), c, lost=False, offset=c.started_unix - (a.started_unix + 0.05))
    assert gather.result is not None
    side_by_side = [sum(t[i] for t in ticks if i < len(t)) for i in range(max(map(len, ticks)))]
    assert ticks_of(gather.result) == side_by_side, ticks
    d, e = one_second_shards(2)
    alone = [ticks_of(d.result), ticks_of(e.result)]  # before d's result becomes the merged one
    far = Gather()
    far.add(gens(1)[0], EngineSpec(groups=[]), d, lost=False, offset=0.0)
    far.add(gens(1, 1)[1], EngineSpec(groups=[]), e, lost=False, offset=e.started_unix - (d.started_unix + 600))
    assert far.result is not None
    assert ticks_of(far.result) == [x + y for x, y in zip(*alone, strict=False)]
