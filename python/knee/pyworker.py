"""knee's Python worker: runs a flow, a Python function, for many clients in one process, speaking knee's
worker protocol (docs/worker-protocol.md) on stdin/stdout.

    python -m knee.pyworker flows:login_and_fetch --path examples/flows

The function takes one argument, a `Context`:

    async def login_and_fetch(ctx):          # or a plain `def` (run in a thread per client)
        if "cookie" not in ctx.session:      # ctx.session lives across a client's iterations
            with ctx.step("login"):          # a named step, timed and reported beside the total
                ctx.session["cookie"] = await login(ctx.vars["target"], ctx.client)
        with ctx.step("fetch"):
            await fetch(ctx.vars["target"], ctx.session["cookie"])

Raising marks the operation failed with the exception's class and message; returning an int counts it
as the operation's bytes. knee times the whole operation itself, applies the timeout and keeps the
accounting; this process only runs the functions.
"""

from __future__ import annotations

import asyncio
import contextlib
import contextvars
import importlib
import inspect
import itertools
import json
import os
import sys
import time
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from knee.flowhttp import Client

PROTOCOL = 1


class Context:
    """What a flow function gets for one operation. Each client has one, renewed for each of its operations
    (a client's operations run one after another): keep what must outlive an operation in `session`."""

    __slots__ = ("_http", "_steps", "client", "data", "iteration", "operation", "session", "vars")

    def __init__(
        self, client: int, iteration: int, operation: str, variables: dict[str, str], session: dict, *, data: dict
    ) -> None:
        self.client = client  # the client's number, unique across every process and machine
        self.iteration = iteration  # its operation's number, from 0
        self.operation = operation  # the stage's name (fixed-work stages), else ""
        self.vars = variables  # the scenario's [vars]
        self.session = session  # this client's dict, kept across its operations
        self.data = data  # the feeders' rows for this operation: {feeder: {column: value}}, else {}
        self._steps: dict[str, float] | None = None
        self._http: Client | None = None

    @property
    def http(self) -> Client:
        """This client's HTTP client (knee.flowhttp.Client), made on first use and kept across its operations."""
        if self._http is None:
            from knee import flowhttp  # a flow without HTTP does not import it

            self._http = flowhttp.Client(self)
        return self._http

    @contextlib.contextmanager
    def step(self, name: str) -> Iterator[None]:
        """Time a named step of the operation (`with ctx.step("auth"): …`); steps of one name add up."""
        t0 = time.perf_counter()
        try:
            yield
        finally:
            if self._steps is None:
                self._steps = {}
            self._steps[name] = self._steps.get(name, 0.0) + time.perf_counter() - t0


def load(spec: str, path: str | None) -> Callable[[Context], Any]:
    """`module:function` → the function; a sentence naming what is missing otherwise."""
    module_name, sep, func_name = spec.partition(":")
    if not sep or not module_name or not func_name:
        raise LookupError(f"the flow must be given as module:function (got {spec!r})")
    if path:
        sys.path.insert(0, os.path.abspath(path))
    try:
        module = importlib.import_module(module_name)
    except ModuleNotFoundError as exc:
        where = f" in {path!r} or" if path else ""
        raise LookupError(
            f"no module {exc.name!r}{where} on the Python path (for {spec!r}); check the name and --path"
        ) from None
    except Exception as exc:
        raise LookupError(f"importing {module_name!r} failed: {type(exc).__name__}: {exc}") from exc
    func = getattr(module, func_name, None)
    if func is None:
        raise LookupError(f"module {module_name!r} has no function {func_name!r}")
    if not callable(func):
        raise LookupError(f"{spec!r} is not a function")
    return func


class _Continue:
    """Awaitable that carries on a coroutine which already ran up to its first suspension (`first`, what it
    yielded). The worker runs operations eagerly, in the call that read their requests (`run_batch`): flows
    that never wait finish there, without the cost of an asyncio Task each; one that waits becomes a Task from
    there: the one (`_Runner`) that was current while it ran eagerly."""

    __slots__ = ("coro", "first")

    def __init__(self, coro: Any, first: Any) -> None:
        self.coro, self.first = coro, first

    def __await__(self) -> Any:
        coro, pending = self.coro, self.first
        while True:
            try:
                sent = yield pending
            except BaseException as exc:  # cancelled, or the awaited future failed: pass it on
                try:
                    pending = coro.throw(exc)
                except StopIteration as stop:
                    return stop.value
            else:
                try:
                    pending = coro.send(sent)
                except StopIteration as stop:
                    return stop.value


