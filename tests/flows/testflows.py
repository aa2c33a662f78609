"""Flows the tests run through knee's Python worker."""

from __future__ import annotations

import asyncio
import contextvars
import os
import time
import urllib.request


async def noop(ctx) -> None:  # type: ignore[no-untyped-def]
    """Nothing: the worker's and the protocol's own cost (make bench)."""


def sync_noop(ctx) -> None:  # type: ignore[no-untyped-def]
    """Nothing, as a plain function (run in a thread)."""


async def slow_once(ctx) -> None:  # type: ignore[no-untyped-def]
    """Client 1's third operation outlasts a 0.5 s timeout (its reply comes late); the rest are quick.

    A client's operations run one after another, so its next one starts when the late one ends (0.8 s).
    """
    with ctx.step("work"):
        if ctx.client == 1 and ctx.iteration == 2:
            await asyncio.sleep(0.8)


def sleepy(ctx) -> None:  # type: ignore[no-untyped-def]
    """A long blocking operation (for Ctrl-C)."""
    time.sleep(0.2)


def sync_fetch(ctx) -> int:  # type: ignore[no-untyped-def]
    """A plain function (run in a thread): one GET of the target's /, failing on every 4th iteration."""
    if ctx.iteration % 4 == 3:
        raise ValueError(f"iteration {ctx.iteration} refused on purpose")
    with ctx.step("get"), urllib.request.urlopen(ctx.vars["target"] + "/", timeout=5) as reply:
        return len(reply.read())


def mark_pid(ctx) -> None:  # type: ignore[no-untyped-def]
    """Leaves a file named after this worker process's PID in the directory ctx.vars["pids"]."""
    open(os.path.join(ctx.vars["pids"], str(os.getpid())), "a").close()


async def mixed(ctx) -> int | None:  # type: ignore[no-untyped-def]
    """By client: 0 returns at once, 1 waits 20 ms, 2 raises, 3 times a step and returns 7 bytes. Each client
    notes its operations in its session, in the order they ran, and fails if one started before the last."""
    seen = ctx.session.setdefault("seen", [])
    if seen and seen[-1] != ("end", ctx.iteration - 1):
        raise RuntimeError(f"operation {ctx.iteration} began before {seen[-1]} ended")
    seen.append(("begin", ctx.iteration))
    kind = ctx.client % 4
    result = None
    if kind == 1:
        await asyncio.sleep(0.02)
    elif kind == 2:
        seen.append(("end", ctx.iteration))
        raise ValueError(f"client {ctx.client} says no to {ctx.iteration}")
    elif kind == 3:
        with ctx.step("work"):
            result = 7
    seen.append(("end", ctx.iteration))
    return result


async def stuck_client_2(ctx) -> None:  # type: ignore[no-untyped-def]
    """Client 2's operations take 60 s (still running when a short duration ends); the rest are quick."""
    if ctx.client == 2:
        await asyncio.sleep(60)


async def hangs_first(ctx) -> None:  # type: ignore[no-untyped-def]
    """Client 0's first operation takes 0.5 s (past a 0.3 s timeout; its next one, queued behind it, ends 0.2 s
    after it was sent); the rest take 1 ms."""
    await asyncio.sleep(0.5 if (ctx.client, ctx.iteration) == (0, 0) else 0.001)


async def hangs_fourth(ctx) -> None:  # type: ignore[no-untyped-def]
    """Each client's fourth operation takes 0.6 s (past a 0.3 s timeout); the rest return at once."""
    if ctx.iteration == 3:
        await asyncio.sleep(0.6)


def _plain_wrapper(f):  # type: ignore[no-untyped-def]
    """A decorator whose wrapper is a plain function: calling it returns the coroutine."""

    def wrapper(ctx):  # type: ignore[no-untyped-def]
        return f(ctx)

    return wrapper


@_plain_wrapper
async def wrapped(ctx) -> int:  # type: ignore[no-untyped-def]
    """By client: 0 prints (to its stdout) and returns 3 bytes; 1 is cancelled by a child it gathered; the rest
    return 5 bytes. Behind a plain wrapper: knee sees a plain function that returns a coroutine."""
    if ctx.client == 0:
        print("a flow's own line, not knee's")
        return 3
    if ctx.client == 1:
        child = asyncio.ensure_future(asyncio.sleep(1))
        child.cancel()
        await asyncio.gather(child)
    await asyncio.sleep(0.001)
    return 5


async def timed(ctx) -> None:  # type: ignore[no-untyped-def]
    """asyncio's timeouts, as flows and their libraries use them (aiohttp's and anyio's, like these, need a current
    Task). By client: 0 returns at once, 1 waits 10 ms, both within their timeouts; 2 outlasts its 0.2 s
    (TimeoutError); 3 waits through wait_for."""
    kind = ctx.client % 4
    if kind == 3:
        await asyncio.wait_for(asyncio.sleep(0.01), timeout=1)
        return
    async with asyncio.timeout(0.2):
        if kind == 1:
            await asyncio.sleep(0.01)
        elif kind == 2:
            await asyncio.sleep(5)
    if asyncio.current_task() is None:
        raise RuntimeError("no current task")


REQUEST_ID: contextvars.ContextVar[int] = contextvars.ContextVar("request_id")


async def context_kept(ctx) -> None:  # type: ignore[no-untyped-def]
    """A contextvar set before the first wait (a request id, a tracing span) is the operation's after it; odd clients
    wait."""
    mine = ctx.iteration * 100 + ctx.client
    REQUEST_ID.set(mine)
    if ctx.client % 2:
        await asyncio.sleep(0.01)
    if REQUEST_ID.get(None) != mine:
        raise RuntimeError(f"request id {REQUEST_ID.get(None)} after the wait, not {mine}")
