"""What runs on a Dask worker for `knee.executor.dask`: one step's shard (`shard`) and a baseload's part
(`background`), each around knee's engine, with the driver's lease watched (`knee.executor.lease`). A call to the
scheduler that fails here is no news: the lease decides whether the driver is gone."""

from __future__ import annotations

import time
from typing import Any

from knee.engine import Engine, Snapshot
from knee.executor.dataparts import with_texts
from knee.executor.lease import LeaseTimes, LeaseWatch
from knee.executor.shards import STOP_POLL_S, Stopped, as_run_here, run_shard
from knee.executor.ship import driver_build
from knee.spec import EngineSpec

# The build this process loaded (knee.executor.ship.driver_build, once a process), for the driver's version check: a
# worker that has run a shard reports it, so that a build installed over it later is not taken for the code it runs.
LOADED_BUILD = driver_build()


def shard(
    spec_json: str,
    key: str,
    index: int,
    barrier: bool,
    lease: tuple[str, float],
    *,
    texts: dict[str, str] | None = None,
) -> dict[str, Any]:
    """One worker's part of a step (`shards.run_shard`), the barrier, the stop and the live snapshots on Dask's
    events and queues, the driver's lease on a `Variable`; returns the outcome as plain data. Runs outside the
    worker's thread pool. `texts`: the rows of the spec's data sources, by name (the driver's files, shipped)."""
    import distributed

    distributed.secede()
    client = distributed.get_client()
    worker = distributed.get_worker()
    go = distributed.Event(f"{key}-go", client=client)
    stop = distributed.Event(f"{key}-stop", client=client)
    ready = distributed.Queue(f"{key}-ready", client=client)
    live = distributed.Queue(f"{key}-live", client=client)

    with _watch(client, lease) as watch:

        def wait_for_go() -> None:
            quietly(ready.put, index)
            while not (released := quietly(go.wait, STOP_POLL_S)):
                if watch.lapsed or quietly(stop.is_set):
                    raise Stopped
                if released is None:  # the scheduler did not answer: wait a moment before asking again
                    time.sleep(STOP_POLL_S)
            if quietly(stop.is_set):  # a shard run again after its step (a restarted worker): that step is over
                raise Stopped
            # Released: the engine starts its clients now (plus its few ms of lead time).

        def send(snapshot: Snapshot) -> None:
            quietly(live.put, (index, snapshot.model_dump_json()))

        spec = with_texts(EngineSpec.model_validate_json(spec_json), texts or {})
        outcome = run_shard(
            spec,
            ready=wait_for_go if barrier else None,
            stop_requested=lambda: bool(quietly(stop.is_set)),
            live=send,
            lease=watch,
        )
    # `lapsed`: it stopped by itself, the driver's lease not renewed (the driver learns it here, not from a stop)
    if outcome is None:
        return {"index": index, "address": worker.address, "stopped_before_start": True, "lapsed": watch.lapsed}
    return {"index": index, "address": worker.address, "lapsed": watch.lapsed, **outcome.to_wire()}


def background(
    spec_json: str, key: str, index: int, lease: tuple[str, float], *, texts: dict[str, str] | None = None
) -> bytes | None:
    """A worker's part of a baseload kept across steps: answers `cut` and `stop` on its command queue; stops by
    itself when the driver's lease lapses. `texts`: its data sources' rows, by name."""
    import distributed

    distributed.secede()
    client = distributed.get_client()
    commands = distributed.Queue(f"{key}-cmd-{index}", client=client)
    replies = distributed.Queue(f"{key}-reply-{index}", client=client)
    with _watch(client, lease) as watch:
        engine = Engine(as_run_here(with_texts(EngineSpec.model_validate_json(spec_json), texts or {}))).start()
        watch.guard(engine)
        while not watch.lapsed:
            try:
                command = commands.get(timeout=watch.times.poll_s)
            except TimeoutError:  # nothing asked
                continue
            except Exception:  # the scheduler did not answer: the lease decides whether the driver is gone
                time.sleep(watch.times.poll_s)
                continue
            if command == "cut":
                quietly(replies.put, engine.cut().to_bytes())
            else:
                engine.stop()
                engine.wait(None)
                quietly(replies.put, engine.result().to_bytes())
                return None
        engine.wait(None)  # stopped by the lapse: its clients are gone, and so is the driver
    return None


def _watch(client: Any, lease: tuple[str, float]) -> LeaseWatch:
    """The driver's lease (`DaskExecutor.lease`), read from its `Variable` on the scheduler."""
    import distributed

    name, lease_s = lease
    times = LeaseTimes(lease_s)
    variable = distributed.Variable(name, client=client)
    return LeaseWatch(lambda: variable.get(timeout=times.poll_s), times)


def quietly(call: Any, *args: Any) -> Any:
    """`call(*args)`, or None when the scheduler cannot answer (the driver's lease, not this, says when to stop)."""
    try:
        return call(*args)
    except Exception:
        return None


def workers_now(client: Any) -> dict[str, Any]:
    """The scheduler's workers as it answers now: asked directly, not through `client.scheduler_info()`, whose
    answer is the client's cached identity, which its own periodic refresh (every 2 s, with no workers listed)
    may replace between the fetch and the read: a step's workers then looked gone 2 s into it."""
    info = client.sync(client.scheduler.identity, n_workers=-1)
    return dict(info.get("workers", {}))