class _Runner:
    """A Task that waits to carry on the operation of an eager run that waited (`claim`), and is the loop's current
    Task while eager runs go on, in its context: asyncio's timeouts refuse to start outside a Task (Python's own eager
    tasks, 3.12's, are not in 3.11), and what an operation tied to the current Task, or set in its context (a
    contextvar, a tracing span), is there still in the Task it goes on in if it waits. A new one is made only when an
    operation waited, as a Task was before."""

    __slots__ = ("context", "go", "task")

    def __init__(self, loop: asyncio.AbstractEventLoop) -> None:
        self.context = contextvars.copy_context()
        self.go: asyncio.Future[tuple[Any, Any]] = loop.create_future()
        self.task = loop.create_task(self._run(), context=self.context)

    async def _run(self) -> None:
        await _carry_on(*await self.go)

    def run(self, loop: asyncio.AbstractEventLoop, driver: Any) -> Any:
        """The driver run up to its first suspension, as this Task and in its context (StopIteration: it ended)."""
        return self.context.run(self._eager, loop, driver)

    def _eager(self, loop: asyncio.AbstractEventLoop, driver: Any) -> Any:
        if _ENTER is None or _LEAVE is None:
            return driver.send(None)
        _ENTER(loop, self.task)  # run_batch runs in the loop's callbacks, in no Task
        try:
            return driver.send(None)
        finally:
            _LEAVE(loop, self.task)

    def claim(self, loop: asyncio.AbstractEventLoop, coro: Any, first: Any) -> asyncio.Task[None]:
        """The Task `coro` goes on in, from `first`: this one, or, if it was cancelled meanwhile (a flow that cancelled
        its current Task while it ran eagerly), a new one in the same context."""
        if self.go.done():
            return loop.create_task(_carry_on(coro, first), context=self.context)
        self.go.set_result((coro, first))
        return self.task


async def _carry_on(coro: Any, first: Any) -> None:
    await _Continue(coro, first)


# The loop's current Task, set and cleared by hand (asyncio's own, CPython 3.11 to 3.13); without them, eager runs
# have no current Task, as before.
_ENTER = getattr(asyncio.tasks, "_enter_task", None)
_LEAVE = getattr(asyncio.tasks, "_leave_task", None)


class _Lane:
    """A driver's state: the client whose operation it runs, and whether it left the line (that operation
    waited, so the driver became its Task)."""

    __slots__ = ("client", "detached")

    def __init__(self) -> None:
        self.client = -1
        self.detached = False


class Worker:
    """One process's clients, their sessions, and the replies waiting to be written."""

    def __init__(self, func: Callable[[Context], Any], start: dict[str, Any]) -> None:
        self.func = func
        self.is_async = inspect.iscoroutinefunction(func)
        self.vars = {str(k): str(v) for k, v in (start.get("vars") or {}).items()}
        # the feeders' rows an operation gets when its run line brings none: the start's `data`, else none
        self.data: dict[str, Any] = start.get("data") or {}
        clients = list(start.get("clients") or [])
        self.contexts = {c: Context(c, 0, "", self.vars, {}, data=self.data) for c in clients}
        # A client's operations run one after another: while one is unfinished (it waits, or it is late and
        # knee already sent the next), the client's next operation waits for it.
        self.busy: dict[int, asyncio.Future[None]] = {}
        self.threads = None if self.is_async else ThreadPoolExecutor(max_workers=max(1, len(clients)))
        self.loop = asyncio.get_running_loop()
        self.out: list[bytes] = []
        self.done: list[int] = []  # plain successes, `client, id` after `client, id`, written as one line
        self.flush_soon = False
        self.runner: _Runner | None = None  # the Task the next eager run goes on in if it waits

    def reply(self, client: int, op_id: int, ctx: Context, result: Any, exc: BaseException | None) -> None:
        steps = ctx._steps
        if exc is None and not steps and (type(result) is not int or result < 0):
            self.done += (client, op_id)
        elif exc is None:  # a success with steps or bytes, written by hand (the JSON encoder costs more)
            ctx._steps = None
            tail = b',"bytes":%d}\n' % result if type(result) is int and 0 <= result < 1 << 64 else b"}\n"
            timed = ",".join([f"{_name(k)}:{v!r}" for k, v in steps.items()]) if steps else ""
            head = b'{"client":%d,"id":%d,"ok":true' % (client, op_id)
            self.out.append(head + (b',"steps":{%s}' % timed.encode() if steps else b"") + tail)
        else:
            line: dict[str, Any] = {"client": client, "id": op_id, "ok": exc is None}
            if exc is not None:  # the flow said no: the operation failed, with its reason
                text = str(exc).strip()
                # its class: knee.flowhttp's errors carry the engine's http classes (status, connect_refused …)
                line["error"] = getattr(exc, "knee_class", None) or type(exc).__name__
                line["message"] = text.splitlines()[0] if text else ""
            if ctx._steps:
                line["steps"] = ctx._steps
                ctx._steps = None
            if exc is None and type(result) is int and 0 <= result < 1 << 64:
                line["bytes"] = result
            self.out.append(_compact(line).encode() + b"\n")
        if not self.flush_soon:
            self.flush_soon = True
            self.loop.call_soon(self.flush)

    def flush(self) -> None:
        self.flush_soon = False
        if self.done:
            self.out.append(b'{"done":%s}\n' % _compact(self.done).encode())
            self.done = []
        if self.out:
            data, self.out = b"".join(self.out), []
            _write(data)

    def context(self, client: int, op_id: int, operation: str, row: dict[str, Any]) -> Context:
        """The client's context, set for its operation `op_id` with the feeders' `row`."""
        ctx = self.contexts.get(client)
        if ctx is None:  # knee only sends the clients of the start message; a stray one still gets a session
            ctx = self.contexts[client] = Context(client, op_id, operation, self.vars, {}, data=row)
        ctx.iteration, ctx.operation, ctx.data = op_id, operation, row
        return ctx

    def rows(self, data: Any) -> Iterator[dict[str, Any]]:
        """The feeders' rows of a run line's operations: its `data`, a list with one {feeder: {column: value}}
        per operation (a batch's, in the order of its pairs), or one such mapping for all; else the start's."""
        if isinstance(data, list):
            return (row or self.data for row in data)
        return itertools.repeat(data or self.data)

    def run_batch(self, ops: list[int], operation: str, data: Any = None) -> None:
        """Run the `client, id` pairs of a batched run line. Async flows run eagerly, one after another, in a
        driver coroutine that awaits each (cheaper than stepping each flow's coroutine by hand); when one
        has to wait, the driver becomes that operation's Task and a new driver goes on with the rest (so the
        line is used up before this returns, and a driver that waited ends with its operation)."""
        pairs = iter(ops)
        todo = zip(pairs, pairs, self.rows(data), strict=False)  # rows: as many, or endless
        if not self.is_async:
            for client, op_id, row in todo:
                self.start(client, op_id, operation, row)
            return
        loop = self.loop
        while True:
            lane = _Lane()
            driver = self._drive(todo, operation, lane)
            runner = self.runner
            if runner is None or runner.go.done() or runner.task.done():  # claimed, or cancelled
                runner = self.runner = _Runner(loop)
            try:
                first = runner.run(loop, driver)
            except StopIteration:
                return
            lane.detached = True  # the driver now is the Task of its waiting operation
            self._track(lane.client, runner.claim(loop, driver, first))

    async def _drive(self, todo: Iterator[tuple[int, int, dict[str, Any]]], operation: str, lane: _Lane) -> None:
        busy, contexts, func, done = self.busy, self.contexts, self.func, self.done
        for client, op_id, row in todo:
            if client in busy:
                self.start(client, op_id, operation, row)
                continue
            ctx = contexts.get(client) or self.context(client, op_id, operation, row)
            ctx.iteration = op_id
            ctx.operation = operation
            ctx.data = row
            lane.client = client
            try:
                result = await func(ctx)
            except (KeyboardInterrupt, SystemExit):
                raise
            except BaseException as exc:  # a CancelledError of the flow's own too: the operation failed
                self.reply(client, op_id, ctx, None, exc)
            else:
                if lane.detached or ctx._steps is not None or result is not None:
                    self.reply(client, op_id, ctx, result, None)  # which also schedules the flush
                else:
                    done.append(client)  # run_batch's caller flushes
                    done.append(op_id)

    def start(self, client: int, op_id: int, operation: str, row: dict[str, Any]) -> None:
        """Run one operation as a task: after the client's unfinished one, else (a plain function) in a thread.
        An idle client's async flow runs in `run_batch`'s driver instead."""
        if client in self.busy:
            after = self._after(self.busy[client], client, op_id, operation, row)
            self._track(client, self.loop.create_task(after))
            return
        ctx = self.context(client, op_id, operation, row)
        future = self.loop.run_in_executor(self.threads, self.func, ctx)
        self._track(client, self.loop.create_task(self._finish(future, client, op_id, ctx)))

    def _track(self, client: int, task: asyncio.Task[None]) -> None:
        self.busy[client] = task

        def idle(t: asyncio.Task[None]) -> None:
            if self.busy.get(client) is t:
                del self.busy[client]

        task.add_done_callback(idle)

    async def _finish(self, awaitable: Any, client: int, op_id: int, ctx: Context) -> None:
        try:
            result = await awaitable
            if inspect.isawaitable(result):  # an async flow behind a plain wrapper: run it (it was counted done)
                result = await result
        except (KeyboardInterrupt, SystemExit):
            raise
        except BaseException as exc:
            self.reply(client, op_id, ctx, None, exc)
        else:
            self.reply(client, op_id, ctx, result, None)

    async def _after(
        self, previous: asyncio.Future[None], client: int, op_id: int, operation: str, row: dict[str, Any]
    ) -> None:
        with contextlib.suppress(BaseException):
            await asyncio.shield(previous)
        ctx = self.context(client, op_id, operation, row)
        if self.is_async:
            await self._finish(self.func(ctx), client, op_id, ctx)
        else:
            await self._finish(self.loop.run_in_executor(self.threads, self.func, ctx), client, op_id, ctx)


_DRAIN = 16  # batches read in a row without returning to the event loop

_compact = json.JSONEncoder(separators=(",", ":")).encode
_names: dict[str, str] = {}  # a step's name as a JSON string


def _name(name: str) -> str:
    quoted = _names.get(name)
    if quoted is None:
        quoted = json.dumps(str(name))
        if len(_names) < 10_000:  # a flow naming steps by id would grow it without end
            _names[name] = quoted
    return quoted


def _parse(lines: list[bytes]) -> list[Any]:
    """Many request lines in one json.loads (a line at a time costs several times more)."""
    try:
        return json.loads(b"[" + b",".join(lines) + b"]")
    except ValueError:
        return [json.loads(line) for line in lines]  # names the bad line


_OUT = 1  # the protocol's pipe to knee; `serve` moves it off fd 1, where a flow's print() would break it


def _write(data: bytes) -> None:
    """All of `data` to knee (the pipe it keeps reading)."""
    view = memoryview(data)
    while view:
        view = view[os.write(_OUT, view) :]


async def serve(spec: str, path: str | None) -> int:
    global _OUT
    loop = asyncio.get_running_loop()
    # The replies go on a copy of stdout; fd 1 (a flow's print(), a child process's output) goes to stderr.
    _OUT = os.dup(1)
    os.dup2(2, 1)
    pending = b""
    while b"\n" not in pending:  # the start message, before anything else runs
        chunk = os.read(0, 1 << 16)
        if not chunk:
            break
        pending += chunk
    first, _, pending = pending.partition(b"\n")
    try:
        start = json.loads(first)
        if start.get("op") != "start":
            raise ValueError("not a start message")
    except ValueError:
        print(f"knee.pyworker: expected knee's start message, got {first[:200]!r}", file=sys.stderr)
        return 2
    try:
        func = load(spec, path)
    except LookupError as exc:
        _write(json.dumps({"ready": False, "error": str(exc)}).encode() + b"\n")
        return 2
    worker = Worker(func, start)
    _write(b'{"ready":true,"batch":true}\n')
    stopped: asyncio.Future[None] = loop.create_future()
    run_batch = worker.run_batch

    def take(chunk: bytes) -> None:
        """Run the requests in `chunk` (with what was left of the last one); stop at knee's stop or EOF."""
        nonlocal pending
        lines = (pending + chunk).split(b"\n")
        pending = lines.pop()
        for msg in _parse([raw for raw in lines if raw.strip()]):
            if msg.get("op") == "run":
                ops = msg["ops"] if "ops" in msg else [msg["client"], msg["id"]]
                run_batch(ops, msg.get("operation", ""), msg.get("data"))
            elif msg.get("op") == "stop":
                chunk = b""
                break
        worker.flush()
        if not chunk and not stopped.done():
            loop.remove_reader(0)
            stopped.set_result(None)

    def readable() -> None:
        # knee usually answers a batch's replies with the next batch at once (on a shared core, before our
        # write returns): read again straight away rather than through the event loop, while no flow waits.
        for _ in range(_DRAIN):
            try:
                chunk = os.read(0, 1 << 16)
            except BlockingIOError:
                return
            take(chunk)
            if stopped.done() or worker.busy:
                return

    os.set_blocking(0, False)
    loop.add_reader(0, readable)
    if b"\n" in pending:  # requests that came with the start message: run outside this Task, as the rest are
        early, pending = pending, b""
        loop.call_soon(take, early)
    await stopped
    tasks = set(worker.busy.values())
    if tasks:
        await asyncio.wait(tasks, timeout=1.0)
    worker.flush()
    return 0


def main(argv: list[str] | None = None) -> int:
    args = list(sys.argv[1:] if argv is None else argv)
    path = None
    if "--path" in args:
        i = args.index("--path")
        path = args[i + 1] if i + 1 < len(args) else None
        del args[i : i + 2]
    if len(args) != 1:
        print("usage: python -m knee.pyworker MODULE:FUNCTION [--path DIR]", file=sys.stderr)
        return 2
    return asyncio.run(serve(args[0], path))


if __name__ == "__main__":
    sys.exit(main())
